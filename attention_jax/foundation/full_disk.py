"""A full disk met while writing a checkpoint, as the ``OSError`` it is (TensorStore raises a ``ValueError``)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from typing import Iterator

# What TensorStore and orbax put in the message of a write that failed for want of space.
_NO_SPACE_CODES = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded"}
_OS_ERROR_CODE = re.compile(r"os_error_code='?(\d+)'?")
_FAILED_PATH = re.compile(r'(?:Failed writing|Error writing local file|local file)[: ]*"([^"]+)"')


def no_space_errno(error: BaseException) -> int | None:
    """Return ``ENOSPC`` or ``EDQUOT`` when ``error`` or an exception in its chain is a full disk.

    Parameters
    ----------
    error : BaseException
        An exception raised while writing a checkpoint.

    Returns
    -------
    int or None
        The errno; ``None`` for any other error.
    """
    found = _full_disk_in_chain(error)
    return found[0] if found else None


def _full_disk_in_chain(error: BaseException) -> tuple[int, BaseException] | None:
    """Return the errno and the exception reporting a full disk, along ``__cause__`` and ``__context__``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _NO_SPACE_CODES:
            return current.errno, current
        message = str(current)
        code = _OS_ERROR_CODE.search(message)
        if code and int(code.group(1)) in _NO_SPACE_CODES:
            return int(code.group(1)), current
        for number, text in _NO_SPACE_CODES.items():
            if text in message:
                return number, current
        current = current.__cause__ or current.__context__
    return None


def _failed_path(error: BaseException) -> str | None:
    """Return the file an ``OSError`` or a TensorStore write error names, if any."""
    if isinstance(error, OSError) and error.filename:
        return str(error.filename)
    match = _FAILED_PATH.search(str(error))
    return match.group(1) if match else None


@contextlib.contextmanager
def as_os_error() -> Iterator[None]:
    """Re-raise a full disk met by the writes inside the block as ``OSError(ENOSPC or EDQUOT, reason, path)``.

    Raises
    ------
    OSError
        From the original error; others pass unchanged.
    """
    try:
        yield
    except Exception as error:
        found = _full_disk_in_chain(error)
        if found is None or (isinstance(error, OSError) and error.errno == found[0]):
            raise  # Another error, or already the OSError a command reports.
        number, reported_by = found
        raise OSError(number, os.strerror(number), _failed_path(reported_by)) from error
