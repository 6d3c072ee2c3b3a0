"""Config fields, ``name: Annotated[type, ResumeRule, ...] = Field(default=..., description=...)`` on a section."""

from __future__ import annotations

import dataclasses
import enum
import functools
import numbers
import typing
from typing import Annotated, Any, Callable, Iterable, Mapping, TypeVar

import annotated_types
import pydantic
from pydantic import TypeAdapter, ValidationError
from pydantic_core import core_schema
from typing_extensions import dataclass_transform

from attention_jax.foundation.registry import Registry, did_you_mean

_STRICT = pydantic.ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")  # No "8" for 8, 1 for True, inf.
_T = TypeVar("_T")
ResumeRule = enum.Enum("ResumeRule", "FREE MODEL COMPUTE DATA SEED OPTIMIZER_STATE SCHEDULE POSITIONS")
"""What a changed value means when a run directory resumes (docs/config_fields.md words each)."""


@dataclasses.dataclass(frozen=True)
class OldRuns:
    """``Annotated[..., OldRuns(value)]``: what a ``config.json`` written before the field existed meant by it."""

    value: Any


@dataclasses.dataclass(frozen=True, eq=False)
class OneOf:
    """A field's allowed strings, ``Annotated[str, OneOf(names)]``: a tuple, or a registry read when checked."""

    names: Iterable[str]

    def __get_pydantic_core_schema__(self, source: Any, handler: Callable[[Any], Any]) -> Any:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: str) -> str:
        allowed = tuple(self.names)
        if value not in allowed:
            error = ValueError(f"must be one of {', '.join(allowed)}; got {value!r}{did_you_mean(str(value), allowed)}")
            error.registry = self.names  # type: ignore[attr-defined]  # A section built directly: its own words.
            raise error
        return value


@dataclasses.dataclass(frozen=True, eq=False)
class BySettings:
    """A registry's settings field, ``{entry: {setting: value}}``: ``Annotated[Any, BySettings(registry)]``."""

    registry: Registry[Any]  # Its ``field`` names the entry field; ``settings_classes()`` the entries' settings.


PAPER_FIGURES = ("dev_ppl", "dev_bleu", "params_millions", "test_bleu", "train_flops", "train_hours",
                 "num_gpus", "gpu_tflops")
"""Keys of ``config.paper``: the paper's figures for the config's row."""


def _paper(value: Any) -> Any:
    if value is not None and not hasattr(value, "items"):
        raise ValueError(f"paper must be a dict of the paper's figures; got {value!r}")
    for key, figure in (value or {}).items():
        if key not in PAPER_FIGURES:
            raise ValueError(f"paper has no figure {key!r}{did_you_mean(key, PAPER_FIGURES)}; "
                             f"its keys: {', '.join(PAPER_FIGURES)}")
        if figure is not None and (isinstance(figure, bool) or not isinstance(figure, numbers.Real)):
            raise ValueError(f"paper.{key} must be a number or None; got {figure!r}")
    return value


Paper = Annotated[Any, pydantic.AfterValidator(_paper)]
"""The annotation of ``paper``: ``None`` or ``{figure: number or None}``."""
AS_TUPLE = pydantic.BeforeValidator(lambda value: tuple(value) if isinstance(value, list) else value)
"""A tuple field's metadata: a list (``config.json``'s) is taken for a tuple."""


@dataclasses.dataclass(frozen=True)
class Record:
    """One config field as ``owner.attribute`` declares it."""

    name: str
    section: str
    kind: str  # int, float, bool, str, int_tuple, str_tuple, paper or entry_settings.
    default: Any
    doc: str
    choices: Iterable[str] | None  # The allowed strings: a tuple, or a registry (read when used); None: any.
    range_text: str  # "positive", ">= 0", "in [0, 100]" (of each item of a tuple); "" when unbounded.
    resume: ResumeRule
    old_run_value: Any  # dataclasses.MISSING for a field every config.json holds.
    by_entry: BySettings | None
    owner: type
    attribute: str


def _number(value: Any) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _of(metadata: Iterable[Any], *kinds: type) -> Any:
    return next((item for item in metadata if isinstance(item, kinds)), None)


