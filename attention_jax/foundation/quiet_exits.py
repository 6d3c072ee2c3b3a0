"""A closed output pipe (``translate | head``) and Ctrl-C end a command quietly (the trainer handles SIGINT itself)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import TextIO

CLOSED_PIPE_STATUS = 128 + signal.SIGPIPE  # What `yes | head` leaves `yes` with (141 on Linux).
INTERRUPTED_STATUS = 128 + signal.SIGINT  # After Ctrl-C (130).


@contextlib.contextmanager
def quiet_pipe_and_interrupt(stdout: TextIO | None = None) -> Iterator[None]:
    """Turn a closed stdout pipe and Ctrl-C inside the block into a quiet exit.

    Parameters
    ----------
    stdout : TextIO, optional
        The stream whose reader may go away; ``sys.stdout`` by default.

    Raises
    ------
    SystemExit
        141 on ``BrokenPipeError`` (the stream then points at ``/dev/null``), 130 on ``KeyboardInterrupt``.
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
