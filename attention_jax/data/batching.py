"""Length-bucketed batches under a token budget (Section 5.1: about 25000 source and 25000 target tokens).

A bucket of padded length ``L`` has ``R`` rows, ``R * L <= tokens_per_batch`` (slots) or sized on real tokens.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol, Sequence

import numpy as np

from attention_jax.foundation.user_errors import UserInputError

MIN_BUCKET_LEN = 8
PADDING_ROW = -1  # Sentence index of an all-pad row (fills a bucket's last, partial batch).


class _TokenRows(Protocol):
    """One side's token ids, copied into padded rows (``token_cache._TokenizedSide``)."""

    def fill_rows(self, rows: np.ndarray, sentence_indices: np.ndarray) -> None:
        """Write each sentence's ids, EOS included, at the start of its row; ``PADDING_ROW`` rows stay pad."""


class _TokenPairs(Protocol):
    """Source and target token ids of one split (``token_cache._TokenizedSplit``)."""

    @property
    def source(self) -> _TokenRows:
        """The source side."""
        ...

    @property
    def target(self) -> _TokenRows:
        """The target side."""
        ...


def _bucket_lengths(max_len: int, min_len: int = MIN_BUCKET_LEN) -> tuple[int, ...]:
    """Return the buckets' padded lengths: powers of two and 1.5 times them, ``min_len`` to ``max_len`` (the last).

    Neighbours differ by at most 1.5x, so bucketing alone leaves at most a third padding.

    E.g. ``(8, 12, 16, 24, ..., 192, 256)``.

    Raises ``ValueError``: for ``max_len < 1``.
    """
    if max_len < 1:
        raise ValueError(f"config.max_len must be positive, got {max_len}.")
    candidates = {base * 2**exponent for base in (2, 3) for exponent in range(max_len.bit_length() + 1)}
    return tuple(sorted({length for length in candidates if min_len <= length < max_len} | {max_len}))


@dataclasses.dataclass(frozen=True)
class _BucketShapes:
    """Padded length ``L`` and global rows ``R`` (summed over processes) of each bucket."""

    lengths: tuple[int, ...]
    global_rows: tuple[int, ...]


