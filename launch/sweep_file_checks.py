"""What a sweep file's ``get_sweep()`` and ``get_seeds()`` return, checked before a row is built or run.

A sweep file is Python the user wrote, so its return values can be anything: a list of rows instead of a
``{row name: overrides}`` dict, a row that is a number, two row names that are the same directory name
(``1`` and ``"1"``), or an override value that cannot be written as the ``--config.key=value`` flag the
trainer reads. Each is a :class:`ValueError` of one line naming the file, the row and the fix, which
``launch.sweep`` prints with exit status 2 before anything is written (:mod:`launch.sweep_spec`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from attention_jax.experiment import schema

ROW_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
"""A row name is a directory name: letters, digits, '_', '.', '-', not starting with a dot or dash."""

MAX_SEEDS = 1000
"""Seeds per row a sweep may ask for (``--seeds=10**12`` would build a trillion jobs before running any)."""

MAX_SEED = 2**32 - 1
"""The largest seed: ``config.seed``'s range in the schema (JAX keys keep 32 bits)."""

_SHAPE_HINT = "get_sweep() returns {row name: {field: value, ...}, ...}, e.g. {'A1': {'num_heads': 1}}"


def checked_rows(config_file: str, returned: Any) -> dict[str, dict[str, Any]]:
    """The rows a sweep file's ``get_sweep()`` returned, checked and keyed by their directory names.

    Parameters
    ----------
    config_file : str
        The sweep file, named first in an error.
    returned : Any
        What ``get_sweep()`` returned.

    Returns
    -------
    dict[str, dict[str, Any]]
        Row name (as a string) -> the row's overrides, in the sweep's order.

    Notes
    -----
    Raises ``ValueError`` in one line for a return value that is not a mapping, a row that is not a
    mapping of field names, no rows, a row name that cannot be a directory name, or two row names that
    are the same string (``{1: ..., "1": ...}``: both would run in ``<root>/1``, one of them silently
    dropped).
    """
    if not isinstance(returned, Mapping):
        raise ValueError(f"{config_file}: get_sweep() returned a {type(returned).__name__}, not a dict; "
                         f"{_SHAPE_HINT}.")
    rows: dict[str, dict[str, Any]] = {}
    first_name_of: dict[str, Any] = {}
    for name, overrides in returned.items():
        row = str(name)
        if row in first_name_of:
            raise ValueError(f"{config_file}: get_sweep() has two rows named {row!r} ({first_name_of[row]!r} "
                             f"and {name!r}); row names are directory names, so give each row its own.")
        first_name_of[row] = name
        if not isinstance(overrides, Mapping):
            raise ValueError(f"{config_file}: row {row}'s overrides are a {type(overrides).__name__} "
                             f"({overrides!r}), not a dict of fields; {_SHAPE_HINT}.")
        bad_keys = [key for key in overrides if not isinstance(key, str)]
        if bad_keys:
            raise ValueError(f"{config_file}: row {row} has override keys {bad_keys!r} that are not field "
                             "names (strings).")
        rows[row] = dict(overrides)
    if not rows:
        raise ValueError(f"{config_file}: get_sweep() returned no rows.")
    bad = [name for name in rows if not ROW_NAME_PATTERN.match(name)]
    if bad:
        raise ValueError(
            f"{config_file}: row names {bad} cannot be directory names; use letters, digits, '_', '.', '-'."
        )
    return rows


def seeds_as_list(config_file: str, returned: Any) -> list[Any]:
    """What a sweep file's ``get_seeds()`` returned, as a list for :func:`launch.sweep_spec.check_seeds`.

    Parameters
    ----------
    config_file : str
        The sweep file, named first in an error.
    returned : Any
        What ``get_seeds()`` returned.

    Returns
    -------
    list
        Its items, in order (checked to be integers >= 0 without repeats by ``check_seeds``).

    Notes
    -----
    Raises ``ValueError`` for a value that is not a list or tuple (a bare ``3``, a string, a dict).
    """
    if not isinstance(returned, (list, tuple, range)):
        raise ValueError(f"{config_file}: get_seeds() returned a {type(returned).__name__} ({returned!r}); "
                         "return a list of seeds, e.g. [0, 1, 2].")
    return list(returned)


