"""The input pipeline: corpus -> shared BPE vocabulary -> token ids -> length-bucketed global batches.

Caches under ``<data_dir>/attention_jax_cache/``, deterministic, so every process builds the same plans.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import grain
import numpy as np
from absl import logging

from attention_jax.data import batching, data_sources, packing, token_cache
from attention_jax.data import tokenizer as tokenizer_lib
from attention_jax.foundation.user_errors import UserInputError

if TYPE_CHECKING:
    from attention_jax.experiment.sections import DataConfig

SPLITS = ("train", "validation", "test")
MIN_VOCABULARY_FILL = 0.5  # A BPE vocabulary below this fraction of vocab_size is an error; above, a warning.
_PREFETCH_BATCHES = 8


@dataclasses.dataclass(frozen=True)
class _SplitData:
    """A split's TFDS name, token ids and batch plan."""

    tfds_split: str
    tokenized: token_cache._TokenizedSplit
    plan: batching._BatchPlan | packing._PackedPlan
    num_empty: int = 0  # Pairs left out for an empty source or target (counted in plan.num_dropped).

    def local_batch(self, planned: batching._PlannedBatch, process_index: int, process_count: int) -> dict:
        """Build this process's rows of a planned global batch (packed when the plan packs)."""
        length = self.plan.shapes.lengths[planned.bucket]
        local = planned.local_indices(process_index, process_count)
        if local.ndim == 2:  # [rows, P]: several pairs per row.
            return packing._make_packed_batch(self.tokenized, length, local)
        return batching._make_batch(self.tokenized, length, local)


