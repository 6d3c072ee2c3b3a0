"""Every command's log lines: ``HH:MM:SS L message``; absl's long prefix with ``--log_format=absl``."""

from __future__ import annotations

import logging as python_logging
import re
from collections.abc import Callable

from absl import logging

LOG_FORMATS = ("short", "absl")
SHORT_PREFIX = re.compile(r"\d\d:\d\d:\d\d ([DIWEC]) ")  # Group 1: the level's letter.


def _never() -> bool:
    return False


class _ShortFormatter(python_logging.Formatter):
    """Format ``HH:MM:SS L message``, or as ``long_formatter`` while ``use_long()`` (asked per record)."""

    def __init__(self, long_formatter: python_logging.Formatter, use_long: Callable[[], bool] = _never) -> None:
        super().__init__("%(asctime)s %(levelname).1s %(message)s", datefmt="%H:%M:%S")
        self._long = long_formatter
        self._use_long = use_long

    def format(self, record: python_logging.LogRecord) -> str:  # noqa: D102 (logging.Formatter's)
        """Return the record's line."""
        if self._use_long():
            return self._long.format(record)
        return super().format(record)


def install(use_long: Callable[[], bool] = _never) -> None:
    """Give absl's log handler the short format, once.

    Parameters
    ----------
    use_long : callable
        True while absl's long format is wanted (``--log_format=absl``).
    """
    handler = logging.get_absl_handler().python_handler
    if not isinstance(handler.formatter, _ShortFormatter):
        handler.setFormatter(_ShortFormatter(handler.formatter or logging.PythonFormatter(), use_long))
