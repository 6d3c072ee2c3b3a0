"""Why a checkpoint could not be read, in one line, without TensorStore's JSON spec and source locations."""

from __future__ import annotations

import re

_TENSORSTORE_ANNOTATION = re.compile(r"\s*\[(?:tensorstore_spec|source locations)=.*", re.S)

REASON_LIMIT = 300  # Characters of the message kept.


def reason_line(error: BaseException, limit: int = REASON_LIMIT) -> str:
    """Return ``error`` as ``"<type>: <message>"`` on one line, without TensorStore's spec and source locations.

    Parameters
    ----------
    error : BaseException
        What restoring a checkpoint raised.
    limit : int
        Characters of the message kept.

    Returns
    -------
    str
        E.g. ``"ValueError: NOT_FOUND: Error opening ..."``.
    """
    message = " ".join(_TENSORSTORE_ANNOTATION.sub("", str(error)).split())
    if len(message) > limit:
        message = message[:limit].rstrip() + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