def flag_text(value: Any) -> str:
    """An override's value as the text of a ``--config.key=<text>`` flag that reads back as ``value``.

    Parameters
    ----------
    value : Any
        A row's override value: a number, a string, a bool, None, or a tuple or list of those.

    Returns
    -------
    str
        A string as itself (a string field takes its flag's text as written); a tuple or list as a
        Python literal, its strings quoted (``('test',)``): ``ml_collections`` reads ``(test,)`` as the
        one string ``'(test,)'``; anything else as ``str(value)``.
    """
    if isinstance(value, (tuple, list)):
        items = [repr(item) if isinstance(item, str) else flag_text(item) for item in value]
        return "(" + ",".join(items) + ("," if len(items) == 1 else "") + ")"
    return str(value)


def check_flags_read_back(config_file: str, row_overrides: Mapping[str, Mapping[str, Any]]) -> None:
    """Check that every row override, written as its flag, reads back as the value the dry run checked.

    Parameters
    ----------
    config_file : str
        The sweep file, named first in an error.
    row_overrides : Mapping[str, Mapping[str, Any]]
        Row name -> overrides, of a sweep whose rows are passed to the trainer as flags.

    Notes
    -----
    The dry run checks a row's config with its overrides applied as Python values; the trainer reads
    the same overrides from the command line :func:`flag_text` writes. Each flag is parsed back the
    way the trainer's flags parse it (:func:`schema.parse_flag_value`), and a value that does not come
    back equal (a string holding a newline, a nested tuple, an object) is a ``ValueError`` naming the
    row and the field, so the check and the command can never disagree.
    """
    for row, overrides in row_overrides.items():
        for key, value in overrides.items():
            if key not in schema.FIELDS_BY_NAME:
                continue  # Unknown keys are refused with a did-you-mean when the row is built.
            text = flag_text(value)
            where = f"{config_file} row {row}"
            try:
                read_back = schema.parse_flag_value(key, text, where)
            except schema.ConfigError:
                read_back = _UNREADABLE
            expected = tuple(value) if isinstance(value, list) else value
            if "\n" in text or read_back != expected or type(read_back) is not type(expected):
                raise ValueError(f"{where}: {key}={value!r} cannot be passed to the trainer as a flag "
                                 f"(--config.{key}={text} reads back as {read_back!r}); give a plain "
                                 f"number, string, bool, None or tuple of those.")


_UNREADABLE = object()


def refuse_flags_over_none(config: Any, keys: Any, where: str) -> None:
    """Refuse ``--config.<key>`` flags the trainer cannot apply: the row's config sets the field to None.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        A row's config, built as the trainer builds it before its flags apply.
    keys : Iterable[str]
        The fields that reach the trainer as flags (``paper.dev_ppl`` dotted).
    where : str
        Named first in the error.

    Notes
    -----
    ``ml_collections`` infers a flag's type from the config's value and refuses to override a ``None``
    (``configs/tiny.py``'s ``paper.dev_ppl``); the dry run, which applies values directly, would accept
    what the trainer then refuses. Raises :class:`schema.ConfigError` naming the field.
    """
    for key in keys:
        found, value = _value_at(config, key)
        if found and value is None:
            raise schema.ConfigError(f"{where}: --config.{key}: the row's config sets {key} to None, and "
                                     f"ml_collections cannot infer a flag's type from None: set {key} in the "
                                     f"config file (or the row) instead of as a flag.")


def _value_at(config: Any, key: str) -> tuple[bool, Any]:
    """Whether the dotted ``key`` names a field of ``config``, and its value (a missing field is another error)."""
    value = config
    for part in key.split("."):
        if not hasattr(value, "keys") or part not in value.keys():
            return False, None
        value = value[part]
    return True, value
