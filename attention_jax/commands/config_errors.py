"""Command-line config mistakes as one line: an unknown ``--config.<field>`` names the closest field.

``ml_collections``' override flags fail on an unknown field with a long traceback from inside the flags
parser. :func:`parse_flags_or_exit` checks every ``--config.<field>`` override against the config file
first, and turns any other flags error into one line, exiting with status 2.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
import sys
from typing import Any, Sequence

import ml_collections
from absl import flags

from attention_jax.user_errors import exit_with_error


def _config_file(spec: str) -> tuple[str, str]:
    """The file and the argument of ``--config=PATH[:ARG]``; ``FileNotFoundError`` for a missing file."""
    path, _, argument = spec.partition(":")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--config={spec}: config file {path} not found (run from the repository root).")
    return path, argument


def _load_config(spec: str) -> ml_collections.ConfigDict:
    path, argument = _config_file(spec)
    module_spec = importlib.util.spec_from_file_location("_checked_config_" + re.sub(r"\W", "_", path), path)
    module = importlib.util.module_from_spec(module_spec)
    if os.getcwd() not in sys.path:  # Config files import `configs.base` from the repository root.
        sys.path.insert(0, os.getcwd())
    module_spec.loader.exec_module(module)
    return module.get_config(argument) if argument else module.get_config()


def _field_names(config: Any, prefix: str = "") -> list[str]:
    names = []
    for key, value in config.items():
        names.append(prefix + key)
        if isinstance(value, ml_collections.ConfigDict):
            names += _field_names(value, f"{prefix}{key}.")
    return names


def unknown_override(argv: Sequence[str], flag_name: str = "config") -> str | None:
    """A one-line message for the first ``--<flag_name>.<field>`` the config file does not define.

    Parameters
    ----------
    argv : Sequence[str]
        The command line (program name first).
    flag_name : str
        The config flag's name.

    Returns
    -------
    str or None
        E.g. ``"--config.num_layerz: configs/tiny.py has no field num_layerz (did you mean
        num_layers?)"``; ``None`` when every override names a field (or there is no ``--config``).

    Notes
    -----
    Raises ``FileNotFoundError`` when the ``--config`` file does not exist, overrides or not.
    """
    specs = [arg.split("=", 1)[1] for arg in argv if arg.startswith(f"--{flag_name}=")]
    overrides = [arg[len(flag_name) + 3:].split("=", 1)[0] for arg in argv if arg.startswith(f"--{flag_name}.")]
    if specs:
        _config_file(specs[-1])  # A missing file: one line here, not ml_collections' traceback later.
    if not specs or not overrides:
        return None
    names = _field_names(_load_config(specs[-1]))
    for field in overrides:
        if field not in names:
            closest = difflib.get_close_matches(field, names, n=1, cutoff=0.5)
            hint = f" (did you mean {closest[0]}?)" if closest else " (see configs/base.py for the fields)"
            return f"--{flag_name}.{field}: {specs[-1]} has no field {field}{hint}"
    return None


def parse_flags_or_exit(argv: list[str]) -> list[str]:
    """absl ``flags_parser`` for ``app.run``: parse, or print one line and exit with status 2.

    Parameters
    ----------
    argv : list[str]
        The command line.

    Returns
    -------
    list[str]
        The positional arguments (as absl's default parser returns them).
    """
    program = os.path.basename(argv[0]) if argv else "attention_jax"
    try:
        message = unknown_override(argv)
    except (FileNotFoundError, AttributeError, TypeError, ValueError) as error:
        message = f"{type(error).__name__}: {error}"
    if message is None:
        try:
            return flags.FLAGS(argv)
        except (flags.Error, AttributeError, KeyError, TypeError, ValueError) as error:
            message = _one_line(str(error)) if str(error) else type(error).__name__
    exit_with_error(program, message)


def _one_line(text: str) -> str:
    """A flags error as one line: its first line, plus the reason that ends a config file's traceback.

    ``ml_collections`` reports an error raised by ``get_config`` (e.g. an unknown row in
    ``--config=configs/table2.py:Z9``) as "Error whilst parsing config file:" followed by the whole
    traceback; the reason is its last line.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and "Traceback (most recent call last):" in lines:
        return f"{lines[0]} {lines[-1]}"
    return lines[0]
