"""A registry of named variants of one mechanism: the attention functions, the positional encodings.

Code asks an entry, never compares names. Imports no framework.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

Entry = TypeVar("Entry")


class Registry(Mapping[str, Entry], Generic[Entry]):
    """Entries by name, in registration order.

    Parameters
    ----------
    field : str
        The config field the names are values of (error messages name it).
    entries : iterable
        The built-in entries; each has a ``name`` attribute.

    Notes
    -----
    Iterating gives the names, so ``tuple(registry)`` is the tuple of allowed values and ``name in
    registry`` is validation's membership test.
    """

    def __init__(self, field: str, entries: Iterable[Entry]) -> None:
        self.field = field
        self._entries: dict[str, Entry] = {}
        for entry in entries:
            self.register(entry)

    def __getitem__(self, name: str) -> Entry:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.field!r}, {tuple(self._entries)})"

    def lookup(self, name: Any) -> Entry:
        """Return the entry of ``name``.

        Parameters
        ----------
        name : str
            A config value.

        Returns
        -------
        Entry
            Its entry.

        Raises
        ------
        ValueError
            One line with a did-you-mean, for an unknown name.
        """
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:
            names = tuple(self._entries)
            close = difflib.get_close_matches(str(name), names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{self.field} must be one of {names}; got {name!r}.{hint}")
        return entry

    def settings_classes(self) -> dict[str, type]:
        """``{name: settings dataclass}`` of the entries that declare settings (``entry.settings``).

        Returns
        -------
        dict[str, type]
            In registration order; entries whose ``settings`` is None are left out
            (:mod:`attention_jax.experiment.fields`).
        """
        return {name: entry.settings for name, entry in self._entries.items()  # type: ignore[attr-defined]
                if getattr(entry, "settings", None) is not None}

    def register(self, entry: Entry) -> "Registration":
        """Add ``entry`` under ``entry.name`` (which must be new).

        Parameters
        ----------
        entry : Entry
            The new variant.

        Returns
        -------
        Registration
            ``.undo()`` removes the entry; ``with registry.register(entry): ...`` keeps it for the block.

        Raises
        ------
        ValueError
            If the name is registered already.
        """
        name = entry.name  # type: ignore[attr-defined]
        if name in self._entries:
            raise ValueError(f"{self.field} {name!r} is registered already; undo its registration first.")
        self._entries[name] = entry
        return Registration(self, entry)

    def _remove(self, entry: Entry) -> None:
        name = entry.name  # type: ignore[attr-defined]
        if self._entries.get(name) is entry:
            del self._entries[name]


@dataclasses.dataclass
class Registration:
    """An entry added to a :class:`Registry`; :meth:`undo` (or leaving its ``with`` block) removes it.

    Attributes
    ----------
    registry : Registry
        Where it was added.
    entry : object
        What was added.
    """

    registry: Registry
    entry: Any

    def undo(self) -> None:
        """Remove the entry (nothing if it is gone already)."""
        self.registry._remove(self.entry)

    def __enter__(self) -> Any:
        return self.entry

    def __exit__(self, *exc_info: object) -> None:
        self.undo()


def jax_hook(module: str, function: str) -> Callable[..., Any]:
    """A built-in entry's JAX code, named: calls ``attention_jax.models.<module>.<function>``, imported on first call.

    Parameters
    ----------
    module, function : str
        The JAX module under ``attention_jax/models/`` and the function in it.

    Returns
    -------
    callable
        The hook, named ``function``.

    Notes
    -----
    Naming the JAX code instead of importing it keeps config checks framework-free and avoids import cycles.
    """
    def _hook(*arguments: Any, **keywords: Any) -> Any:
        return getattr(importlib.import_module(f"attention_jax.models.{module}"), function)(*arguments, **keywords)

    _hook.__name__ = _hook.__qualname__ = function
    return _hook
