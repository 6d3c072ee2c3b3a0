"""The one Markdown table writer, CSV writer and figure title every report uses."""

from __future__ import annotations

import csv
import os
import textwrap
from typing import Any, Iterable, Mapping, Sequence


def format_figure(value: float | None, spread: float | None, digits: int, *, percent: bool = False,
                  sign: bool = False) -> str:
    """Return a table cell such as ``"+8.9 ± 0.9%"`` or ``"7.24 ± 0.11"``; ``""`` for no value.

    Parameters
    ----------
    value : float or None
        The figure (a fraction when ``percent``).
    spread : float or None
        Its standard error, shown after ``±`` when given.
    digits : int
        Digits after the point.
    percent : bool
        Show ``value`` and ``spread`` times 100 with a ``%``.
    sign : bool
        Always show the sign.

    Returns
    -------
    str
        The cell.
    """
    if value is None:
        return ""
    scale, suffix = (100.0, "%") if percent else (1.0, "")
    text = f"{value * scale:{'+' if sign else ''}.{digits}f}"
    return text + (f" ± {spread * scale:.{digits}f}" if spread is not None else "") + suffix


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: Sequence[str] = ()) -> list[str]:
    """Return the lines of a Markdown table.

    Parameters
    ----------
    header : Sequence[str]
        Column titles.
    rows : Iterable[Sequence]
        One sequence of cells per line (formatted with ``str``).
    align : Sequence[str]
        Each column's rule (``"---:"`` right-aligns); ``"---"`` for every column by default.

    Returns
    -------
    list[str]
        The header, the rule and one line per row.
    """
    rule = "|" + "|".join(align or ["---"] * len(header)) + "|"
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(map(str, row)) + " |" for row in rows)]


def _write_text(path: str, text: str) -> str:
    """Write ``text`` to ``path`` (UTF-8) and return ``path``."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
    return path


def _write_csv(path: str, fields: Sequence[str], records: Iterable[Mapping[str, Any]]) -> str:
    """Write records as CSV with a header line."""
    with open(path, "w", encoding="utf-8", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fields)
        writer.writeheader()
        writer.writerows(records)
    return path


def write_report_files(stem: str, markdown: str, fields: Sequence[str],
                       records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Write ``STEM.md`` and ``STEM.csv`` (creating the directory) and return both paths.

    Parameters
    ----------
    stem : str
        The path without its suffix.
    markdown : str
        The Markdown text.
    fields : Sequence[str]
        The CSV's columns.
    records : Iterable[Mapping]
        The CSV's lines.

    Returns
    -------
    list[str]
        The two paths.
    """
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    return [_write_text(stem + ".md", markdown), _write_csv(stem + ".csv", fields, records)]


def fit_title(figure: Any, title: str, fontsize: float = 10.0) -> None:
    """Set a figure's title, wrapped so that a long sweep root is not clipped.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure; its width sets the line length (a character is about 0.6 of the font size wide).
    title : str
        The title; a path in it breaks at its slashes.
    fontsize : float
        Font size in points.
    """
    width_in_characters = max(20, int(0.9 * figure.get_figwidth() * 72 / (0.6 * fontsize)))
    spaced = title.replace("/", "/\u200b")  # A zero-width space after each slash: a place to break.
    lines = textwrap.wrap(spaced, width=width_in_characters, break_long_words=True)
    figure.suptitle("\n".join(line.replace("\u200b", "") for line in lines), fontsize=fontsize)
