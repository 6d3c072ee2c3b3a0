"""A closed output pipe and Ctrl-C end a command quietly, with the status a Unix tool leaves with.

``translate ... | head -2`` closes the pipe after two lines; the next write raises ``BrokenPipeError``, and
Python would print its traceback and, at exit, a second complaint while flushing ``sys.stdout``. Ctrl-C on a
command waiting for input raises ``KeyboardInterrupt`` from wherever it was (``text_io.read_lines``). Neither
is a fault: :func:`quiet_pipe_and_interrupt` ends the command at once, without a traceback, with status
:data:`CLOSED_PIPE_STATUS` (128 + SIGPIPE, what ``yes | head`` leaves ``yes`` with) or
:data:`INTERRUPTED_STATUS` (128 + SIGINT). The trainer is not affected: it turns the first SIGINT into a
checkpoint and status 75 itself (:mod:`attention_jax.training.distributed`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import TextIO

CLOSED_PIPE_STATUS = 128 + signal.SIGPIPE
"""Exit status after the reader of stdout went away (141 on Linux)."""

INTERRUPTED_STATUS = 128 + signal.SIGINT
"""Exit status after Ctrl-C (130)."""


@contextlib.contextmanager
def quiet_pipe_and_interrupt(stdout: TextIO | None = None) -> Iterator[None]:
    """Turn a closed stdout pipe and Ctrl-C inside the block into a quiet exit.

    Parameters
    ----------
    stdout : TextIO, optional
        The stream whose reader may go away; ``sys.stdout`` by default.

    Notes
    -----
    Raises ``SystemExit`` with :data:`CLOSED_PIPE_STATUS` on ``BrokenPipeError`` (after pointing the
    stream's file descriptor at ``/dev/null``, so the interpreter's last flush at exit has nowhere to
    fail) and with :data:`INTERRUPTED_STATUS` on ``KeyboardInterrupt``. Any other exception passes.
    """
    try:
        yield
    except BrokenPipeError:
        stream = stdout if stdout is not None else sys.stdout
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # A stream without a file descriptor: nothing left to flush there.
            pass
        raise SystemExit(CLOSED_PIPE_STATUS) from None
    except KeyboardInterrupt:
        raise SystemExit(INTERRUPTED_STATUS) from None
