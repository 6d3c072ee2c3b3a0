"""Why a checkpoint could not be read, in one short line for a warning or an error.

TensorStore's errors, which orbax passes on for a damaged checkpoint, carry the whole JSON spec of the
array being opened (``[tensorstore_spec='{...}']``) and the C++ source locations: about 60 lines on a
terminal for one unreadable file. :func:`reason_line` keeps what a user acts on: the error's type, its
status and message, and the file named.
"""

from __future__ import annotations

import re

_TENSORSTORE_ANNOTATION = re.compile(r"\s*\[(?:tensorstore_spec|source locations)=.*", re.S)

REASON_LIMIT = 300
"""Characters of the message kept; a longer one ends in ``...``."""


def reason_line(error: BaseException, limit: int = REASON_LIMIT) -> str:
    """``error`` as ``"<type>: <message>"`` on one line, without TensorStore's spec and source locations.

    Parameters
    ----------
    error : BaseException
        What restoring a checkpoint raised.
    limit : int
        The most characters of the message kept.

    Returns
    -------
    str
        E.g. ``"ValueError: NOT_FOUND: Error opening "zarr3" driver: Error reading local file
        "/run/checkpoints/4/state/d/0": No such file or directory"``; the message's whitespace (newlines
        included) is collapsed to single spaces.
    """
    message = " ".join(_TENSORSTORE_ANNOTATION.sub("", str(error)).split())
    if len(message) > limit:
        message = message[:limit].rstrip() + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
