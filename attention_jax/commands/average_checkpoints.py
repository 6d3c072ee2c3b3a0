"""Average the parameters of a run's last checkpoints (Section 6.1: the last 5 for base, 20 for big models).

Usage::

    python -m attention_jax.average_checkpoints --workdir=runs/base [--last=5]
    python -m attention_jax.average_checkpoints --workdir=runs/small --best --last=3  # early stopping

Writes ``WORKDIR/averaged/<last step>/`` (``--checkpoint=averaged``) and prints one JSON line;
``--last`` defaults to ``config.average_last_checkpoints``. Mistakes are one line, exit 2 (docs/checkpoints.md).
"""

from __future__ import annotations

import json
import os

from absl import app, flags

from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError, exit_with_error

_WORKDIR = flags.DEFINE_string("workdir", None, "Training workdir whose checkpoints are averaged.")
_LAST = flags.DEFINE_integer("last", 0, "How many of the newest checkpoints to average "
                             "(0: config.average_last_checkpoints of the run).")
_BEST = flags.DEFINE_bool("best", False, "Average the best dev evaluations (WORKDIR/best/, kept with "
                          "early stopping) instead of the newest training checkpoints.")


def _write_averaged(workdir: str, last: int, *, best: bool = False) -> tuple[str, list[int]]:
    """Average the newest ``last`` (or ``last`` best) checkpoints into ``WORKDIR/averaged`` (Section 6.1).

    Returns the directory written (replacing an earlier average) and the averaged steps.
    """
    from attention_jax.checkpointing import params_checkpoints  # Here: a mistake is refused before Orbax loads.

    source = run_files.BEST_DIR if best else run_files.CHECKPOINT_DIR
    steps = params_checkpoints.write_average(workdir, last, source=source)
    return os.path.join(workdir, run_files.AVERAGED_DIR), steps


def main(argv: list[str]) -> None:
    """Average, say which steps, and print ``{"averaged": directory, "steps": [...], "last": N}``.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not _WORKDIR.value:
        raise app.UsageError("--workdir is required.")
    if _LAST.value < 0:
        _fail(f"--last must be a positive number of checkpoints (or 0: the run's config.average_last_checkpoints); "
              f"got {_LAST.value}.")
    try:
        last, origin = _checkpoint_count(_WORKDIR.value, _LAST.value)
        averaged_dir = os.path.join(_WORKDIR.value, run_files.AVERAGED_DIR)
        for directory in [_WORKDIR.value] + ([averaged_dir] if os.path.isdir(averaged_dir) else []):
            run_files.check_directory(directory, "--workdir", writable=True)  # Before any checkpoint is read.
        directory, steps = _write_averaged(_WORKDIR.value, last, best=_BEST.value)
    except (FileNotFoundError, UserInputError) as error:
        _fail(str(error))
    if len(steps) == 1:  # Only with --last=1: said, since it is a copy and not an average.
        print(f"averaged 1 checkpoint ({origin}): a copy of step {steps[0]}, not an average, into {directory}")
    else:
        kind = "best dev evaluations" if _BEST.value else "newest checkpoints"
        print(f"averaged the {len(steps)} {kind} ({origin}): steps {steps}, into {directory}")
    print(json.dumps({"averaged": directory, "steps": steps, "last": last}))


def _checkpoint_count(workdir: str, last: int) -> tuple[int, str]:
    """Return how many checkpoints to average and where that came from; a config's 1 needs ``--last``."""
    if last > 0:
        return last, f"--last={last}"
    from attention_jax.checkpointing import checkpoints

    configured = checkpoints.read_config(workdir).run.average_last_checkpoints
    if configured < 2:
        raise UserInputError(
            f"the run in {workdir} scores its last checkpoint alone (config.average_last_checkpoints="
            f"{configured}), so there is nothing to average by default: pass --last=N to average its N newest "
            f"checkpoints (N >= 2; the paper averages 5 for base, 20 for big models).")
    return configured, f"config.average_last_checkpoints={configured} of the run"


def _fail(message: str) -> None:
    exit_with_error("attention_jax.average_checkpoints", message)


if __name__ == "__main__":
    app.run(main)
