"""Every field of an experiment config: the schema collected from the sections' declarations.

A config file's ``get_config()``, each row of a sweep and each ``--config.FIELD=VALUE`` flag set fields of
one flat config (``configs/base.py`` is :func:`default_config`, the paper's base model). Before anything
runs, :func:`check_config` compares all of it with :data:`FIELDS`, which each section's dataclass
declares (:data:`SECTION_CLASSES`, :func:`attention_jax.foundation.field_declarations.setting`: one declaration per
field gives its type, default, range, meaning and resume rule): a key the table does not hold (with the
closest field's name), a value of the wrong type or one outside its range is one
:class:`ConfigError` line naming where it was set. A run's ``config.json`` keeps the same flat form;
:func:`with_old_run_defaults` is the one place that says what the fields added since an old run was
written meant for it.

Sections group the fields by what consumes them (:data:`SECTIONS`);
:func:`attention_jax.experiment.sections.build_experiment` turns a checked config into one frozen object
per section.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from typing import Any, Iterable, Mapping

from attention_jax.data.data_config import DataConfig
from attention_jax.experiment.settings import ExperimentSettings, OptimizerConfig, RunConfig
from attention_jax.foundation import field_declarations
from attention_jax.foundation.field_declarations import (
    NO_OLD_RUN_VALUE,
    PAPER_FIGURES,
    Field,
    ResumeRule,
    check_value,
    declared_fields,
    did_you_mean,
)
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models.decode_settings import DecodeSettings
from attention_jax.models.transformer_config import TransformerConfig

__all__ = ["PAPER_FIGURES", "SECTIONS", "SECTION_CLASSES", "FIELDS", "FIELDS_BY_NAME", "OLD_RUN_DEFAULTS",
           "RENAMED_FIELDS", "ConfigError", "entry_settings_fields", "dotted_field", "flag_keys", "moved_hint",
           "Field", "ResumeRule", "check_value", "did_you_mean", "default_config", "section_fields",
           "fields_with_rule", "check_config", "check_keys", "parse_flag_value", "import_user_modules",
           "with_old_run_defaults"]

SECTIONS = ("experiment", "model", "data", "optimizer", "decoding", "run")
"""``experiment``: name, seed, model kind, the paper's figures; ``model``: the Transformer (Table 3);
``data``: corpus, tokenizer and batches (5.1); ``optimizer``: Adam, schedule and loss (5.3-5.4);
``decoding``: beam search (6.1); ``run``: steps, parallelism, checkpoints, evaluation and logging."""

SECTION_CLASSES: Mapping[str, type] = {
    "experiment": ExperimentSettings, "model": TransformerConfig, "data": DataConfig, "optimizer": OptimizerConfig,
    "decoding": DecodeSettings, "run": RunConfig,
}
"""Each section's dataclass, whose :func:`~attention_jax.foundation.field_declarations.setting` fields are its
config fields."""


class ConfigError(UserInputError):
    """A config key or value that the schema refuses; the message is one line naming where and the fix."""


FIELDS: tuple[Field, ...] = tuple(field for section in SECTIONS
                                  for field in declared_fields(SECTION_CLASSES[section], section))
"""The schema: every field a config may set, section by section in :data:`SECTIONS` order, each in its
section dataclass's order (the order ``docs/config_fields.md`` lists them)."""

FIELDS_BY_NAME: Mapping[str, Field] = {field.name: field for field in FIELDS}

RENAMED_FIELDS: Mapping[str, tuple[str, ...]] = {
    "relative_max_distance": ("positional_encoding_settings", "relative", "max_distance"),
    "relative_values": ("positional_encoding_settings", "relative", "add_to_values"),
}
"""Keys an old run's ``config.json`` may hold that have moved, and where to (a path of keys): the relative
encoding's two fields became its registry entry's settings (issue 75). :func:`with_old_run_defaults` moves
them; a config file, row or flag that sets an old key is refused with the new one's name."""


def entry_settings_fields() -> tuple[Field, ...]:
    """The registries' settings fields (kind ``"entry_settings"``), in the schema's order.

    Returns
    -------
    tuple[Field, ...]
        ``positional_encoding_settings``, ``normalization_settings``, ``attention_function_settings``.
    """
    return tuple(field for field in FIELDS if field.kind == "entry_settings")


