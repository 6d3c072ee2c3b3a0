"""A command's log: ``HH:MM:SS L message`` lines (absl's long prefix with ``--log_format=absl``), without other
libraries' INFO lines (shown at ``--verbosity=1``) and a failed save's echoes.
"""

from __future__ import annotations

import logging as python_logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from absl import logging

from attention_jax.foundation import full_disk

LOG_FORMATS = ("short", "absl")
SHORT_PREFIX = re.compile(r"\d\d:\d\d:\d\d ([DIWEC]) ")  # Group 1: the level's letter.

# Where our own log lines come from: the library, and the repository's launchers, configs and benchmarks.
_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # attention_jax/
_OUR_DIRECTORIES = tuple(os.path.join(os.path.dirname(_PACKAGE_DIRECTORY), name) + os.sep
                         for name in ("launch", "configs", "benchmarks")) + (_PACKAGE_DIRECTORY + os.sep,)

# orbax's log lines that announce a failure it then re-raises in the main thread.
_RERAISED_BY_ORBAX = ("raised an exception", "Handler Commit operations", "Save Finalize thread")

# TFDS warnings every TSV run repeats (a custom BuilderConfig; probes of the version folder before the
# first preparation): lowered to DEBUG, so shown at --verbosity=1 only.
_ROUTINE_TFDS_WARNINGS = ("Using custom data configuration", "has no dataset_info.json")


def _mentions_orbax(error: BaseException | None) -> bool:
    """Return whether ``error``'s traceback runs through orbax."""
    if error is None or error.__traceback__ is None:
        return False
    return any("/orbax/" in frame.filename for frame in traceback.extract_tb(error.__traceback__))


def _is_ours(record: python_logging.LogRecord) -> bool:
    """Return whether ``record`` was logged by attention_jax, ``launch/``, ``configs/`` or ``benchmarks/``."""
    return os.path.abspath(record.pathname).startswith(_OUR_DIRECTORIES)


def _is_routine_tfds_warning(record: python_logging.LogRecord) -> bool:
    """Return whether ``record`` is a TFDS warning every run repeats."""
    if record.levelno != python_logging.WARNING or "/tensorflow_datasets/" not in record.pathname:
        return False
    message = record.getMessage()
    return any(phrase in message for phrase in _ROUTINE_TFDS_WARNINGS)


class _QuietLibraries(python_logging.Filter):
    """Drop other libraries' INFO records and orbax's echoes of a failed save; shorten library errors to a line."""

    def filter(self, record: python_logging.LogRecord) -> bool:
        """Return whether to print ``record``, lowering routine TFDS warnings and shortening library errors."""
        if _is_routine_tfds_warning(record):
            record.levelno, record.levelname = python_logging.DEBUG, "DEBUG"
        if record.levelno < python_logging.WARNING and not _is_ours(record) and logging.get_verbosity() < 1:
            return False
        noisy = "/orbax/" in record.pathname
        if not (noisy or record.name == "asyncio"):
            return True
        error = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()
        if record.levelno >= python_logging.ERROR and (
                any(phrase in message for phrase in _RERAISED_BY_ORBAX) if noisy
                else _mentions_orbax(error) or (error is not None and full_disk.no_space_errno(error))):
            return False
        if record.exc_info or "\n" in message:
            record.msg, record.args = message.splitlines()[0], None
            record.exc_info, record.exc_text = None, None
        return not noisy or record.levelno >= python_logging.WARNING


def _is_failed_save_echo(unraisable: Any) -> bool:
    """Return whether an unraisable exception echoes a failed orbax save (closed-loop callbacks, orbax coroutines)."""
    error = unraisable.exc_value
    if isinstance(error, RuntimeError) and str(error) == "Event loop is closed" and unraisable.object is None:
        return True
    code = getattr(unraisable.object, "cr_code", None)
    return (code is not None and "/orbax/" in code.co_filename) or _mentions_orbax(error)


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


def _install_short_format(use_long: Callable[[], bool] = _never) -> None:
    """Give absl's log handler the short format, once; ``use_long()``: absl's long format wanted."""
    handler = logging.get_absl_handler().python_handler
    if not isinstance(handler.formatter, _ShortFormatter):
        handler.setFormatter(_ShortFormatter(handler.formatter or logging.PythonFormatter(), use_long))


_INSTALLED = False


def install(long_log_format: Callable[[], bool] = lambda: False) -> None:
    """Quiet the libraries for a command, once: log filter and format, unraisable and thread hooks.

    Parameters
    ----------
    long_log_format : callable
        Whether absl's long log prefix is wanted (``--log_format=absl``).
    """
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    logging.get_absl_handler().addFilter(_QuietLibraries())
    _install_short_format(long_log_format)  # HH:MM:SS I message; absl's long prefix with --log_format=absl.
    previous_hook = sys.unraisablehook

    def _hook(unraisable: Any) -> None:
        if not _is_failed_save_echo(unraisable):
            previous_hook(unraisable)
            return
        try:
            logging.debug("Dropped an echo of a failed checkpoint save: %s: %s",
                          type(unraisable.exc_value).__name__, unraisable.exc_value)
        except Exception:  # At interpreter exit logging may be gone; the echo is dropped either way.
            pass

    sys.unraisablehook = _hook
    previous_thread_hook = threading.excepthook

    def _thread_hook(arguments: Any) -> None:
        if arguments.exc_value is None or not full_disk.no_space_errno(arguments.exc_value):
            previous_thread_hook(arguments)
            return
        name = arguments.thread.name if arguments.thread is not None else "a thread"
        logging.warning("%s stopped: %s", name, arguments.exc_value)

    threading.excepthook = _thread_hook
