"""The flat config that config files, sweep rows and ``--config.FIELD=VALUE`` flags set, checked field by field."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from typing import Any, Iterable, Mapping

from attention_jax.experiment import declarations, fields
from attention_jax.experiment.fields import PAPER_FIGURES, Record, _check_value, _records
from attention_jax.foundation.registry import did_you_mean
from attention_jax.foundation.user_errors import UserInputError

SECTION_CLASSES: Mapping[str, type] = {
    "experiment": declarations.ExperimentSettings, "model": declarations.TransformerConfig,
    "data": declarations.DataConfig, "optimizer": declarations.OptimizerConfig,
    "decoding": declarations.DecodeSettings, "run": declarations.RunConfig}


class ConfigError(UserInputError):
    """A config key or value that the schema refuses; the message is one line naming where and the fix."""


FIELDS: tuple[Record, ...] = tuple(field for section, section_class in SECTION_CLASSES.items()
                                   for field in _records(section_class, section))
FIELDS_BY_NAME: Mapping[str, Record] = {field.name: field for field in FIELDS}
OLD_RUN_DEFAULTS: Mapping[str, Any] = {field.name: field.old_run_value for field in FIELDS
                                       if field.old_run_value is not dataclasses.MISSING}
RENAMED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "relative_max_distance": ("positional_encoding_settings", "relative", "max_distance"),
    "relative_values": ("positional_encoding_settings", "relative", "add_to_values")}
"""Keys an old run's ``config.json`` may hold that have moved (issue 75), and where to; set anew, refused."""
SECTION_FIELDS: Mapping[str, tuple[str, ...]] = {
    section: tuple(field.name for field in FIELDS if field.section == section) for section in SECTION_CLASSES}
FIELDS_BY_RULE: Mapping[fields.ResumeRule, tuple[str, ...]] = {
    rule: tuple(field.name for field in FIELDS if field.resume is rule) for rule in fields.ResumeRule}
"""The names of the fields declared with each resume rule, in the schema's order."""
_SETTINGS = {field.name: field.by_entry.registry for field in FIELDS if field.by_entry}  # *_settings: registry.


def flag_keys() -> dict[str, Record]:
    """Return every key a ``--config.<key>`` flag may name, and its field (``paper.<figure>``: ``paper``).

    Returns
    -------
    dict[str, Record]
        The fields, ``paper.<figure>`` and ``<registry>_settings.<entry>.<setting>``.
    """
    keys = {**FIELDS_BY_NAME, **{f"paper.{figure}": FIELDS_BY_NAME["paper"] for figure in PAPER_FIGURES}}
    for name, registry in _SETTINGS.items():
        for entry, settings_class in registry.settings_classes().items():
            keys.update({f"{name}.{entry}.{item.name}": dataclasses.replace(
                item, name=f"{name}.{entry}.{item.name}", section=FIELDS_BY_NAME[name].section)
                for item in _records(settings_class, "")})
    return keys


def moved_hint(key: str) -> str:
    """Return ``" (it moved: set ... instead)"`` for a key of :data:`RENAMED_FIELDS`, else ``""``.

    Parameters
    ----------
    key : str
        A key a config, row or flag sets.

    Returns
    -------
    str
        The hint.
    """
    path = RENAMED_FIELDS.get(key)
    return f" (it moved: set {'.'.join(path)} instead)" if path else ""


def _refuse_unknown(key: str, candidates: Iterable[str], where: str) -> None:
    raise ConfigError(f"{where}: unknown config field {key!r}{moved_hint(key) or did_you_mean(key, candidates)}; "
                      f"the fields are listed in attention_jax/experiment/schema.py.")


def default_config() -> dict[str, Any]:
    """Return the paper's base model as a flat dict, every registry entry's settings at their defaults.

    Returns
    -------
    dict[str, Any]
        ``{name: default}`` for every field.
    """
    config = {field.name: field.default for field in FIELDS}
    config["paper"] = dict.fromkeys(PAPER_FIGURES)
    for name, registry in _SETTINGS.items():  # Every entry's settings, so that flags can set them.
        config[name] = {entry: dataclasses.asdict(cls()) for entry, cls in registry.settings_classes().items()}
    return config


def plain_fields(config: Any) -> dict[str, Any]:
    """Return the fields of a ConfigDict or Mapping as a plain dict (nested ConfigDicts as dicts, lists as tuples).

    Parameters
    ----------
    config : Mapping
        A config file's ``ConfigDict`` or a dict of fields (anything else: :class:`ConfigError`).

    Returns
    -------
    dict[str, Any]
        The fields.
    """
    if not hasattr(config, "items"):
        raise ConfigError(f"a config must be a ConfigDict or a dict of fields; got {type(config).__name__}.")
    plain = {key: value.to_dict() if hasattr(value, "to_dict") else value for key, value in config.items()}
    return {key: tuple(value) if isinstance(value, list) else value for key, value in plain.items()}


