"""Deterministic, disjoint train/validation/test splits of the synthetic EN->DE stream (by English hash)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from attention_jax.data.synthetic_en_de.sampling import SEED, iter_pairs

TRAIN_SIZE = 200_000
VALIDATION_SIZE = 2_000
TEST_SIZE = 2_000
SPLITS = ("train", "validation", "test")
_HASH_BUCKETS = 100  # Bucket 0 -> test, 1 -> validation, the other 98 -> train.


def split_of(english: str) -> str:
    """Return the split of an English sentence from a hash of its text: "test", "validation" (1 in 100 each) or "train".

    Parameters
    ----------
    english : str
        An English sentence.

    Returns
    -------
    str
        The split.
    """
    digest = hashlib.blake2b(english.encode("utf-8"), digest_size=8).digest()
    bucket = int.from_bytes(digest, "big") % _HASH_BUCKETS
    return {0: "test", 1: "validation"}.get(bucket, "train")


def default_split_sizes() -> dict[str, int]:
    """Return the module's split sizes, read at call time.

    Returns
    -------
    dict[str, int]
        ``{"train": TRAIN_SIZE, "validation": VALIDATION_SIZE, "test": TEST_SIZE}``.
    """
    return {"train": TRAIN_SIZE, "validation": VALIDATION_SIZE, "test": TEST_SIZE}


def generate_splits(sizes: Mapping[str, int], seed: int = SEED) -> dict[str, list[tuple[str, str]]]:
    """Return the first `sizes[split]` pairs of each split, in one pass over the English-deduplicated stream.

    Each sentence goes to the split `split_of` names, so a split's first N pairs do not depend on the other sizes.

    Parameters
    ----------
    sizes : Mapping[str, int]
        Pairs per split name; missing splits get none.
    seed : int
        Seed of the stream.

    Returns
    -------
    dict[str, list[tuple[str, str]]]
        (English, German) pairs per split, in stream order.
    """
    unknown = set(sizes) - set(SPLITS)
    if unknown:
        raise ValueError(f"Unknown split(s) {sorted(unknown)}; choose from {SPLITS}.")
    if any(size < 0 for size in sizes.values()):
        raise ValueError(f"Split sizes must be >= 0, got {dict(sizes)}.")
    splits: dict[str, list[tuple[str, str]]] = {split: [] for split in sizes}
    missing = sum(sizes.values())
    seen: set[str] = set()
    pairs = iter_pairs(seed)
    while missing:
        english, german = next(pairs)
        if english in seen:
            continue
        seen.add(english)
        split = split_of(english)
        if split in splits and len(splits[split]) < sizes[split]:
            splits[split].append((english, german))
            missing -= 1
    return splits


def generate_split(split: str, num_examples: int | None = None) -> list[tuple[str, str]]:
    """Return the (English, German) pairs of one split as the TFDS builder stores them, without TFDS.

    Parameters
    ----------
    split : str
        "train", "validation" or "test".
    num_examples : int | None
        A prefix of the split; None: the module's size for it.

    Returns
    -------
    list[tuple[str, str]]
        The pairs.
    """
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; choose from {SPLITS}.")
    size = default_split_sizes()[split] if num_examples is None else num_examples
    return generate_splits({split: size})[split]


