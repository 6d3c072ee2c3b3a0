"""Reading prompts and sentences from stdin: one line in, one output line out (no flags here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from absl import logging


def read_lines(stream: BinaryIO) -> Iterator[str]:
    """Yield the lines of a byte stream as text, without line endings.

    Parameters
    ----------
    stream : BinaryIO
        E.g. ``sys.stdin.buffer``.

    Yields
    ------
    str
        Each line, decoded as UTF-8; bytes that are not valid UTF-8 are replaced by U+FFFD and a
        warning naming the line goes to the log (stderr).

    Notes
    -----
    Only ``\n`` (and a ``\r`` before it) ends a line, so the count of output lines always equals the
    count of input lines (``str.splitlines`` would also split on form feeds and Unicode separators).
    """
    for number, raw in enumerate(stream, start=1):
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            logging.warning("Input line %d is not valid UTF-8 (%s); undecodable bytes were replaced by U+FFFD.",
                            number, error.reason)
            yield raw.decode("utf-8", errors="replace")