def check_config(config: Any, where: str, *, complete: bool = True) -> None:
    """Check every key and value of a config against :data:`FIELDS`, in the config's order.

    Parameters
    ----------
    config : ml_collections.ConfigDict or Mapping
        A whole config, or a run's ``config.json`` after :func:`with_old_run_defaults`.
    where : str
        Named first in the message, e.g. ``"--config=configs/tiny.py"``.
    complete : bool
        Whether every field must be there (False for a reader of some of a run's fields).

    Raises
    ------
    ConfigError
        For the first unknown key, missing field or refused value.
    """
    fields = plain_fields(config)
    import_user_modules(fields, where)
    for key, value in fields.items():
        if key not in FIELDS_BY_NAME:
            _refuse_unknown(key, FIELDS_BY_NAME, where)
        problem = _check_value(FIELDS_BY_NAME[key], value)
        if problem:
            raise ConfigError(f"{where}: {problem}.")
    missing = [field.name for field in FIELDS if field.name not in fields]
    if complete and missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ConfigError(f"{where}: the config has no field {missing[0]}{more}; "
                          f"start a config file from configs/base.py's get_config().")


def check_keys(keys: Iterable[str], where: str) -> None:
    """Refuse the first key that names no field (a row's or a flag's overrides, dotted keys too).

    Parameters
    ----------
    keys : Iterable[str]
        Field names.
    where : str
        Named first in the message.

    Raises
    ------
    ConfigError
        With the closest key's name.
    """
    known = flag_keys()
    for key in map(str, keys):
        if key not in known:
            _refuse_unknown(key, known, where)


def parse_flag_value(key: str, text: str, where: str) -> Any:
    """Return a ``--config.<key>=<text>`` value as the field's type, as the flags parse it.

    Parameters
    ----------
    key : str
        A key of :func:`flag_keys`.
    text : str
        The value as written on the command line.
    where : str
        Named first in an error.

    Returns
    -------
    Any
        The text for a string field, a bool for a boolean, else the Python literal it spells.

    Raises
    ------
    ConfigError
        For an unknown key, or text that is no literal of the field's kind (the range is checked later).
    """
    field = flag_keys().get(key)
    if field is None:
        raise ConfigError(f"{where}: unknown config field {key!r}{did_you_mean(key, flag_keys())}.")
    if field.kind == "str":  # paper.<figure> keys are the paper field's: kind "paper", read as a literal.
        return text
    if field.kind == "bool":
        words = {"true": True, "1": True, "false": False, "0": False}
        if text.strip().lower() not in words:
            raise ConfigError(f"{where}: {key} must be True or False; got {text!r}.")
        return words[text.strip().lower()]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ConfigError(f"{where}: {key}={text!r} is not a {field.kind.replace('_', ' of ')} value.") from None
    return tuple(value) if isinstance(value, list) else value


def import_user_modules(config: Any, where: str) -> None:
    """Import the modules a config's ``user_modules`` names, so that their registry entries exist.

    Parameters
    ----------
    config : Mapping
        A config (its ``user_modules`` is read).
    where : str
        Named first in an error.

    Raises
    ------
    ConfigError
        For a module that cannot be imported or whose import raises, naming it.
    """
    modules = config.get("user_modules") if hasattr(config, "get") else None
    for name in modules if isinstance(modules, (tuple, list)) else ():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: user_modules must name Python modules; got {name!r}.")
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ConfigError(f"{where}: user_modules: cannot import {name!r} ({error}); put it on PYTHONPATH "
                              "or in the directory you run from.") from None
        except Exception as error:  # The module's own mistake (a SyntaxError, a registration refused): named.
            at = f" at {error.filename}:{error.lineno}" if isinstance(error, SyntaxError) else ""
            reason = " ".join(str(error).split())[:300]
            raise ConfigError(f"{where}: user_modules: importing {name!r} failed{at} with {type(error).__name__}: "
                              f"{reason}; fix the module, or remove it from user_modules.") from None


def with_old_run_defaults(saved: Mapping[str, Any]) -> dict[str, Any]:
    """Return a run's saved config with the fields added since as that run behaved, and moved keys moved.

    Parameters
    ----------
    saved : Mapping[str, Any]
        A ``config.json`` as read (lists for tuples).

    Returns
    -------
    dict[str, Any]
        With :data:`OLD_RUN_DEFAULTS` and ``paper`` completed; an unknown key is left for :func:`check_config`.
    """
    config = plain_fields(saved)
    for old_key, (head, entry, name) in RENAMED_FIELDS.items():
        if old_key in config:
            value, given = config.pop(old_key), config.get(head)
            settings = dict(given) if isinstance(given, Mapping) else {}
            inner = dict(settings[entry]) if isinstance(settings.get(entry), Mapping) else {}
            config[head] = {**settings, entry: {**inner, name: inner.get(name, value)}}
    for name, value in OLD_RUN_DEFAULTS.items():
        config.setdefault(name, dict(value) if isinstance(value, dict) else value)
    paper: Any = config.get("paper")
    config["paper"] = {**dict.fromkeys(PAPER_FIGURES), **(dict(paper) if hasattr(paper, "items") else {})}
    return config