def dotted_field(key: str) -> Field | None:
    """The declaration a dotted key names: ``paper.<figure>`` or ``<registry>_settings.<entry>.<setting>``.

    Parameters
    ----------
    key : str
        A key as a flag or a row's override writes it.

    Returns
    -------
    Field or None
        A field (the setting's declaration, named by the whole key, for an entry's setting; the ``paper``
        field for a figure), or None when the key names none.
    """
    top, _, rest = key.partition(".")
    field = FIELDS_BY_NAME.get(top)
    if field is None or not rest:
        return field
    if field.kind == "paper":
        return field if rest in PAPER_FIGURES else None
    if field.kind == "entry_settings" and field.settings_of is not None:
        entry, _, name = rest.partition(".")
        settings_class = field.settings_of().get(entry)
        declared = field_declarations.settings_fields(settings_class) if settings_class else ()
        for item in declared:
            if item.name == name:
                return dataclasses.replace(item, name=key, section=field.section)
    return None


def flag_keys() -> list[str]:
    """Every key a ``--config.<key>`` flag may name: the fields, ``paper.<figure>`` and each entry's settings.

    Returns
    -------
    list[str]
        In the schema's order (the did-you-mean candidates of an unknown flag).
    """
    keys = list(FIELDS_BY_NAME) + [f"paper.{figure}" for figure in PAPER_FIGURES]
    for field in entry_settings_fields():
        assert field.settings_of is not None
        for entry, settings_class in field.settings_of().items():
            keys += [f"{field.name}.{entry}.{item.name}" for item in field_declarations.settings_fields(settings_class)]
    return keys


def moved_hint(key: str) -> str:
    """The fix for a key of :data:`RENAMED_FIELDS`, e.g. ``" (it moved: set ... instead)"``; ``""`` for others.

    Parameters
    ----------
    key : str
        A key a config, row or flag sets.

    Returns
    -------
    str
        The hint, with a leading space, or an empty string.
    """
    path = RENAMED_FIELDS.get(key)
    if path is None:
        return ""
    return f" (it moved: set {'.'.join(path)} instead)"


