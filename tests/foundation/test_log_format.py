"""Log lines: 'HH:MM:SS L message' by default, absl's long prefix with --log_format=absl."""

from __future__ import annotations

import logging as python_logging
import re
import time

from absl import logging
from absl.testing import flagsaver

from attention_jax.commands import entry_points
from attention_jax.foundation import log_format


def _record(level: int, message: str, *args: object) -> python_logging.LogRecord:
    return python_logging.LogRecord("absl", level, "/x/attention_jax/training/progress.py", 81, message, args, None)


def test_short_lines_are_time_level_letter_and_message_and_absl_is_a_flag_away() -> None:
    formatter = log_format._ShortFormatter(logging.PythonFormatter(), entry_points.long_log_format)
    record = _record(python_logging.INFO, "step %d/%d | loss %.4f", 150, 2400, 3.25)
    assert formatter.format(record) == time.strftime("%H:%M:%S", time.localtime(record.created)) + \
        " I step 150/2400 | loss 3.2500"
    assert re.fullmatch(r"\d\d:\d\d:\d\d W disk nearly full", formatter.format(_record(python_logging.WARNING,
                                                                                      "disk nearly full")))
    assert formatter.format(_record(python_logging.ERROR, "x")).split(" ")[1] == "E"
    with flagsaver.flagsaver(log_format="absl"):  # I1205 23:44:46.869700 140090122574720 progress.py:81] ...
        assert re.fullmatch(r"I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ progress\.py:81\] step 150/2400 \| loss 3\.2500",
                            formatter.format(record))


def test_install_gives_absl_s_handler_the_short_format_once() -> None:
    handler = logging.get_absl_handler().python_handler
    before = handler.formatter
    try:
        log_format.install()
        log_format.install()
        assert isinstance(handler.formatter, log_format._ShortFormatter)
        assert not isinstance(handler.formatter._long, log_format._ShortFormatter)  # Not wrapped twice.
    finally:
        handler.setFormatter(before)
