"""Figure titles that fit: a report's title names its sweep root, and a long root must not be clipped."""

from __future__ import annotations

import textwrap
from typing import Any


def fit_title(figure: Any, title: str, fontsize: float = 10.0) -> None:
    """Set ``title`` as the figure's title, wrapped onto as many lines as the figure's width needs.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure (its width in inches sets the line length).
    title : str
        The title; a path in it is broken at its slashes when a line would overflow.
    fontsize : float
        Font size in points.

    Notes
    -----
    A character of the default sans-serif font is about 0.6 of the font size wide; lines are kept to
    90% of the figure's width in such characters.
    """
    width_in_characters = max(20, int(0.9 * figure.get_figwidth() * 72 / (0.6 * fontsize)))
    spaced = title.replace("/", "/\u200b")  # A zero-width space after each slash: a place to break.
    lines = textwrap.wrap(spaced, width=width_in_characters, break_long_words=True)
    figure.suptitle("\n".join(line.replace("\u200b", "") for line in lines), fontsize=fontsize)
