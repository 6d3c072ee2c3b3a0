"""Several sentence pairs per batch row, with segment ids (``config.packing``).

Bucketed batches (:mod:`attention_jax.data.batching`) pad every row to its bucket's length on both
sides, so up to a third of a batch, and more on the shorter side, is padding. Packing instead fills
rows with as many whole pairs as fit on *both* sides:

- pair ``k`` of a row (``k = 1, 2, ...``) is written at the next free position of the source row and
  of the target row, each side ending in EOS; ``inputs_segmentation`` / ``targets_segmentation`` hold
  ``k`` on its tokens (0 on padding), ``inputs_position`` / ``targets_position`` count 0, 1, ... from
  each pair's first token;
- the model (:class:`attention_jax.models.model.Transformer`) keeps attention within a pair and restarts
  positions, so a packed row's loss equals the loss of its pairs batched alone.

Rows come in a few lengths, ``config.packing_row_lengths`` (by default 3/8, 3/4 and all of ``max_len``,
see :func:`default_row_lengths`). Every position of a row attends over the whole
row, so a row of ``L`` costs about ``L`` per token in attention: short rows for short pairs keep that
cost near the bucketed batches' while the rows stay almost full. Rows are filled by first-fit
decreasing: the kept pairs, in a fixed pseudo-random order, are cut into windows of ``window`` pairs;
each window's pairs, longest first, go into the first open row of that window with room on both
sides, and a pair that fits no open row opens a row of the shortest length that holds it. The
packing is computed once per split. The rows of a shorter length that would not fill its last batch
go into batches of the next length instead (padded to it), so only the longest length has a partial
batch. Every epoch shuffles each length's rows, cuts them into batches of that length's ``R`` rows
and shuffles the batches, so the plan has one batch shape ``[R, L]`` per row length (one compilation
each) and a fixed number of batches per epoch (the iterator's state stays the step number).

Glossary: ``L`` row length, ``R`` global rows per batch of that length, ``P`` most pairs in one row.
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


def default_row_lengths(max_len: int) -> tuple[int, ...]:
    """The row lengths of packed training when ``config.packing_row_lengths`` is empty.

    Parameters
    ----------
    max_len : int
        Longest pair (tokens per side, EOS included); always the last length.

    Returns
    -------
    tuple[int, ...]
        ``(3 * max_len // 8, 3 * max_len // 4, max_len)``, leaving out lengths below
        ``batching.MIN_BUCKET_LEN``; e.g. ``(24, 48, 64)`` for ``max_len=64``.

    Notes
    -----
    More, shorter rows are cheaper to attend over but leave more gaps; these three lengths were
    chosen by the removed ``benchmarks/packing.py --one_length`` on ``messages_en_de`` (figures:
    ``docs/real_language.md``, "Fewer wasted tokens (packing)").
    """
    shorter = (3 * max_len // 8, 3 * max_len // 4)
    return tuple(length for length in shorter if length >= batching.MIN_BUCKET_LEN) + (max_len,)


def check_row_lengths(row_lengths: Sequence[int], max_len: int) -> tuple[int, ...]:
    """Return ``config.packing_row_lengths`` as a tuple if valid, else raise a ValueError naming the fix.

    Parameters
    ----------
    row_lengths : Sequence[int]
        Configured lengths; empty means :func:`default_row_lengths`.
    max_len : int
        ``config.max_len``: the longest length must equal it, so that no pair kept by bucketing is
        dropped by packing.

    Returns
    -------
    tuple[int, ...]
        Strictly increasing positive lengths ending in ``max_len``.

    Notes
    -----
    Training checks this before it creates the work directory (``sections.build_experiment``), so a
    bad value costs one line and exit status 2, not a run.
    """
    lengths = tuple(int(length) for length in row_lengths) or default_row_lengths(max_len)
    increasing = all(0 < short < long for short, long in zip(lengths, lengths[1:]))
    if not (increasing and lengths[0] > 0 and lengths[-1] == max_len):
        raise ValueError(
            f"config.packing_row_lengths={tuple(row_lengths)} must be strictly increasing positive lengths "
            f"ending in config.max_len={max_len} (the longest pair must fit a row). Use e.g. "
            f"--config.packing_row_lengths='{default_row_lengths(max_len)}', or leave it empty for that default."
        )
    return lengths


def make_packed_shapes(max_len: int, tokens_per_batch: int, row_multiple: int,
                       row_lengths: Sequence[int] = ()) -> batching.BucketShapes:
    """The batch shapes of packed training: per row length ``L``, the most rows within the budget.

    Parameters
    ----------
    max_len : int
        Longest pair; the longest row length.
    tokens_per_batch : int
        Token slots per side of one global batch: ``R * L <= tokens_per_batch`` for every length.
    row_multiple : int
        Every ``R`` is a multiple of this (data-parallel devices and processes).
    row_lengths : Sequence[int]
        ``config.packing_row_lengths`` (checked by :func:`check_row_lengths`; empty: the default).

    Returns
    -------
    batching.BucketShapes
        One "bucket" per row length.

    Notes
    -----
    Raises the same ``ValueError`` as :func:`batching.make_bucket_shapes` when the budget cannot hold
    ``row_multiple`` rows of ``max_len``.
    """
    lengths = check_row_lengths(row_lengths, max_len)
    batching.make_bucket_shapes(max_len, tokens_per_batch, row_multiple)  # Raises for a budget too small.
    global_rows = tuple((tokens_per_batch // length) // row_multiple * row_multiple for length in lengths)
    return batching.BucketShapes(lengths=lengths, global_rows=global_rows)


def first_fit_decreasing(source_lengths: np.ndarray, target_lengths: np.ndarray,
                         row_lengths: int | Sequence[int]) -> tuple[list[list[int]], list[int]]:
    """Pack pairs into rows, longest first, each into the first open row with room on both sides.

    Parameters
    ----------
    source_lengths, target_lengths : np.ndarray
        Lengths (EOS included) of the pairs to pack, shape ``[n]``; every one at most the longest row.
    row_lengths : int or Sequence[int]
        Tokens per side of a row; with several, increasing, a pair that fits no open row opens a row of
        the shortest length that holds it.

    Returns
    -------
    rows : list[list[int]]
        Rows, each a list of indices into the given arrays, in the order the pairs sit in the row.
    lengths : list[int]
        Each row's length.

    Notes
    -----
    A pair fits a row when both its sides fit the row's free source and target space. Because the
    longest pairs come first, the long rows they open are topped up with short pairs before any
    short row opens. Time is ``O(n * rows)`` (vectorized over rows), so callers pack bounded windows.
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


class PackedPlan:
    """Packed global batches of one split: a :class:`batching.BatchPlan` with several pairs per row.

    Parameters
    ----------
    source_lengths, target_lengths : np.ndarray
        Length of each pair's sides (EOS included), shape ``[num_pairs]``.
    shapes : batching.BucketShapes
        From :func:`make_packed_shapes`: the row lengths and each one's ``R``.
    window : int
        Pairs packed together by :func:`first_fit_decreasing`.

    Notes
    -----
    Pairs with a side longer than the longest row are dropped, as in bucketing. A
    :class:`batching.PlannedBatch` of this plan has ``bucket`` = the index of its row length and
    ``sentence_indices`` of shape ``[R, P]`` (``PADDING_ROW`` after a row's pairs and in empty rows);
    :func:`make_packed_batch` turns it into arrays.
    """

    def __init__(self, source_lengths: np.ndarray, target_lengths: np.ndarray,
                 shapes: batching.BucketShapes, window: int = DEFAULT_WINDOW) -> None:
        self.shapes = shapes
        is_kept = np.maximum(source_lengths, target_lengths) <= shapes.lengths[-1]
        self.num_pairs = len(source_lengths)
        self.num_dropped = int(np.sum(~is_kept))
        kept = np.flatnonzero(is_kept)
        kept = kept[np.random.default_rng(0).permutation(len(kept))]  # Windows mix all lengths.
        rows, row_lengths = [], []
        for start in range(0, len(kept), window):
            members = kept[start:start + window]
            packed, lengths = first_fit_decreasing(source_lengths[members], target_lengths[members], shapes.lengths)
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
        """Packed rows holding every kept pair once."""
        return len(self._rows)

    def rows_per_length(self) -> tuple[int, ...]:
        """Packed rows in batches of each row length, in the order of ``shapes.lengths``."""
        return tuple(int(count) for count in np.bincount(self._batch_bucket(), minlength=len(self.shapes.lengths)))

    def _batch_bucket(self) -> np.ndarray:
        """Row length index of the batches each packed row goes into.

        A row goes into batches of its own length, except that the rows of a shorter length that do not
        fill its last batch move up to the next length (padded there): only the longest length ever
        has a partial batch, so an epoch wastes no more than one batch's worth of empty rows.
        """
        bucket = self._row_bucket.copy()
        for shorter in range(len(self.shapes.lengths) - 1):
            members = np.flatnonzero(bucket == shorter)
            remainder = len(members) % self.shapes.global_rows[shorter] if self.shapes.global_rows[shorter] else 0
            bucket[members[len(members) - remainder:]] = shorter + 1
        return bucket

    def mean_tokens_per_row(self) -> tuple[float, ...]:
        """Per row length, the mean real tokens of a row's longer side: ``max(source, target tokens) / rows``.

        Returns
        -------
        tuple[float, ...]
            One value per row length (over the rows packed at that length); 0 for a length without rows.
        """
        rows_packed = np.bincount(self._row_bucket, minlength=len(self.shapes.lengths))
        return tuple(float(max(source, target) / rows) if rows else 0.0 for source, target, rows in
                     zip(self._source_tokens, self._target_tokens, rows_packed))

    def with_shapes(self, shapes: batching.BucketShapes) -> "PackedPlan":
        """Return this packing cut into batches of ``shapes.global_rows`` rows (the rows are not repacked).

        Parameters
        ----------
        shapes : batching.BucketShapes
            This plan's row lengths with other row counts (e.g. from :func:`batching.real_token_shapes`).

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

    def _batches_per_length(self) -> list[int]:
        return [math.ceil(rows / batch_rows) if rows else 0
                for rows, batch_rows in zip(self.rows_per_length(), self.shapes.global_rows)]

    @property
    def num_batches(self) -> int:
        """Global batches in one epoch."""
        return sum(self._batches_per_length())

    @property
    def num_kept(self) -> int:
        """Pairs that fit the longest row and appear once per epoch."""
        return self.num_pairs - self.num_dropped

    def used_buckets(self) -> list[int]:
        """Return the indices of the row lengths that have rows (the batch shapes an epoch uses)."""
        return [bucket for bucket, rows in enumerate(self.rows_per_length()) if rows]

    def shuffled_batches(self, seed: int, epoch: int) -> list[batching.PlannedBatch]:
        """Return epoch ``epoch``'s batches: each length's rows shuffled and cut, then the batches shuffled.

        Parameters
        ----------
        seed : int
            Data seed; the same seed and epoch give the same batches on every process.
        epoch : int
            Epoch number, from 0.

        Returns
        -------
        list[batching.PlannedBatch]
            ``num_batches`` batches covering every kept pair once; each length's last batch ends in
            empty rows.
        """
        rng = np.random.default_rng([seed, epoch])
        batch_bucket = self._batch_bucket()
        batches = []
        for bucket in self.used_buckets():
            rows = self._rows[batch_bucket == bucket]
            batches.extend(self._chunk(rows[rng.permutation(len(rows))], bucket))
        return [batches[index] for index in rng.permutation(len(batches))]

    def ordered_batches(self) -> list[batching.PlannedBatch]:
        """Return the batches for evaluation: each length's packed rows in their fixed order."""
        batch_bucket = self._batch_bucket()
        return [batch for bucket in self.used_buckets()
                for batch in self._chunk(self._rows[batch_bucket == bucket], bucket)]

    def padding_fraction(self) -> dict[str, float]:
        """Return the fraction of batch positions that are padding in one epoch.

        Returns
        -------
        dict[str, float]
            ``{"inputs": ..., "targets": ..., "total": ...}``; 0 when the plan has no batches.
        """
        slots = sum(batches * rows * length for batches, rows, length in
                    zip(self._batches_per_length(), self.shapes.global_rows, self.shapes.lengths))
        if slots == 0:
            return {"inputs": 0.0, "targets": 0.0, "total": 0.0}
        source, target = float(self._source_tokens.sum()), float(self._target_tokens.sum())
        return {"inputs": 1.0 - source / slots, "targets": 1.0 - target / slots,
                "total": 1.0 - (source + target) / (2 * slots)}

    def mean_attended_length(self) -> float:
        """Row length averaged over the slots of an epoch: the keys each position's attention spans.

        Returns
        -------
        float
            ``sum(slots_L * L) / sum(slots_L)`` over row lengths ``L`` (0 without batches).

        Notes
        -----
        Attention costs about this many keys per query position. For bucketed batches the
        counterpart is the bucket length averaged the same way (the removed ``benchmarks/packing.py`` reported both).
        """
        slots = [batches * rows * length for batches, rows, length in
                 zip(self._batches_per_length(), self.shapes.global_rows, self.shapes.lengths)]
        return float(np.dot(slots, self.shapes.lengths) / sum(slots)) if sum(slots) else 0.0

    def _chunk(self, rows: np.ndarray, bucket: int) -> list[batching.PlannedBatch]:
        batch_rows = self.shapes.global_rows[bucket]
        num_batches = math.ceil(len(rows) / batch_rows)
        padded = np.full((num_batches * batch_rows, self._rows.shape[1]), batching.PADDING_ROW, np.int64)
        padded[:len(rows)] = rows
        return [batching.PlannedBatch(bucket, chunk) for chunk in padded.reshape(-1, batch_rows, padded.shape[1])]


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
