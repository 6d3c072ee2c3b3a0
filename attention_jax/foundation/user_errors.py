"""How a command ends: a user's mistake (config value, corpus file, flag) in one line with status 2, others
with their traceback; a closed output pipe (``translate | head``) and Ctrl-C quietly; and on time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TextIO

USAGE_ERROR = 2  # Exit status for a bad command line, config or input file (as absl's usage errors).
CLOSED_PIPE_STATUS = 128 + signal.SIGPIPE  # What `yes | head` leaves `yes` with (141 on Linux).
INTERRUPTED_STATUS = 128 + signal.SIGINT  # After Ctrl-C (130).

SHUTDOWN_GRACE_S = 60.0  # Seconds a failing or stopped command's shutdown may take before it leaves anyway.
_OUR_MODULE_PREFIXES = ("attention_jax.", "launch.")  # Never `pytest` or another host.
_OUR_SCRIPT_PREFIX = "attention-jax-"  # pyproject.toml's [project.scripts].


def program_name(fallback: str) -> str:
    """Return the command's name as typed (``attention_jax.translate``, ``attention-jax-translate``), the error prefix.

    Parameters
    ----------
    fallback : str
        The name outside our commands (a notebook, a test).

    Returns
    -------
    str
        The module from ``sys.orig_argv``, a console script's name, else ``fallback``.
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
    program, message : str
        The fallback of :func:`program_name`; what was wrong and what to change (lines are joined).
    status : int
        The exit status.
    """
    line = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"{program_name(program)}: error: {line}", file=sys.stderr)
    sys.exit(status)


def flag_errors_in_one_line(program: str) -> Callable[[list[str]], list[str]]:
    """Return an absl ``flags_parser`` that reports a flag mistake in one line, status 2 (absl's: two lines, 1).

    Parameters
    ----------
    program : str
        The command's ``python -m`` name.

    Returns
    -------
    callable
        ``parse(argv) -> list[str]``, the positional arguments.
    """
    from absl import flags  # Here only: this module is imported below every layer.

    def _parse(argv: list[str]) -> list[str]:
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            exit_with_error(program, f"{error}. --helpshort lists the flags.")
    return _parse


def usage_errors_in_one_line(program: str, main: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Return ``main`` with an ``absl.app.UsageError`` in one line, status 2 (absl prints the whole docstring, 1).

    Parameters
    ----------
    program : str
        The command's name for the error line.
    main : callable
        The command's ``main(argv)``.

    Returns
    -------
    callable
        The wrapped ``main``.
    """
    from absl import app  # Here only: this module is imported below every layer.

    @functools.wraps(main)
    def _main_with_usage_line(argv: Any) -> Any:
        try:
            return main(argv)
        except app.UsageError as error:
            exit_with_error(program, str(error))

    return _main_with_usage_line


def arm_exit_deadline(program: str, status: int, grace_s: float | None = None) -> None:
    """Make sure the process ends with ``status`` at most ``grace_s`` seconds from now.

    Called as a command leaves: a library's writer thread (tensorboardX after a full disk, orbax's saves)
    can block shutdown forever, and a cluster job must leave on time.

    Parameters
    ----------
    program : str
        The command's name, for the line printed if shutdown is cut short.
    status : int
        The exit status.
    grace_s : float, optional
        Seconds shutdown may take; :data:`SHUTDOWN_GRACE_S` by default.
    """
    grace_s = SHUTDOWN_GRACE_S if grace_s is None else grace_s

    def _leave() -> None:
        time.sleep(grace_s)
        alive = sorted(thread.name for thread in threading.enumerate()
                       if thread.is_alive() and thread is not threading.current_thread())
        print(f"{program_name(program)}: warning: shutdown still waiting after {grace_s:g} s on threads "
              f"{', '.join(alive) or '(none)'}; leaving with status {status}.", file=sys.stderr, flush=True)
        os._exit(status)

    threading.Thread(target=_leave, name="exit_deadline", daemon=True).start()


class UserInputError(ValueError):
    """A config value, input file or flag the command cannot use; a ``ValueError`` so existing handlers keep working."""


class MissingInputError(UserInputError, FileNotFoundError):
    """A file or directory the user named does not exist; also a ``FileNotFoundError``."""


def path_argument(value: Any, argument: str, function: str) -> str:
    """Return ``value`` as a path string, or raise a one-line ``TypeError`` for a Python API function.

    Parameters
    ----------
    value : Any
        What the caller passed.
    argument, function : str
        Named in the error.

    Returns
    -------
    str
        ``os.fspath(value)``.

    Raises
    ------
    TypeError
        For anything but a ``str`` or ``os.PathLike``.
    """
    if isinstance(value, str | os.PathLike) and isinstance(os.fspath(value), str):
        return os.fspath(value)
    raise TypeError(f"{function}'s {argument} must be a path (str); got {type(value).__name__} "
                    f"{_short_repr(value)}.")


def _short_repr(value: Any, limit: int = 40) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def quiet_pipe_and_interrupt(stdout: TextIO | None = None) -> Iterator[None]:
    """Turn a closed stdout pipe and Ctrl-C inside the block into a quiet exit (the trainer handles SIGINT itself).

    Parameters
    ----------
    stdout : TextIO, optional
        The stream whose reader may go away; ``sys.stdout`` by default.

    Raises
    ------
    SystemExit
        141 on ``BrokenPipeError`` (the stream then points at ``/dev/null``), 130 on ``KeyboardInterrupt``.
    """
    try:
        yield
    except BrokenPipeError:
        stream = stdout if stdout is not None else sys.stdout
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # A stream without a file descriptor: nothing left to flush there.
            pass
        raise SystemExit(CLOSED_PIPE_STATUS) from None
    except KeyboardInterrupt:
        raise SystemExit(INTERRUPTED_STATUS) from None
