"""A corpus split by target length: train below a cap, score held-apart pairs in longer buckets.

The extrapolation experiment (``configs/sweeps/positions.py``, ``docs/positions.md``) trains every row
on the pairs whose target has at most ``cap`` words and then scores pairs it never saw, in four buckets
of target length in words (whitespace-separated):

==============  =====================================  =======================================
bucket          target words                           drawn from
==============  =====================================  =======================================
``within_cap``  1 .. cap                               ``test.tsv`` pairs within the cap
``up_to_1.5x``  cap + 1 .. floor(1.5 cap)              the held-apart pool
``up_to_2x``    floor(1.5 cap) + 1 .. 2 cap            the held-apart pool
``beyond_2x``   2 cap + 1 .. the longest               the held-apart pool
==============  =====================================  =======================================

The held-apart pool is every pair over the cap: the training pairs the capped corpus leaves out, and
the dev and test pairs over the cap. Pairs with an empty side are left out (the training pipeline
drops them too) and repeated pairs count once. A bucket larger than ``max_pairs`` is sampled down with
a fixed seed. Everything is written sorted by (target words, source, target), so the same corpus and
arguments always give the same files.

Run (from the repository root)::

    python -m attention_jax.data.length_buckets --corpus=../shared/data/messages_en_de --cap=12 \\
        --out=runs/positions_corpus

It writes, in ``--out``::

    train.tsv, dev.tsv, test.tsv   the capped corpus (targets of at most cap words; file order kept),
                                   for ``--config.dataset=tsv:OUT``
    buckets/<bucket>.tsv           the four buckets above
    length_buckets.json            the cap, each bucket's size, word range and file fingerprint, the
                                   corpus's target-length quantiles, and the bucket sizes at other caps
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
class LengthBucket:
    """One bucket of held-apart pairs.

    Attributes
    ----------
    name : str
        One of :data:`BUCKET_NAMES`.
    min_words, max_words : int
        The range of target words, both ends included (``max_words`` of ``beyond_2x`` is the longest
        target in the pool).
    num_pairs : int
        Pairs written (after sampling).
    num_available : int
        Pairs of this range before sampling.
    sha256 : str
        Fingerprint of the bucket's file.
    """

    name: str
    min_words: int
    max_words: int
    num_pairs: int
    num_available: int
    sha256: str

    @property
    def file_name(self) -> str:
        """The bucket's file inside the split directory: ``buckets/<name>.tsv``."""
        return os.path.join(BUCKETS_DIR, f"{self.name}.tsv")


def target_words(pair: Pair) -> int:
    """Words (whitespace-separated) of a pair's target: the length the buckets and the cap count.

    Parameters
    ----------
    pair : tuple[str, str]
        ``(source, target)``.

    Returns
    -------
    int
        ``len(target.split())``.
    """
    return len(pair[1].split())


def word_ranges(cap: int, longest: int) -> dict[str, tuple[int, int]]:
    """Each bucket's range of target words (both ends included) for a cap.

    Parameters
    ----------
    cap : int
        The longest target (words) of the training corpus.
    longest : int
        The longest target (words) anywhere, the upper end of ``beyond_2x``.

    Returns
    -------
    dict[str, tuple[int, int]]
        Bucket name -> ``(min_words, max_words)``; a range may be empty (``min > max``).
    """
    one_and_a_half = (3 * cap) // 2
    return {"within_cap": (1, cap), "up_to_1.5x": (cap + 1, one_and_a_half),
            "up_to_2x": (one_and_a_half + 1, 2 * cap), "beyond_2x": (2 * cap + 1, max(longest, 2 * cap))}


def read_corpus(corpus_dir: str) -> dict[str, list[Pair]]:
    """The ``train``, ``dev`` and ``test`` pairs of a TSV corpus directory, in file order.

    Parameters
    ----------
    corpus_dir : str
        Holds ``train.tsv``, ``dev.tsv`` and ``test.tsv`` (``source<TAB>target`` lines).

    Returns
    -------
    dict[str, list[tuple[str, str]]]
        Split name -> its pairs.

    Notes
    -----
    Raises :class:`attention_jax.foundation.user_errors.MissingInputError` for a missing directory or file and
    :class:`UserInputError` for a malformed line (:func:`tsv_dataset.read_tsv_pairs`).
    """
    tsv_dataset.require_tsv_files(corpus_dir)
    return {split: [(source, target) for _, source, target, _ in
                    tsv_dataset.read_tsv_pairs(os.path.join(corpus_dir, f"{split}.tsv"))] for split in SPLITS}


