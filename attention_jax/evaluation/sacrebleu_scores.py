"""Corpus BLEU, chrF and TER of detokenized text (sacrebleu), BLEU's tokenizer a choice: no model, no JAX."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER

from attention_jax.foundation.user_errors import UserInputError

DEFAULT_BLEU_TOKENIZER = "13a"  # sacrebleu's default, the WMT convention.
# What --tokenize accepts for BLEU: intl splits Unicode punctuation off (non-Latin scripts), zh each Chinese
# character, char every character, none takes tokenized text; *-mecab need sacrebleu's [ja]/[ko] extras.
# spm/flores* are left out: they download a model on first use.
BLEU_TOKENIZERS = ("13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab")

_EXTRAS = {"ja-mecab": "sacrebleu[ja]", "ko-mecab": "sacrebleu[ko]"}


@dataclasses.dataclass(frozen=True)
class CorpusScores:
    """sacrebleu's corpus BLEU, chrF and TER, each with its signature."""

    bleu: float  # [0, 100], higher is better.
    bleu_signature: str  # E.g. nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0.
    chrf: float  # chrF2 (character 6-grams, beta 2), [0, 100], higher is better.
    chrf_signature: str
    ter: float  # Edits per 100 reference words (may pass 100); lower is better.
    ter_signature: str


def check_bleu_tokenizer(name: str, flag: str = "--tokenize") -> str:
    """Return ``name`` if sacrebleu's BLEU can use it here.

    Parameters
    ----------
    name, flag : str
        One of :data:`BLEU_TOKENIZERS`; how the user gave it, for the message.

    Returns
    -------
    str
        ``name``.

    Raises
    ------
    UserInputError
        For an unknown name, or a ``*-mecab`` one without its packages.
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


def _check_one_reference_each(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[list[str], list[str]]:
    """Return both as lists, refusing (ValueError) two of different lengths."""
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"scoring needs one reference per hypothesis; got {len(hypotheses)} hypotheses "
                         f"and {len(references)} references.")
    return hypotheses, references


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str], *,
                  bleu_tokenizer: str = DEFAULT_BLEU_TOKENIZER) -> CorpusScores:
    """Return sacrebleu's corpus BLEU, chrF and TER of detokenized hypotheses against one reference each.

    Parameters
    ----------
    hypotheses, references : Sequence[str]
        Detokenized system outputs and their references.
    bleu_tokenizer : str
        One of :data:`BLEU_TOKENIZERS`.

    Returns
    -------
    CorpusScores
        Metrics at sacrebleu's defaults but BLEU's tokenizer.
    """
    hypotheses, references = _check_one_reference_each(hypotheses, references)
    scored: dict[str, Any] = {}
    for name, metric in (("bleu", BLEU(tokenize=bleu_tokenizer)), ("chrf", CHRF()), ("ter", TER())):
        scored[name] = float(metric.corpus_score(hypotheses, [references]).score)
        scored[f"{name}_signature"] = str(metric.get_signature())
    return CorpusScores(**scored)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    """Return the corpus BLEU in ``[0, 100]`` and sacrebleu's signature, one reference per hypothesis.

    Parameters
    ----------
    hypotheses, references : Sequence[str]
        Detokenized system outputs and their references.

    Returns
    -------
    (float, str)
        BLEU and signature.
    """
    hypotheses, references = _check_one_reference_each(hypotheses, references)
    metric = BLEU()
    score = metric.corpus_score(hypotheses, [references])
    return float(score.score), str(metric.get_signature())
