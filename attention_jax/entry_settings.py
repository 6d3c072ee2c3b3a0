"""Settings a registry entry declares for itself: an attention function's, a positional encoding's, a norm's.

An entry of a registry (:mod:`attention_jax.models.attention_registry`,
:mod:`attention_jax.models.positional_encodings`, :mod:`attention_jax.models.normalization_registry`) may
name a frozen dataclass of its own settings (``settings=``); each setting is declared once with
:func:`attention_jax.field_declarations.setting`, as a section's config fields are (type, default, range
or choices, meaning)::

    @dataclasses.dataclass(frozen=True)
    class RelativeSettings(EntrySettings):
        max_distance: int = setting(16, "Offsets clipped to [-k, k].", minimum=1)

A config holds them in the registry's settings field (``positional_encoding_settings`` beside
``positional_encoding``), by entry: ``{"relative": {"max_distance": 8}}``, so a flag reads
``--config.positional_encoding_settings.relative.max_distance=8`` and a row that changes the encoding
leaves the other entries' settings alone. The schema checks every entry's settings
(:func:`check_by_entry`: an unknown entry or setting with a did-you-mean, a value out of range, one line);
the section gets the chosen entry's settings as its dataclass (:func:`resolve`), and a run's
``config.json`` records the chosen entry's, every setting written out (:func:`recorded`).

Like :mod:`attention_jax.field_declarations`, this module imports nothing else of the library.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from attention_jax.field_declarations import Field, check_declared, check_value, declared_fields, did_you_mean

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
        A frozen dataclass whose fields use :func:`attention_jax.field_declarations.setting`.

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
