"""The documentation points at things that exist: README.md and every docs/*.md page.

Checks, with no training and no network: every relative Markdown link (and image) resolves to a file or
directory of the repository, and an ``#anchor`` into a Markdown page names one of its headings; every
``python -m MODULE`` a page runs can be found by :func:`importlib.util.find_spec` from the repository
root; every ``python path/to/script.py`` names a file that exists; every docs page is linked from the
README; the README stays short.

Notes
-----
Stale docs are bugs: a module moved, a page renamed or a results directory dropped fails here with the
page and the target it names. Modules are found, not imported, so the check is fast and does not depend
on a GPU or on data being present.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
from collections import Counter

import pytest

from tests.support import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS_PAGES = sorted((REPO_ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS_PAGES]
MAX_README_LINES = 260

_FENCED_BLOCK = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`]+`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A dotted module name; a placeholder (`python -m attention_jax.<command>`, `attention_jax.X`) is not one.
_MODULE = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?![\w<]|\.[\w<])")
_SCRIPT = re.compile(r"\bpython3?\s+((?:[\w.-]+/)*[\w.-]+\.py)\b")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_EXTERNAL = ("http://", "https://", "mailto:")


def _page_id(page: pathlib.Path) -> str:
    """The page's path relative to the repository root, as a test id.

    Parameters
    ----------
    page : pathlib.Path
        A Markdown file of the repository.

    Returns
    -------
    str
        For example ``README.md`` or ``docs/clusters.md``.
    """
    return page.relative_to(REPO_ROOT).as_posix()


def _prose(text: str) -> str:
    """The Markdown text without fenced code blocks and inline code spans, where links are not links.

    Parameters
    ----------
    text : str
        A Markdown page.

    Returns
    -------
    str
        The text with every fenced block and every inline code span removed.
    """
    return _INLINE_CODE.sub("", _FENCED_BLOCK.sub("", text))


def relative_links(text: str) -> list[str]:
    """Targets of the Markdown links and images that point inside the repository.

    Parameters
    ----------
    text : str
        A Markdown page.

    Returns
    -------
    list[str]
        Each target as written (``../configs/base.py``, ``clusters.md#seeds``), in order; external
        (``http(s):``, ``mailto:``) links are left out.
    """
    return [target for target in _LINK.findall(_prose(text)) if not target.startswith(_EXTERNAL)]


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings.

    Parameters
    ----------
    text : str
        A Markdown page.

    Returns
    -------
    set[str]
        Each heading lower-cased, with its punctuation dropped and its spaces made hyphens; a repeated
        heading gets ``-1``, ``-2``, ... as on GitHub.

    Notes
    -----
    Headings inside fenced code blocks (shell comments) are not headings and are skipped.
    """
    anchors: set[str] = set()
    seen: Counter[str] = Counter()
    for heading in _HEADING.findall(_FENCED_BLOCK.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(slug if seen[slug] == 0 else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return anchors


def python_m_modules(text: str) -> list[str]:
    """The modules that the page's commands run with ``python -m``.

    Parameters
    ----------
    text : str
        A Markdown page (commands in code blocks, inline code or prose alike).

    Returns
    -------
    list[str]
        Dotted module names in order of appearance; placeholders (a last part in capitals, as in
        ``attention_jax.X``, or one in angle brackets) are left out.
    """
    return [module for module in _MODULE.findall(text) if not module.rsplit(".", 1)[-1].isupper()]


def link_problems(page: pathlib.Path) -> list[str]:
    """The relative links of ``page`` whose file, directory or heading does not exist.

    Parameters
    ----------
    page : pathlib.Path
        A Markdown file of the repository.

    Returns
    -------
    list[str]
        One line per broken link, naming the target and what is missing; empty when all resolve.
    """
    problems = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path_part, _, anchor = target.partition("#")
        path_part = path_part.split("?", 1)[0]
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            problems.append(f"{target}: {resolved.relative_to(REPO_ROOT) if resolved.is_relative_to(REPO_ROOT) else resolved} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved.read_text(encoding="utf-8")):
            problems.append(f"{target}: {resolved.name} has no heading with the anchor #{anchor}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_relative_links_resolve(page: pathlib.Path) -> None:
    """Every relative link and image of the page names an existing path (and heading)."""
    assert relative_links(page.read_text(encoding="utf-8")) or page != README, "the README links to nothing"
    problems = link_problems(page)
    assert not problems, f"{_page_id(page)} has broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_python_m_modules_are_found(page: pathlib.Path) -> None:
    """Every ``python -m MODULE`` of the page's commands is a module importable from the repository root."""
    modules = sorted(set(python_m_modules(page.read_text(encoding="utf-8"))))
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    assert not missing, f"{_page_id(page)} runs modules that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_python_scripts_exist(page: pathlib.Path) -> None:
    """Every ``python path/to/script.py`` of the page names a file of the repository."""
    scripts = sorted(set(_SCRIPT.findall(page.read_text(encoding="utf-8"))))
    missing = [script for script in scripts if not (REPO_ROOT / script).is_file()]
    assert not missing, f"{_page_id(page)} runs scripts that do not exist: {missing}"


def test_readme_runs_the_entry_points() -> None:
    """The README's quickstart runs the training entry point and the test suite, and both resolve."""
    modules = set(python_m_modules(README.read_text(encoding="utf-8")))
    assert {"attention_jax.main", "pytest"} <= modules, sorted(modules)


def test_every_docs_page_is_linked_from_the_readme() -> None:
    """A docs page that the README does not link to is one nobody finds."""
    linked = {(README.parent / target.partition("#")[0]).resolve()
              for target in relative_links(README.read_text(encoding="utf-8"))}
    unlinked = [_page_id(page) for page in DOCS_PAGES if page.resolve() not in linked]
    assert not unlinked, f"README.md links to none of {unlinked}"


def test_readme_is_short() -> None:
    """The README is the front door, not the lab notebook: at most 260 lines."""
    num_lines = len(README.read_text(encoding="utf-8").splitlines())
    assert num_lines <= MAX_README_LINES, f"README.md has {num_lines} lines; at most {MAX_README_LINES}."


def test_link_and_anchor_parsing() -> None:
    """The parsers find links outside code, skip links in code and external ones, and slug headings."""
    text = ("See [a](docs/a.md#two-words), ![img](pic.png) and [web](https://example.com).\n"
            "`[not](inline.md)`\n```bash\n# Not a heading\n[not](fenced.md)\n```\n"
            "## Two words\n### Table 3: BLEU (and cost)\n## Two words\n")
    assert relative_links(text) == ["docs/a.md#two-words", "pic.png"]
    assert heading_anchors(text) == {"two-words", "table-3-bleu-and-cost", "two-words-1"}
    commands = ("x && .venv/bin/python -m attention_jax.main --config=c; python3 -m venv .venv; "
                "python -m attention_jax.<command>; python -m attention_jax.X; python -m benchmarks.packing.")
    assert python_m_modules(commands) == ["attention_jax.main", "venv", "benchmarks.packing"]
