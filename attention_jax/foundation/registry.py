"""A registry of named variants of one mechanism (code asks an entry, never compares names); near-miss names."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

Entry = TypeVar("Entry")


class Registry(Mapping[str, Entry], Generic[Entry]):
    """Entries by name, in registration order; iterating gives the allowed names.

    Parameters
    ----------
    field : str
        The config field the names are values of.
    entries : iterable
        Built-in entries, each with a ``name``.
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
            Unknown name (one line, with a did-you-mean).
        """
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:
            names = tuple(self._entries)
            close = difflib.get_close_matches(str(name), names, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{self.field} must be one of {names}; got {name!r}.{hint}")
        return entry

    def settings_classes(self) -> dict[str, type]:
        """Return ``{name: settings dataclass}`` of the entries that declare settings.

        Returns
        -------
        dict[str, type]
            In registration order.
        """
        return {name: entry.settings for name, entry in self._entries.items()  # type: ignore[attr-defined]
                if getattr(entry, "settings", None) is not None}

    def register(self, entry: Entry) -> "Registration":
        """Add ``entry`` under its new ``entry.name``.

        Parameters
        ----------
        entry : Entry
            The new variant.

        Returns
        -------
        Registration
            ``.undo()`` removes it; usable as a context manager.

        Raises
        ------
        ValueError
            The name is registered already.
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
    """An entry added to a :class:`Registry`; :meth:`undo` or leaving its ``with`` block removes it."""

    registry: Registry
    entry: Any

    def undo(self) -> None:
        """Remove the entry (nothing if it is gone already)."""
        self.registry._remove(self.entry)

    def __enter__(self) -> Any:
        return self.entry

    def __exit__(self, *exc_info: object) -> None:
        self.undo()


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return ``" (did you mean X?)"`` for the closest candidate, ``""`` when none is close.

    Parameters
    ----------
    name : str
        The unknown name.
    candidates : Iterable[str]
        The known names.

    Returns
    -------
    str
        The hint, with a leading space.
    """
    closest = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {closest[0]}?)" if closest else ""
