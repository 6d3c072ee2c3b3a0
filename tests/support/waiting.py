"""Polling helpers for tests that watch another process: wait for a condition, a file or a log line,
and fail with what was seen instead of hanging."""

from __future__ import annotations

import pathlib
import re
import subprocess
import time
from typing import Callable, TypeVar

Found = TypeVar("Found")


def wait_until(condition: Callable[[], Found], timeout_s: float, what: str, *,
               process: subprocess.Popen | None = None, poll_s: float = 0.1,
               details: Callable[[], str] | None = None) -> Found:
    """Poll ``condition`` until it returns something truthy, and return that.

    Parameters
    ----------
    condition
        Called every ``poll_s`` seconds; the first truthy value ends the wait.
    timeout_s
        How long to wait. Zero checks once.
    what
        What is awaited, for the failure message ("the first trainer's step 20").
    process
        The process expected to bring the condition about: if it exits first, the wait fails at once
        with the tail of its stderr (when that is a pipe).
    poll_s
        Seconds between checks.
    details
        Called on failure; its text is appended to the message (a log's tail, a file's content).

    Returns
    -------
    Found
        The truthy value ``condition`` returned.

    Notes
    -----
    Raises ``AssertionError``, so pytest reports a timeout as a test failure with the message.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        found = condition()
        if found:
            return found
        if process is not None and process.poll() is not None:
            stderr = process.communicate()[1] if process.stderr is not None else ""
            raise AssertionError(f"the process exited ({process.returncode}) before {what}:\n"
                                 f"{(stderr or '')[-3000:]}")
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}{extra}")
        time.sleep(poll_s)


def read_if_exists(path: pathlib.Path) -> str:
    """Read a file another process may not have written yet.

    Parameters
    ----------
    path
        The file.

    Returns
    -------
    str
        Its text, undecodable bytes replaced, or "" while it does not exist.

    Notes
    -----
    A file created between the check and the read is read; one deleted in between raises.
    """
    return path.read_text(errors="replace") if path.exists() else ""


def wait_for_pattern(log_path: pathlib.Path, pattern: str, timeout_s: float, *,
                     process: subprocess.Popen | None = None) -> re.Match:
    """Wait until ``pattern`` (a regular expression) matches the text of ``log_path``; return the match.

    Parameters
    ----------
    log_path
        A log another process is writing; it may not exist yet.
    pattern
        Searched with ``re.search`` over the whole text.
    timeout_s
        How long to wait; zero checks once.
    process
        As in `wait_until`.

    Returns
    -------
    re.Match
        The match, so callers can read its groups.

    Notes
    -----
    On failure the message carries the log's last 3,000 characters.
    """
    return wait_until(lambda: re.search(pattern, read_if_exists(log_path)), timeout_s,
                      f"{pattern!r} in {log_path}", process=process, poll_s=0.25,
                      details=lambda: read_if_exists(log_path)[-3000:] or "(no log)")
