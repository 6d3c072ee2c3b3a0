"""Command-line config mistakes as one line: a config file that does not run, an unknown ``--config.<field>``.

``ml_collections``' config flags fail on such mistakes with a long traceback from inside the flags
parser. :func:`parse_flags_or_exit` first runs the ``--config`` file itself (:func:`_load_config_file`)
and checks every ``--config.<field>`` override against the schema
(:data:`attention_jax.experiment.schema.FIELDS`), then turns any other flags error into one line, exiting
with status 2. The whole config, the file's own fields included, is checked by
:func:`attention_jax.experiment.sections.build_experiment` once the flags are parsed.
"""

from __future__ import annotations

import inspect
import os
import re
from typing import Any, NoReturn, Sequence

import ml_collections
from absl import flags

from attention_jax.commands import entry_points, shipped_configs
from attention_jax.experiment import schema
from attention_jax.foundation import python_files
from attention_jax.foundation.user_errors import exit_with_error


def _config_file(spec: str) -> tuple[str, str]:
    """The file and the argument of ``--config=PATH[:ARG]``; ``FileNotFoundError`` for a missing file."""
    path, _, argument = spec.partition(":")
    if os.path.isdir(path):
        raise schema.ConfigError(f"--config={spec}: {path} is a directory; name a config file such as "
                                 "configs/tiny.py.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--config={spec}: config file {path} not found{_where_configs_are(path)}")
    return path, argument


def _where_configs_are(path: str) -> str:
    """The end of a missing config file's message: where it was looked for, and the shipped configs' names."""
    shipped = shipped_configs.names()
    if not shipped:
        return (f" in {os.getcwd()} (this install has no shipped configs/ folder: pass a config file's path, or "
                "pip install -e the repository).")
    name = os.path.basename(path).removesuffix(".py")
    if shipped_configs._is_bare_name(path):
        return (f": no such file in {os.getcwd()}, and no shipped config of that name"
                f"{schema.did_you_mean(name, shipped)}; the shipped configs are {', '.join(shipped)}.")
    hint = (f"; the shipped config is --config={name} from any directory" if name in shipped else
            f"; a shipped config is named without a path from any directory, e.g. --config={shipped[-1]}")
    return f" in {os.getcwd()}{hint}."


def _config_spec(argv: Sequence[str], flag_name: str = "config") -> str:
    """The last ``--<flag_name>=PATH[:ARG]`` of a command line, as the user wrote it."""
    specs = [arg for arg in argv if arg.startswith(f"--{flag_name}=")]
    return specs[-1] if specs else f"--{flag_name}"


def _takes_argument(function: Any) -> bool:
    return any(parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD,
                                  parameter.VAR_POSITIONAL)
               for parameter in inspect.signature(function).parameters.values())


def _load_config_file(spec: str) -> ml_collections.ConfigDict:
    """Run a ``--config=PATH[:ARG]`` file's ``get_config``; a mistake in the file is one ``ConfigError`` line.

    Raises ``FileNotFoundError``: for a missing file; ``schema.ConfigError``: for a directory, a file that does not run,
    no ``get_config``, a row given to a file without rows, or a ``get_config`` that returns no ``ConfigDict``.
    """
    path, argument = _config_file(spec)
    try:
        module = python_files.import_python_file(path, "_checked_config_", os.getcwd())
    except python_files.PythonFileError as failure:
        if isinstance(failure.error, SyntaxError):
            raise schema.ConfigError(f"--config={spec}: {failure}") from None
        error = failure.error
        raise schema.ConfigError(f"--config={spec}: importing {path} raised {type(error).__name__}: "
                                 f"{_one_line(str(error))}{shipped_configs.import_hint(error)}") from None
    get_config = getattr(module, "get_config", None)
    if not callable(get_config):
        raise schema.ConfigError(f"--config={spec}: {path} defines no get_config(); every config file needs one.")
    if argument and not _takes_argument(get_config):
        raise schema.ConfigError(f"--config={spec}: {path} has no rows (its get_config() takes no argument): use "
                                 f"--config={path}, and --config.FIELD=VALUE to change a field.")
    try:
        config = get_config(argument) if argument else get_config()
    except Exception as error:  # A bad row name, a typed ConfigDict refusing a value, ...
        raise schema.ConfigError(f"--config={spec}: {path}'s get_config raised {type(error).__name__}: "
                                 f"{_one_line(str(error))}") from None
    if not isinstance(config, ml_collections.ConfigDict):
        raise schema.ConfigError(f"--config={spec}: {path}'s get_config() returned a {type(config).__name__}, not "
                                 "an ml_collections.ConfigDict: return configs.base.get_config() with your changes.")
    return config


