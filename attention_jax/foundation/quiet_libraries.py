"""Library chatter kept out of a command's output: other libraries' INFO lines, and the echoes of a failed save.

A command logs its own progress (our modules' INFO lines) and everyone's warnings and errors. The INFO
lines of the libraries underneath (orbax's checkpoint chatter, TFDS's "Load dataset info", JAX's) are
hidden unless ``--verbosity=1`` (absl's flag: DEBUG and up) asks for everything, and so are two TFDS
warnings that every TSV run repeated ("Using custom data configuration", "Variant folder ... has no
dataset_info.json"). TFDS's progress bars are off when stderr is not a terminal
(:func:`attention_jax.data.first_use.prepare_local_builder`).

A checkpoint save that fails in orbax's writer threads (a full disk, say) is reported three ways before
the command can say anything: each writer thread logs the error, orbax logs that the save failed, and
TensorStore's callbacks into the event loops orbax already closed raise "Event loop is closed" (printed
through ``sys.unraisablehook``, one traceback each, a dozen or more); at exit, the coroutines left
unfinished are collected with more tracebacks. The error itself always reaches the main thread, where the
command reports it: one line for a user's mistake (a full disk), the traceback for anything else. So
:func:`install` drops these echoes (they stay visible at ``--verbosity=1``) and keeps every other warning
and error. A background thread stopped by a full disk (TensorBoard's event writer) is one warning line,
not a traceback.
"""

from __future__ import annotations

import logging as python_logging
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from absl import logging

from attention_jax.foundation import full_disk, log_format

# Where our own log lines come from: the library, and the repository's launchers, configs and benchmarks.
_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # attention_jax/
_OUR_DIRECTORIES = tuple(os.path.join(os.path.dirname(_PACKAGE_DIRECTORY), name) + os.sep
                         for name in ("launch", "configs", "benchmarks")) + (_PACKAGE_DIRECTORY + os.sep,)

# orbax's log lines that announce a failure it then re-raises in the main thread.
_RERAISED_BY_ORBAX = ("raised an exception", "Handler Commit operations", "Save Finalize thread")

# TFDS warnings that every run on a local corpus repeats and that ask nothing of the user: each TSV run
# builds its dataset from a custom BuilderConfig ("Using custom data configuration ..."), and TFDS probes
# the version folder three times before the corpus is first prepared ("Variant folder ... has no
# dataset_info.json"). They are lowered to DEBUG here, the one place that sorts library chatter, so
# they show at --verbosity=1 and nowhere else.
_ROUTINE_TFDS_WARNINGS = ("Using custom data configuration", "has no dataset_info.json")


def _mentions_orbax(error: BaseException | None) -> bool:
    """Whether ``error``'s traceback runs through orbax."""
    if error is None or error.__traceback__ is None:
        return False
    return any("/orbax/" in frame.filename for frame in traceback.extract_tb(error.__traceback__))


def is_ours(record: python_logging.LogRecord) -> bool:
    """Whether ``record`` was logged by attention_jax (the library, ``launch/``, ``configs/``, ``benchmarks/``).

    Parameters
    ----------
    record : logging.LogRecord
        A log record; its ``pathname`` is the file that logged it.

    Returns
    -------
    bool
        True for our modules' records, False for any library's.
    """
    return os.path.abspath(record.pathname).startswith(_OUR_DIRECTORIES)


def is_routine_tfds_warning(record: python_logging.LogRecord) -> bool:
    """Whether ``record`` is one of TFDS's warnings that every run repeats (:data:`_ROUTINE_TFDS_WARNINGS`).

    Parameters
    ----------
    record : logging.LogRecord
        A log record.

    Returns
    -------
    bool
        True for a WARNING logged from ``tensorflow_datasets`` whose message holds one of the phrases.
    """
    if record.levelno != python_logging.WARNING or "/tensorflow_datasets/" not in record.pathname:
        return False
    message = record.getMessage()
    return any(phrase in message for phrase in _ROUTINE_TFDS_WARNINGS)


class QuietLibraries(python_logging.Filter):
    """Drop other libraries' INFO records and orbax's echoes of a failed save; shorten library errors to one line.

    Notes
    -----
    TFDS's routine warnings (:func:`is_routine_tfds_warning`) are lowered to DEBUG first. Below WARNING,
    only our own records pass, unless absl's verbosity is 1 (DEBUG) or more, when every
    library's do too. Errors of orbax's writer threads and of the asyncio tasks they run keep their
    first line and lose their tracebacks; those that announce a save failure orbax re-raises in the
    main thread, or a full disk, are dropped: the command's own error line says what failed and what to
    do.
    """

    def filter(self, record: python_logging.LogRecord) -> bool:
        """Whether to print ``record`` (shortened to one line when it is a library error)."""
        if is_routine_tfds_warning(record):
            record.levelno, record.levelname = python_logging.DEBUG, "DEBUG"
        if record.levelno < python_logging.WARNING and not is_ours(record) and logging.get_verbosity() < 1:
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


def is_failed_save_echo(unraisable: Any) -> bool:
    """Whether an unraisable exception is an echo of a failed orbax save (see the module docstring).

    Parameters
    ----------
    unraisable : sys.UnraisableHookArgs
        What ``sys.unraisablehook`` receives.

    Returns
    -------
    bool
        True for TensorStore's callbacks into a closed event loop and for orbax coroutines collected
        unfinished; False for anything else (printed as Python prints it).
    """
    error = unraisable.exc_value
    if isinstance(error, RuntimeError) and str(error) == "Event loop is closed" and unraisable.object is None:
        return True
    code = getattr(unraisable.object, "cr_code", None)
    return (code is not None and "/orbax/" in code.co_filename) or _mentions_orbax(error)


_INSTALLED = False


def install(long_log_format: Callable[[], bool] = lambda: False) -> None:
    """Add :class:`QuietLibraries` and the short log format to absl's handler; drop failed-save echoes; a full disk in a
    thread is one line.

    Parameters
    ----------
    long_log_format : callable
        Whether absl's long log prefix is wanted, asked at every line (``--log_format=absl``;
        :func:`attention_jax.foundation.log_format.install`).

    Notes
    -----
    Every command calls it as it starts (:func:`attention_jax.commands.entry_points.run_command` and
    :func:`~attention_jax.commands.entry_points.run_in_one_line`); a second call does nothing.
    Wraps ``sys.unraisablehook`` (dropped echoes are logged at DEBUG level, one line each) and
    ``threading.excepthook`` (a thread's full-disk ``OSError`` becomes one warning line; any other error
    keeps its traceback).
    """
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    logging.get_absl_handler().addFilter(QuietLibraries())
    log_format.install(long_log_format)  # HH:MM:SS I message; absl's long prefix with --log_format=absl.
    previous_hook = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not is_failed_save_echo(unraisable):
            previous_hook(unraisable)
            return
        try:
            logging.debug("Dropped an echo of a failed checkpoint save: %s: %s",
                          type(unraisable.exc_value).__name__, unraisable.exc_value)
        except Exception:  # At interpreter exit logging may be gone; the echo is dropped either way.
            pass

    sys.unraisablehook = hook
    previous_thread_hook = threading.excepthook

    def thread_hook(arguments: Any) -> None:
        if arguments.exc_value is None or not full_disk.no_space_errno(arguments.exc_value):
            previous_thread_hook(arguments)
            return
        name = arguments.thread.name if arguments.thread is not None else "a thread"
        logging.warning("%s stopped: %s", name, arguments.exc_value)

    threading.excepthook = thread_hook
