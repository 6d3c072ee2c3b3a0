"""A corpus split by target length: train below a cap, score held-apart pairs in longer buckets (docs/positions.md).

Buckets ``within_cap``, ``up_to_1.5x``, ``up_to_2x``, ``beyond_2x``; written sorted, so reruns give the same bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from collections.abc import Sequence

from attention_jax.data import tsv_dataset
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError

Pair = tuple[str, str]
BUCKET_NAMES = ("within_cap", "up_to_1.5x", "up_to_2x", "beyond_2x")
BUCKETS_DIR = "buckets"
SPLIT_FILE = "length_buckets.json"
DEFAULT_MIN_PAIRS = 200
DEFAULT_MAX_PAIRS = 500
DEFAULT_SEED = 0
SPLITS = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class _LengthBucket:
    """One bucket of held-apart pairs: its target-word range (ends included), sizes and file's SHA-256."""

    name: str
    min_words: int
    max_words: int
    num_pairs: int
    num_available: int
    sha256: str

    @property
    def file_name(self) -> str:
        """The bucket's file in the split directory, ``buckets/<name>.tsv``."""
        return os.path.join(BUCKETS_DIR, f"{self.name}.tsv")


def _target_words(pair: Pair) -> int:
    """Return the whitespace-separated words of a pair's target, which buckets and cap count."""
    return len(pair[1].split())


def _word_ranges(cap: int, longest: int) -> dict[str, tuple[int, int]]:
    """Return each bucket's ``(min_words, max_words)`` for a cap; a range may be empty."""
    one_and_a_half = (3 * cap) // 2
    return {"within_cap": (1, cap), "up_to_1.5x": (cap + 1, one_and_a_half),
            "up_to_2x": (one_and_a_half + 1, 2 * cap), "beyond_2x": (2 * cap + 1, max(longest, 2 * cap))}


def _read_corpus(corpus_dir: str) -> dict[str, list[Pair]]:
    """Return the ``train``, ``dev`` and ``test`` pairs of a TSV corpus directory, in file order."""
    tsv_dataset._require_tsv_files(corpus_dir)
    return {split: [(source, target) for _, source, target, _ in
                    tsv_dataset._read_tsv_pairs(os.path.join(corpus_dir, f"{split}.tsv"))] for split in SPLITS}


def _usable(pair: Pair) -> bool:
    return bool(pair[0].strip()) and bool(pair[1].strip())


def _sorted_unique(pairs: Sequence[Pair]) -> list[Pair]:
    return sorted(set(pairs), key=lambda pair: (_target_words(pair), pair[0], pair[1]))


def _bucket_pairs(corpus: dict[str, list[Pair]], cap: int) -> dict[str, list[Pair]]:
    """Return each bucket's held-apart pairs before sampling, sorted, without repeats or empty sides."""
    usable = {split: [pair for pair in pairs if _usable(pair)] for split, pairs in corpus.items()}
    pool = [pair for pairs in usable.values() for pair in pairs if _target_words(pair) > cap]
    longest = max((_target_words(pair) for pairs in usable.values() for pair in pairs), default=cap)
    ranges = _word_ranges(cap, longest)
    buckets = {"within_cap": _sorted_unique([pair for pair in usable["test"] if _target_words(pair) <= cap])}
    for name in BUCKET_NAMES[1:]:
        low, high = ranges[name]
        buckets[name] = _sorted_unique([pair for pair in pool if low <= _target_words(pair) <= high])
    return buckets


def _sample_sorted(pairs: Sequence[Pair], max_pairs: int, seed: int) -> list[Pair]:
    """Return at most ``max_pairs`` (0: all) of sorted ``pairs``, drawn with ``seed``, in order."""
    if max_pairs <= 0 or len(pairs) <= max_pairs:
        return list(pairs)
    kept = sorted(random.Random(seed).sample(range(len(pairs)), max_pairs))
    return [pairs[index] for index in kept]


def _tsv_text(pairs: Sequence[Pair]) -> str:
    return "".join(f"{source}\t{target}\n" for source, target in pairs)


def _quantiles(lengths: Sequence[int]) -> dict[str, int]:
    ordered = sorted(lengths)
    return {f"p{round(q * 100)}": ordered[min(int(q * len(ordered)), len(ordered) - 1)]
            for q in (0.5, 0.75, 0.9, 0.95, 0.99)} | {"max": ordered[-1]}


def _bucket_sizes_by_cap(corpus: dict[str, list[Pair]], caps: Sequence[int]) -> dict[str, dict[str, int]]:
    """Return per cap the training pairs kept and each bucket's size, to choose a cap from."""
    table = {}
    for cap in caps:
        sizes = {name: len(pairs) for name, pairs in _bucket_pairs(corpus, cap).items()}
        table[str(cap)] = {"train": sum(_target_words(pair) <= cap for pair in corpus["train"] if _usable(pair)),
                           **sizes}
    return table


