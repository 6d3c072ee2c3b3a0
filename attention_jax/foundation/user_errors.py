"""Mistakes in what a user gave (a config value, a corpus file, a flag): shown as one line, exit status 2.

The commands catch :class:`UserInputError` and print its message alone, without a traceback; any other
exception is a programming error and keeps its traceback. Library code raises it where the cause is
the user's input and the message says what to change.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

USAGE_ERROR = 2
"""Exit status of a command given a bad command line, config or input file (as absl's usage errors)."""

SHUTDOWN_GRACE_S = 60.0
"""Seconds a failing or stopped command's interpreter shutdown may take before it leaves anyway."""


_OUR_MODULE_PREFIXES = ("attention_jax.", "launch.")
"""Modules whose ``python -m`` name an error line repeats (ours; never ``pytest`` or another host)."""

_OUR_SCRIPT_PREFIX = "attention-jax-"
"""How our console scripts' names begin (``pyproject.toml``'s ``[project.scripts]``)."""


def program_name(fallback: str) -> str:
    """The command's name as the user typed it: the one rule for the prefix of every error line.

    Parameters
    ----------
    fallback : str
        The name when the process was not started as one of our commands (a command's ``main`` called
        in-process, a notebook, a test): the ``python -m`` name, e.g. ``"attention_jax.translate"``.

    Returns
    -------
    str
        ``"attention_jax.translate"`` for ``python -m attention_jax.translate`` (``launch.sweep`` for
        ``python -m launch.sweep``), ``"attention-jax-translate"`` for the console script, else
        ``fallback``.

    Notes
    -----
    The module comes from ``sys.orig_argv`` (the interpreter's own command line, whose ``-m MODULE``
    ``sys.argv[0]`` replaces with a file path); the console script's name from ``sys.argv[0]``. Before
    this rule the prefixes varied with the code path: ``main.py:`` for a config mistake and
    ``attention_jax.main:`` for a full disk in the same command, ``translate:`` beside
    ``attention_jax.export:``.
    """
    interpreter = list(getattr(sys, "orig_argv", []))
    own_flags = len(sys.argv) - 1
    if interpreter and own_flags and interpreter[len(interpreter) - own_flags:] == sys.argv[1:]:
        interpreter = interpreter[:len(interpreter) - own_flags]  # Up to the module: the command's own flags off.
    module = None
    if len(interpreter) >= 3 and interpreter[-2] == "-m":
        module = interpreter[-1]
    elif len(interpreter) >= 2 and interpreter[-1].startswith("-m") and len(interpreter[-1]) > 2:
        module = interpreter[-1][2:]  # python -mattention_jax.main
    if module is not None and module.startswith(_OUR_MODULE_PREFIXES):
        return module
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return script if script.startswith(_OUR_SCRIPT_PREFIX) else fallback


def exit_with_error(program: str, message: str, status: int = USAGE_ERROR) -> NoReturn:
    """Print ``<program>: error: <message>`` as one line on stderr and exit with ``status``.

    Parameters
    ----------
    program : str
        The command's ``python -m`` name, e.g. ``"attention_jax.main"``: the prefix when the process was
        not started as one of our commands (:func:`program_name`).
    message : str
        What was wrong and what to change.
    status : int
        The exit status: :data:`USAGE_ERROR` for the user's mistakes.

    Notes
    -----
    The one place that formats a command's error line, so every command's mistakes read alike: the
    prefix is the command as the user typed it (:func:`program_name`: ``attention_jax.translate`` or
    ``attention-jax-translate``). A message of several lines is joined into one.
    """
    line = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"{program_name(program)}: error: {line}", file=sys.stderr)
    sys.exit(status)


