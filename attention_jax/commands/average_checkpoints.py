"""Average the parameters of a run's last checkpoints (Section 6.1).

"For the base models, we used a single model obtained by averaging the last 5 checkpoints, which were
written at 10-minute intervals. For the big models, we averaged the last 20 checkpoints."

Usage::

    python -m attention_jax.average_checkpoints --workdir=runs/base [--last=5]
    python -m attention_jax.average_checkpoints --workdir=runs/small --best --last=3  # early stopping

writes ``WORKDIR/averaged/<last step>/`` (parameters and the list of averaged steps), which
``params_checkpoints.load_for_inference(workdir, "averaged")`` loads; once newer checkpoints exist,
loading it is an error naming the averaged steps (rerun this command, or pass ``--reaverage`` to
``evaluate``/``translate``). ``--last`` defaults to the run's
``config.average_last_checkpoints``; the run must have kept that many (``config.keep_checkpoints``).
With ``--best``, the average is of the run's best dev evaluations instead (``WORKDIR/best/``, kept by
runs with ``config.early_stopping_patience > 0``). A run directory that cannot be written (read-only) is
refused in one line (exit 2) before any checkpoint is read.
"""

from __future__ import annotations

import json
import os

from absl import app, flags

from attention_jax import run_files
from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.user_errors import UserInputError, exit_with_error

_WORKDIR = flags.DEFINE_string("workdir", None, "Training workdir whose checkpoints are averaged.")
_LAST = flags.DEFINE_integer("last", 0, "How many of the newest checkpoints to average "
                             "(0: config.average_last_checkpoints of the run).")
_BEST = flags.DEFINE_bool("best", False, "Average the best dev evaluations (WORKDIR/best/, kept with "
                          "early stopping) instead of the newest training checkpoints.")


def write_averaged(workdir: str, last: int, *, best: bool = False) -> tuple[str, list[int]]:
    """Average the newest ``last`` checkpoints (or the ``last`` best ones) into ``WORKDIR/averaged``.

    Parameters
    ----------
    workdir : str
        A training workdir.
    last : int
        Number of checkpoints to average.
    best : bool
        Average the run's best dev evaluations (``WORKDIR/best/``) instead of its newest checkpoints.

    Returns
    -------
    (str, list[int])
        The directory written (``WORKDIR/averaged``) and the averaged steps; the checkpoint is filed
        under the newest averaged step and replaces an earlier average.
    """
    source = run_files.BEST_DIR if best else run_files.CHECKPOINT_DIR
    steps = params_checkpoints.write_average(workdir, last, source=source)
    return os.path.join(workdir, run_files.AVERAGED_DIR), steps


def main(argv: list[str]) -> None:
    """Entry point: average and print ``{"averaged": directory, "steps": [...]}``."""
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not _WORKDIR.value:
        raise app.UsageError("--workdir is required.")
    if _LAST.value < 0:
        _fail(f"--last must be a positive number of checkpoints (or 0: the run's config.average_last_checkpoints); "
              f"got {_LAST.value}.")
    try:
        last = _LAST.value or checkpoints.read_config(_WORKDIR.value).run.average_last_checkpoints
        averaged_dir = os.path.join(_WORKDIR.value, run_files.AVERAGED_DIR)
        for directory in [_WORKDIR.value] + ([averaged_dir] if os.path.isdir(averaged_dir) else []):
            run_files.check_directory(directory, "--workdir", writable=True)  # Before any checkpoint is read.
        directory, steps = write_averaged(_WORKDIR.value, last, best=_BEST.value)
    except (FileNotFoundError, UserInputError) as error:
        _fail(str(error))
    print(json.dumps({"averaged": directory, "steps": steps}))


def _fail(message: str) -> None:
    exit_with_error("average_checkpoints", message)


if __name__ == "__main__":
    app.run(main)
