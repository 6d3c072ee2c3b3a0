"""Reading sentences from stdin (one line in, one line out), in blocks, and parallel text files (no flags here)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from absl import logging

from attention_jax.foundation.user_errors import MissingInputError, UserInputError

LINES_PER_BLOCK_PER_BATCH = 16  # Lines read before translating: 16 batches, sorted by length together.


def blocks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """Yield ``lines`` in lists of at most ``size``.

    Parameters
    ----------
    lines : Iterable[str]
        The lines.
    size : int
        The largest block.

    Yields
    ------
    list[str]
        The next block.
    """
    block: list[str] = []
    for line in lines:
        block.append(line)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block


def buffer_size(flag_value: int | None, batch_size: int, interactive: bool) -> int:
    """Return the lines translated together: the flag's, else 1 for a terminal and ``16 * batch_size`` otherwise.

    Parameters
    ----------
    flag_value : int, optional
        ``--buffer_size``.
    batch_size : int
        ``--batch_size``.
    interactive : bool
        Whether stdin is a terminal.

    Returns
    -------
    int
        At least 1.
    """
    if flag_value is not None:
        return flag_value
    return 1 if interactive else batch_size * LINES_PER_BLOCK_PER_BATCH


def _read_lines(stream: BinaryIO) -> Iterator[str]:
    r"""Yield the lines of a byte stream as text; only ``\n`` (or ``\r\n``) ends one, so lines out match lines in."""
    for number, raw in enumerate(stream, start=1):
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            logging.warning("Input line %d is not valid UTF-8 (%s); undecodable bytes were replaced by U+FFFD.",
                            number, error.reason)
            yield raw.decode("utf-8", errors="replace")


def _read_parallel_text(source_file: str, reference_file: str, *, source_flag: str = "--source",
                       reference_flag: str = "--reference") -> list[tuple[str, str]]:
    """Read a parallel text given as two files, line ``i`` of one translating line ``i`` of the other.

    Raises ``UserInputError``: for a missing file, a directory, no sentence, or line counts that differ.
    """
    sides = []
    for flag, path in ((source_flag, source_file), (reference_flag, reference_file)):
        if not os.path.exists(path):
            raise MissingInputError(f"{flag}={path} does not exist: name a text file with one sentence per line.")
        if os.path.isdir(path):
            raise UserInputError(f"{flag}={path} is a directory: name a text file with one sentence per line.")
        with open(path, "rb") as stream:
            lines = list(_read_lines(stream))
        if not any(line.strip() for line in lines):
            raise UserInputError(f"{flag}={path} is empty: it needs one sentence per line.")
        sides.append(lines)
    sources, references = sides
    if len(sources) != len(references):
        raise UserInputError(f"{source_flag}={source_file} has {len(sources)} lines but {reference_flag}="
                             f"{reference_file} has {len(references)}: a parallel text needs one reference "
                             f"line per source line.")
    return list(zip(sources, references))