def flag_errors_in_one_line(program: str) -> Callable[[list[str]], list[str]]:
    """An absl ``flags_parser`` that reports a flag mistake in one line with exit status 2.

    Parameters
    ----------
    program : str
        The command's ``python -m`` name for the error line, e.g. ``"attention_jax.translate"``.

    Returns
    -------
    callable
        ``parse(argv) -> list[str]``: the positional arguments, as absl's own parser returns them.

    Notes
    -----
    absl's default parser prints ``FATAL Flags parsing error`` and a second line, then exits with status
    1, the status of a crash; a mistyped or missing flag is the user's mistake, so it gets the line and
    status of every other one (:func:`exit_with_error`).
    """
    from absl import flags  # Here only: this module is imported below every layer.

    def parse(argv: list[str]) -> list[str]:
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            exit_with_error(program, f"{error}. --helpshort lists the flags.")
    return parse


def usage_errors_in_one_line(program: str, main: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``main`` with its ``absl.app.UsageError`` reported by :func:`exit_with_error`: one line, exit 2.

    Parameters
    ----------
    program : str
        The command's name for the error line.
    main : callable
        The command's ``main(argv)``, as ``absl.app.run`` calls it.

    Returns
    -------
    callable
        ``main``, but a ``UsageError`` it raises (a missing flag, an unexpected argument) becomes
        ``<program>: error: <message>`` and exit status 2.

    Notes
    -----
    ``absl.app.run`` reports a ``UsageError`` with the module's whole docstring before the message and exits
    with status 1, the status of a crash; a command line's mistake gets the line and status of every other
    mistake of the user's.
    """
    from absl import app  # Here only: this module is imported below every layer.

    @functools.wraps(main)
    def main_with_usage_line(argv: Any) -> Any:
        try:
            return main(argv)
        except app.UsageError as error:
            exit_with_error(program, str(error))

    return main_with_usage_line


def arm_exit_deadline(program: str, status: int, grace_s: float | None = None) -> None:
    """Make sure the process ends with ``status`` at most ``grace_s`` seconds from now.

    Parameters
    ----------
    program : str
        The command's name, for the one line printed if its shutdown had to be cut short.
    status : int
        The exit status the command is leaving with.
    grace_s : float, optional
        Seconds the interpreter's shutdown (joining threads, ``atexit`` handlers) may take;
        :data:`SHUTDOWN_GRACE_S` by default.

    Notes
    -----
    Called by :func:`attention_jax.commands.entry_points.run_command` as a command leaves, never by
    library code (a caller catching ``SystemExit`` would be ended regardless). A command that stops
    on an error or a signal has saved what it can; what remains are the libraries' writer threads,
    and one of them can block shutdown forever: tensorboardX joins its event thread through a queue
    that a thread killed by a full disk no longer drains, and orbax joins its save threads. A daemon
    thread started here ends the process with ``status`` once ``grace_s`` has passed, after one line
    naming the threads still alive; a normal shutdown ends the process first. A job in a cluster's
    grace period then leaves on time, and its caller sees the status instead of a process that never
    exits.
    """
    grace_s = SHUTDOWN_GRACE_S if grace_s is None else grace_s

    def leave() -> None:
        time.sleep(grace_s)
        alive = sorted(thread.name for thread in threading.enumerate()
                       if thread.is_alive() and thread is not threading.current_thread())
        print(f"{program_name(program)}: warning: shutdown still waiting after {grace_s:g} s on threads "
              f"{', '.join(alive) or '(none)'}; leaving with status {status}.", file=sys.stderr, flush=True)
        os._exit(status)

    threading.Thread(target=leave, name="exit_deadline", daemon=True).start()


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


def path_argument(value: Any, argument: str, function: str) -> str:
    """``value`` as a path string, or a one-line ``TypeError`` naming the argument of a Python API function.

    Parameters
    ----------
    value : Any
        What the caller passed, a ``str`` or ``os.PathLike`` to be accepted.
    argument, function : str
        Named in the error, e.g. ``"workdir"`` and ``"load_run"``.

    Returns
    -------
    str
        ``os.fspath(value)``.

    Raises
    ------
    TypeError
        For anything else (``None``, bytes, a parameter tree passed in its place).
    """
    if isinstance(value, str | os.PathLike) and isinstance(os.fspath(value), str):
        return os.fspath(value)
    raise TypeError(f"{function}'s {argument} must be a path (str); got {type(value).__name__} "
                    f"{_short_repr(value)}.")


def _short_repr(value: Any, limit: int = 40) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
