"""The file a command writes at the user's request (``--out``): a run's own files and unwritable places refused."""

from __future__ import annotations

import errno
import os

from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError

_WRITE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENOENT,
                 errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR)


RUN_OWN_NAMES = frozenset({
    run_files.CONFIG_FILE, run_files.TOKENIZER_FILE, run_files.DATA_SPLITS_FILE, run_files.FINE_TUNED_FROM_FILE,
    run_files.METRICS_FILE, run_files.RESULTS_FILE, run_files.LOCK_FILE, run_files.LENGTH_BUCKETS_FILE,
    run_files.POSITION_LOSSES_FILE, run_files.CHECKPOINT_DIR, run_files.CORRUPT_DIR, run_files.AVERAGED_DIR,
    run_files.BEST_DIR, run_files.TENSORBOARD_DIR, run_files.LOG_FILE, run_files.LAUNCH_FILE,
})
"""The files and directories of a run's top level that only training and its evaluations write."""


def _is_inside(path: str, directory: str) -> bool:
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


def _check_output_file(path: str, flag: str, run_directories: tuple[str, ...] = ()) -> None:
    """Refuse an output file that would overwrite a run's own file or that cannot be created.

    Raises ``UserInputError``: one line naming the path and the fix.
    """
    _refuse_run_files(path, flag, run_directories)
    if os.path.isdir(path):
        raise UserInputError(f"{flag}={path} is a directory; name the file to write.")
    run_files.check_directory(os.path.dirname(os.path.abspath(path)), flag, writable=True,
                              instead=f"Name a file in a writable directory with {flag}.")


def _refuse_run_files(path: str, flag: str, run_directories: tuple[str, ...]) -> None:
    """Refuse an output file that is a run's own file, of ``run_directories`` or any run holding it.

    Raises ``UserInputError``: naming the run's file and the fix.
    """
    for run_directory in (*filter(None, run_directories), *_runs_holding(path)):
        if not _is_inside(path, run_directory):
            continue
        relative = os.path.relpath(os.path.realpath(path), os.path.realpath(run_directory))
        if relative.split(os.sep)[0] in RUN_OWN_NAMES:
            whose = "the run's" if run_directory in run_directories else "another run's"
            raise UserInputError(f"{flag}={path} is {whose} own {relative} in {run_directory}; writing over "
                                 f"it would break the run: name a new file (outside the run, or a new name).")


def _runs_holding(path: str) -> list[str]:
    """Return the run directories (a ``config.json`` beside a run's files) above ``path``, innermost first."""
    runs, directory = [], os.path.dirname(os.path.realpath(path))
    while True:
        if os.path.isfile(os.path.join(directory, run_files.CONFIG_FILE)) and any(
                os.path.exists(os.path.join(directory, name))
                for name in (run_files.CHECKPOINT_DIR, run_files.TOKENIZER_FILE, run_files.RESULTS_FILE)):
            runs.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            return runs
        directory = parent


def _replacement_note(path: str, flag: str) -> str | None:
    """Return the stderr note before an existing file is replaced."""
    return f"note: {flag}={path} exists and is replaced." if os.path.lexists(path) else None


def _write_error_message(error: OSError, path: str, flag: str) -> str | None:
    """Return the one-line message, naming the fix, for an ``OSError`` raised writing ``path``."""
    if error.errno not in _WRITE_ERRNOS:
        return None
    fix = ("free space and rerun" if error.errno in (errno.ENOSPC, errno.EDQUOT) else
           "name a file in a writable directory")
    return (f"cannot write {flag}={path}: {error.strerror} ({errno.errorcode.get(error.errno or 0, 'error')}); "
            f"{fix}.")
