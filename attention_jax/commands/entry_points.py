"""How every command starts: ``python -m`` and console script alike (``--help``, ``sys.path``, ``--log_format``)."""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Callable, Sequence

from absl import app, flags

from attention_jax.commands import shipped_configs
from attention_jax.foundation import quiet_libraries, user_errors

_LOG_FORMAT = flags.DEFINE_enum("log_format", "short", list(quiet_libraries.LOG_FORMATS),
                                "'short': 'HH:MM:SS I message' log lines; 'absl': absl's long prefix "
                                "(date, microseconds, thread, file:line).")


def long_log_format() -> bool:
    """Return whether ``--log_format=absl`` asks for absl's long log prefix (before flags are parsed: no).

    Returns
    -------
    bool
        Whether the long prefix is asked for.
    """
    return flags.FLAGS[_LOG_FORMAT.name].value == "absl"  # The Flag's value: the default before parsing.


def _add_config_import_paths(argv: Sequence[str], flag_name: str = "config") -> list[str]:
    """Put on ``sys.path`` the directories from which ``--config`` files import their siblings."""
    directories = [os.getcwd()]
    for argument in argv[1:]:
        if argument.startswith(f"--{flag_name}="):
            path = os.path.abspath(shipped_configs.resolve(argument.split("=", 1)[1]).partition(":")[0])
            package = os.path.dirname(path)
            if os.path.isfile(path) and os.path.isfile(os.path.join(package, "__init__.py")):
                directories.append(os.path.dirname(package))
    added = []
    for directory in directories:
        if directory not in sys.path:
            sys.path.insert(0, directory)
            added.append(directory)
    checkout = shipped_configs._checkout_root()  # Last: a `configs` package of one's own comes first.
    if checkout is not None and checkout not in sys.path:
        sys.path.append(checkout)
        added.append(checkout)
    return added


def show_in_help(command: types.ModuleType, *, replace_doc: bool = False) -> None:
    """Make absl's ``--help`` print ``command``'s docstring and flags, whatever module ``__main__`` is.

    Parameters
    ----------
    command : types.ModuleType
        The module that defines the flags.
    replace_doc : bool
        Print its docstring even where ``__main__`` has one of its own.
    """
    program = sys.modules["__main__"]
    if replace_doc or not program.__doc__:  # A console script's wrapper; `python -m` runs the shim.
        program.__doc__ = command.__doc__
    for flag in flags.FLAGS.get_key_flags_for_module(command.__name__):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)  # What --help lists.


def run_command(command: types.ModuleType, flags_parser: Callable[[list[str]], list[str]] | None = None,
                name: str | None = None) -> None:
    """Run ``command.main`` under ``absl.app.run`` with the command's docstring and flags for ``--help``; never return.

    Mistakes are one line, status 2; a closed pipe and Ctrl-C exit quietly (141, 130); shutdown has a deadline.

    Parameters
    ----------
    command : types.ModuleType
        A module of :mod:`attention_jax.commands` (its ``main(argv)`` and its flags).
    flags_parser : callable, optional
        ``absl.app.run``'s ``flags_parser`` (default: flag errors in one line).
    name : str, optional
        Its ``python -m`` name when not ``attention_jax.<module>``.
    """
    show_in_help(command)
    _add_config_import_paths(sys.argv)
    quiet_libraries.install(long_log_format)  # Other libraries' INFO lines only at --verbosity=1.
    module_name = command.__spec__.name if command.__spec__ is not None else command.__name__  # Not "__main__".
    name = name or f"attention_jax.{module_name.rpartition('.')[2]}"  # Its `python -m` name (program_name).
    try:
        with user_errors.quiet_pipe_and_interrupt():  # `translate | head`, Ctrl-C: status 141 / 130, no traceback.
            app.run(user_errors.usage_errors_in_one_line(name, command.main),
                    flags_parser=flags_parser or user_errors.flag_errors_in_one_line(name))
    except SystemExit as leaving:
        status = leaving.code if isinstance(leaving.code, int) else 0 if leaving.code is None else 1
        user_errors.arm_exit_deadline(name, status)
        raise


def run_in_one_line(program: str, main: Callable[[Any], Any]) -> None:
    """Run ``absl.app.run(main)`` with a flag or usage mistake in one line, status 2; never return.

    Parameters
    ----------
    program : str
        The command's name for the error line.
    main : callable
        The command's ``main(argv)``.
    """
    for flag in flags.FLAGS.get_key_flags_for_module(main.__module__):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)  # What --helpshort lists.
    quiet_libraries.install(long_log_format)
    with user_errors.quiet_pipe_and_interrupt():
        app.run(user_errors.usage_errors_in_one_line(program, main),
                flags_parser=user_errors.flag_errors_in_one_line(program))
