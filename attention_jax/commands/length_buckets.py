"""``python -m attention_jax.data.length_buckets``: the length split of a TSV corpus; flags and ``main`` here."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from absl import flags

from attention_jax.commands import entry_points
from attention_jax.data.length_buckets import (
    DEFAULT_MAX_PAIRS,
    DEFAULT_MIN_PAIRS,
    DEFAULT_SEED,
    SPLIT_FILE,
    write_length_split,
)
from attention_jax.foundation.user_errors import UserInputError, exit_with_error

_CORPUS: Any = None  # Set by _define_flags.
_CAP: Any = None  # Set by _define_flags.
_OUT: Any = None  # Set by _define_flags.
_MIN_PAIRS: Any = None  # Set by _define_flags.
_MAX_PAIRS: Any = None  # Set by _define_flags.
_SEED: Any = None  # Set by _define_flags.

_PROGRAM = "attention_jax.data.length_buckets"  # Its error lines' prefix in-process.


def main(argv: Sequence[str]) -> None:
    """Write the split; print each bucket's size and word range.

    Parameters
    ----------
    argv : Sequence[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1 or not _CORPUS.value or _CAP.value is None or not _OUT.value:
        exit_with_error(_PROGRAM, "usage: python -m attention_jax.data.length_buckets --corpus=DIR "
                        "--cap=N --out=DIR")
    try:
        record = write_length_split(_CORPUS.value, _CAP.value, _OUT.value, min_pairs=_MIN_PAIRS.value,
                                    max_pairs=_MAX_PAIRS.value, seed=_SEED.value)
    except UserInputError as error:
        exit_with_error(_PROGRAM, str(error))
    print(f"cap {record['cap']} words: {record['corpus_pairs']}", file=sys.stdout)
    for name, bucket in record["buckets"].items():
        print(f"{name}: {bucket['num_pairs']} pairs ({bucket['num_available']} available), target words "
              f"{bucket['min_words']}-{bucket['max_words']}")
    print(f"wrote {os.path.join(_OUT.value, SPLIT_FILE)}")


def _define_flags() -> None:
    """Define the command's flags: only when run as a command, so importing the module defines none."""
    global _CORPUS, _CAP, _OUT, _MIN_PAIRS, _MAX_PAIRS, _SEED
    _CORPUS = flags.DEFINE_string("corpus", None, "TSV corpus directory (train.tsv, dev.tsv, test.tsv).")
    _CAP = flags.DEFINE_integer("cap", None, "Longest target (words) kept for training.")
    _OUT = flags.DEFINE_string("out", None, "Directory for the capped corpus, buckets/ and length_buckets.json.")
    _MIN_PAIRS = flags.DEFINE_integer("min_pairs", DEFAULT_MIN_PAIRS, "Refuse a cap leaving a bucket fewer pairs.")
    _MAX_PAIRS = flags.DEFINE_integer("max_pairs", DEFAULT_MAX_PAIRS, "Sample larger buckets down to this (0: all).")
    _SEED = flags.DEFINE_integer("seed", DEFAULT_SEED, "Seed of the sampling.")


def run() -> None:
    """Define the flags, then run :func:`main`, a mistake in one line."""
    _define_flags()
    entry_points.run_in_one_line(_PROGRAM, main)
