"""A hand-written page's generated blocks: a section of a report, copied verbatim between two markers.

A page includes a section of a generated report as::

    <!-- generated from normalization/normalization_runs.md#at-a-glance -->
    ...
    <!-- end generated -->

(the path relative to the page, the anchor the section heading's GitHub slug). ``python -m attention_jax.report
ROOT --page=PAGE`` rewrites the blocks after writing the reports, and ``tests/docs/test_page_figures.py`` fails
where a committed page's block differs from its committed report.
"""

from __future__ import annotations

import dataclasses
import os
import re

from attention_jax.foundation.user_errors import UserInputError

_BLOCK = re.compile(r"(<!-- generated from (?P<source>[^#\s]+)#(?P<anchor>[\w-]+) -->\n)(?P<body>.*?)"
                    r"(<!-- end generated -->)", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class GeneratedBlock:
    """One block of a page.

    Attributes
    ----------
    source : str
        The report's path, relative to the page.
    anchor : str
        The slug of the report's section heading.
    body : str
        What the page holds between the markers.
    expected : str
        What the report's section holds now.
    """

    source: str
    anchor: str
    body: str
    expected: str


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _read(path: str, missing: str) -> str:
    """The text of ``path``; ``missing`` (the problem and its fix) as a UserInputError when it is not a file."""
    if not os.path.isfile(path):
        raise UserInputError(missing)
    with open(path, encoding="utf-8") as file:
        return file.read()


def _report_section(path: str, anchor: str) -> str:
    """The lines under the ``##`` heading of ``path`` whose slug is ``anchor``, up to the next ``##`` (trimmed)."""
    text = _read(path, f"{path} (a page's generated block) does not exist: run the report command on its root.")
    sections = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    for heading, body in zip(sections[1::2], sections[2::2]):
        if _slug(heading) == anchor:
            return body.strip("\n") + "\n"
    raise UserInputError(f"{path} has no section #{anchor} (a page's generated block): fix the block's marker.")


def generated_blocks(page: str) -> list[GeneratedBlock]:
    """Every generated block of a page, with what its report's section holds now.

    Parameters
    ----------
    page : str
        A Markdown page.

    Returns
    -------
    list[GeneratedBlock]
        In the page's order.

    Raises
    ------
    UserInputError
        When the page, a block's report or its section is missing.
    """
    return _blocks(_read(page, f"{page} does not exist."), os.path.dirname(page))


def _blocks(text: str, directory: str) -> list[GeneratedBlock]:
    """:func:`generated_blocks` of a page's ``text``, its reports' paths relative to ``directory``."""
    return [GeneratedBlock(match["source"], match["anchor"], match["body"],
                           _report_section(os.path.join(directory, match["source"]), match["anchor"]))
            for match in _BLOCK.finditer(text)]


def check_page(page: str) -> None:
    """Refuse a page that does not exist or has no generated block (before any report is written).

    Parameters
    ----------
    page : str
        The ``--page`` value.

    Raises
    ------
    UserInputError
        One line naming the problem and the fix.
    """
    if not _BLOCK.search(_read(page, f"--page={page} does not exist: pass a Markdown page with generated blocks.")):
        raise UserInputError(f"--page={page} has no generated block (`<!-- generated from REPORT#SECTION -->` "
                             "... `<!-- end generated -->`): add one, or leave out --page.")


def refresh_page(page: str) -> int:
    """Rewrite every generated block of ``page`` from its report's section.

    Parameters
    ----------
    page : str
        A Markdown page.

    Returns
    -------
    int
        How many blocks changed.

    Raises
    ------
    UserInputError
        When the page, a block's report or its section is missing, or the page has no block.
    """
    check_page(page)
    text = _read(page, f"--page={page} does not exist.")
    blocks = _blocks(text, os.path.dirname(page))
    expected = iter(block.expected for block in blocks)
    refreshed = _BLOCK.sub(lambda match: match.group(1) + next(expected) + match.group(5), text)
    with open(page, "w", encoding="utf-8") as file:
        file.write(refreshed)
    return sum(block.body != block.expected for block in blocks)
