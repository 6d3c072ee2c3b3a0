"""Several sentence pairs per batch row, with segment ids (``config.packing``; docs/real_language.md).

Attention stays within a pair, so a packed row's loss equals its pairs' batched alone (first-fit decreasing).
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

from attention_jax.data import batching
from attention_jax.data import tokenizer as tokenizer_lib

if TYPE_CHECKING:  # Annotations only: the config schema imports this module, and token_cache loads TFDS.
    from attention_jax.data import token_cache

DEFAULT_WINDOW = 4096


def _default_row_lengths(max_len: int) -> tuple[int, ...]:
    """Return ``(3 * max_len // 8, 3 * max_len // 4, max_len)`` less those under ``MIN_BUCKET_LEN``."""
    shorter = (3 * max_len // 8, 3 * max_len // 4)
    return tuple(length for length in shorter if length >= batching.MIN_BUCKET_LEN) + (max_len,)


def check_row_lengths(row_lengths: Sequence[int], max_len: int) -> tuple[int, ...]:
    """Return ``config.packing_row_lengths`` as a tuple if valid.

    Parameters
    ----------
    row_lengths : Sequence[int]
        Configured lengths; empty: the default.
    max_len : int
        ``config.max_len``; the last length must equal it, so packing drops no pair bucketing keeps.

    Returns
    -------
    tuple[int, ...]
        Strictly increasing positive lengths ending in ``max_len``.

    Raises
    ------
    ValueError
        Naming the fix.
    """
    lengths = tuple(int(length) for length in row_lengths) or _default_row_lengths(max_len)
    increasing = all(0 < short < long for short, long in zip(lengths, lengths[1:]))
    if not (increasing and lengths[0] > 0 and lengths[-1] == max_len):
        raise ValueError(
            f"config.packing_row_lengths={tuple(row_lengths)} must be strictly increasing positive lengths "
            f"ending in config.max_len={max_len} (the longest pair must fit a row). Use e.g. "
            f"--config.packing_row_lengths='{_default_row_lengths(max_len)}', or leave it empty for that default."
        )
    return lengths


def _make_packed_shapes(max_len: int, tokens_per_batch: int, row_multiple: int,
                       row_lengths: Sequence[int] = ()) -> batching._BucketShapes:
    """Return packed training's batch shapes: per row length ``L``, the most rows within the budget."""
    lengths = check_row_lengths(row_lengths, max_len)
    batching.make_bucket_shapes(max_len, tokens_per_batch, row_multiple)  # Raises for a budget too small.
    global_rows = tuple((tokens_per_batch // length) // row_multiple * row_multiple for length in lengths)
    return batching._BucketShapes(lengths=lengths, global_rows=global_rows)


def _first_fit_decreasing(source_lengths: np.ndarray, target_lengths: np.ndarray,
                         row_lengths: int | Sequence[int]) -> tuple[list[list[int]], list[int]]:
    """Pack pairs into rows, longest first, each into the first open row with room on both sides.

    Long rows are topped up with short pairs before a short row opens; ``O(n * rows)``, so callers pack windows.

    Lengths ``[n]`` include EOS; a pair that fits no open row opens the shortest row length that holds it.
    Returns each row's pair indices and its length.
    """
    capacities = np.atleast_1d(np.asarray(row_lengths, np.int64))
    longer_side = np.maximum(source_lengths, target_lengths)
    order = np.argsort(-longer_side, kind="stable")
    free = np.zeros((2, len(order)), np.int64)  # Free source / target slots of each open row.
    rows: list[list[int]] = []
    lengths: list[int] = []
    for pair in order.tolist():
        need_source, need_target = int(source_lengths[pair]), int(target_lengths[pair])
        fits = (free[0, :len(rows)] >= need_source) & (free[1, :len(rows)] >= need_target)
        row = int(np.argmax(fits)) if len(rows) and fits.any() else len(rows)
        if row == len(rows):
            length = int(capacities[np.searchsorted(capacities, longer_side[pair])])
            rows.append([])
            lengths.append(length)
            free[:, row] = length
        rows[row].append(pair)
        free[0, row] -= need_source
        free[1, row] -= need_target
    return rows, lengths


class _PackedPlan:
    """Packed global batches of one split: a :class:`batching._BatchPlan` with ``[R, P]`` pairs per batch.

    Lengths ``[num_pairs]`` include EOS; pairs over the longest row are dropped; ``window`` pairs are packed together.
    """

    def __init__(self, source_lengths: np.ndarray, target_lengths: np.ndarray,
                 shapes: batching._BucketShapes, window: int = DEFAULT_WINDOW) -> None:
        self.shapes = shapes
        is_kept = np.maximum(source_lengths, target_lengths) <= shapes.lengths[-1]
        self.num_pairs = len(source_lengths)
        self.num_dropped = int(np.sum(~is_kept))
        kept = np.flatnonzero(is_kept)
        kept = kept[np.random.default_rng(0).permutation(len(kept))]  # Windows mix all lengths.
        rows, row_lengths = [], []
        for start in range(0, len(kept), window):
            members = kept[start:start + window]
            packed, lengths = _first_fit_decreasing(source_lengths[members], target_lengths[members], shapes.lengths)
            rows.extend([members[row].tolist() for row in packed])
            row_lengths.extend(lengths)
        self._rows = np.full((len(rows), max(map(len, rows), default=1)), batching.PADDING_ROW, np.int64)
        for index, row in enumerate(rows):
            self._rows[index, :len(row)] = row  # [rows, P]
        self._row_bucket = np.searchsorted(np.asarray(shapes.lengths), np.asarray(row_lengths, np.int64))
        members = np.maximum(self._rows, 0)
        is_member = self._rows >= 0
        self._source_tokens = np.bincount(self._row_bucket, np.sum(source_lengths[members] * is_member, axis=1),
                                          minlength=len(shapes.lengths))  # Per row length.
        self._target_tokens = np.bincount(self._row_bucket, np.sum(target_lengths[members] * is_member, axis=1),
                                          minlength=len(shapes.lengths))

    @property
    def num_rows(self) -> int:
        """Return the packed rows, holding every kept pair once."""
        return len(self._rows)

    def _rows_per_length(self) -> tuple[int, ...]:
        """The packed rows in batches of each row length, in the order of ``shapes.lengths``."""
        return tuple(int(count) for count in np.bincount(self._batch_bucket(), minlength=len(self.shapes.lengths)))

    def _batch_bucket(self) -> np.ndarray:
        """Return each row's batch length index; leftover rows move up, so only the longest has a partial batch."""
        bucket = self._row_bucket.copy()
        for shorter in range(len(self.shapes.lengths) - 1):
            members = np.flatnonzero(bucket == shorter)
            remainder = len(members) % self.shapes.global_rows[shorter] if self.shapes.global_rows[shorter] else 0
            bucket[members[len(members) - remainder:]] = shorter + 1
        return bucket

    def mean_tokens_per_row(self) -> tuple[float, ...]:
        """Return per row length the mean real tokens of a row's longer side (0 without rows)."""
        rows_packed = np.bincount(self._row_bucket, minlength=len(self.shapes.lengths))
        return tuple(float(max(source, target) / rows) if rows else 0.0 for source, target, rows in
                     zip(self._source_tokens, self._target_tokens, rows_packed))

    def with_shapes(self, shapes: batching._BucketShapes) -> "_PackedPlan":
        """Return this packing cut into batches of ``shapes.global_rows`` rows, not repacked.

        Raises ``ValueError``: when the lengths differ.
        """
        if tuple(shapes.lengths) != tuple(self.shapes.lengths):
            raise ValueError(f"shapes of length {shapes.lengths} do not match this plan's {self.shapes.lengths}.")
        resized = copy.copy(self)
        resized.shapes = shapes
        return resized

    def _batches_per_length(self) -> list[int]:
        return [math.ceil(rows / batch_rows) if rows else 0
                for rows, batch_rows in zip(self._rows_per_length(), self.shapes.global_rows)]

    @property
    def num_batches(self) -> int:
        """Return the global batches in one epoch."""
        return sum(self._batches_per_length())

    @property
    def num_kept(self) -> int:
        """Return the pairs that fit the longest row; each appears once per epoch."""
        return self.num_pairs - self.num_dropped

    def used_buckets(self) -> list[int]:
        """Return the indices of the row lengths that have rows."""
        return [bucket for bucket, rows in enumerate(self._rows_per_length()) if rows]

    def shuffled_batches(self, seed: int, epoch: int) -> list[batching._PlannedBatch]:
        """Return an epoch's batches (every kept pair once): each length's rows shuffled and cut, batches shuffled."""
        rng = np.random.default_rng([seed, epoch])
        batch_bucket = self._batch_bucket()
        batches = []
        for bucket in self.used_buckets():
            rows = self._rows[batch_bucket == bucket]
            batches.extend(self._chunk(rows[rng.permutation(len(rows))], bucket))
        return [batches[index] for index in rng.permutation(len(batches))]

    def ordered_batches(self) -> list[batching._PlannedBatch]:
        """Return the evaluation batches: each length's packed rows in their fixed order."""
        batch_bucket = self._batch_bucket()
        return [batch for bucket in self.used_buckets()
                for batch in self._chunk(self._rows[batch_bucket == bucket], bucket)]

    def padding_fraction(self) -> dict[str, float]:
        """Return the fraction of an epoch's batch positions that are padding."""
        slots = sum(batches * rows * length for batches, rows, length in
                    zip(self._batches_per_length(), self.shapes.global_rows, self.shapes.lengths))
        if slots == 0:
            return {"inputs": 0.0, "targets": 0.0, "total": 0.0}
        source, target = float(self._source_tokens.sum()), float(self._target_tokens.sum())
        return {"inputs": 1.0 - source / slots, "targets": 1.0 - target / slots,
                "total": 1.0 - (source + target) / (2 * slots)}


    def _chunk(self, rows: np.ndarray, bucket: int) -> list[batching._PlannedBatch]:
        batch_rows = self.shapes.global_rows[bucket]
        num_batches = math.ceil(len(rows) / batch_rows)
        padded = np.full((num_batches * batch_rows, self._rows.shape[1]), batching.PADDING_ROW, np.int64)
        padded[:len(rows)] = rows
        return [batching._PlannedBatch(bucket, chunk) for chunk in padded.reshape(-1, batch_rows, padded.shape[1])]


def _pack_side(side: token_cache._TokenizedSide, rows: np.ndarray,
               length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return ids, segment ids and positions ``[rows, L]`` of one side of packed rows ``[rows, P]``."""
    ids = np.zeros((len(rows), length), np.int32)
    segmentation = np.zeros_like(ids)
    position = np.zeros_like(ids)
    for row, sentences in enumerate(rows.tolist()):
        cursor = 0
        for segment, sentence in enumerate((s for s in sentences if s >= 0), start=1):
            start, end = int(side.offsets[sentence]), int(side.offsets[sentence + 1])
            size = end - start + 1  # EOS included.
            ids[row, cursor:cursor + size - 1] = side.ids[start:end]
            ids[row, cursor + size - 1] = tokenizer_lib.EOS_ID
            segmentation[row, cursor:cursor + size] = segment
            position[row, cursor:cursor + size] = np.arange(size)
            cursor += size
    return ids, segmentation, position


def _make_packed_batch(tokenized: token_cache._TokenizedSplit, length: int, rows: np.ndarray) -> dict:
    """Build one packed batch: int32 ``[rows, L]`` ``inputs``, ``targets`` (pad 0), ``*_segmentation``, ``*_position``.

    ``rows``: int64 ``[rows, P]`` pair indices (``PADDING_ROW`` skipped); segment ``k`` of a row is its pair ``k``.
    """
    batch = {}
    for name, side in (("inputs", tokenized.source), ("targets", tokenized.target)):
        ids, segmentation, position = _pack_side(side, rows, length)
        batch.update({name: ids, f"{name}_segmentation": segmentation, f"{name}_position": position})
    return batch
