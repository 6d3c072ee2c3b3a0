"""Several sentence pairs per batch row, with segment ids (``config.packing``).

Bucketed batches (:mod:`attention_jax.data.batching`) pad every row to its bucket's length on both
sides, so up to a third of a batch, and more on the shorter side, is padding. Packing instead fills
rows of ``max_len`` tokens per side with as many whole pairs as fit on *both* sides:

- pair ``k`` of a row (``k = 1, 2, ...``) is written at the next free position of the source row and
  of the target row, each side ending in EOS; ``inputs_segmentation`` / ``targets_segmentation`` hold
  ``k`` on its tokens (0 on padding), ``inputs_position`` / ``targets_position`` count 0, 1, ... from
  each pair's first token;
- the model (:class:`attention_jax.model.Transformer`) keeps attention within a pair and restarts
  positions, so a packed row's loss equals the loss of its pairs batched alone.

Rows are filled by first-fit decreasing: the kept pairs, in a fixed pseudo-random order, are cut into
windows of ``window`` pairs; each window's pairs, longest first, go into the first open row of that
window with room on both sides. The packing is computed once per split; every epoch shuffles the
packed rows and cuts them into batches of ``R`` rows, so the plan has a single batch shape
``[R, max_len]`` (one compilation) and a fixed number of batches per epoch (the iterator's state stays
the step number).

Glossary: ``L`` row length (``max_len``), ``R`` global rows per batch, ``P`` most pairs in one row.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from attention_jax.data import batching
from attention_jax.data import token_cache
from attention_jax.data import tokenizer as tokenizer_lib

DEFAULT_WINDOW = 4096


def make_packed_shapes(max_len: int, tokens_per_batch: int, row_multiple: int) -> batching.BucketShapes:
    """The one batch shape of packed training: the most rows of ``max_len`` within the budget.

    Parameters
    ----------
    max_len : int
        Row length ``L`` of both sides.
    tokens_per_batch : int
        Token slots per side of one global batch: ``R * L <= tokens_per_batch``.
    row_multiple : int
        ``R`` is a multiple of this (data-parallel devices and processes).

    Returns
    -------
    batching.BucketShapes
        A single "bucket" of length ``max_len``.

    Notes
    -----
    Raises the same ``ValueError`` as :func:`batching.make_bucket_shapes` when the budget cannot hold
    ``row_multiple`` rows.
    """
    shapes = batching.make_bucket_shapes(max_len, tokens_per_batch, row_multiple)
    return batching.BucketShapes(lengths=shapes.lengths[-1:], global_rows=shapes.global_rows[-1:])


def first_fit_decreasing(source_lengths: np.ndarray, target_lengths: np.ndarray,
                         capacity: int) -> list[list[int]]:
    """Pack pairs into rows of ``capacity`` tokens per side, longest first, each into the first row with room.

    Parameters
    ----------
    source_lengths, target_lengths : np.ndarray
        Lengths (EOS included) of the pairs to pack, shape ``[n]``; every one at most ``capacity``.
    capacity : int
        ``L``, tokens per side of a row.

    Returns
    -------
    list[list[int]]
        Rows, each a list of indices into the given arrays, in the order the pairs sit in the row.

    Notes
    -----
    A pair fits a row when both its sides fit the row's free source and target space. Time is
    ``O(n * rows)`` (vectorized over rows), so callers pack bounded windows.
    """
    order = np.argsort(-np.maximum(source_lengths, target_lengths), kind="stable")
    free = np.zeros((2, len(order)), np.int64)  # Free source / target slots of each open row.
    rows: list[list[int]] = []
    for pair in order.tolist():
        need_source, need_target = int(source_lengths[pair]), int(target_lengths[pair])
        fits = (free[0, :len(rows)] >= need_source) & (free[1, :len(rows)] >= need_target)
        row = int(np.argmax(fits)) if len(rows) and fits.any() else len(rows)
        if row == len(rows):
            rows.append([])
            free[:, row] = capacity
        rows[row].append(pair)
        free[0, row] -= need_source
        free[1, row] -= need_target
    return rows


class PackedPlan:
    """Packed global batches of one split: a :class:`batching.BatchPlan` with several pairs per row.

    Parameters
    ----------
    source_lengths, target_lengths : np.ndarray
        Length of each pair's sides (EOS included), shape ``[num_pairs]``.
    shapes : batching.BucketShapes
        From :func:`make_packed_shapes` (one length ``L``, ``R`` rows).
    window : int
        Pairs packed together by :func:`first_fit_decreasing`.

    Notes
    -----
    Pairs with a side longer than ``L`` are dropped, as in bucketing. A :class:`batching.PlannedBatch`
    of this plan has ``sentence_indices`` of shape ``[R, P]`` (``PADDING_ROW`` after a row's pairs
    and in empty rows); :func:`make_packed_batch` turns it into arrays.
    """

    def __init__(self, source_lengths: np.ndarray, target_lengths: np.ndarray,
                 shapes: batching.BucketShapes, window: int = DEFAULT_WINDOW) -> None:
        self.shapes = shapes
        length = shapes.lengths[-1]
        is_kept = np.maximum(source_lengths, target_lengths) <= length
        self.num_pairs = len(source_lengths)
        self.num_dropped = int(np.sum(~is_kept))
        kept = np.flatnonzero(is_kept)
        kept = kept[np.random.default_rng(0).permutation(len(kept))]  # Windows mix all lengths.
        rows = []
        for start in range(0, len(kept), window):
            members = kept[start:start + window]
            packed = first_fit_decreasing(source_lengths[members], target_lengths[members], length)
            rows.extend([members[row].tolist() for row in packed])
        self._rows = np.full((len(rows), max(map(len, rows), default=1)), batching.PADDING_ROW, np.int64)
        for index, row in enumerate(rows):
            self._rows[index, :len(row)] = row  # [rows, P]
        self._source_tokens = int(np.sum(source_lengths[is_kept]))
        self._target_tokens = int(np.sum(target_lengths[is_kept]))

    @property
    def num_rows(self) -> int:
        """Packed rows holding every kept pair once."""
        return len(self._rows)

    def mean_tokens_per_row(self) -> tuple[float]:
        """Mean real tokens of a packed row's longer side: ``max(source, target tokens) / rows``.

        Returns
        -------
        tuple[float]
            One value (the plan's one shape); 0 for a plan without rows.
        """
        return (max(self._source_tokens, self._target_tokens) / self.num_rows if self.num_rows else 0.0,)

    def with_shapes(self, shapes: batching.BucketShapes) -> "PackedPlan":
        """Return this packing cut into batches of ``shapes.global_rows[0]`` rows (the rows are not repacked).

        Parameters
        ----------
        shapes : batching.BucketShapes
            One bucket of this plan's length (e.g. from :func:`batching.real_token_shapes`).

        Returns
        -------
        PackedPlan
            A copy sharing the packed rows.
        """
        if tuple(shapes.lengths) != tuple(self.shapes.lengths):
            raise ValueError(f"shapes of length {shapes.lengths} do not match this plan's {self.shapes.lengths}.")
        resized = copy.copy(self)
        resized.shapes = shapes
        return resized

    @property
    def num_batches(self) -> int:
        """Global batches in one epoch."""
        return math.ceil(self.num_rows / self.shapes.global_rows[0])

    @property
    def num_kept(self) -> int:
        """Pairs that fit ``max_len`` and appear once per epoch."""
        return self.num_pairs - self.num_dropped

    def used_buckets(self) -> list[int]:
        """Return ``[0]`` (the one shape) when there is a batch, else ``[]``."""
        return [0] if self.num_rows else []

    def shuffled_batches(self, seed: int, epoch: int) -> list[batching.PlannedBatch]:
        """Return epoch ``epoch``'s batches: the packed rows in a shuffled order, ``R`` per batch.

        Parameters
        ----------
        seed : int
            Data seed; the same seed and epoch give the same batches on every process.
        epoch : int
            Epoch number, from 0.

        Returns
        -------
        list[batching.PlannedBatch]
            ``num_batches`` batches covering every kept pair once; the last one ends in empty rows.
        """
        rng = np.random.default_rng([seed, epoch])
        return self._chunk(self._rows[rng.permutation(self.num_rows)])

    def ordered_batches(self) -> list[batching.PlannedBatch]:
        """Return the batches for evaluation: the packed rows in their fixed order."""
        return self._chunk(self._rows)

    def padding_fraction(self) -> dict[str, float]:
        """Return the fraction of batch positions that are padding in one epoch.

        Returns
        -------
        dict[str, float]
            ``{"inputs": ..., "targets": ..., "total": ...}``; 0 when the plan has no batches.
        """
        slots = self.num_batches * self.shapes.global_rows[0] * self.shapes.lengths[0]
        if slots == 0:
            return {"inputs": 0.0, "targets": 0.0, "total": 0.0}
        return {
            "inputs": 1.0 - self._source_tokens / slots,
            "targets": 1.0 - self._target_tokens / slots,
            "total": 1.0 - (self._source_tokens + self._target_tokens) / (2 * slots),
        }

    def _chunk(self, rows: np.ndarray) -> list[batching.PlannedBatch]:
        batch_rows = self.shapes.global_rows[0]
        padded = np.full((self.num_batches * batch_rows, rows.shape[1]), batching.PADDING_ROW, np.int64)
        padded[:len(rows)] = rows
        return [batching.PlannedBatch(0, chunk) for chunk in padded.reshape(-1, batch_rows, rows.shape[1])]


def _pack_side(side: token_cache.TokenizedSide, rows: np.ndarray,
               length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ids, segment ids and positions ``[rows, L]`` of one side of packed rows ``[rows, P]``."""
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


def make_packed_batch(tokenized: token_cache.TokenizedSplit, length: int, rows: np.ndarray) -> dict:
    """Build one packed batch.

    Parameters
    ----------
    tokenized : token_cache.TokenizedSplit
        Token ids of the split.
    length : int
        ``L``, tokens per side of a row.
    rows : np.ndarray
        ``int64 [rows, P]`` pair indices per row; ``PADDING_ROW`` entries are skipped.

    Returns
    -------
    dict
        int32 ``[rows, L]`` arrays ``inputs``, ``targets`` (pad 0, each pair ending in EOS),
        ``inputs_segmentation``, ``targets_segmentation`` (pair ``k`` of a row is ``k`` on both
        sides, 0 = padding) and ``inputs_position``, ``targets_position`` (0 at each pair's start).
    """
    batch = {}
    for name, side in (("inputs", tokenized.source), ("targets", tokenized.target)):
        ids, segmentation, position = _pack_side(side, rows, length)
        batch.update({name: ids, f"{name}_segmentation": segmentation, f"{name}_position": position})
    return batch
