"""How every command starts, as ``python -m attention_jax.<command>`` or as its installed console script.

``pyproject.toml``'s ``[project.scripts]`` maps ``attention-jax-train`` to ``attention_jax.main:run``,
``attention-jax-translate`` to ``attention_jax.translate:run`` and so on; each module's ``__main__`` block
calls the same ``run``, which hands :func:`run_command` its command in :mod:`attention_jax.commands`
(``attention_jax.main``'s is :mod:`~attention_jax.commands.train`). The flags every command takes are
defined here (``--log_format``).
Two things differ between the two ways in and are evened out here:

- absl's ``--help`` prints the docstring of the ``__main__`` module and the key flags of ``sys.argv[0]``;
  under a console script both belong to pip's wrapper script, so the command's docstring and flags are
  registered for it.
- ``python -m`` puts the current directory on ``sys.path``, so config files run from the repository root
  can import their siblings (``from configs import base``); a console script's wrapper does not, and
  ``configs/`` is not installed (nothing in the library imports it). :func:`add_config_import_paths`
  adds the current directory and, for ``--config=/path/to/repo/configs/tiny.py``, the directory that holds
  the config's package, so such a path works from any directory, as does a shipped config's bare name
  (``--config=tiny``, :mod:`attention_jax.commands.shipped_configs`).
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Callable, Sequence

from absl import app, flags

from attention_jax.commands import shipped_configs
from attention_jax.foundation import log_format, quiet_exits, quiet_libraries, user_errors

_LOG_FORMAT = flags.DEFINE_enum("log_format", "short", list(log_format.LOG_FORMATS),
                                "'short': 'HH:MM:SS I message' log lines; 'absl': absl's long prefix "
                                "(date, microseconds, thread, file:line).")


def long_log_format() -> bool:
    """Whether ``--log_format=absl`` asks for absl's long log prefix (before flags are parsed: no)."""
    return flags.FLAGS[_LOG_FORMAT.name].value == "absl"  # The Flag's value: the default before parsing.


def add_config_import_paths(argv: Sequence[str], flag_name: str = "config") -> list[str]:
    """Put on ``sys.path`` the directories from which ``--config`` files import their siblings.

    Parameters
    ----------
    argv : Sequence[str]
        The command line (program name first).
    flag_name : str
        The config flag's name.

    Returns
    -------
    list[str]
        The directories added (already present ones are not repeated): the current directory, and for
        each ``--<flag_name>=PATH[:ARG]`` whose file sits in a package (a directory with ``__init__.py``)
        the directory above that package; a shipped config's bare name counts as its file's path
        (:func:`shipped_configs.resolve`). Last, at the end of ``sys.path``, the checkout this
        ``attention_jax`` was installed from (``pip install -e .``), so that a config file in any directory
        can import the shipped configs (``from configs import tiny``) in every command, as the sweep
        launcher does (:mod:`attention_jax.sweep`).

    Notes
    -----
    A missing config file adds nothing here; the flags parser then reports it in one line
    (:func:`attention_jax.commands.config_errors.parse_flags_or_exit`).
    """
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
    checkout = shipped_configs.checkout_root()  # Last: a `configs` package of one's own comes first.
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
    """Run ``command.main`` under ``absl.app.run`` with the command's docstring and flags for ``--help``.

    Parameters
    ----------
    command : types.ModuleType
        A module of :mod:`attention_jax.commands` (its ``main(argv)`` and its absl flags).
    flags_parser : callable
        ``absl.app.run``'s ``flags_parser``:
        :func:`~attention_jax.foundation.user_errors.flag_errors_in_one_line` by default, or
        ``config_errors.parse_flags_or_exit`` for the commands that take a ``--config``.
    name : str, optional
        Its ``python -m`` name when that is not ``attention_jax.<module>`` (``attention_jax.main`` runs ``train``).

    Notes
    -----
    Does not return: ``absl.app.run`` exits with the command's status (a ``UsageError`` of ``main``'s is
    one line with status 2: :func:`~attention_jax.foundation.user_errors.usage_errors_in_one_line`), and
    :func:`~attention_jax.foundation.user_errors.arm_exit_deadline` makes sure the process does end with it
    (a library thread that blocks the interpreter's shutdown is cut short after
    :data:`~attention_jax.foundation.user_errors.SHUTDOWN_GRACE_S` seconds). A closed stdout pipe and Ctrl-C end
    the command quietly with status 141 and 130 (:mod:`attention_jax.foundation.quiet_exits`).
    """
    show_in_help(command)
    add_config_import_paths(sys.argv)
    quiet_libraries.install(long_log_format)  # Other libraries' INFO lines only at --verbosity=1.
    module_name = command.__spec__.name if command.__spec__ is not None else command.__name__  # Not "__main__".
    name = name or f"attention_jax.{module_name.rpartition('.')[2]}"  # Its `python -m` name (program_name).
    try:
        with quiet_exits.quiet_pipe_and_interrupt():  # `translate | head`, Ctrl-C: status 141 / 130, no traceback.
            app.run(user_errors.usage_errors_in_one_line(name, command.main),
                    flags_parser=flags_parser or user_errors.flag_errors_in_one_line(name))
    except SystemExit as leaving:
        status = leaving.code if isinstance(leaving.code, int) else 0 if leaving.code is None else 1
        user_errors.arm_exit_deadline(name, status)
        raise


def run_in_one_line(program: str, main: Callable[[Any], Any]) -> None:
    """``absl.app.run(main)`` with a flag or usage mistake reported in one line, exit status 2.

    Parameters
    ----------
    program : str
        The command's name for the error line.
    main : callable
        The command's ``main(argv)``.

    Notes
    -----
    For the commands run as ``python -m`` under their library module's name (the length split and its
    evaluation, the step budgets, the gettext corpus) and ``launch.export_results``: the same quiet
    libraries and quiet exits as :func:`run_command`. Does not return.
    """
    for flag in flags.FLAGS.get_key_flags_for_module(main.__module__):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)  # What --helpshort lists.
    quiet_libraries.install(long_log_format)
    with quiet_exits.quiet_pipe_and_interrupt():
        app.run(user_errors.usage_errors_in_one_line(program, main),
                flags_parser=user_errors.flag_errors_in_one_line(program))
