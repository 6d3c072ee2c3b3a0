"""What training reads from its data: the interface translation pairs and a language model's rows share.

The trainer reads each attribute directly, with no fallback.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Protocol, Sequence

import numpy as np

Batch = dict[str, np.ndarray]  # One process's rows of a global batch: "inputs"/"targets" (and packing's arrays).


class _TrainingTokenizer(Protocol):
    """What training reads from the data's tokenizer."""

    @property
    def vocab_size(self) -> int:
        """Pieces in the vocabulary; the model's ``vocab_size`` must hold them."""

    @property
    def model_proto(self) -> bytes:
        """The serialized model, written to ``tokenizer.model`` and compared on resume."""

    def encode(self, text: str) -> list[int]:
        """Return the ids of ``text``, ending in EOS."""

    def decode(self, ids: Sequence[int]) -> str:
        """Return the text of ``ids`` up to the first EOS."""


class TrainIterator(Protocol):
    """An endless iterator over this process's training batches whose position can be saved and restored."""

    def __iter__(self) -> Iterator[Batch]:
        """Return the iterator itself."""

    def __next__(self) -> Batch:
        """Return the next batch."""

    def get_state(self) -> Any:
        """Return a JSON-serializable position, kept in every checkpoint."""

    def set_state(self, state: Any) -> None:
        """Continue from a position :meth:`get_state` returned.

        Parameters
        ----------
        state : Any
            The position.
        """


class TrainingData(Protocol):
    """The data one training run works with; ``stats["examples"]["validation"]`` bounds early stopping."""

    @property
    def tokenizer(self) -> _TrainingTokenizer:
        """Return the vocabulary of the token ids."""

    @property
    def stats(self) -> dict[str, Any]:
        """Return counts per split."""

    def train_iterator(self, seed: int) -> TrainIterator:
        """Return an endless iterator over the training batches.

        Parameters
        ----------
        seed : int
            Shuffles every epoch.
        """

    def eval_batches(self, split: str, max_batches: int = 0) -> Iterable[Batch]:
        """Return the batches that cover ``split`` once.

        Parameters
        ----------
        split : str
            A split or role name.
        max_batches : int
            The first this many; 0: all.
        """

    def text_pairs(self, split: str, max_pairs: int = 0) -> list[tuple[str, str]]:
        """Return the ``(source, target)`` sentences of ``split`` for BLEU; none for a language model.

        Parameters
        ----------
        split : str
            A split or role name.
        max_pairs : int
            The first this many; 0: all.
        """

    def split_fingerprints(self) -> dict[str, dict[str, Any]]:
        """Return what identifies the dev and test splits (``data_splits.json``, checked on resume)."""
