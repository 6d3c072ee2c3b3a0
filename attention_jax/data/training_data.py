"""What training reads from its data: the interface that translation pairs and a language model's rows share.

:class:`~attention_jax.data.input_pipeline.TranslationData` and
:class:`~attention_jax.data.lm_data.LanguageModelData` have it, and so does any data passed to
``train_and_evaluate(..., data=...)``: the trainer reads each attribute below directly, with no fallback
for data that lacks one.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Protocol, Sequence

import numpy as np

Batch = dict[str, np.ndarray]  # One process's rows of a global batch: "inputs"/"targets" (and packing's arrays).


class TrainingTokenizer(Protocol):
    """What training reads from the data's tokenizer (``data.tokenizer.Tokenizer`` has it).

    Attributes
    ----------
    vocab_size : int
        Pieces in the vocabulary; the model's ``vocab_size`` must hold them.
    model_proto : bytes
        The serialized SentencePiece model, written to ``WORKDIR/tokenizer.model`` and compared with it when
        a run resumes.
    """

    @property
    def vocab_size(self) -> int:
        """Pieces in the vocabulary."""

    @property
    def model_proto(self) -> bytes:
        """The serialized model (``tokenizer.model``'s bytes)."""

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` ending in EOS."""

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` up to the first EOS."""


class TrainIterator(Protocol):
    """An endless iterator over this process's training batches whose position can be saved and restored."""

    def __iter__(self) -> Iterator[Batch]:
        """The iterator itself."""

    def __next__(self) -> Batch:
        """The next batch."""

    def get_state(self) -> Any:
        """A JSON-serializable position (kept in every checkpoint)."""

    def set_state(self, state: Any) -> None:
        """Continue from a position :meth:`get_state` returned."""


class TrainingData(Protocol):
    """The data one training run works with.

    Attributes
    ----------
    tokenizer : TrainingTokenizer
        The vocabulary of the token ids.
    stats : dict
        Counts per split; ``stats["examples"]["validation"]`` is the dev split's size (pairs or documents),
        which early stopping's minimum is checked against. Translation data also counts the dev pairs left out
        (``"dropped_too_long"``, ``"dropped_empty"``); a language model's rows leave none out.
    """

    @property
    def tokenizer(self) -> TrainingTokenizer:
        """The vocabulary of the token ids."""

    @property
    def stats(self) -> dict[str, Any]:
        """Counts per split (see the class's attributes)."""

    def train_iterator(self, seed: int) -> TrainIterator:
        """An endless iterator over the training batches, shuffled with ``seed``."""

    def eval_batches(self, split: str, max_batches: int = 0) -> Iterable[Batch]:
        """The batches that cover ``split`` once (the first ``max_batches``; 0: all)."""

    def text_pairs(self, split: str, max_pairs: int = 0) -> list[tuple[str, str]]:
        """The ``(source, target)`` sentences of ``split`` for BLEU (the first ``max_pairs``; 0: all).

        A language model's data has none (an empty list): its config asks for no BLEU
        (:func:`attention_jax.experiment.sections.build_experiment` refuses one that does).
        """

    def split_fingerprints(self) -> dict[str, dict[str, Any]]:
        """What identifies the dev and test splits, recorded in ``data_splits.json`` and checked on resume."""
