"""Every command's log lines: ``HH:MM:SS L message`` (``02:31:21 I step 150/2400 | ...``).

absl's own prefix (``I1205 23:44:46.869700 140090122574720 progress.py:81]``: date, microseconds, thread
and source line) is ``--log_format=absl`` away (the flag: :mod:`attention_jax.commands.entry_points`), for a
log read beside another absl program's.
"""

from __future__ import annotations

import logging as python_logging
import re
from collections.abc import Callable

from absl import logging

LOG_FORMATS = ("short", "absl")
SHORT_PREFIX = re.compile(r"\d\d:\d\d:\d\d ([DIWEC]) ")
"""The start of a short log line; group 1 is the level's letter."""


def _never() -> bool:
    return False


class ShortFormatter(python_logging.Formatter):
    """``HH:MM:SS``, the level's letter (D, I, W, E, C), the message; ``long_formatter`` while ``use_long()``.

    ``use_long`` is asked at every record: a command's flags are parsed after its handler is set up.
    """

    def __init__(self, long_formatter: python_logging.Formatter, use_long: Callable[[], bool] = _never) -> None:
        super().__init__("%(asctime)s %(levelname).1s %(message)s", datefmt="%H:%M:%S")
        self._long = long_formatter
        self._use_long = use_long

    def format(self, record: python_logging.LogRecord) -> str:  # noqa: D102 (logging.Formatter's)
        if self._use_long():
            return self._long.format(record)
        return super().format(record)


def install(use_long: Callable[[], bool] = _never) -> None:
    """Give absl's log handler the short format (once; :func:`attention_jax.foundation.quiet_libraries.install`
    calls it); absl's long one while ``use_long()`` (``--log_format=absl``)."""
    handler = logging.get_absl_handler().python_handler
    if not isinstance(handler.formatter, ShortFormatter):
        handler.setFormatter(ShortFormatter(handler.formatter or logging.PythonFormatter(), use_long))
