"""``python -m attention_jax.evaluation.position_losses``: runs' losses by target position (flags, ``main``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from absl import flags, logging

from attention_jax.commands import entry_points
from attention_jax.data import length_buckets
from attention_jax.evaluation.position_losses import plot_runs, score_run
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError, exit_with_error

_WORKDIRS: Any = None  # Set by _define_flags.
_BUCKETS: Any = None
_OUT: Any = None
_BIN: Any = None
_BATCH_SIZE: Any = None


_PROGRAM = "attention_jax.evaluation.position_losses"  # Its error lines' prefix in-process.


def main(argv: Sequence[str]) -> None:
    """Score every ``--workdir`` and draw them in ``--out``.

    Parameters
    ----------
    argv : Sequence[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1 or not _WORKDIRS.value or not _BUCKETS.value or not _OUT.value:
        exit_with_error(_PROGRAM, "usage: python -m attention_jax.evaluation.position_losses "
                        "--buckets=SPLIT_DIR --workdir=RUN [--workdir=RUN ...] --out=PLOT.png")
    if _BIN.value < 1:
        exit_with_error(_PROGRAM, f"--bin must be a positive number of positions; got {_BIN.value}.")
    try:
        length_buckets.read_split(_BUCKETS.value)
        for workdir in _WORKDIRS.value:
            if not os.path.isfile(os.path.join(workdir, run_files.RESULTS_FILE)):
                raise UserInputError(f"--workdir={workdir} holds no finished run ({run_files.RESULTS_FILE}).")
        run_files.check_directory(os.path.dirname(os.path.abspath(_OUT.value)), "--out", writable=True)
        records = []
        for workdir in _WORKDIRS.value:
            records.append(score_run(workdir, _BUCKETS.value, batch_size=_BATCH_SIZE.value))
            logging.info("%s: %d target tokens scored by position.", workdir, sum(records[-1]["counts"]))
    except (UserInputError, FileNotFoundError) as error:
        exit_with_error(_PROGRAM, str(error))
    plot_runs(records, _OUT.value, bin_size=_BIN.value)
    print(f"wrote {_OUT.value}")


def _define_flags() -> None:
    global _WORKDIRS, _BUCKETS, _OUT, _BIN, _BATCH_SIZE
    _WORKDIRS = flags.DEFINE_multi_string("workdir", [], "A finished run to score (repeat for several).")
    _BUCKETS = flags.DEFINE_string("buckets", None, "The length split (python -m attention_jax.data.length_buckets).")
    _OUT = flags.DEFINE_string("out", None, "The plot to write (PNG).")
    _BIN = flags.DEFINE_integer("bin", 8, "Target positions per point of the plot.")
    _BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Pairs per forward pass.")


def run() -> None:
    """Define the flags, then run :func:`main`, a mistake in one line."""
    _define_flags()
    entry_points.run_in_one_line(_PROGRAM, main)
