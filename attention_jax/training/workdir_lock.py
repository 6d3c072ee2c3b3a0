"""One trainer per work directory: an ``flock`` on ``lock.json``, a refreshed record on object stores."""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import socket
import time
from typing import Any

from absl import logging
from etils import epath

from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError

REMOTE_STALE_AFTER_S = 30 * 60  # An object-store lock not refreshed for this long is taken over.


_CANNOT_CREATE = (errno.ENOENT, errno.ENOTDIR, errno.EEXIST)
"""What creating a work directory answers where no run can be (``/proc/x``: ENOENT): the user's mistake."""


class WorkdirLockedError(RuntimeError):
    """Another live trainer holds the work directory; the message names it."""


def _holder_record() -> dict[str, Any]:
    now = time.time()
    record = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": now,
              "started": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(timespec="seconds"),
              "refreshed_at": now}
    if os.environ.get("SLURM_JOB_ID"):
        record["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    return record


def _describe_holder(record: dict[str, Any]) -> str:
    """Return a lock record in words: ``host H, pid P, started T`` (and the SLURM job)."""
    text = f"host {record.get('host', '?')}, pid {record.get('pid', '?')}, started {record.get('started', '?')}"
    if record.get("slurm_job_id"):
        text += f" (SLURM job {record['slurm_job_id']})"
    return text


def _parse(text: str) -> dict[str, Any] | None:
    try:
        record = json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and record.get("pid") else None


class WorkdirLock:
    """The exclusive right to train in a work directory; a context manager.

    Parameters
    ----------
    workdir : str
        The work directory (created if missing); a local path or a URL (``gs://``).
    holder, flag : str
        What holds it and the flag naming it, for the refusal (``"trainer"``, ``"--workdir"``).
    """

    def __init__(self, workdir: str, holder: str = "trainer", flag: str = "--workdir") -> None:
        self.holder, self.flag = holder, flag
        self.workdir = os.fspath(workdir)
        self.path = os.path.join(self.workdir, run_files.LOCK_FILE)
        self.remote = "://" in self.workdir
        self._descriptor: int | None = None
        self.held = False

    def acquire(self) -> "WorkdirLock":
        """Take the lock.

        Returns
        -------
        WorkdirLock
            ``self``.

        Raises
        ------
        WorkdirLockedError
            Naming the live holder.
        PermissionError
            With the path, when the directory cannot be written.
        UserInputError
            For a local ``workdir`` under a file or with too long a name, before anything is created.
        """
        if self.remote:
            self._acquire_remote()
        else:
            self._acquire_local()
        self.held = True
        return self

    def _acquire_local(self) -> None:
        run_files.check_directory(self.workdir, "--workdir")  # A file or an overlong name: one line, nothing made.
        try:
            os.makedirs(self.workdir, exist_ok=True)
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            if error.errno == errno.ENAMETOOLONG:  # E.g. a whole path over PATH_MAX.
                raise UserInputError(f"--workdir={self.workdir[:60]}...: {error.strerror}; choose a shorter "
                                     f"path.") from None
            if error.errno not in _CANNOT_CREATE:
                raise
            raise UserInputError(f"--workdir={self.workdir}: cannot create a run there ({error.strerror}, "
                                 f"{errno.errorcode.get(error.errno or 0, 'error')}): choose a directory on a "
                                 f"writable file system.") from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(descriptor)
            if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = _parse(_read_text(self.path)) or {}
            raise WorkdirLockedError(
                f"{self.workdir} is in use by another {self.holder} ({_describe_holder(holder)}); only one may "
                f"work in a {self.flag} directory. Wait for it to finish, stop it (kill -TERM {holder.get('pid', '?')} "
                f"on {holder.get('host', 'its host')}: it checkpoints and exits), or use another {self.flag}."
            ) from None
        previous = _parse(_read_text(self.path))
        if previous is not None:
            logging.warning("Taking over the lock of %s: that trainer is gone (its lock was released "
                            "without a clean exit).", _describe_holder(previous))
        self._descriptor = descriptor
        self._write_local(_holder_record())

    def _write_local(self, record: dict[str, Any] | None) -> None:
        payload = b"" if record is None else (json.dumps(record, indent=2) + "\n").encode("utf-8")
        descriptor = self._descriptor
        assert descriptor is not None  # Held locally.
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, payload, 0)
        os.fsync(descriptor)

    def _acquire_remote(self) -> None:
        path = epath.Path(self.path)
        previous = _parse(path.read_text()) if path.exists() else None
        if previous is not None:
            age_s = time.time() - float(previous.get("refreshed_at", 0.0))
            if age_s < REMOTE_STALE_AFTER_S:
                raise WorkdirLockedError(
                    f"{self.workdir} is in use by another trainer ({_describe_holder(previous)}, last "
                    f"checkpoint {age_s:.0f} s ago); only one may train in a work directory. Wait for it, "
                    f"stop it, or use another --workdir. A record older than {REMOTE_STALE_AFTER_S} s "
                    f"is taken over; delete {self.path} to take it over now if that trainer is gone.")
            logging.warning("Taking over the lock of %s: not refreshed for %.0f s.",
                            _describe_holder(previous), age_s)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_holder_record(), indent=2) + "\n")

    def refresh(self) -> None:
        """Mark the holder alive (object stores; local locks need nothing): call at each checkpoint."""
        if self.held and self.remote:
            path = epath.Path(self.path)
            record = (_parse(path.read_text()) if path.exists() else None) or _holder_record()
            record["refreshed_at"] = time.time()
            path.write_text(json.dumps(record, indent=2) + "\n")

    def release(self) -> None:
        """Empty the record and let go of the lock (idempotent); the file stays."""
        if not self.held:
            return
        self.held = False
        if self.remote:
            path = epath.Path(self.path)
            if path.exists():
                path.write_text("")
            return
        descriptor = self._descriptor
        assert descriptor is not None  # Held locally.
        try:
            self._write_local(None)
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            os.close(descriptor)
            self._descriptor = None

    def __enter__(self) -> "WorkdirLock":
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (FileNotFoundError, UnicodeDecodeError):
        return ""


def _acquire_for_job(workdir: str) -> WorkdirLock | None:
    """Take the lock for a (possibly multi-process) job on process 0; every process learns the verdict.

    Raises ``WorkdirLockedError``: on every process together, when another trainer holds it.
    """
    import jax  # Here: the lock itself is plain Python.

    from attention_jax.training import distributed

    lock, refusal = None, None
    if jax.process_index() == 0:
        try:
            lock = WorkdirLock(workdir).acquire()
        except WorkdirLockedError as error:
            refusal = error
    if not distributed._all_processes_agree(refusal is None):
        raise refusal or WorkdirLockedError(f"{workdir} is in use by another trainer (see process 0's log).")
    return lock