def make_bucket_shapes(max_len: int, tokens_per_batch: int, row_multiple: int) -> _BucketShapes:
    """Choose the most rows per bucket that keep ``rows * L <= tokens_per_batch``.

    Parameters
    ----------
    max_len : int
        Longest padded length.
    tokens_per_batch : int
        Token slots per side of one global batch.
    row_multiple : int
        Every row count is a multiple of this (devices x processes).

    Returns
    -------
    _BucketShapes
        The shapes.

    Raises
    ------
    UserInputError
        When the longest bucket cannot hold ``row_multiple`` rows within the budget.
    """
    if row_multiple < 1:
        raise ValueError(f"rows_multiple must be at least 1, got {row_multiple}.")
    lengths = _bucket_lengths(max_len)
    global_rows = tuple((tokens_per_batch // length) // row_multiple * row_multiple for length in lengths)
    if global_rows[-1] == 0:
        raise UserInputError(
            f"config.tokens_per_batch={tokens_per_batch} cannot hold {row_multiple} rows of config.max_len="
            f"{max_len} tokens (the row multiple: devices x processes). Raise tokens_per_batch to at least "
            f"{row_multiple * max_len} or lower max_len."
        )
    return _BucketShapes(lengths=lengths, global_rows=global_rows)


def _real_token_shapes(shapes: _BucketShapes, mean_tokens_per_row: Sequence[float], tokens_per_batch: int,
                      row_multiple: int) -> _BucketShapes:
    """Resize each bucket's rows so its average batch holds ``tokens_per_batch`` real tokens per side.

    ``R = tokens_per_batch / mean``, rounded down to ``row_multiple``, never below the slot-counted rows; a batch
    may then span up to ``L / mean`` times the budget in slots.
    """
    global_rows = []
    for slot_rows, mean in zip(shapes.global_rows, mean_tokens_per_row):
        real_rows = int(tokens_per_batch / mean) // row_multiple * row_multiple if mean > 0 else 0
        global_rows.append(max(slot_rows, real_rows))
    return _BucketShapes(lengths=shapes.lengths, global_rows=tuple(global_rows))


def _mean_longer_side_per_bucket(source_lengths: np.ndarray, target_lengths: np.ndarray,
                                lengths: Sequence[int]) -> tuple[float, ...]:
    """Return per bucket the larger of its pairs' mean source and mean target lengths (0 when empty).

    The larger mean, not the mean of the larger sides, keeps each side's average batch within the budget.
    """
    bucket_of_pair = np.searchsorted(np.asarray(lengths), np.maximum(source_lengths, target_lengths), side="left")
    means = []
    for bucket in range(len(lengths)):
        members = bucket_of_pair == bucket
        means.append(float(max(source_lengths[members].mean(), target_lengths[members].mean()))
                     if members.any() else 0.0)
    return tuple(means)


@dataclasses.dataclass(frozen=True)
class _PlannedBatch:
    """One global batch: its bucket index and each row's sentence index (``[R]``, packed ``[R, P]``)."""

    bucket: int
    sentence_indices: np.ndarray

    def local_indices(self, process_index: int, process_count: int) -> np.ndarray:
        """Return this process's rows: the ``process_index``-th of ``process_count`` equal slices.

        ``[R // process_count]`` (packed: ``[R // process_count, P]``).
        """
        indices = self.sentence_indices
        return indices.reshape(process_count, -1, *indices.shape[1:])[process_index]


class _BatchPlan:
    """Global batches of one split: ``ceil(pairs_in_bucket / R)`` per bucket, reshuffled every epoch.

    Lengths ``[num_pairs]`` include EOS.
    """

    def __init__(self, source_lengths: np.ndarray, target_lengths: np.ndarray, shapes: _BucketShapes) -> None:
        self.shapes = shapes
        pair_lengths = np.maximum(source_lengths, target_lengths)
        is_kept = pair_lengths <= shapes.lengths[-1]
        self.num_pairs = len(pair_lengths)
        self.num_dropped = int(np.sum(~is_kept))
        bucket_of_pair = np.searchsorted(np.asarray(shapes.lengths), pair_lengths, side="left")
        self._members = [np.flatnonzero(is_kept & (bucket_of_pair == bucket)) for bucket in range(len(shapes.lengths))]
        self._batches_per_bucket = [
            math.ceil(len(members) / rows) for members, rows in zip(self._members, shapes.global_rows)
        ]
        self._source_tokens = int(np.sum(source_lengths[is_kept]))
        self._target_tokens = int(np.sum(target_lengths[is_kept]))

    @property
    def num_batches(self) -> int:
        """Return the global batches in one epoch."""
        return sum(self._batches_per_bucket)

    @property
    def num_kept(self) -> int:
        """Return the pairs that fit ``max_len``; each appears once per epoch."""
        return self.num_pairs - self.num_dropped

    def used_buckets(self) -> list[int]:
        """Return the buckets with at least one batch (the shapes a run will see)."""
        return [bucket for bucket, count in enumerate(self._batches_per_bucket) if count]

    def shuffled_batches(self, seed: int, epoch: int) -> list[_PlannedBatch]:
        """Return an epoch's batches (every kept pair once): pairs shuffled within buckets, batches in shuffled order.
        """
        rng = np.random.default_rng([seed, epoch])
        batches = self._chunk([members[rng.permutation(len(members))] for members in self._members])
        return [batches[i] for i in rng.permutation(len(batches))]

    def ordered_batches(self) -> list[_PlannedBatch]:
        """Return the evaluation batches in a fixed order that mixes lengths (a limited evaluation's first batches too).
        """
        batches = self._chunk(self._members)
        return [batches[i] for i in np.random.default_rng(0).permutation(len(batches))]

    def padding_fraction(self) -> dict[str, float]:
        """Return the fraction of an epoch's batch positions that are padding."""
        slots = sum(
            count * rows * length
            for count, rows, length in zip(self._batches_per_bucket, self.shapes.global_rows, self.shapes.lengths)
        )
        if slots == 0:
            return {"inputs": 0.0, "targets": 0.0, "total": 0.0}
        return {
            "inputs": 1.0 - self._source_tokens / slots,
            "targets": 1.0 - self._target_tokens / slots,
            "total": 1.0 - (self._source_tokens + self._target_tokens) / (2 * slots),
        }

    def _chunk(self, members_per_bucket: list[np.ndarray]) -> list[_PlannedBatch]:
        batches: list[_PlannedBatch] = []
        for bucket, (members, rows) in enumerate(zip(members_per_bucket, self.shapes.global_rows)):
            padded = np.full(self._batches_per_bucket[bucket] * rows, PADDING_ROW, np.int64)
            padded[: len(members)] = members
            batches.extend(_PlannedBatch(bucket, chunk) for chunk in padded.reshape(-1, rows))
        return batches


def count_tokens(batch: dict) -> dict[str, int]:
    """Return the real (non-pad) tokens and token slots of each side of a batch (a language model's: targets only).

    Parameters
    ----------
    batch : dict
        ``targets`` and ``inputs`` ids, pad 0.

    Returns
    -------
    dict[str, int]
        ``inputs_tokens``, ``inputs_slots``, ``targets_tokens``, ``targets_slots``.
    """
    counts = {}
    for name in ("inputs", "targets"):
        if name not in batch:  # Language-model batches have targets only.
            continue
        ids = np.asarray(batch[name])
        counts[f"{name}_tokens"] = int(np.count_nonzero(ids))
        counts[f"{name}_slots"] = int(ids.size)
    return counts


def _make_batch(tokenized: _TokenPairs, padded_len: int, sentence_indices: np.ndarray) -> dict:
    """Build one batch of padded, EOS-terminated token ids.

    ``inputs`` and ``targets``: int32 ``[rows, padded_len]``, pad 0; a ``PADDING_ROW`` index gives an all-pad row.
    """
    batch = {}
    for name, side in (("inputs", tokenized.source), ("targets", tokenized.target)):
        rows = np.zeros((len(sentence_indices), padded_len), np.int32)
        side.fill_rows(rows, sentence_indices)
        batch[name] = rows
    return batch