_SIGNS = {annotated_types.Gt: ">", annotated_types.Ge: ">=", annotated_types.Lt: "<", annotated_types.Le: "<="}


def _range_text(metadata: list[Any]) -> str:
    bounds = sorted(((_SIGNS[type(item)], _number(dataclasses.astuple(item)[0])) for item in metadata
                     if type(item) in _SIGNS), reverse=True)  # The lower bound (> or >=) first.
    if bounds == [(">=", "0"), ("<", "1")]:
        return "a probability in [0, 1)"
    if bounds == [(">", "0")]:
        return "positive"
    if len(bounds) == 2:
        (low_sign, low), (high_sign, high) = bounds
        return f"in {'(' if low_sign == '>' else '['}{low}, {high}{')' if high_sign == '<' else ']'}"
    return " ".join(bounds[0]) if bounds else ""


@functools.cache
def _records(section_class: type, section: str) -> tuple[Record, ...]:
    """The config fields (those with a description) a section declares; TypeError for one a config cannot hold."""
    found = []
    for name, info in section_class.__pydantic_fields__.items():  # type: ignore[attr-defined]
        if info.description is None:
            continue
        metadata, annotation = list(info.metadata), info.annotation
        kind = {int: "int", float: "float", bool: "bool", str: "str"}.get(annotation)
        if typing.get_origin(annotation) is tuple:
            item = typing.get_args(annotation)[0]
            metadata = list(getattr(item, "__metadata__", ()))
            kind = {int: "int_tuple", str: "str_tuple"}.get(getattr(item, "__origin__", item))
        elif annotation is Any:
            kind = "entry_settings" if _of(metadata, BySettings) else "paper"
        if kind is None:
            raise TypeError(f"{section_class.__name__}.{name}: a config field is an int, float, bool, str, "
                            f"tuple[int, ...] or tuple[str, ...]; got {annotation}.")
        resume, old = _of(info.metadata, ResumeRule) or ResumeRule.FREE, _of(info.metadata, OldRuns)
        found.append(Record(name, section, kind, info.default, info.description,
                            getattr(_of(metadata, OneOf), "names", None), _range_text(metadata), resume,
                            old.value if old else dataclasses.MISSING, _of(metadata, BySettings), section_class, name))
    return tuple(found)


@functools.cache
def _adapter(owner: type, attribute: str) -> TypeAdapter[Any]:
    info = owner.__pydantic_fields__[attribute]  # type: ignore[attr-defined]
    return TypeAdapter(Annotated[info.annotation, info], config=_STRICT)  # type: ignore[arg-type]


_EXPECTED = {"int_type": "an integer", "float_type": "a number", "finite_number": "a number",
             "bool_type": "True or False", "string_type": "a string", "tuple_type": "a tuple"}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def _refusal(error: ValidationError, owner: type, given: Mapping[str, Any] | None = None, prefix: str = "",
             at: tuple[str, ...] = ()) -> str:
    """Word pydantic's first error in one line; ``at``: the attribute a one-field check refused."""
    first = error.errors(include_url=False)[0]
    loc, kind, value = (*at, *first["loc"]), first["type"], first["input"]
    if not loc:  # A check of several fields (__post_init__): its own words.
        return str(first.get("ctx", {}).get("error", first["msg"]))
    attribute = str(loc[0])
    name = f"{prefix}.{attribute}" if prefix else attribute
    declared = {record.attribute: record for record in _records(owner, "")}
    if kind == "unexpected_keyword_argument":
        return f"{owner.__name__} has no field {attribute!r}{did_you_mean(attribute, declared)}."
    if kind in ("value_error", "assertion_error"):
        cause = first["ctx"]["error"]
        registry = getattr(cause, "registry", None)
        if not at and hasattr(registry, "lookup"):
            try:
                registry.lookup(value)  # type: ignore[union-attr]
            except ValueError as unknown:
                return str(unknown)
        problem = str(cause) if str(cause).startswith(attribute) else f"{name} {cause}"
    elif kind in _BOUNDS:
        words = (declared[attribute].range_text if attribute in declared else
                 f"{_BOUNDS[kind]} {_number(next(iter(first['ctx'].values())))}")
        problem = f"{name} must be {words}; got {value!r}"
    elif kind == "missing_argument":
        problem = f"{name} is required"
    else:
        expected = _EXPECTED.get(kind)
        problem = (f"{name} must be {expected}; got {value!r} ({type(value).__name__})" if expected else
                   f"{name}: {first['msg']}; got {value!r}")
    whole = (given or {}).get(attribute)
    if len(loc) > 1 and isinstance(whole, (tuple, list)):
        problem += f" (an item of {name}={tuple(whole)!r})"
    return f"{problem}."


