"""Mistakes in what a user gave (a config value, a corpus file, a flag): shown as one line, exit status 2.

The commands catch :class:`UserInputError` and print its message alone, without a traceback; any other
exception is a programming error and keeps its traceback. Library code raises it where the cause is
the user's input and the message says what to change.
"""

from __future__ import annotations

import sys
from typing import NoReturn

USAGE_ERROR = 2
"""Exit status of a command given a bad command line, config or input file (as absl's usage errors)."""


def exit_with_error(program: str, message: str, status: int = USAGE_ERROR) -> NoReturn:
    """Print ``<program>: error: <message>`` as one line on stderr and exit with ``status``.

    Parameters
    ----------
    program : str
        The command's name as the user typed it, e.g. ``"attention_jax.main"``.
    message : str
        What was wrong and what to change.
    status : int
        The exit status: :data:`USAGE_ERROR` for the user's mistakes.

    Notes
    -----
    The one place that formats a command's error line, so every command's mistakes read alike. A
    message of several lines is joined into one.
    """
    line = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"{program}: error: {line}", file=sys.stderr)
    sys.exit(status)


class UserInputError(ValueError):
    """A config value, input file or flag the command cannot use; the message names it and the fix.

    Notes
    -----
    A ``ValueError``, so callers that already catch ``ValueError`` for bad values keep working.
    """


class MissingInputError(UserInputError, FileNotFoundError):
    """A file or directory the user named (a corpus, a split's file) does not exist.

    Notes
    -----
    Also a ``FileNotFoundError``, for callers that catch that; give it the message alone.
    """
