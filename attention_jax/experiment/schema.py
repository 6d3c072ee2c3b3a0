"""The flat config a config file, a sweep row and the ``--config.FIELD=VALUE`` flags set, checked field by field.

:data:`FIELDS` is read from the sections' declarations (:mod:`attention_jax.experiment.declarations`);
:func:`check_config` refuses an unknown key, a wrong type or a value out of range in one
:class:`ConfigError` line naming where it was set. :func:`with_old_run_defaults` is the one place that
knows what the fields added since an old run's ``config.json`` meant for it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from typing import Any, Iterable, Mapping

from attention_jax.experiment.declarations import (
    DataConfig,
    DecodeSettings,
    ExperimentSettings,
    OptimizerConfig,
    RunConfig,
    TransformerConfig,
)
from attention_jax.experiment.fields import (
    NO_OLD_RUN_VALUE,
    PAPER_FIGURES,
    Record,
    ResumeRule,
    check_value,
    did_you_mean,
    records,
)
from attention_jax.foundation.user_errors import UserInputError

__all__ = ["PAPER_FIGURES", "SECTIONS", "SECTION_CLASSES", "FIELDS", "FIELDS_BY_NAME", "OLD_RUN_DEFAULTS",
           "RENAMED_FIELDS", "ConfigError", "Record", "ResumeRule", "check_value", "did_you_mean"]

SECTIONS = ("experiment", "model", "data", "optimizer", "decoding", "run")
SECTION_CLASSES: Mapping[str, type] = {
    "experiment": ExperimentSettings, "model": TransformerConfig, "data": DataConfig, "optimizer": OptimizerConfig,
    "decoding": DecodeSettings, "run": RunConfig,
}


class ConfigError(UserInputError):
    """A config key or value that the schema refuses; the message is one line naming where and the fix."""


FIELDS: tuple[Record, ...] = tuple(field for section in SECTIONS
                                   for field in records(SECTION_CLASSES[section], section))
FIELDS_BY_NAME: Mapping[str, Record] = {field.name: field for field in FIELDS}
OLD_RUN_DEFAULTS: Mapping[str, Any] = {field.name: field.old_run_value for field in FIELDS
                                       if field.old_run_value is not NO_OLD_RUN_VALUE}
RENAMED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "relative_max_distance": ("positional_encoding_settings", "relative", "max_distance"),
    "relative_values": ("positional_encoding_settings", "relative", "add_to_values"),
}
"""Keys an old run's ``config.json`` may hold that have moved (issue 75), and where to; set anew, refused."""


def entry_settings_fields() -> tuple[Record, ...]:
    """Return the registries' settings fields (``positional_encoding_settings``, ...).

    Returns
    -------
    tuple[Record, ...]
        In the schema's order.
    """
    return tuple(field for field in FIELDS if field.by_entry is not None)


def dotted_field(key: str) -> Record | None:
    """Return the field a key names: a field, ``paper.<figure>`` or ``<registry>_settings.<entry>.<setting>``.

    Parameters
    ----------
    key : str
        A key as a flag or a row's override writes it.

    Returns
    -------
    Record or None
        An entry's setting is named by the whole key; None when the key names nothing.
    """
    top, _, rest = key.partition(".")
    field = FIELDS_BY_NAME.get(top)
    if field is None or not rest:
        return field
    if field.kind == "paper":
        return field if rest in PAPER_FIGURES else None
    if field.by_entry is not None:
        entry, _, name = rest.partition(".")
        settings_class = field.by_entry.settings_of().get(entry)
        for item in records(settings_class, "") if settings_class else ():
            if item.name == name:
                return dataclasses.replace(item, name=key, section=field.section)
    return None


def flag_keys() -> list[str]:
    """Return every key a ``--config.<key>`` flag may name (an unknown flag's did-you-mean candidates).

    Returns
    -------
    list[str]
        The fields, ``paper.<figure>`` and each entry's settings.
    """
    keys = list(FIELDS_BY_NAME) + [f"paper.{figure}" for figure in PAPER_FIGURES]
    for field in entry_settings_fields():
        assert field.by_entry is not None
        for entry, settings_class in field.by_entry.settings_of().items():
            keys += [f"{field.name}.{entry}.{item.name}" for item in records(settings_class, "")]
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


def fields_with_rule(rule: ResumeRule) -> tuple[str, ...]:
    """Return the names of the fields declared with ``rule``, in the schema's order.

    Parameters
    ----------
    rule : ResumeRule
        E.g. :attr:`ResumeRule.DATA`.

    Returns
    -------
    tuple[str, ...]
        Field names.
    """
    return tuple(field.name for field in FIELDS if field.resume is rule)