def _check_value(record: Record, value: Any) -> str | None:
    """Why ``value`` does not fit the field, in one line without the final period (None when it does)."""
    if record.by_entry is None:
        try:
            _adapter(record.owner, record.attribute).validate_python(value)
        except ValidationError as error:
            return _refusal(error, record.owner, {record.attribute: value}, record.name.rpartition(".")[0],
                            (record.attribute,))[:-1]
        return None
    if value is None or dataclasses.is_dataclass(value):
        return None
    if not hasattr(value, "items"):
        return (f"{record.name} must be a dict of {{entry: {{setting: value}}}}; got {value!r} "
                f"({type(value).__name__})")
    classes = record.by_entry.registry.settings_classes()
    for entry, given in value.items():
        if entry not in classes:
            return (f"{record.name} has no entry {entry!r}{did_you_mean(str(entry), classes)}; the "
                    f"{record.by_entry.registry.field} entries with settings: {', '.join(classes) or 'none'}")
        try:
            _build_settings(f"{record.name}.{entry}", classes[entry], given)
        except ValueError as error:
            return str(error)[:-1]
    return None


def _build_settings(prefix: str, settings_class: Any, given: Any) -> Any:
    if not hasattr(given, "items"):
        raise ValueError(f"{prefix} must be a dict of settings; got {given!r} ({type(given).__name__}).")
    declared = {record.attribute: record for record in _records(settings_class, "")}
    for key, value in given.items():
        if key not in declared:
            raise ValueError(f"{prefix} has no setting {key!r}{did_you_mean(str(key), declared)}; its settings: "
                             f"{', '.join(declared) or 'none'}.")
        problem = _check_value(dataclasses.replace(declared[key], name=f"{prefix}.{key}"), value)
        if problem:
            raise ValueError(f"{problem}.")
    try:
        return settings_class(**dict(given))
    except ValidationError as error:
        raise ValueError(_refusal(error, settings_class, given, prefix)) from None


def _resolve_settings(field: str, entry: str, settings_class: type | None, given: Any) -> Any:
    if hasattr(given, "items"):
        given = given.get(entry)
        if given is not None and settings_class is not None:
            return _build_settings(f"{field}.{entry}", settings_class, given)
    if settings_class is None and given is not None:
        raise ValueError(f"{entry!r} takes no settings; got {field}={given!r}: leave it None.")
    if settings_class is None or given is None:
        return settings_class() if settings_class else None
    if type(given) is not settings_class:
        raise ValueError(f"{field} of {entry!r} must be a {settings_class.__name__}; got {type(given).__name__}.")
    return given


@dataclass_transform(frozen_default=True, field_specifiers=(pydantic.Field,))
def section(cls: type[_T]) -> type[_T]:
    """Make ``cls`` a frozen, strict pydantic dataclass whose refusals are one-line ``ValueError``.

    Parameters
    ----------
    cls : type
        The section's class body.

    Returns
    -------
    type
        The dataclass (``dataclasses.replace`` builds, and checks, a changed copy).
    """
    built = pydantic.dataclasses.dataclass(frozen=True, config=_STRICT)(cls)
    init = built.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except ValidationError as error:
            raise ValueError(_refusal(error, built, kwargs)) from None
        for name, info in built.__pydantic_fields__.items():
            by_entry = _of(info.metadata, BySettings)
            if by_entry is not None:  # After the checks, the chosen entry's settings (None: it has none).
                entry = getattr(self, by_entry.registry.field)
                object.__setattr__(self, name, _resolve_settings(name, entry, by_entry.registry.settings_classes()
                                                                 .get(entry), getattr(self, name)))

    setattr(built, "__init__", __init__)  # noqa: B010 (mypy refuses assigning a method)
    return typing.cast(type[_T], built)