def _usable(pair: Pair) -> bool:
    return bool(pair[0].strip()) and bool(pair[1].strip())


def _sorted_unique(pairs: Sequence[Pair]) -> list[Pair]:
    return sorted(set(pairs), key=lambda pair: (target_words(pair), pair[0], pair[1]))


def bucket_pairs(corpus: dict[str, list[Pair]], cap: int) -> dict[str, list[Pair]]:
    """All held-apart pairs of each bucket (before sampling), sorted.

    Parameters
    ----------
    corpus : dict[str, list[tuple[str, str]]]
        From :func:`read_corpus`.
    cap : int
        The longest target (words) kept for training.

    Returns
    -------
    dict[str, list[tuple[str, str]]]
        Bucket name -> its pairs, sorted by (target words, source, target), without repeats.
    """
    usable = {split: [pair for pair in pairs if _usable(pair)] for split, pairs in corpus.items()}
    pool = [pair for pairs in usable.values() for pair in pairs if target_words(pair) > cap]
    longest = max((target_words(pair) for pairs in usable.values() for pair in pairs), default=cap)
    ranges = word_ranges(cap, longest)
    buckets = {"within_cap": _sorted_unique([pair for pair in usable["test"] if target_words(pair) <= cap])}
    for name in BUCKET_NAMES[1:]:
        low, high = ranges[name]
        buckets[name] = _sorted_unique([pair for pair in pool if low <= target_words(pair) <= high])
    return buckets


def sample_sorted(pairs: Sequence[Pair], max_pairs: int, seed: int) -> list[Pair]:
    """At most ``max_pairs`` of sorted ``pairs``, drawn with ``seed``, in their sorted order.

    Parameters
    ----------
    pairs : Sequence[tuple[str, str]]
        Sorted pairs.
    max_pairs : int
        The most to keep (0: all).
    seed : int
        Seed of the draw.

    Returns
    -------
    list[tuple[str, str]]
        All of ``pairs`` when there are at most ``max_pairs``, else a sample in the original order.
    """
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


def bucket_sizes_by_cap(corpus: dict[str, list[Pair]], caps: Sequence[int]) -> dict[str, dict[str, int]]:
    """For each cap, the training pairs it keeps and each bucket's size before sampling.

    Parameters
    ----------
    corpus : dict[str, list[tuple[str, str]]]
        From :func:`read_corpus`.
    caps : Sequence[int]
        The caps to tabulate.

    Returns
    -------
    dict[str, dict[str, int]]
        ``str(cap)`` -> ``{"train": ..., "within_cap": ..., "up_to_1.5x": ..., ...}``: what to choose a cap from.
    """
    table = {}
    for cap in caps:
        sizes = {name: len(pairs) for name, pairs in bucket_pairs(corpus, cap).items()}
        table[str(cap)] = {"train": sum(target_words(pair) <= cap for pair in corpus["train"] if _usable(pair)),
                           **sizes}
    return table