def _check_cap(cap: int, available: dict[str, int], min_pairs: int) -> None:
    """Refuse, in one line, a cap that leaves a bucket with fewer than ``min_pairs`` pairs."""
    if cap < 2:
        raise UserInputError(f"--cap={cap} leaves the up_to_1.5x bucket empty (cap + 1 > floor(1.5 cap)); "
                             "choose a cap of at least 2 words.")
    small = {name: count for name, count in available.items() if count < min_pairs}
    if small:
        listed = ", ".join(f"{name} {count}" for name, count in small.items())
        direction = "a larger" if "within_cap" in small else "a smaller"
        raise UserInputError(f"--cap={cap} leaves fewer than {min_pairs} pairs in {listed}; choose {direction} "
                             f"cap (or lower --min_pairs).")


def write_length_split(corpus_dir: str, cap: int, out_dir: str, *, min_pairs: int = DEFAULT_MIN_PAIRS,
                       max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = DEFAULT_SEED) -> dict:
    """Write the capped training corpus and the four length buckets of ``corpus_dir``, all checked first.

    Parameters
    ----------
    corpus_dir : str
        A TSV corpus directory.
    cap : int
        The longest training target, in words.
    out_dir : str
        Not ``corpus_dir``.
    min_pairs, max_pairs : int
        Pairs every bucket must have available; a bucket is sampled down to ``max_pairs`` (0: all).
    seed : int
        Seed of the sampling.

    Returns
    -------
    dict
        ``length_buckets.json``'s record.

    Raises
    ------
    UserInputError
        For a bad corpus, output directory or cap.
    """
    if os.path.abspath(out_dir) == os.path.abspath(corpus_dir):
        raise UserInputError(f"--out={out_dir!r} is the corpus itself; write the split to another directory.")
    corpus = _read_corpus(corpus_dir)
    available = _bucket_pairs(corpus, cap)
    _check_cap(cap, {name: len(pairs) for name, pairs in available.items()}, min_pairs)
    capped = {split: [pair for pair in pairs if _usable(pair) and _target_words(pair) <= cap]
              for split, pairs in corpus.items()}
    longest = max(_target_words(pair) for pairs in available.values() for pair in pairs)
    ranges = _word_ranges(cap, longest)
    buckets = {}
    for name in BUCKET_NAMES:
        text = _tsv_text(_sample_sorted(available[name], max_pairs, seed))
        bucket = _LengthBucket(name, *ranges[name], num_pairs=text.count("\n"), num_available=len(available[name]),
                              sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
        run_files.write_atomically(os.path.join(out_dir, bucket.file_name), text)
        buckets[name] = dataclasses.asdict(bucket) | {"file": bucket.file_name}
    for split, pairs in capped.items():
        run_files.write_atomically(os.path.join(out_dir, f"{split}.tsv"), _tsv_text(pairs))
    lengths = [_target_words(pair) for pairs in corpus.values() for pair in pairs if _usable(pair)]
    record = {"cap": cap, "corpus": corpus_dir, "seed": seed, "max_pairs": max_pairs, "min_pairs": min_pairs,
              "corpus_pairs": {split: len(pairs) for split, pairs in capped.items()},
              "train_sources_over_cap": sum(len(source.split()) > cap for source, _ in capped["train"]),
              "buckets": buckets, "target_words_quantiles": _quantiles(lengths),
              "sizes_by_cap": _bucket_sizes_by_cap(corpus, range(max(2, cap - 4), cap + 9))}
    run_files.write_json_atomically(os.path.join(out_dir, SPLIT_FILE), record)
    return record


def read_split(split_dir: str) -> dict:
    """Return a split directory's ``length_buckets.json``, each bucket's file checked against its SHA-256.

    Parameters
    ----------
    split_dir : str
        Written by :func:`write_length_split`.

    Returns
    -------
    dict
        The record.

    Raises
    ------
    UserInputError
        For a missing record or file, or a file whose contents changed.
    """
    path = os.path.join(split_dir, SPLIT_FILE)
    if not os.path.isfile(path):
        raise UserInputError(f"{split_dir!r} holds no {SPLIT_FILE}; write it with python -m "
                             "attention_jax.data.length_buckets --corpus=DIR --cap=N --out=DIR.")
    with open(path, encoding="utf-8") as record_file:
        record = json.load(record_file)
    for bucket in record["buckets"].values():
        if _fingerprint(os.path.join(split_dir, bucket["file"])) != bucket["sha256"]:
            raise UserInputError(f"{os.path.join(split_dir, bucket['file'])} is missing or changed since "
                                 f"{SPLIT_FILE} was written; write the split again.")
    return record


def _fingerprint(path: str) -> str | None:
    """Return the SHA-256 of a file's bytes, or None when there is no file."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as bucket_file:
        return hashlib.sha256(bucket_file.read()).hexdigest()


def read_bucket(split_dir: str, bucket: dict) -> list[Pair]:
    """Return one bucket's ``(source, target)`` pairs, in file order.

    Parameters
    ----------
    split_dir : str
        The split directory.
    bucket : dict
        One entry of ``read_split(split_dir)["buckets"]``.

    Returns
    -------
    list[tuple[str, str]]
        The pairs.
    """
    path = os.path.join(split_dir, bucket["file"])
    return [(source, target) for _, source, target, _ in tsv_dataset._read_tsv_pairs(path)]


if __name__ == "__main__":  # The command (its flags) is in attention_jax/commands/.
    from attention_jax.commands import length_buckets as command

    command.run()
