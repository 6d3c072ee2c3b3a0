"""Every command's log lines: ``HH:MM:SS L message`` (``02:31:21 I step 150/2400 | ...``).

absl's own prefix (``I1205 23:44:46.869700 140090122574720 progress.py:81]``: date, microseconds, thread
and source line) is ``--log_format=absl`` away, for a log read beside another absl program's.
"""

from __future__ import annotations

import logging as python_logging
import re

from absl import flags, logging

LOG_FORMATS = ("short", "absl")
SHORT_PREFIX = re.compile(r"\d\d:\d\d:\d\d ([DIWEC]) ")
"""The start of a short log line; group 1 is the level's letter."""
_LOG_FORMAT = flags.DEFINE_enum("log_format", "short", list(LOG_FORMATS),
                                "'short': 'HH:MM:SS I message' log lines; 'absl': absl's long prefix "
                                "(date, microseconds, thread, file:line).")


class ShortFormatter(python_logging.Formatter):
    """``HH:MM:SS``, the level's letter (D, I, W, E, C), the message; ``long_formatter`` with --log_format=absl."""

    def __init__(self, long_formatter: python_logging.Formatter) -> None:
        super().__init__("%(asctime)s %(levelname).1s %(message)s", datefmt="%H:%M:%S")
        self._long = long_formatter

    def format(self, record: python_logging.LogRecord) -> str:  # noqa: D102 (logging.Formatter's)
        if flags.FLAGS[_LOG_FORMAT.name].value == "absl":  # The flag's default before parsing: short.
            return self._long.format(record)
        return super().format(record)


def install() -> None:
    """Give absl's log handler the short format (once; :func:`attention_jax.quiet_libraries.install` calls it)."""
    handler = logging.get_absl_handler().python_handler
    if not isinstance(handler.formatter, ShortFormatter):
        handler.setFormatter(ShortFormatter(handler.formatter or logging.PythonFormatter()))
