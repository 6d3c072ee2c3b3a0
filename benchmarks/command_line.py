"""Every benchmark's command line: absl flags, as in the rest of the project, defined only when it runs.

Benchmarks import each other (``gpu.py`` times ``train_step.py``'s step and ``decode.py``'s search;
``op_profile.py`` both), and absl flags are global: two modules that defined ``--steps`` at import would
clash in one process. So each benchmark defines its flags in a ``define_flags()`` function and ends::

    if __name__ == "__main__":
        command_line.run(main, define_flags)

``python benchmarks/<name>.py --help`` (or ``python -m benchmarks.<name> --help``) lists them and exits 0. A
mistake on the command line is one line and exit status 2, as in the ``attention_jax`` commands.

This module needs only absl and :mod:`attention_jax.user_errors`, so PyTorch's benchmark (``peer_torch.py``),
which runs in a venv without the project's other dependencies, uses it too (``checks_config_file=False``).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from absl import app, flags

from attention_jax.foundation.user_errors import exit_with_error

CONFIG_OVERRIDE_PREFIX = "--config."
HELP_ARGUMENTS = ("--help", "-help", "--helpshort", "-h", "-?")


def run(main: Callable[[list[str]], Any], define_flags: Callable[[], None], *,
        passes_config_overrides: bool = False, checks_config_file: bool = True) -> None:
    """Define the flags, parse the command line and run ``main`` under ``absl.app.run``.

    Parameters
    ----------
    main : Callable[[list[str]], Any]
        The benchmark; called with the program name followed by the ``--config.FIELD=VALUE`` overrides
        when ``passes_config_overrides`` (they go to the training runs it starts), else with the
        program name alone.
    define_flags : Callable[[], None]
        Defines the benchmark's absl flags, each with its help text.
    passes_config_overrides : bool
        Whether ``--config.FIELD=VALUE`` arguments are set aside for ``main`` instead of being parsed.
    checks_config_file : bool
        Parse with :func:`attention_jax.commands.config_errors.parse_flags_or_exit`, which names a missing
        ``--config`` file or an unknown ``--config.FIELD`` in one line (needs ``ml_collections``); else
        with absl alone, its errors also one line.

    Notes
    -----
    Does not return: ``absl.app.run`` exits with the benchmark's status. ``--help`` prints the module's
    docstring and flags and exits 0 (absl's own exits 1). A positional argument, or an override where
    none is passed on, is one line and exit status 2; so is a ``--config.FIELD`` override that the default
    config file lacks (``ml_collections`` applies overrides of a default config file as the flag is
    defined).
    """
    try:
        define_flags()
    except (AttributeError, KeyError) as error:
        if not any(argument.startswith(CONFIG_OVERRIDE_PREFIX) for argument in sys.argv[1:]):
            raise  # A mistake in the benchmark, not on the command line.
        exit_with_error(program_name(), f"a --config.FIELD override: {_innermost_message(error)}")

    def parse(argv: list[str]) -> list[str]:
        if any(argument in HELP_ARGUMENTS for argument in argv[1:]):
            app.usage(shorthelp=True, writeto_stdout=True)
            print("Try --helpfull to get a list of all flags.")
            sys.exit(0)
        overrides = [argument for argument in argv[1:]
                     if passes_config_overrides and argument.startswith(CONFIG_OVERRIDE_PREFIX)]
        given = [argument for argument in argv if argument not in overrides]
        remaining = _parse_config_checked(given) if checks_config_file else _parse(given)
        if len(remaining) > 1:
            exit_with_error(program_name(argv), f"unexpected arguments {remaining[1:]}; flags are --name=value "
                            f"(see --help){'; --config.FIELD=VALUE pass through' if passes_config_overrides else ''}.")
        return remaining + overrides

    app.run(main, flags_parser=parse)


def _innermost_message(error: BaseException) -> str:
    """The message of the error that ``ml_collections`` wrapped in others (``AttributeError(KeyError(...))``)."""
    while error.args and isinstance(error.args[0], BaseException):
        error = error.args[0]
    return str(error.args[0]) if error.args else str(error)


def _parse_config_checked(argv: list[str]) -> list[str]:
    from attention_jax.commands import config_errors  # ml_collections: not in PyTorch's venv.

    return config_errors.parse_flags_or_exit(argv)


def _parse(argv: list[str]) -> list[str]:
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        exit_with_error(program_name(argv), str(error))


def program_name(argv: list[str] | None = None) -> str:
    """The benchmark's name for its error lines, e.g. ``gpu.py``."""
    argv = sys.argv if argv is None else argv
    return (argv[0].replace("\\", "/").rsplit("/", 1)[-1] or "benchmark") if argv else "benchmark"


def fail(message: str) -> None:
    """End the benchmark with ``<name>: error: <message>`` as one line and exit status 2."""
    exit_with_error(program_name(), message)

