"""Train and evaluate a Transformer: the training command, ``python -m attention_jax.main``.

Usage::

    python -m attention_jax.main --config=configs/tiny.py --workdir=runs/tiny
    python -m attention_jax.main --config=configs/table2.py:B1 --workdir=runs/B1 --config.num_train_steps=1000

Rerunning resumes from the latest checkpoint. Exit status: 0 finished, 2 bad command line or config,
3 workdir locked by another trainer, 75 stopped on SIGTERM/Ctrl-C after checkpointing (rerun to resume).
"""

from __future__ import annotations

import errno
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from attention_jax.commands import config_errors, entry_points
from attention_jax.experiment import sections
from attention_jax.foundation import cache_dirs, quiet_libraries, run_files
from attention_jax.foundation.user_errors import USAGE_ERROR, UserInputError, exit_with_error

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file, e.g. configs/tiny.py or "
                                          "configs/table2.py:B1; a shipped config by name from any directory: "
                                          "tiny, table2:B1.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics and results.")

EXIT_LOCKED = 3  # Another trainer holds the work directory.


def main(argv: list[str]) -> None:
    """Check the command line and config, join a multi-process job if there is one, then train.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _CONFIG.value is None or not _WORKDIR.value:
        raise app.UsageError("--config and --workdir are required, e.g. "
                             "--config=configs/tiny.py --workdir=runs/tiny")
    quiet_libraries.install(entry_points.long_log_format)
    try:  # The whole config against the schema, before anything is written.
        experiment = sections.build_experiment(_CONFIG.value, config_errors._config_spec(sys.argv))
    except ValueError as error:
        _fail(f"bad config: {error}", USAGE_ERROR)
    if os.path.exists(_WORKDIR.value) and not os.path.isdir(_WORKDIR.value):
        _fail(f"--workdir={_WORKDIR.value} is a file, not a directory: name a new or existing run "
              f"directory.", USAGE_ERROR)
    # JAX, Flax and Orbax load only now: a mistake in the command line or the config is refused in about
    # half a second, not after seconds of imports.
    from attention_jax.checkpointing import checkpoints, compilation_cache
    from attention_jax.training import distributed, fine_tuning, train, workdir_lock

    distributed.maybe_initialize()
    try:
        source = fine_tuning.resolve_source(experiment, _WORKDIR.value)  # Before anything is written.
    except UserInputError as error:
        _fail(str(error), USAGE_ERROR)
    compiled_in = compilation_cache.enable(experiment.run.compilation_cache_dir)
    logging.info("%s", cache_dirs.describe(experiment.data.data_dir, compiled_in))
    try:
        data = fine_tuning.start_from_source(experiment, _WORKDIR.value, source) if source else None
        results = train.train_and_evaluate(experiment, _WORKDIR.value, data=data)
    except workdir_lock.WorkdirLockedError as error:
        _fail(str(error), EXIT_LOCKED)
    except UserInputError as error:
        _fail(str(error), USAGE_ERROR)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            _fail(f"{error.strerror} writing {error.filename or _WORKDIR.value}. "
                  f"{checkpoints.last_good_checkpoint_sentence(_WORKDIR.value)}", USAGE_ERROR)
        if error.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        _fail(f"cannot write to the work directory: {error.strerror}: {error.filename}. Choose a "
              f"writable --workdir (or fix its permissions).", USAGE_ERROR)
    if results.get("already_finished"):
        print(f"{_WORKDIR.value} already finished at step {results['step']}: nothing to do, no file "
              f"changed: {results.get('reason', 'rerun')}. Results in {_WORKDIR.value}/results.json.")
    elif not results.get("finished", True):
        sys.exit(run_files.STOPPED_EXIT_STATUS)


def _fail(message: str, status: int) -> None:
    exit_with_error("attention_jax.main", message, status)

