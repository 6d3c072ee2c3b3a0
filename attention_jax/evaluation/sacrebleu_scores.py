"""Corpus BLEU, chrF and TER of detokenized text (sacrebleu), with BLEU's tokenizer a choice: no model, no JAX.

:func:`corpus_scores` is what ``evaluate`` prints for a run's translations and for an existing file of
them (``evaluate --hypotheses=FILE --reference=FILE``), the same figures and signatures as
``sacrebleu REFERENCE -i HYPOTHESES -m bleu chrf ter --tokenize TOKENIZER``. BLEU's tokenizer is sacrebleu's
``13a`` by default (the WMT convention); :data:`BLEU_TOKENIZERS` lists the others it accepts: ``intl``
(Unicode punctuation and symbols split off, for scripts other than Latin), ``zh`` (Chinese characters one
token each), ``char`` (every character), ``none`` (already tokenized text) and ``ja-mecab``/``ko-mecab``
(where sacrebleu's ``[ja]``/``[ko]`` extras are installed). chrF and TER have no tokenizer choice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER

from attention_jax.foundation.user_errors import UserInputError

DEFAULT_BLEU_TOKENIZER = "13a"
"""sacrebleu's default BLEU tokenizer, the one the WMT figures use."""

BLEU_TOKENIZERS = ("13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab")
"""The sacrebleu tokenizers ``--tokenize`` accepts for BLEU (the ``*-mecab`` ones need sacrebleu's extras).

sacrebleu's ``spm``/``flores*`` tokenizers are left out: they download a model on first use.
"""

_EXTRAS = {"ja-mecab": "sacrebleu[ja]", "ko-mecab": "sacrebleu[ko]"}


@dataclasses.dataclass(frozen=True)
class CorpusScores:
    """sacrebleu's corpus BLEU, chrF and TER of a set of translations, each with its signature.

    Attributes
    ----------
    bleu : float
        Corpus BLEU in ``[0, 100]`` (``13a`` tokenization unless asked otherwise); higher is better.
    bleu_signature : str
        How it was computed, e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``.
    chrf : float
        Corpus chrF2 in ``[0, 100]`` (character 6-grams, beta 2); higher is better.
    chrf_signature : str
        E.g. ``nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0``.
    ter : float
        Corpus TER, edits per 100 reference words (can exceed 100); lower is better.
    ter_signature : str
        E.g. ``nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.6.0``.
    """

    bleu: float
    bleu_signature: str
    chrf: float
    chrf_signature: str
    ter: float
    ter_signature: str


def check_bleu_tokenizer(name: str, flag: str = "--tokenize") -> str:
    """Return ``name`` if sacrebleu's BLEU can use it here, else raise a one-line :class:`UserInputError`.

    Parameters
    ----------
    name : str
        One of :data:`BLEU_TOKENIZERS`.
    flag : str
        How the user gave it, for the message.

    Returns
    -------
    str
        ``name``.

    Notes
    -----
    An unknown name is refused with the list of known ones; ``ja-mecab``/``ko-mecab`` without their
    packages are refused with the ``pip install`` that adds them.
    """
    if name not in BLEU_TOKENIZERS:
        raise UserInputError(f"{flag}={name} is not a BLEU tokenizer: use one of {', '.join(BLEU_TOKENIZERS)} "
                             f"(sacrebleu's; {DEFAULT_BLEU_TOKENIZER} is the default).")
    try:
        BLEU(tokenize=name)
    except RuntimeError as error:  # sacrebleu's message for a tokenizer whose extra packages are missing.
        raise UserInputError(f"{flag}={name} needs packages that are not installed: pip install "
                             f"'{_EXTRAS.get(name, 'sacrebleu')}' (or use --tokenize=intl).") from error
    return name


def check_one_reference_each(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[list[str], list[str]]:
    """Both lists as lists, or ``ValueError`` when they differ in length (scoring needs one reference each).

    Parameters
    ----------
    hypotheses, references : Sequence[str]
        System outputs and their references.

    Returns
    -------
    (list[str], list[str])
        The two, unchanged.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"scoring needs one reference per hypothesis; got {len(hypotheses)} hypotheses "
                         f"and {len(references)} references.")
    return hypotheses, references


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str], *,
                  bleu_tokenizer: str = DEFAULT_BLEU_TOKENIZER) -> CorpusScores:
    """sacrebleu corpus BLEU, chrF and TER of detokenized hypotheses against one reference each.

    Parameters
    ----------
    hypotheses : Sequence[str]
        System outputs, detokenized.
    references : Sequence[str]
        One reference per hypothesis, detokenized.
    bleu_tokenizer : str
        BLEU's tokenizer, one of :data:`BLEU_TOKENIZERS` (``13a``: sacrebleu's default).

    Returns
    -------
    CorpusScores
        The three scores with the signatures of the ``sacrebleu.metrics`` objects that computed them
        (their defaults but BLEU's tokenizer, as ``sacrebleu -m bleu chrf ter --tokenize`` on the command line).

    Notes
    -----
    Raises ``ValueError`` when the lists differ in length.
    """
    hypotheses, references = check_one_reference_each(hypotheses, references)
    scored: dict[str, Any] = {}
    for name, metric in (("bleu", BLEU(tokenize=bleu_tokenizer)), ("chrf", CHRF()), ("ter", TER())):
        scored[name] = float(metric.corpus_score(hypotheses, [references]).score)
        scored[f"{name}_signature"] = str(metric.get_signature())
    return CorpusScores(**scored)