def _unknown_override(argv: Sequence[str], flag_name: str = "config") -> str | None:
    """A one-line message (with a did-you-mean) for the first ``--<flag_name>.<field>`` the schema lacks, or None."""
    specs = [arg.split("=", 1)[1] for arg in argv if arg.startswith(f"--{flag_name}=")]
    overrides = [arg[len(flag_name) + 3:].split("=", 1)[0] for arg in argv if arg.startswith(f"--{flag_name}.")]
    if not specs:
        return None
    _load_config_file(specs[-1])
    names = schema.flag_keys()  # The fields, paper.<figure> and <registry>_settings.<entry>.<setting>.
    for field in overrides:
        if field not in names:
            hint = (schema.moved_hint(field) or schema.did_you_mean(field, names)
                    or " (see attention_jax/experiment/schema.py for the fields)")
            return f"--{flag_name}.{field}: {specs[-1]} has no field {field}{hint}"
    return None


def parse_flags_or_exit(argv: list[str]) -> list[str]:
    """Parse absl flags for ``app.run``, or print one line and exit with status 2.

    Parameters
    ----------
    argv : list[str]
        The command line; a shipped config's bare name (``--config=tiny``) becomes its file's path.

    Returns
    -------
    list[str]
        The positional arguments (as absl's default parser returns them).
    """
    program = os.path.basename(argv[0]) if argv else "attention_jax"  # In-process; a command: user_errors.program_name.
    argv = shipped_configs._resolve_argv(argv)  # --config=tiny: configs/tiny.py, from any directory.
    entry_points._add_config_import_paths(argv)
    try:
        _import_flagged_user_modules(argv)
        message = _unknown_override(argv)
    except schema.ConfigError as error:
        message = str(error)
    except (FileNotFoundError, AttributeError, TypeError, ValueError) as error:
        message = f"{type(error).__name__}: {error}"
    if message is None:
        try:
            return flags.FLAGS(argv)
        except (flags.Error, AttributeError, KeyError, TypeError, ValueError) as error:
            message = _none_field_message(str(error), argv) or (_one_line(str(error)) if str(error) else
                                                                 type(error).__name__)
    _exit(program, message)


def _import_flagged_user_modules(argv: Sequence[str], flag_name: str = "config") -> None:
    """Import the modules ``--config.user_modules=...`` names, before the config file runs."""
    prefix = f"--{flag_name}.user_modules="
    given = [arg[len(prefix):] for arg in argv if arg.startswith(prefix)]
    if given:
        modules = schema.parse_flag_value("user_modules", given[-1], prefix.rstrip("="))
        schema.import_user_modules({"user_modules": modules}, prefix.rstrip("="))


_NONE_FIELD = re.compile(r"Type <class 'NoneType'> of field config\.(\S+) is not supported for overriding")


def _none_field_message(error: str, argv: Sequence[str]) -> str | None:
    """ml_collections' refusal to override a field its config file sets to None, as the user's one line.

    ``ml_collections`` infers a flag's type from the config's value, and a ``None`` (a paper figure the
    config has no counterpart for: ``configs/tiny.py``'s ``paper.dev_ppl``) has none; its message lists
    its supported types. Returns None for any other error.
    """
    found = _NONE_FIELD.search(error)
    if found is None:
        return None
    field = found.group(1)
    return (f"--config.{field}: {_config_spec(argv)} sets {field} to None, and ml_collections cannot infer a "
            f"flag's type from None: set {field} in the config file (or a copy of it) instead of on the "
            f"command line.")


def _exit(program: str, message: str) -> NoReturn:
    exit_with_error(program, message)


def _one_line(text: str) -> str:
    """An error as one line: its first line, plus the reason that ends a config file's traceback.

    ``ml_collections`` reports an error raised by ``get_config`` (e.g. an unknown row in
    ``--config=configs/table2.py:Z9``) as "Error whilst parsing config file:" followed by the whole
    traceback; the reason is its last line.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    if len(lines) > 1 and "Traceback (most recent call last):" in lines:
        return f"{lines[0]} {lines[-1]}"
    return lines[0]
