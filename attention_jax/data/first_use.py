"""First use of a shared cache, done once: one process prepares under an ``flock``, the others wait and reuse it.

NFS holds the lock across hosts (docs/clusters.md); on object stores each process prepares and renames.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import io
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from absl import logging

from attention_jax.foundation.user_errors import UserInputError

LOCK_SUFFIX = ".lock"


def _can_lock(path: str) -> bool:
    return "://" not in path  # gs://, s3://: no flock.


def _describe_holder(lock_fd: int) -> str:
    try:
        record = json.loads(os.pread(lock_fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict) or "pid" not in record:
        return "another process"
    return f"pid {record['pid']} on host {record.get('host', '?')}"


@contextlib.contextmanager
def _exclusive_lock(lock_path: str, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (holder's pid and host inside), logging once whom it waits for."""
    import fcntl  # POSIX only; imported here so that the module imports everywhere.

    if not _can_lock(lock_path):
        yield
        return
    os.makedirs(os.path.dirname(os.path.abspath(lock_path)), exist_ok=True)
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            started = time.monotonic()
            logging.warning("Waiting for %s to finish preparing %s (lock %s).",
                            _describe_holder(lock_fd), what, lock_path)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            logging.info("Lock %s free after %.1f s.", lock_path, time.monotonic() - started)
        os.ftruncate(lock_fd, 0)
        os.pwrite(lock_fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode(), 0)
        yield
    finally:
        os.close(lock_fd)  # Closing the last descriptor releases the flock.


def _prepare_once(lock_path: str, what: str, is_prepared: Callable[[], bool], prepare: Callable[[], None]) -> bool:
    """Run ``prepare`` unless ``is_prepared``, in at most one process at a time.

    Raises ``UserInputError``: naming the path and the data-directory settings when the cache is not writable.
    """
    if is_prepared():
        return False
    try:
        with _exclusive_lock(lock_path, what):
            if is_prepared():
                logging.info("Reusing %s, prepared by another process.", what)
                return False
            prepare()
            return True
    except OSError as error:
        if error.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        path = error.filename or lock_path  # The work directory is not the problem: it is not named.
        raise UserInputError(
            f"cannot write {what} to {path} ({error.strerror}): prepared corpora and their tokenizer and token-id "
            f"caches go into config.data_dir, by default TFDS's data directory ($TFDS_DATA_DIR, else "
            f"$ATTENTION_JAX_CACHE_DIR/tensorflow_datasets, else ~/tensorflow_datasets). Set --config.data_dir=DIR, "
            f"TFDS_DATA_DIR=DIR or ATTENTION_JAX_CACHE_DIR=DIR (every cache) to a writable directory, or "
            f"make {path} writable.") from None


def _remove_incomplete_tfds_dirs(dataset_version_dir: str) -> list[str]:
    """Delete the ``incomplete.*`` directories an interrupted TFDS preparation left; call holding the lock."""
    parent, version = os.path.split(os.path.normpath(dataset_version_dir))
    removed = sorted(glob.glob(os.path.join(glob.escape(parent), f"incomplete.*_{glob.escape(version)}")))
    for directory in removed:
        logging.warning("Removing %s, left by an interrupted preparation.", directory)
        shutil.rmtree(directory, ignore_errors=True)
    return removed


def _prepare_local_builder(builder: Any) -> None:
    """Run ``builder.download_and_prepare()`` without TFDS's misleading stdout banner; bars only on a terminal."""
    _progress_bars_for(sys.stderr)
    with contextlib.redirect_stdout(io.StringIO()):
        builder.download_and_prepare()


def _progress_bars_for(stream: IO[str]) -> bool:
    """Turn TFDS's progress bars off unless ``stream`` is a terminal (redraws pile up in logs); return whether on."""
    is_terminal = bool(getattr(stream, "isatty", lambda: False)())
    if not is_terminal:
        import tensorflow_datasets as tfds  # Here only: the callers have imported it already.

        tfds.disable_progress_bar()
    return is_terminal