class _TrainBatchSequence(Sequence):
    """Step ``i`` -> batch ``i % num_batches`` of epoch ``i // num_batches``, this process's rows, lazily for Grain."""

    def __init__(self, split: _SplitData, seed: int, process_index: int, process_count: int) -> None:
        self._split = split
        self._seed = seed
        self._process_index = process_index
        self._process_count = process_count
        self._epoch_plans: collections.OrderedDict[int, list[batching._PlannedBatch]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sys.maxsize  # Endless; Grain's iterator state is the next step.

    # Grain reads one step at a time: an endless Sequence has no slices to give (hence the narrower type).
    def __getitem__(self, step: int) -> dict[str, np.ndarray]:  # type: ignore[override]
        epoch, batch_in_epoch = divmod(int(step), self._split.plan.num_batches)
        planned = self._epoch_plan(epoch)[batch_in_epoch]
        return self._split.local_batch(planned, self._process_index, self._process_count)

    def _epoch_plan(self, epoch: int) -> list[batching._PlannedBatch]:
        with self._lock:
            if epoch not in self._epoch_plans:
                self._epoch_plans[epoch] = self._split.plan.shuffled_batches(self._seed, epoch)
                while len(self._epoch_plans) > 2:
                    self._epoch_plans.popitem(last=False)
            return self._epoch_plans[epoch]


class _EvalBatches:
    """A split's evaluation batches, built when iterated (re-iterable, always the same)."""

    def __init__(
        self, split: _SplitData, planned_batches: list[batching._PlannedBatch], process_index: int, process_count: int
    ) -> None:
        self._split = split
        self._planned_batches = planned_batches
        self._process_index = process_index
        self._process_count = process_count

    def __len__(self) -> int:
        return len(self._planned_batches)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for planned in self._planned_batches:
            yield self._split.local_batch(planned, self._process_index, self._process_count)


class TranslationData:
    """What training and decoding read about the data; made by :func:`get_datasets`.

    Parameters
    ----------
    source : data_sources._TranslationSource
        The opened corpus.
    tokenizer : tokenizer_lib.Tokenizer
        The shared vocabulary.
    splits : dict[str, _SplitData]
        ``train``, ``validation`` and ``test``.
    process_index, process_count : int
        This process and the processes in the run.
    num_threads : int
        Grain reader threads.
    """

    def __init__(
        self,
        *,
        source: data_sources._TranslationSource,
        tokenizer: tokenizer_lib.Tokenizer,
        splits: dict[str, _SplitData],
        process_index: int,
        process_count: int,
        num_threads: int,
    ) -> None:
        self.tokenizer = tokenizer
        self._source = source
        self._splits = splits
        self._process_index = process_index
        self._process_count = process_count
        self._num_threads = num_threads
        self._fingerprints: dict[str, dict[str, Any]] | None = None
        self.stats = self._compute_stats()

    @property
    def _batch_shapes(self) -> list[tuple[int, int]]:
        """The local ``(rows, L)`` shapes of training batches, one per used bucket."""
        plan = self._splits["train"].plan
        return [
            (plan.shapes.global_rows[bucket] // self._process_count, plan.shapes.lengths[bucket])
            for bucket in plan.used_buckets()
        ]

    def train_iterator(self, seed: int) -> grain.DatasetIterator:
        """Return an endless iterator over this process's training batches.

        Parameters
        ----------
        seed : int
            The same on every process: epoch ``e`` is shuffled with ``(seed, e)``.

        Returns
        -------
        grain.DatasetIterator
            ``inputs`` and ``targets`` ``int32 [rows, L]``; ``get_state``/``set_state`` resume exactly.
        """
        steps = _TrainBatchSequence(self._splits["train"], seed, self._process_index, self._process_count)
        read_options = grain.ReadOptions(num_threads=self._num_threads, prefetch_buffer_size=_PREFETCH_BATCHES)
        return iter(grain.MapDataset.source(steps).to_iter_dataset(read_options))

    def eval_batches(self, split: str, max_batches: int = 0) -> _EvalBatches:
        """Return the batches covering a split once, with the training shapes; pairs over ``max_len`` left out.

        Parameters
        ----------
        split : str
            A role or the TFDS split name the config gives one.
        max_batches : int
            Keep the first this many (a fixed, length-mixed subset); 0: all.

        Returns
        -------
        _EvalBatches
            Re-iterable local batches.
        """
        split_data = self._splits[self._split_role(split)]
        planned = split_data.plan.ordered_batches()
        if max_batches > 0:
            planned = planned[:max_batches]
        return _EvalBatches(split_data, planned, self._process_index, self._process_count)

    def text_pairs(self, split: str, max_pairs: int = 0) -> list[tuple[str, str]]:
        """Return a split's ``(source, target)`` text in dataset order, over-long pairs included (BLEU scores them).

        Parameters
        ----------
        split : str
            As for :meth:`eval_batches`.
        max_pairs : int
            The first this many; 0: all.

        Returns
        -------
        list[tuple[str, str]]
            The pairs.
        """
        tfds_split = self._splits[self._split_role(split)].tfds_split
        num_pairs = self.num_pairs(split)
        count = min(num_pairs, max_pairs) if max_pairs > 0 else num_pairs
        return list(self._source.text_pairs(tfds_split, range(count)))

    def num_pairs(self, split: str) -> int:
        """Return how many pairs a split holds, empty and over-long ones included.

        Parameters
        ----------
        split : str
            As for :meth:`eval_batches`.

        Returns
        -------
        int
            The count.
        """
        return self._source.num_examples(self._splits[self._split_role(split)].tfds_split)

    def split_fingerprints(self) -> dict[str, dict[str, Any]]:
        """Return the dev and test splits' fingerprints, which a run refuses to resume without.

        Returns
        -------
        dict[str, dict]
            ``validation`` and ``test`` -> :func:`data_sources._split_contents_fingerprint`.
        """
        if self._fingerprints is None:
            self._fingerprints = {role: data_sources._split_contents_fingerprint(self._source, split.tfds_split)
                                  for role, split in self._splits.items() if role != "train"}
        return self._fingerprints

    def _split_role(self, split: str) -> str:
        if split in self._splits:
            return split
        for role, split_data in self._splits.items():
            if split == split_data.tfds_split:
                return role
        raise ValueError(f"Unknown split {split!r}; use one of {list(SPLITS)}.")

    def _compute_stats(self) -> dict[str, Any]:
        train_plan = self._splits["train"].plan
        return {
            "dataset": self._source.description,
            "cache_dir": self._source.cache_dir,
            "tokenizer_vocab_size": self.tokenizer.vocab_size,
            "examples": {role: split.plan.num_pairs for role, split in self._splits.items()},
            "dropped_too_long": {role: split.plan.num_dropped - split.num_empty
                                 for role, split in self._splits.items()},
            "dropped_empty": {role: split.num_empty for role, split in self._splits.items()},
            "batches_per_epoch": {role: split.plan.num_batches for role, split in self._splits.items()},
            "bucket_lengths": list(train_plan.shapes.lengths),
            "global_rows": list(train_plan.shapes.global_rows),
            "local_batch_shapes": [list(shape) for shape in self._batch_shapes],
            "packing": isinstance(train_plan, packing._PackedPlan),
            "train_padding_fraction": train_plan.padding_fraction(),
            "eval_padding_fraction": self._splits["validation"].plan.padding_fraction(),
        }


def get_datasets(
    config: DataConfig, *, process_index: int = 0, process_count: int = 1, rows_multiple: int = 1
) -> TranslationData:
    """Open the corpus ``config.dataset`` names and prepare (or reuse) its vocabulary, token ids and batch plans.

    Parameters
    ----------
    config : DataConfig
        The experiment's data section.
    process_index, process_count : int
        This process and the processes in the run.
    rows_multiple : int
        Global rows of every batch are a multiple of this (data-parallel devices).

    Returns
    -------
    TranslationData
        Tokenizer, iterators and statistics.

    Raises
    ------
    UserInputError
        When no training pair fits ``max_len`` or the corpus is far too small for ``vocab_size``.
    """
    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index={process_index} must lie in [0, process_count={process_count}).")
    source = data_sources._open_translation_source(config)
    tokenizer = _load_or_train_tokenizer(source, config)
    row_multiple = int(np.lcm(rows_multiple, process_count))
    tfds_splits = {"train": config.train_split, "validation": config.eval_split, "test": config.test_split}
    splits = {}
    shapes = None  # Bucket shapes of every bucketed plan, sized on the training split (train comes first).
    for role, tfds_split in tfds_splits.items():
        tokenized = token_cache._load_or_tokenize_split(source, tfds_split, tokenizer)
        lengths = (tokenized.source.lengths_with_eos(), tokenized.target.lengths_with_eos())
        num_empty = 0
        if role == "train":
            lengths, num_empty = _leave_out_empty_pairs(*lengths)
        shapes = shapes or _bucket_shapes(config, lengths, row_multiple)
        plan: batching._BatchPlan | packing._PackedPlan
        if role == "train" and config.packing:
            plan = _packed_plan(config, lengths, row_multiple)
        else:
            plan = batching._BatchPlan(*lengths, shapes)
        if role == "train" and plan.num_kept == 0:
            raise UserInputError(
                f"All {plan.num_pairs} training pairs are longer than config.max_len={config.max_len} tokens "
                f"(EOS included); raise max_len."
            )
        if role == "train":
            _log_left_out(plan.num_pairs, num_empty, plan.num_dropped - num_empty, config.max_len)
        splits[role] = _SplitData(tfds_split, tokenized, plan, num_empty)
    _warn_of_overlap(splits)
    return TranslationData(
        source=source,
        tokenizer=tokenizer,
        splits=splits,
        process_index=process_index,
        process_count=process_count,
        num_threads=config.data_threads,
    )


def _warn_of_overlap(splits: dict[str, _SplitData]) -> None:
    """Warn in one line when dev or test pairs also occur in the training split (by 64-bit pair hashes)."""
    train = splits["train"]
    train_hashes = train.tokenized.pair_hashes()
    counts = {role: int(np.isin(splits[role].tokenized.pair_hashes(), train_hashes).sum())
              for role in ("validation", "test")}
    if not any(counts.values()):
        return
    logging.warning(
        "%d of %d dev pairs (split %r) and %d of %d test pairs (split %r) also occur in the training split %r: "
        "their perplexity and BLEU are not measured on held-out data. Remove them from the training data, or "
        "choose other splits (config.eval_split, config.test_split).", counts["validation"],
        len(splits["validation"].tokenized), splits["validation"].tfds_split, counts["test"],
        len(splits["test"].tokenized), splits["test"].tfds_split, train.tfds_split)


def _leave_out_empty_pairs(source_lengths: np.ndarray,
                           target_lengths: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """Return lengths in which pairs with an empty side exceed every bucket (never trained on), and their count."""
    empty = (source_lengths <= 1) | (target_lengths <= 1)
    if not empty.any():
        return (source_lengths, target_lengths), 0
    beyond_any_bucket = np.iinfo(np.int32).max
    return ((np.where(empty, beyond_any_bucket, source_lengths),
             np.where(empty, beyond_any_bucket, target_lengths)), int(empty.sum()))


def _log_left_out(num_pairs: int, num_empty: int, num_too_long: int, max_len: int) -> None:
    """Say how many training pairs are left out, and why."""
    if num_empty:
        logging.warning("%d of %d training pairs (%.2f%%) have an empty source or target: left out.",
                        num_empty, num_pairs, 100.0 * num_empty / num_pairs)
    if num_too_long:
        logging.warning("%d of %d training pairs (%.2f%%) are longer than config.max_len=%d tokens (EOS "
                        "included): left out. Raise max_len to keep them.", num_too_long, num_pairs,
                        100.0 * num_too_long / num_pairs, max_len)


def _bucket_shapes(config: DataConfig, lengths: tuple[np.ndarray, np.ndarray],
                   row_multiple: int) -> batching._BucketShapes:
    """Return bucket shapes under ``config.tokens_per_batch``, sized on training lengths (evaluation reuses them)."""
    shapes = batching.make_bucket_shapes(config.max_len, config.tokens_per_batch, row_multiple)
    if config.tokens_per_batch_unit == "slots":
        return shapes
    means = batching._mean_longer_side_per_bucket(*lengths, shapes.lengths)
    return batching._real_token_shapes(shapes, means, config.tokens_per_batch, row_multiple)


def _packed_plan(config: DataConfig, lengths: tuple[np.ndarray, np.ndarray], row_multiple: int) -> packing._PackedPlan:
    """Return the packed training plan, ``R`` per row length in the budget's unit."""
    shapes = packing._make_packed_shapes(config.max_len, config.tokens_per_batch, row_multiple,
                                        config.packing_row_lengths)
    plan = packing._PackedPlan(*lengths, shapes)
    if config.tokens_per_batch_unit == "slots":
        return plan
    return plan.with_shapes(batching._real_token_shapes(
        plan.shapes, plan.mean_tokens_per_row(), config.tokens_per_batch, row_multiple))


def _load_or_train_tokenizer(source: data_sources._TranslationSource,
                             config: DataConfig) -> tokenizer_lib.Tokenizer:
    if (fine_tuned := tokenizer_lib._tokenizer_for(config.fine_tune_from)) is not None:
        return fine_tuned  # The source run's vocabulary, whatever this corpus would train.
    max_sentences = config.tokenizer_max_sentences
    split_name = re.sub(r"[^A-Za-z0-9_.\-]+", "_", config.train_split)
    model_path = os.path.join(source.cache_dir, f"spm-bpe-{config.vocab_size}-{split_name}-{max_sentences}.model")
    tokenizer = tokenizer_lib.load_or_train_tokenizer(
        model_path, lambda: _tokenizer_training_sentences(source, config.train_split, max_sentences), config.vocab_size
    )
    if tokenizer.vocab_size < config.vocab_size:  # BPE ran out of merges: every word is a piece already.
        message = (
            f"the training split of {config.dataset} is too small for config.vocab_size={config.vocab_size}: "
            f"its BPE vocabulary stops at {tokenizer.vocab_size} pieces, so {config.vocab_size - tokenizer.vocab_size} "
            f"embedding rows would never be trained. Set --config.vocab_size={tokenizer.vocab_size} or less "
            "(subwords need a vocabulary well below the corpus's distinct words), or train on more data."
        )
        if tokenizer.vocab_size < config.vocab_size * MIN_VOCABULARY_FILL:
            raise UserInputError(message)
        logging.warning(message)
    return tokenizer


def _tokenizer_training_sentences(
    source: data_sources._TranslationSource, train_split: str, max_sentences: int
) -> Iterable[str]:
    """Return both sides of a fixed random sample of at most ``max_sentences // 2`` training pairs."""
    total_pairs = source.num_examples(train_split)
    num_pairs = min(total_pairs, max(1, max_sentences // 2))
    indices = np.sort(np.random.default_rng(0).choice(total_pairs, size=num_pairs, replace=False))
    return [sentence for pair in source.text_pairs(train_split, indices) for sentence in pair]
