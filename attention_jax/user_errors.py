"""Mistakes in what a user gave (a config value, a corpus file, a flag): shown as one line, exit status 2.

The commands catch :class:`UserInputError` and print its message alone, without a traceback; any other
exception is a programming error and keeps its traceback. Library code raises it where the cause is
the user's input and the message says what to change.
"""

from __future__ import annotations

USAGE_ERROR = 2
"""Exit status of a command given a bad command line, config or input file (as absl's usage errors)."""


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