def check_cap(cap: int, available: dict[str, int], min_pairs: int) -> None:
    """Refuse a cap that leaves a bucket with fewer than ``min_pairs`` pairs, in one line.

    Parameters
    ----------
    cap : int
        The cap.
    available : dict[str, int]
        Bucket name -> pairs available at that cap.
    min_pairs : int
        The fewest pairs a bucket may hold.

    Notes
    -----
    Raises :class:`UserInputError` naming the small buckets and what to change.
    """
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
    """Write the capped training corpus and the four length buckets of ``corpus_dir`` into ``out_dir``.

    Parameters
    ----------
    corpus_dir : str
        A TSV corpus directory (``train.tsv``, ``dev.tsv``, ``test.tsv``).
    cap : int
        The longest target (words) of the training corpus.
    out_dir : str
        Where to write (created); must not be ``corpus_dir``.
    min_pairs : int
        Every bucket must have at least this many pairs available (:func:`check_cap`).
    max_pairs : int
        A bucket with more is sampled down to this many (0: keep all).
    seed : int
        Seed of the sampling.

    Returns
    -------
    dict
        What ``length_buckets.json`` holds: ``cap``, ``corpus``, ``seed``, ``max_pairs``, the capped
        corpus's sizes (``corpus_pairs``), ``buckets`` (name -> :class:`LengthBucket` fields), the
        corpus's target-length quantiles and ``sizes_by_cap``.

    Notes
    -----
    Everything is checked before anything is written; a bad corpus or cap raises
    :class:`UserInputError` (one line).
    """
    if os.path.abspath(out_dir) == os.path.abspath(corpus_dir):
        raise UserInputError(f"--out={out_dir!r} is the corpus itself; write the split to another directory.")
    corpus = read_corpus(corpus_dir)
    available = bucket_pairs(corpus, cap)
    check_cap(cap, {name: len(pairs) for name, pairs in available.items()}, min_pairs)
    capped = {split: [pair for pair in pairs if _usable(pair) and target_words(pair) <= cap]
              for split, pairs in corpus.items()}
    longest = max(target_words(pair) for pairs in available.values() for pair in pairs)
    ranges = word_ranges(cap, longest)
    buckets = {}
    for name in BUCKET_NAMES:
        text = _tsv_text(sample_sorted(available[name], max_pairs, seed))
        bucket = LengthBucket(name, *ranges[name], num_pairs=text.count("\n"), num_available=len(available[name]),
                              sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
        run_files.write_atomically(os.path.join(out_dir, bucket.file_name), text)
        buckets[name] = dataclasses.asdict(bucket) | {"file": bucket.file_name}
    for split, pairs in capped.items():
        run_files.write_atomically(os.path.join(out_dir, f"{split}.tsv"), _tsv_text(pairs))
    lengths = [target_words(pair) for pairs in corpus.values() for pair in pairs if _usable(pair)]
    record = {"cap": cap, "corpus": corpus_dir, "seed": seed, "max_pairs": max_pairs, "min_pairs": min_pairs,
              "corpus_pairs": {split: len(pairs) for split, pairs in capped.items()},
              "train_sources_over_cap": sum(len(source.split()) > cap for source, _ in capped["train"]),
              "buckets": buckets, "target_words_quantiles": _quantiles(lengths),
              "sizes_by_cap": bucket_sizes_by_cap(corpus, range(max(2, cap - 4), cap + 9))}
    run_files.write_json_atomically(os.path.join(out_dir, SPLIT_FILE), record)
    return record


def read_split(split_dir: str) -> dict:
    """The ``length_buckets.json`` of a split directory, each bucket's file checked against its fingerprint.

    Parameters
    ----------
    split_dir : str
        A directory :func:`write_length_split` wrote.

    Returns
    -------
    dict
        The record (see :func:`write_length_split`).

    Notes
    -----
    Raises :class:`UserInputError` for a missing record or file, or a file whose contents changed.
    """
    path = os.path.join(split_dir, SPLIT_FILE)
    if not os.path.isfile(path):
        raise UserInputError(f"{split_dir!r} holds no {SPLIT_FILE}; write it with python -m "
                             "attention_jax.data.length_buckets --corpus=DIR --cap=N --out=DIR.")
    with open(path, encoding="utf-8") as record_file:
        record = json.load(record_file)
    for bucket in record["buckets"].values():
        if fingerprint(os.path.join(split_dir, bucket["file"])) != bucket["sha256"]:
            raise UserInputError(f"{os.path.join(split_dir, bucket['file'])} is missing or changed since "
                                 f"{SPLIT_FILE} was written; write the split again.")
    return record


def fingerprint(path: str) -> str | None:
    """SHA-256 of a file's bytes, or None when it does not exist.

    Parameters
    ----------
    path : str
        The file.

    Returns
    -------
    str or None
        Hex digest.
    """
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as bucket_file:
        return hashlib.sha256(bucket_file.read()).hexdigest()


def read_bucket(split_dir: str, bucket: dict) -> list[Pair]:
    """The pairs of one bucket of a split directory, in file order.

    Parameters
    ----------
    split_dir : str
        The split directory.
    bucket : dict
        One entry of ``read_split(split_dir)["buckets"]``.

    Returns
    -------
    list[tuple[str, str]]
        ``(source, target)`` pairs.
    """
    path = os.path.join(split_dir, bucket["file"])
    return [(source, target) for _, source, target, _ in tsv_dataset.read_tsv_pairs(path)]


if __name__ == "__main__":  # The command (its flags) is in attention_jax/commands/.
    from attention_jax.commands import length_buckets as command

    command.run()
