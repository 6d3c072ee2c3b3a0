"""First use of a shared cache, done once: one process prepares, every other process waits and reuses it.

A corpus, its tokenizer and its token ids are prepared on first use into directories that every run on
the machine (and every host on a shared disk) reads afterwards. Two processes that find the same cache
missing at the same moment, as ``launch.sweep --parallel=2`` on a fresh machine or the processes of a
multi-host job do, must not both write it: TFDS, for one, renames its ``incomplete.*`` directory onto the
final one and raises ``FileExistsError`` in the second process. :func:`prepare_once` serialises them:

1. a process that finds the cache ready uses it without locking;
2. otherwise it takes an exclusive ``flock`` on ``<cache>.lock``, waiting with one log line that names
   the holder ("Waiting for pid 4121 on host node7 to finish preparing ...") while another process holds
   it;
3. holding the lock, it looks again: a cache that the holder before it finished is reused, otherwise it
   prepares it.

The kernel releases a ``flock`` when its process exits or is killed (``kill -9`` included), so a process
killed halfway never blocks the next one; what it left half-written must not look finished (TFDS's
``incomplete.*`` directory: see :func:`remove_incomplete_tfds_dirs`; the token cache and the tokenizer
are renamed into place only when complete). On NFS, Linux maps ``flock`` onto the server's byte-range
locks, so the hosts of a multi-host job on one shared disk prepare once: process 0 or whichever comes
first, the others wait. Object stores (``gs://``, ``s3://``) have no lock: there every process that finds
the cache missing prepares it (each preparation here is deterministic, and writes end in a rename).
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
def exclusive_lock(lock_path: str, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` for the ``with`` block, waiting for another holder.

    Parameters
    ----------
    lock_path : str
        The lock file (created, with its directory, when missing; left in place afterwards).
    what : str
        What the holder prepares, for the waiting line, e.g. ``"the corpus /data/en_de"``.

    Returns
    -------
    Iterator[None]
        A context manager.

    Notes
    -----
    The holder writes its pid and host into the file so that a waiting process can name it. A path on
    an object store (``://``) is not locked.
    """
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


def prepare_once(lock_path: str, what: str, is_prepared: Callable[[], bool], prepare: Callable[[], None]) -> bool:
    """Run ``prepare`` unless ``is_prepared``, in at most one process at a time.

    Parameters
    ----------
    lock_path : str
        Lock file beside the cache it guards (see :func:`exclusive_lock`).
    what : str
        The cache in words, for log lines.
    is_prepared : Callable[[], bool]
        Whether the cache is complete on disk; asked before and again after taking the lock.
    prepare : Callable[[], None]
        Writes the cache; called with the lock held, only when ``is_prepared`` is still false.

    Returns
    -------
    bool
        True when this process prepared the cache, False when it was ready (before or after waiting).

    Notes
    -----
    A cache directory this process may not write (a read-only ``$HOME`` holding TFDS's default data
    directory, a shared read-only disk) raises :class:`UserInputError`, one line naming the path and
    how to choose another data directory.
    """
    if is_prepared():
        return False
    try:
        with exclusive_lock(lock_path, what):
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


def remove_incomplete_tfds_dirs(dataset_version_dir: str) -> list[str]:
    """Delete what an interrupted TFDS preparation left beside ``dataset_version_dir``.

    Parameters
    ----------
    dataset_version_dir : str
        A builder's ``data_dir`` (``<root>/<name>/<config>/<version>``).

    Returns
    -------
    list[str]
        The directories removed.

    Notes
    -----
    TFDS writes into ``incomplete.<6 characters>_<version>`` beside the final directory and renames it
    at the end; a process killed before the rename leaves it behind. Call this only while holding the
    preparation lock: then no live process is writing there.
    """
    parent, version = os.path.split(os.path.normpath(dataset_version_dir))
    removed = sorted(glob.glob(os.path.join(glob.escape(parent), f"incomplete.*_{glob.escape(version)}")))
    for directory in removed:
        logging.warning("Removing %s, left by an interrupted preparation.", directory)
        shutil.rmtree(directory, ignore_errors=True)
    return removed


def prepare_local_builder(builder: Any) -> None:
    """``builder.download_and_prepare()`` for a corpus made on this machine, without TFDS's stdout banner.

    Parameters
    ----------
    builder : tfds.core.DatasetBuilder
        A builder that downloads nothing (a TSV directory, the synthetic grammar).

    Notes
    -----
    TFDS prints "Downloading and preparing dataset ..." and "Dataset ... downloaded and prepared to
    ..." on stdout whatever the log level; for a corpus read from local files that banner misleads, and
    on stdout it mixes with a command's output. The caller logs its own line instead. TFDS's progress
    bars (on stderr) are turned off when stderr is not a terminal (:func:`progress_bars_for`).
    """
    progress_bars_for(sys.stderr)
    with contextlib.redirect_stdout(io.StringIO()):
        builder.download_and_prepare()


def progress_bars_for(stream: IO[str]) -> bool:
    """Turn TFDS's progress bars off, for the rest of the process, unless ``stream`` is a terminal.

    Parameters
    ----------
    stream : file object
        Where the bars would be drawn (``sys.stderr``).

    Returns
    -------
    bool
        Whether the bars stay on: True on a terminal.

    Notes
    -----
    A bar redraws itself with carriage returns and cursor-up escapes (``ESC[A``), which a terminal
    interprets and a log file keeps as raw bytes, one redraw after another. Redirected to a file or a
    pipe (a cluster job, ``launch.sweep``, ``2> train.log``) a run therefore draws none; its own log
    lines say what is being prepared. Bars that are already off stay off.
    """
    is_terminal = bool(getattr(stream, "isatty", lambda: False)())
    if not is_terminal:
        import tensorflow_datasets as tfds  # Here only: the callers have imported it already.

        tfds.disable_progress_bar()
    return is_terminal