def fields_with_rule(rule: ResumeRule) -> tuple[str, ...]:
    """The names of the fields whose declaration gives ``rule`` for a resumed run, in the schema's order.

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
    """The paper's base model as a flat dict: every field at its default.

    Returns
    -------
    dict[str, Any]
        ``{name: default}`` for every field of :data:`FIELDS` (``paper`` with every figure ``None``; each
        registry's settings field with every entry's settings at their defaults, by entry).
    """
    config = {field.name: field.default for field in FIELDS}
    config["paper"] = dict.fromkeys(PAPER_FIGURES)
    for field in entry_settings_fields():  # Every entry's settings at their defaults, so flags can set them.
        assert field.settings_of is not None
        config[field.name] = {entry: field_declarations.defaults(settings_class)
                              for entry, settings_class in field.settings_of().items()}
    return config


def section_fields(section: str) -> tuple[str, ...]:
    """The names of the fields of one section, in the table's order.

    Parameters
    ----------
    section : str
        One of :data:`SECTIONS`.

    Returns
    -------
    tuple[str, ...]
        Field names.
    """
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r}; the sections are {', '.join(SECTIONS)}.")
    return tuple(field.name for field in FIELDS if field.section == section)


def _items(config: Any) -> list[tuple[str, Any]]:
    """The top-level ``(key, value)`` pairs of a ConfigDict, a FieldReference-free dict or a Mapping."""
    if hasattr(config, "items"):
        return list(config.items())
    raise ConfigError(f"a config must be a ConfigDict or a dict of fields; got {type(config).__name__}.")


def check_config(config: Any, where: str, *, complete: bool = True) -> None:
    """Check every key and value of a config against :data:`FIELDS`; raise one :class:`ConfigError` line.

    Parameters
    ----------
    config : ml_collections.ConfigDict or Mapping
        A whole config (a config file's ``get_config()`` with a row's overrides and the command-line
        flags applied), or a run's ``config.json`` after :func:`with_old_run_defaults`.
    where : str
        Where the config came from, named first in the message: e.g. ``"configs/my_sweep.py row
        heads2"`` or ``"--config=configs/tiny.py"``.
    complete : bool
        Whether every field must be there (False for a reader that needs only some of a run's fields,
        such as a report).

    Notes
    -----
    Raises :class:`ConfigError` for the first of: a key the schema does not know (with the closest
    field's name), a field the config lacks, a value of the wrong type, or a value outside its choices or
    range. Relations between fields (``packing`` needs full attention, say) are checked where the
    sections are built (:func:`attention_jax.experiment.sections.build_experiment`).
    """
    items = _items(config)
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
    """Raise :class:`ConfigError` for the first key that is not a field (a row's or a flag's overrides).

    Parameters
    ----------
    keys : Iterable[str]
        Field names, possibly dotted (``paper.dev_ppl``, ``positional_encoding_settings.relative.max_distance``).
    where : str
        Named first in the message.
    """
    for key in keys:
        if dotted_field(str(key)) is None:
            hint = moved_hint(str(key)) or did_you_mean(str(key), flag_keys())
            raise ConfigError(f"{where}: unknown config field {key!r}{hint}; "
                              f"the fields are listed in attention_jax/experiment/schema.py.")


def parse_flag_value(key: str, text: str, where: str) -> Any:
    """A ``--config.<key>=<text>`` value as the field's type, the way the entry point's flags parse it.

    Parameters
    ----------
    key : str
        A field (``paper.<figure>`` for one of the paper's figures, ``<registry>_settings.<entry>.<setting>``
        for an entry's setting).
    text : str
        The value as written on the command line.
    where : str
        Named first in an error.

    Returns
    -------
    Any
        The value: the text itself for a string field, ``True``/``False`` for a boolean, else the Python
        literal it spells (a number, a tuple, ``None``).

    Notes
    -----
    Raises :class:`ConfigError` for text that is no literal of the field's kind; the value's range is
    checked with the rest of the config.
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
        A config (its ``user_modules``, if any, is read).
    where : str
        Named first in an error.

    Notes
    -----
    A module registers its attention functions or positional encodings when imported
    (``docs/extending.md``); naming it in the config makes every command that reads the config (training,
    a sweep's launcher, ``evaluate`` and ``translate`` on the run) import it before the config's choices
    are checked, as fairseq's ``--user-dir`` does. Raises :class:`ConfigError` for a module that cannot be
    imported or whose import raises (a syntax error, a registration its registry refuses), naming it.
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


OLD_RUN_DEFAULTS: Mapping[str, Any] = {field.name: field.old_run_value for field in FIELDS
                                       if field.old_run_value is not NO_OLD_RUN_VALUE}
"""What each field added since the first runs were written means for a run whose ``config.json`` lacks it:
the behaviour that run had (each field's declared ``old_run_value``). ``tokens_per_batch_unit`` differs from
today's default (``real``): runs from before the field counted padded slots."""


def with_old_run_defaults(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A run's saved config with the fields added since it was written, as that run behaved.

    Parameters
    ----------
    saved : Mapping[str, Any]
        A ``config.json`` as read (lists for tuples).

    Returns
    -------
    dict[str, Any]
        The same fields, plus :data:`OLD_RUN_DEFAULTS` for those it lacks, lists turned into tuples and
        ``paper`` completed with ``None`` for the figures it lacks.

    Notes
    -----
    The one place that knows the history of the schema: every reader of a run directory
    (``evaluate``, ``translate``, ``report``, resuming) goes through it. The keys of
    :data:`RENAMED_FIELDS` are moved to where they live now (``relative_max_distance: 8`` becomes
    ``positional_encoding_settings: {"relative": {"max_distance": 8}}``), the same setting for the same
    model. A field it does not know is left in place, for :func:`check_config` to name.
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
    """Set ``config[path[0]][path[1]]... = value``, copying the nested dicts on the way (a value there wins)."""
    head, *rest = path
    if not rest:
        config.setdefault(head, value)
        return
    given = config.get(head)
    inner: dict[str, Any] = dict(given) if isinstance(given, Mapping) else {}
    config[head] = inner
    _set_path(inner, tuple(rest), value)
