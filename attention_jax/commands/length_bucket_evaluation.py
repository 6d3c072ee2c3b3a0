"""``python -m attention_jax.evaluation.length_bucket_evaluation``: runs scored on length buckets (flags, ``main``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from absl import flags

from attention_jax.commands import entry_points
from attention_jax.evaluation.length_bucket_evaluation import evaluate_root, evaluate_run
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError, exit_with_error

_WORKDIR: Any = None  # Set by _define_flags.
_ROOT: Any = None  # Set by _define_flags.
_BUCKETS: Any = None  # Set by _define_flags.
_CHECKPOINT: Any = None  # Set by _define_flags.
_WAIT: Any = None  # Set by _define_flags.
_POLL_S: Any = None  # Set by _define_flags.
_BATCH_SIZE: Any = None  # Set by _define_flags.

_PROGRAM = "attention_jax.evaluation.length_bucket_evaluation"  # Its error lines' prefix in-process.


def main(argv: Sequence[str]) -> None:
    """Score ``--workdir`` (or every finished run under ``--root``) on the buckets of ``--buckets``.

    Parameters
    ----------
    argv : Sequence[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1 or not _BUCKETS.value or bool(_WORKDIR.value) == bool(_ROOT.value):
        exit_with_error(_PROGRAM,
                        "usage: python -m attention_jax.evaluation.length_bucket_evaluation "
                        "(--workdir=RUN | --root=SWEEP_ROOT [--wait]) --buckets=SPLIT_DIR")
    try:
        if _ROOT.value:
            scored = evaluate_root(_ROOT.value, _BUCKETS.value, wait=_WAIT.value, poll_s=_POLL_S.value,
                                   batch_size=_BATCH_SIZE.value)
            print(f"scored {len(scored)} runs under {_ROOT.value}")
        else:
            assert _WORKDIR.value is not None  # The usage check: exactly one of --workdir and --root.
            evaluate_run(_WORKDIR.value, _BUCKETS.value, checkpoint=_CHECKPOINT.value, batch_size=_BATCH_SIZE.value)
            print(f"wrote {os.path.join(_WORKDIR.value, run_files.LENGTH_BUCKETS_FILE)}")
    except (UserInputError, FileNotFoundError, ValueError) as error:
        exit_with_error(_PROGRAM, str(error))


def _define_flags() -> None:
    """Define the command's flags: only when run as a command, so importing the module defines none."""
    global _WORKDIR, _ROOT, _BUCKETS, _CHECKPOINT, _WAIT, _POLL_S, _BATCH_SIZE
    _WORKDIR = flags.DEFINE_string("workdir", None, "A finished training run.")
    _ROOT = flags.DEFINE_string("root", None, "A sweep root: score each finished run (instead of --workdir).")
    _BUCKETS = flags.DEFINE_string("buckets", None, "The split directory (attention_jax.data.length_buckets).")
    _CHECKPOINT = flags.DEFINE_string("checkpoint", "latest", "With --workdir: 'latest', 'averaged', 'best' or a step.")
    _WAIT = flags.DEFINE_bool("wait", False, "With --root: keep polling until every run of the sweep is scored.")
    _POLL_S = flags.DEFINE_float("poll_s", 300.0, "With --wait: seconds between looks at the sweep root.")
    _BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences per decoding batch.")


def run() -> None:
    """Define the flags, then run :func:`main`, a mistake in one line."""
    _define_flags()
    entry_points.run_in_one_line(_PROGRAM, main)
