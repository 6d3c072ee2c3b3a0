"""Every ± in the README, docs (generated reports included) and notebooks is one standard error of the mean,
declared on its page near the first ± with the number of seeds."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from tests.support import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md")),
         *sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))]
NEAR = 700  # Characters either side of a page's first ±.
DECLARED = re.compile(r"standard error|\bSE\b")
COUNTED = re.compile(r"n = \d|\bseeds?\b")
OTHER_SPREAD = re.compile(r"±[^.|\n]{0,30}(standard deviation|\bstd\b|\bSD\b)|(standard deviation|\bstd\b)[^.|\n]{0,5}±")


def _text(page: pathlib.Path) -> str:
    """The page as read: a notebook's cells and their printed outputs."""
    if page.suffix != ".ipynb":
        return page.read_text(encoding="utf-8")
    parts = []
    for cell in json.loads(page.read_text(encoding="utf-8"))["cells"]:
        parts.append("".join(cell["source"]))
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def undeclared_plus_minus(text: str) -> str | None:
    """Why ``text`` breaks the convention, or None: its first ± has no declaration near it, or a ± is an SD."""
    first = text.find(" ± ")  # A spread, not a range such as "±1 token".
    if first < 0:
        return None
    near = text[max(0, first - NEAR):first + NEAR]
    if not DECLARED.search(near) or not COUNTED.search(near):
        return f"no 'standard error' and seed count (n) within {NEAR} characters of the first ±: {near[NEAR - 80:NEAR + 80]!r}"
    other = OTHER_SPREAD.search(text)
    return f"a ± that is not a standard error: {other.group(0)!r}" if other else None


def test_the_check_catches_an_undeclared_or_other_spread() -> None:
    assert undeclared_plus_minus("dev PPL 7.41 ± 0.08") is not None
    assert undeclared_plus_minus("7.41 ± 0.08 (mean ± one standard deviation over 3 seeds)") is not None
    assert undeclared_plus_minus("Every ± is one standard error over n = 3 seeds. 7.41 ± 0.05") is None
    assert undeclared_plus_minus("no spread here") is None


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO_ROOT)))
def test_every_plus_minus_is_a_declared_standard_error(page: pathlib.Path) -> None:
    problem = undeclared_plus_minus(_text(page))
    assert problem is None, f"{page.relative_to(REPO_ROOT)}: {problem}"