def default_config() -> dict[str, Any]:
    """Return the paper's base model as a flat dict, every entry's settings at their defaults.

    Returns
    -------
    dict[str, Any]
        ``{name: default}`` for every field.
    """
    config = {field.name: field.default for field in FIELDS}
    config["paper"] = dict.fromkeys(PAPER_FIGURES)
    for field in entry_settings_fields():  # Every entry's settings, so that flags can set them.
        assert field.by_entry is not None
        config[field.name] = {entry: dataclasses.asdict(settings_class())
                              for entry, settings_class in field.by_entry.settings_of().items()}
    return config


def section_fields(section: str) -> tuple[str, ...]:
    """Return the names of one section's fields, in declaration order.

    Parameters
    ----------
    section : str
        One of :data:`SECTIONS`.

    Returns
    -------
    tuple[str, ...]
        Field names.

    Raises
    ------
    ValueError
        For an unknown section.
    """
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r}; the sections are {', '.join(SECTIONS)}.")
    return tuple(field.name for field in FIELDS if field.section == section)


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
        For the first unknown key (with the closest field's name), missing field or refused value.
    """
    if not hasattr(config, "items"):
        raise ConfigError(f"a config must be a ConfigDict or a dict of fields; got {type(config).__name__}.")
    items = list(config.items())
    import_user_modules(dict(items), where)
    for key, value in items:
        field = FIELDS_BY_NAME.get(key)
        if field is None:
            hint = moved_hint(key) or did_you_mean(key, FIELDS_BY_NAME)
            raise ConfigError(f"{where}: unknown config field {key!r}{hint}; "
                              f"the fields are listed in attention_jax/experiment/schema.py.")
        problem = check_value(field, value.to_dict() if hasattr(value, "to_dict") else value)
        if problem:
            raise ConfigError(f"{where}: {problem}.")
    missing = [field.name for field in FIELDS if field.name not in dict(items)]
    if complete and missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ConfigError(f"{where}: the config has no field {missing[0]}{more}; "
                          f"start a config file from configs/base.py's get_config().")


def check_keys(keys: Iterable[str], where: str) -> None:
    """Refuse the first key that is not a field (a row's or a flag's overrides).

    Parameters
    ----------
    keys : Iterable[str]
        Field names, possibly dotted (:func:`dotted_field`).
    where : str
        Named first in the message.

    Raises
    ------
    ConfigError
        With the closest key's name.
    """
    for key in keys:
        if dotted_field(str(key)) is None:
            hint = moved_hint(str(key)) or did_you_mean(str(key), flag_keys())
            raise ConfigError(f"{where}: unknown config field {key!r}{hint}; "
                              f"the fields are listed in attention_jax/experiment/schema.py.")


def parse_flag_value(key: str, text: str, where: str) -> Any:
    """Return a ``--config.<key>=<text>`` value as the field's type, as the flags parse it.

    Parameters
    ----------
    key : str
        A field or a dotted key (:func:`dotted_field`).
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
    field = dotted_field(key)
    if field is None:
        raise ConfigError(f"{where}: unknown config field {key!r}{did_you_mean(key, flag_keys())}.")
    kind = "paper" if key.startswith("paper.") else field.kind
    if kind == "str":
        return text
    if kind == "bool":
        words = {"true": True, "1": True, "false": False, "0": False}
        if text.strip().lower() not in words:
            raise ConfigError(f"{where}: {key} must be True or False; got {text!r}.")
        return words[text.strip().lower()]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ConfigError(f"{where}: {key}={text!r} is not a {kind.replace('_', ' of ')} value.") from None
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
    if not isinstance(modules, (tuple, list)):
        return
    for name in modules:
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
    """Return a run's saved config with the fields added since, as that run behaved, and moved keys moved.

    Parameters
    ----------
    saved : Mapping[str, Any]
        A ``config.json`` as read (lists for tuples).

    Returns
    -------
    dict[str, Any]
        Plus :data:`OLD_RUN_DEFAULTS` for the fields it lacks and ``paper`` completed; a key it does not
        know is left for :func:`check_config` to name.
    """
    config: dict[str, Any] = {key: (tuple(value) if isinstance(value, list) else value) for key, value in saved.items()}
    for old_key, path in RENAMED_FIELDS.items():
        if old_key in config:
            _set_path(config, path, config.pop(old_key))
    for name, value in OLD_RUN_DEFAULTS.items():
        config.setdefault(name, dict(value) if isinstance(value, dict) else value)
    paper = config.get("paper")
    given = dict(paper) if paper is not None and hasattr(paper, "items") else {}
    config["paper"] = {**dict.fromkeys(PAPER_FIGURES), **given}
    return config


def _set_path(config: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    head, *rest = path
    if not rest:
        config.setdefault(head, value)
        return
    given = config.get(head)
    inner: dict[str, Any] = dict(given) if isinstance(given, Mapping) else {}
    config[head] = inner
    _set_path(inner, tuple(rest), value)
