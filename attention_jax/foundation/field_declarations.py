"""How a config field is declared: once, as a field of the frozen section dataclass that holds it.

A section (:class:`attention_jax.models.transformer_config.TransformerConfig`,
:class:`attention_jax.data.data_config.DataConfig`, ...) declares each of its fields as
``name: type = setting(default, doc, ...)``. The annotation gives the field's type; :func:`setting` holds
the default, the meaning, the allowed values or range, what a changed value means for a resumed run and
what a ``config.json`` written before the field existed meant by it. From that one declaration follow the
schema's checks (:mod:`attention_jax.experiment.schema`), the section object itself (checked again when it
is built, :func:`check_declared`), the resume checks (:mod:`attention_jax.checkpointing.resume_checks`) and
the table of fields in ``docs/config_fields.md``. A registry entry's own settings are declared the same
way, on its settings dataclass (an :class:`EntrySettings`); the registry's settings field is
``kind="entry_settings"``: ``{"relative": {"max_distance": 8}}`` by entry, so a flag reads
``--config.positional_encoding_settings.relative.max_distance=8`` and a row that changes the encoding
leaves the other entries' settings alone. :func:`check_by_entry` checks them, :func:`resolve` gives the
chosen entry's dataclass and :func:`recorded` what ``config.json`` records.

This module imports nothing of the library, so that every section can use it.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import math
import numbers
import typing
from typing import Any, Callable, Iterable, Mapping

_METADATA_KEY = "attention_jax.setting"


class ResumeRule(enum.Enum):
    """What a changed value means when a run directory is resumed with a new config.

    Attributes
    ----------
    FREE
        May change; the resume logs it (steps, logging, batching, decoding).
    MODEL
        Another model: refused.
    COMPUTE
        The same model computed another way (dtype, kernels): allowed.
    DATA
        Another corpus or tokenizer: refused (the weights belong to its token ids).
    SEED
        Another start (initial parameters, dropout keys, batch order): refused.
    OPTIMIZER_STATE
        Switching it on or off changes the optimizer state's structure: refused; another non-zero value
        is allowed.
    SCHEDULE
        Another learning-rate schedule: refused (the run's steps so far followed its own).
    POSITIONS
        Sets the model's positions (their sum is ``TransformerConfig.max_len``): named when the
        positions differ.
    """

    FREE = "free"
    MODEL = "model"
    COMPUTE = "compute"
    DATA = "data"
    SEED = "seed"
    OPTIMIZER_STATE = "optimizer_state"
    SCHEDULE = "schedule"
    POSITIONS = "positions"


class _NoOldRunValue:
    """The marker of a field every ``config.json`` holds (it existed when the first runs were written)."""

    def __repr__(self) -> str:
        return "NO_OLD_RUN_VALUE"


NO_OLD_RUN_VALUE: Any = _NoOldRunValue()


@dataclasses.dataclass(frozen=True)
class Field:
    """One config field, as its section declares it.

    Attributes
    ----------
    name : str
        The key, as in ``--config.<name>`` and ``config.json`` (the dataclass field's name).
    section : str
        The section that holds it (``schema.SECTIONS``).
    kind : str
        From the annotation: ``"int"``, ``"float"`` (an int is taken too), ``"bool"``, ``"str"``,
        ``"int_tuple"``, ``"str_tuple"`` (a list is taken for a tuple: ``config.json`` stores lists),
        ``"paper"`` (the paper's figures) or ``"entry_settings"`` (a registry entry's own settings, by
        entry: :class:`EntrySettings`).
    default : Any
        The paper's base-model value (``configs/base.py`` is the defaults).
    doc : str
        One line: what the field means.
    choices : tuple[str, ...] or callable, optional
        The allowed values of a ``"str"`` field, or of each item of a ``"str_tuple"``; a callable
        returns them (a registry's names, read when checked).
    minimum, maximum : float, optional
        The allowed range of a number (each item of an ``int_tuple``).
    exclusive_minimum, exclusive_maximum : bool
        Whether the bound itself is refused.
    resume : ResumeRule
        What a changed value means for a resumed run.
    old_run_value : Any
        What a ``config.json`` written before the field existed meant by it (the behaviour that run had);
        :data:`NO_OLD_RUN_VALUE` for a field every run records.
    entry_field : str, optional
        ``"entry_settings"`` fields: the field that names the chosen entry (``"positional_encoding"``).
    settings_of : callable, optional
        ``"entry_settings"`` fields: ``() -> {entry name: settings dataclass}`` of the registry.
    """

    name: str
    section: str
    kind: str
    default: Any
    doc: str
    choices: tuple[str, ...] | Callable[[], Iterable[str]] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    resume: ResumeRule = ResumeRule.FREE
    old_run_value: Any = NO_OLD_RUN_VALUE
    entry_field: str | None = None
    settings_of: Callable[[], Mapping[str, type]] | None = None

    def allowed(self) -> tuple[str, ...] | None:
        """List the allowed string values.

        Returns
        -------
        tuple[str, ...] or None
            The allowed values; None when any string is allowed.
        """
        if self.choices is None:
            return None
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def range_text(self) -> str:
        """Say the range in words.

        Returns
        -------
        str
            E.g. ``"positive"``, ``">= 0"`` or ``"in [0, 100]"``; ``""`` when unbounded.
        """
        low, high = self.minimum, self.maximum
        if (low, high, self.exclusive_minimum, self.exclusive_maximum) == (0, 1, False, True):
            return "a probability in [0, 1)"
        if (low, high, self.exclusive_minimum) == (0, None, True):
            return "positive"
        if low is not None and high is not None:
            return (f"in {'(' if self.exclusive_minimum else '['}{_number(low)}, "
                    f"{_number(high)}{')' if self.exclusive_maximum else ']'}")
        if low is not None:
            return f"{'>' if self.exclusive_minimum else '>='} {_number(low)}"
        if high is not None:
            return f"{'<' if self.exclusive_maximum else '<='} {_number(high)}"
        return ""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


POSITIVE: dict[str, Any] = dict(minimum=0, exclusive_minimum=True)
"""The range keywords of a positive number: ``setting(8, "...", **POSITIVE)``."""
NON_NEGATIVE: dict[str, Any] = dict(minimum=0)
"""The range keywords of a number >= 0."""
PROBABILITY: dict[str, Any] = dict(minimum=0, maximum=1, exclusive_maximum=True)
"""The range keywords of a probability in [0, 1)."""


def setting(default: Any, doc: str, *, choices: tuple[str, ...] | Callable[[], Iterable[str]] | None = None,
            minimum: float | None = None, maximum: float | None = None, exclusive_minimum: bool = False,
            exclusive_maximum: bool = False, resume: ResumeRule = ResumeRule.FREE,
            old_run_value: Any = NO_OLD_RUN_VALUE, kind: str | None = None, entry_field: str | None = None,
            settings_of: Callable[[], Mapping[str, type]] | None = None) -> Any:
    """Declare a config field: a dataclass field whose metadata holds everything the schema needs.

    Parameters
    ----------
    default : Any
        The paper's base-model value.
    doc : str
        One line: what the field means (the docs table and the section's documentation show it).
    choices : tuple[str, ...] or callable, optional
        The allowed strings (a callable: a registry's names, read when checked).
    minimum, maximum : float, optional
        The allowed range of a number.
    exclusive_minimum, exclusive_maximum : bool
        Whether the bound itself is refused.
    resume : ResumeRule
        What a changed value means for a resumed run (default: it may change).
    old_run_value : Any, optional
        For a field added after runs were written: what their ``config.json``, which lacks it, meant.
    kind : str, optional
        Overrides the kind the annotation gives (``"paper"`` for the paper's figures).
    entry_field, settings_of : optional
        A registry's settings field (``kind="entry_settings"``): the field naming the chosen entry, and
        ``() -> {entry name: settings dataclass}`` (:class:`EntrySettings`).

    Returns
    -------
    dataclasses.Field
        ``dataclasses.field(default=default, metadata=...)``, typed ``Any`` so that it stands for the
        annotated type.
    """
    spec = dict(default=default, doc=doc, choices=choices, minimum=minimum, maximum=maximum,
                exclusive_minimum=exclusive_minimum, exclusive_maximum=exclusive_maximum, resume=resume,
                old_run_value=old_run_value, kind=kind, entry_field=entry_field, settings_of=settings_of)
    if (kind == "entry_settings") != (entry_field is not None and settings_of is not None):
        raise TypeError(f"setting {doc!r}: kind='entry_settings' goes with entry_field and settings_of.")
    return dataclasses.field(default=default, metadata={_METADATA_KEY: spec})


_KINDS: dict[Any, str] = {int: "int", float: "float", bool: "bool", str: "str", tuple[int, ...]: "int_tuple",
                          tuple[str, ...]: "str_tuple"}


@functools.cache
def declared_fields(section_class: type, section: str) -> tuple[Field, ...]:
    """The config fields a section dataclass declares with :func:`setting`, in its order.

    Parameters
    ----------
    section_class : type
        A frozen dataclass whose config fields use :func:`setting` (other fields, derived when the
        section is built, are left out).
    section : str
        The section's name.

    Returns
    -------
    tuple[Field, ...]
        One :class:`Field` per declared field; its kind comes from the annotation.
    """
    hints = typing.get_type_hints(section_class)
    fields = []
    for dataclass_field in dataclasses.fields(section_class):
        spec = dict(dataclass_field.metadata.get(_METADATA_KEY) or {})
        if not spec:
            continue
        kind = spec.pop("kind") or _KINDS.get(hints[dataclass_field.name])
        if kind is None:
            raise TypeError(f"{section_class.__name__}.{dataclass_field.name}: a config field is an int, float, "
                            f"bool, str, tuple[int, ...] or tuple[str, ...]; got {hints[dataclass_field.name]}.")
        fields.append(Field(name=dataclass_field.name, section=section, kind=kind, **spec))
    return tuple(fields)


def check_declared(instance: Any, section: str) -> None:
    """Raise ``ValueError`` (one line) for the first declared field of a built section that does not fit.

    Parameters
    ----------
    instance : dataclass instance
        A section object, checked when built or replaced: its declared fields with :func:`check_value`.
    section : str
        The section's name.
    """
    section_class: type = type(instance)
    for field in declared_fields(section_class, section):
        problem = check_value(field, getattr(instance, field.name))
        if problem:
            raise ValueError(f"{problem}.")


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A hint naming the closest candidate, e.g. ``" (did you mean num_heads?)"``; ``""`` when none is close.

    Parameters
    ----------
    name : str
        The unknown name.
    candidates : Iterable[str]
        The known names.

    Returns
    -------
    str
        The hint, with a leading space, or an empty string.
    """
    closest = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {closest[0]}?)" if closest else ""


PAPER_FIGURES = ("dev_ppl", "dev_bleu", "params_millions", "test_bleu", "train_flops", "train_hours",
                 "num_gpus", "gpu_tflops")
"""Keys of ``config.paper``: the paper's figures for the config's row (``None`` where it has none)."""


def check_value(field: Field, value: Any) -> str | None:
    """Why ``value`` does not fit ``field``, or None when it does.

    Parameters
    ----------
    field : Field
        The declared field.
    value : Any
        The value a config gives it.

    Returns
    -------
    str or None
        E.g. ``"num_heads must be an integer; got '8' (str)"``.
    """
    if field.kind == "paper":
        return _check_paper(value)
    if field.kind == "entry_settings":
        return check_by_entry(field, value)
    if field.kind in ("int_tuple", "str_tuple"):
        if not isinstance(value, (tuple, list)):
            return f"{field.name} must be a tuple; got {value!r} ({type(value).__name__})"
        item_field = dataclasses.replace(field, kind=field.kind.split("_")[0])
        for item in value:
            problem = check_value(item_field, item)
            if problem:
                return f"{problem} (an item of {field.name}={tuple(value)!r})"
        return None
    problem = _check_type(field, value)
    if problem:
        return problem
    allowed = field.allowed()
    if allowed is not None and value not in allowed:
        return f"{field.name} must be one of {', '.join(allowed)}; got {value!r}{did_you_mean(str(value), allowed)}"
    if field.kind in ("int", "float") and not _in_range(field, value):
        return f"{field.name} must be {field.range_text()}; got {value!r}"
    return None


def _check_type(field: Field, value: Any) -> str | None:
    expected = {"int": "an integer", "float": "a number", "bool": "True or False", "str": "a string"}[field.kind]
    if field.kind == "bool":
        ok = isinstance(value, bool)
    elif field.kind == "int":
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif field.kind == "float":
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    else:
        ok = isinstance(value, str)
    return None if ok else f"{field.name} must be {expected}; got {value!r} ({type(value).__name__})"


def _in_range(field: Field, value: float) -> bool:
    if field.minimum is not None and (value < field.minimum or (field.exclusive_minimum and value == field.minimum)):
        return False
    if field.maximum is not None and (value > field.maximum or (field.exclusive_maximum and value == field.maximum)):
        return False
    return True


def _check_paper(value: Any) -> str | None:
    if value is None:
        return None
    if not hasattr(value, "items"):
        return f"paper must be a dict of the paper's figures; got {value!r}"
    for key, figure in value.items():
        if key not in PAPER_FIGURES:
            return (f"paper has no figure {key!r}{did_you_mean(key, PAPER_FIGURES)}; "
                    f"its keys: {', '.join(PAPER_FIGURES)}")
        if figure is not None and (isinstance(figure, bool) or not isinstance(figure, numbers.Real)):
            return f"paper.{key} must be a number or None; got {figure!r}"
    return None

SettingsClasses = Callable[[], Mapping[str, type]]
"""``() -> {entry name: settings dataclass}`` over a registry's entries that have settings (read when checked,
so entries registered by ``user_modules`` count)."""


@dataclasses.dataclass(frozen=True)
class EntrySettings:
    """Base of an entry's settings: a frozen dataclass whose fields are :func:`setting` declarations.

    Notes
    -----
    Building one checks every declared setting (``ValueError``, one line), so
    ``RelativeSettings(max_distance=0)`` is refused wherever it is built. Subclasses are frozen
    dataclasses (hashable: a Flax module may hold one as an attribute). What a changed setting means for
    a resumed run, and what an old run lacking it meant, are its registry's settings field's (``resume``,
    ``old_run_value`` of e.g. ``positional_encoding_settings``: another model; the defaults); a setting's
    own ``resume=``/``old_run_value=`` are not read.
    """

    def __post_init__(self) -> None:
        check_declared(self, "entry settings")


def settings_fields(settings_class: type) -> tuple[Field, ...]:
    """The declared settings of an entry's settings dataclass, in its order.

    Parameters
    ----------
    settings_class : type
        A frozen dataclass whose fields use :func:`attention_jax.foundation.field_declarations.setting`.

    Returns
    -------
    tuple[Field, ...]
        One :class:`Field` per setting (its ``name`` the setting's own, unqualified).
    """
    return declared_fields(settings_class, "entry settings")


def defaults(settings_class: type) -> dict[str, Any]:
    """``{setting: default}`` of one entry's settings dataclass.

    Parameters
    ----------
    settings_class : type
        An entry's settings dataclass.

    Returns
    -------
    dict[str, Any]
        Every declared setting at its default.
    """
    return {field.name: field.default for field in settings_fields(settings_class)}


def check_settings(prefix: str, settings_class: type, given: Any) -> str | None:
    """Why ``given`` is not a valid set of one entry's settings, or None when it is.

    Parameters
    ----------
    prefix : str
        How messages name the entry's settings, e.g. ``"positional_encoding_settings.relative"``.
    settings_class : type
        The entry's settings dataclass.
    given : Mapping
        ``{setting: value}``; settings it leaves out keep their defaults.

    Returns
    -------
    str or None
        E.g. ``"positional_encoding_settings.relative.max_distance must be >= 1; got 0"``.
    """
    if not hasattr(given, "items"):
        return f"{prefix} must be a dict of settings; got {given!r} ({type(given).__name__})"
    fields = {field.name: field for field in settings_fields(settings_class)}
    for key, value in given.items():
        field = fields.get(key)
        if field is None:
            return (f"{prefix} has no setting {key!r}{did_you_mean(str(key), fields)}; its settings: "
                    f"{', '.join(fields) or 'none'}")
        problem = check_value(dataclasses.replace(field, name=f"{prefix}.{key}"), value)
        if problem:
            return problem
    return None


def check_by_entry(field: Field, value: Any) -> str | None:
    """Why a registry's settings field ``{entry: {setting: value}}`` does not fit, or None when it does.

    Parameters
    ----------
    field : Field
        The settings field (kind ``"entry_settings"``; its ``settings_of`` lists the entries' classes).
    value : Any
        The config's value: a mapping by entry name. A built section's value (the chosen entry's settings
        dataclass, or None) was checked when it was built, and passes.

    Returns
    -------
    str or None
        E.g. ``"positional_encoding_settings has no entry 'relativ' (did you mean relative?); ..."``.
    """
    if value is None or dataclasses.is_dataclass(value):
        return None
    if not hasattr(value, "items"):
        return (f"{field.name} must be a dict of {{entry: {{setting: value}}}}; got {value!r} "
                f"({type(value).__name__})")
    assert field.settings_of is not None  # Every "entry_settings" field is declared with one.
    classes = field.settings_of()
    for entry, given in value.items():
        settings_class = classes.get(entry)
        if settings_class is None:
            return (f"{field.name} has no entry {entry!r}{did_you_mean(str(entry), classes)}; the "
                    f"{field.entry_field} entries with settings: {', '.join(classes) or 'none'}")
        problem = check_settings(f"{field.name}.{entry}", settings_class, given)
        if problem:
            return problem
    return None


def resolve(field_name: str, entry_name: str, settings_class: type | None, given: Any) -> Any:
    """The chosen entry's settings as its dataclass (None for an entry without settings).

    Parameters
    ----------
    field_name : str
        The settings field, named in errors (``"positional_encoding_settings"``).
    entry_name : str
        The chosen entry.
    settings_class : type or None
        Its settings dataclass (``entry.settings``).
    given : Any
        None (every setting at its default), the entry's settings dataclass, or a config's mapping by
        entry (``{"relative": {"max_distance": 8}}``: the chosen entry's item is read, the others are
        another entry's and left alone).

    Returns
    -------
    Any
        An instance of ``settings_class``, or None.

    Notes
    -----
    Raises ``ValueError`` (one line naming the fix) for a dataclass of another entry, a setting the entry
    does not declare or a value out of its range.
    """
    if hasattr(given, "items"):
        given = given.get(entry_name)
        if given is not None and settings_class is not None:
            problem = check_settings(f"{field_name}.{entry_name}", settings_class, given)
            if problem:
                raise ValueError(f"{problem}.")
            return settings_class(**dict(given))
    if settings_class is None:
        if given is not None:
            raise ValueError(f"{entry_name!r} takes no settings; got {field_name}={given!r}: leave it None.")
        return None
    if given is None:
        return settings_class()
    if type(given) is not settings_class:
        raise ValueError(f"{field_name} of {entry_name!r} must be a {settings_class.__name__}; got "
                         f"{type(given).__name__}.")
    return given


def recorded(entry_name: str, resolved: Any) -> dict[str, dict[str, Any]]:
    """What ``config.json`` records of a registry's settings field: the chosen entry's, every setting.

    Parameters
    ----------
    entry_name : str
        The chosen entry.
    resolved : Any
        Its settings dataclass (:func:`resolve`), or None.

    Returns
    -------
    dict
        ``{entry_name: {setting: value}}``, or ``{}`` for an entry without settings.
    """
    if resolved is None:
        return {}
    return {entry_name: {field.name: getattr(resolved, field.name) for field in settings_fields(type(resolved))}}
