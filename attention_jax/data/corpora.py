"""Corpus recipes: per corpus, the dataset and the training settings every sweep on it uses.

:data:`CORPORA` is a :class:`attention_jax.foundation.registry.Registry` of :class:`Corpus` entries, read by
``launch.sweep --corpora=...`` (each run gets ``--config.corpus=NAME`` and :meth:`Corpus.overrides`), by
sweep files and by reports. A user adds a corpus with :func:`register_corpus`, e.g. at the top of a sweep file
(docs/clusters.md#corpora shows one). Imports no framework. Datasets are relative to the repository root
(``../shared`` beside it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from attention_jax.foundation.registry import Registration, Registry

GNOME_HELP_TRAIN_STEPS = 1700  # messages' update budget; the pilot and why: docs/real_language.md.


@dataclasses.dataclass(frozen=True)
class Corpus:
    """One corpus and the settings its runs share (they replace a row config's, see ``launch.sweep``).

    Attributes
    ----------
    name : str
        Registry key, ``config.corpus`` and the sweep root's directory for it.
    dataset : str
        ``config.dataset``, e.g. ``tsv:../shared/data/messages_en_de``.
    vocab_size, num_train_steps, warmup_steps, eval_every_steps, max_len : int
        The config fields of the same names.
    positions_cap : int
        Target words the positions experiment trains within (``length_buckets --cap``).
    """

    name: str
    dataset: str
    vocab_size: int
    num_train_steps: int
    warmup_steps: int
    eval_every_steps: int
    max_len: int
    positions_cap: int

    @property
    def directory(self) -> str:
        """The corpus's directory.

        Returns
        -------
        str
            ``dataset`` without its ``tsv:`` prefix.
        """
        return self.dataset.removeprefix("tsv:")

    def overrides(self) -> dict[str, Any]:
        """The config fields this recipe sets, ``corpus`` first.

        Returns
        -------
        dict[str, Any]
            Field -> value, in the order the launcher passes them as ``--config.FIELD=VALUE``.
        """
        return dict(corpus=self.name, dataset=self.dataset, vocab_size=self.vocab_size,
                    num_train_steps=self.num_train_steps, warmup_steps=self.warmup_steps,
                    eval_every_steps=self.eval_every_steps, max_len=self.max_len)


MESSAGES_EN_DE = Corpus(
    name="messages_en_de", dataset="tsv:../shared/data/messages_en_de",  # configs/small_corpus.py's budget.
    vocab_size=4000, num_train_steps=1700, warmup_steps=300, eval_every_steps=100, max_len=64,
    positions_cap=12)  # Just above the target p90 (11 words), 93% of training pairs (docs/positions.md).
GNOME_HELP_EN_DE = Corpus(
    name="gnome_help_en_de", dataset="tsv:../shared/data/gnome_help_en_de",
    vocab_size=4000, num_train_steps=GNOME_HELP_TRAIN_STEPS, warmup_steps=300, eval_every_steps=100, max_len=128,
    positions_cap=26)  # The largest cap leaving every bucket 500+ pairs, as 12 does; keeps 82% of training pairs.

CORPORA: Registry[Corpus] = Registry("corpus", (MESSAGES_EN_DE, GNOME_HELP_EN_DE))


def register_corpus(corpus: Corpus) -> Registration | None:
    """Add ``corpus`` to :data:`CORPORA`; registering an equal entry again (a file imported twice) is a no-op.

    Parameters
    ----------
    corpus : Corpus
        The new recipe.

    Returns
    -------
    Registration or None
        ``.undo()`` removes it again; None when an equal entry was registered already.

    Raises
    ------
    ValueError
        When another recipe holds the name already.
    """
    return None if CORPORA.get(corpus.name) == corpus else CORPORA.register(corpus)


def lookup_corpora(names: Sequence[str], where: str) -> tuple[Corpus, ...]:
    """The recipes of ``names``, in order.

    Parameters
    ----------
    names : Sequence[str]
        Corpus names, without repeats.
    where : str
        The flag or file named first in an error.

    Returns
    -------
    tuple[Corpus, ...]
        One recipe per name.

    Raises
    ------
    ValueError
        For no names, a repeated name or an unknown one (naming the known ones and how to register one).
    """
    names = tuple(names)
    if not names:
        raise ValueError(f"{where}: no corpora; give names such as {', '.join(CORPORA)}.")
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: repeated corpora in {list(names)}.")
    unknown = [name for name in names if name not in CORPORA]
    if unknown:
        raise ValueError(f"{where}: unknown corpus {unknown[0]!r}; known: {', '.join(CORPORA)} (register one with "
                         "attention_jax.data.corpora.register_corpus(Corpus(...)) in your sweep file).")
    return tuple(CORPORA[name] for name in names)
