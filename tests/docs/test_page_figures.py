"""The research pages cite only figures that their committed reports give, and those reports regenerate
unchanged from the committed runs: a figure on a page is traceable to the files beside it (issue 87 item 4).

A page's prose turns a signed change into words ("233 ± 33 fewer steps", "14.2 ± 2.4% lower"), so a cited
``a ± b`` matches a generated figure by magnitude, to the page's own rounding.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from attention_jax.reports import pages
from tests.support import REPO_ROOT

PAGE_REPORTS = {
    "docs/normalization.md": ["docs/normalization"],
    "docs/positions.md": ["docs/positions"],
    "docs/attention_functions.md": ["docs/attention_functions"],
    "docs/feed_forward.md": ["docs/feed_forward"],
    "docs/table2.md": ["docs/table2_small", "docs/table2_small_subset"],
    "README.md": ["docs/table2_small", "docs/normalization", "docs/positions", "docs/attention_functions",
                  "docs/feed_forward"],
}
"""Each hand-written page and the folders whose generated reports its ± figures come from."""

_FIGURE = re.compile(r"[+\-−]?(\d[\d,]*(?:\.\d+)?)%? ± (\d[\d,]*(?:\.\d+)?)%?")
_GENERATED_SUFFIXES = (".md", ".csv")


def _figures(text: str) -> list[tuple[str, float, int, float, int]]:
    """Each ``a ± b`` in ``text``: the match, |a| and its decimals, b and its decimals."""
    def decimals(number: str) -> int:
        return len(number.split(".")[1]) if "." in number else 0

    return [(match.group(0), float(match.group(1).replace(",", "")), decimals(match.group(1)),
             float(match.group(2).replace(",", "")), decimals(match.group(2))) for match in _FIGURE.finditer(text)]


def _rounds_to(value: float, cited: float, decimals: int) -> bool:
    return abs(value - cited) <= 0.5 * 10 ** -decimals + 1e-9


def _unsupported_figures(page_text: str, report_texts: list[str]) -> list[str]:
    """The page's ``a ± b`` figures that no report gives to the page's rounding."""
    generated = [figure for text in report_texts for figure in _figures(text)]
    return [cited for cited, value, value_decimals, error, error_decimals in _figures(page_text)
            if not any(_rounds_to(other[1], value, value_decimals) and _rounds_to(other[3], error, error_decimals)
                       for other in generated)]


_NUMBER = re.compile(r"(?<![\w.^/#])(\d[\d,]*(?:\.\d+)?(?:e-?\d+)?)(?![\w^/]|\.\d)")
_SKIPPED_SPANS = re.compile(r"`[^`]*`|\]\([^)]*\)|<!-- generated from .*?<!-- end generated -->", re.DOTALL)
RESULTS_PAGES = {"docs/normalization.md": ["docs/normalization"]}
"""Pages whose Results prose cites only figures the committed files give: every number with a decimal point or of
three digits and more (issue 87 item 4)."""


def _numbers(text: str) -> list[tuple[str, float, int]]:
    """Each number in ``text`` (a sign is read as a word: pages write "lower"): as written, |value|, its decimals."""
    found = []
    for match in _NUMBER.finditer(text):
        written = match.group(1).rstrip(",")
        mantissa = written.split("e")[0]
        found.append((written, float(written.replace(",", "")), len(mantissa.split(".")[1]) if "." in mantissa else 0))
    return found


def _cited_numbers(page_text: str) -> list[tuple[str, float, int]]:
    """The numbers of a page's ``## Results`` section that it cites from its runs: those with a decimal point or of
    three digits and more, outside code, link targets and generated blocks."""
    results = page_text.split("\n## Results", 1)[1].split("\n## ", 1)[0]
    return [number for number in _numbers(_SKIPPED_SPANS.sub(" ", results))
            if number[2] > 0 or abs(number[1]) >= 100]


def _uncited_numbers(page_text: str, committed_texts: list[str]) -> list[str]:
    """The page's cited numbers (:func:`_cited_numbers`) that no committed file gives to the page's rounding."""
    given = sorted({value for text in committed_texts for _, value, _ in _numbers(text)})
    return [written for written, value, decimals in _cited_numbers(page_text)
            if not any(_rounds_to(other, value, decimals) for other in given)]


def _report_texts(folders: list[str]) -> list[str]:
    return [path.read_text(encoding="utf-8") for folder in folders
            for path in sorted((REPO_ROOT / folder).rglob("*.md"))]


def test_the_figure_check_rounds_to_the_page_and_reads_words_for_signs() -> None:
    report = "| pre_layer_norm | 1100 ± 0 | -233 ± 33 | 336.65 ± 7.28 | +4477.6% ± 60.9% |"
    page = "233 ± 33 fewer steps; 336.7 ± 7.3; +4,478% ± 61%; 1,100 ± 0"
    assert _unsupported_figures(page, [report]) == []
    assert _unsupported_figures("234 ± 33 and 336.7 ± 7.4 and 1,100 ± 1", [report]) == [
        "234 ± 33", "336.7 ± 7.4", "1,100 ± 1"]


@pytest.mark.parametrize("page", sorted(PAGE_REPORTS))
def test_every_figure_a_page_cites_is_in_its_committed_reports(page: str) -> None:
    unsupported = _unsupported_figures((REPO_ROOT / page).read_text(encoding="utf-8"),
                                       _report_texts(PAGE_REPORTS[page]))
    assert not unsupported, f"{page} cites figures no committed report under {PAGE_REPORTS[page]} gives: {unsupported}"


def _committed_export_roots() -> list[pathlib.Path]:
    """Every committed sweep export whose reports the report command writes (a sweep.json at its top)."""
    roots = sorted(path.parent for path in (REPO_ROOT / "docs").rglob("sweep.json"))
    return [root for root in roots if not any(other in root.parents for other in roots)]


@pytest.mark.slow  # The report command once per committed export (a subprocess each).
@pytest.mark.parametrize("root", [str(root.relative_to(REPO_ROOT)) for root in _committed_export_roots()])
def test_committed_reports_regenerate_unchanged_from_the_committed_runs(root: str, tmp_path: pathlib.Path) -> None:
    completed = subprocess.run([sys.executable, "-m", "attention_jax.report", root, f"--out={tmp_path}"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    regenerated = sorted(path for path in tmp_path.rglob("*") if path.suffix in _GENERATED_SUFFIXES)
    assert regenerated, f"the report command wrote no table for {root}"
    for path in regenerated:
        committed = REPO_ROOT / root / path.relative_to(tmp_path)
        assert committed.is_file(), f"{committed} is not committed: run `python -m attention_jax.report {root}`"
        assert path.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), (
            f"{committed} differs from a regeneration from the committed runs: "
            f"run `python -m attention_jax.report {root}` and commit")


@pytest.mark.parametrize("page", sorted(PAGE_REPORTS))
def test_a_pages_generated_blocks_hold_what_its_committed_reports_give(page: str) -> None:
    for block in pages.generated_blocks(str(REPO_ROOT / page)):
        assert block.body == block.expected, (
            f"{page}'s block from {block.source}#{block.anchor} differs from the committed report: run "
            f"`python -m attention_jax.report <its root> --page={page}` and commit")


def test_the_number_check_reads_prose_and_skips_code_links_and_blocks() -> None:
    page = ("# P\n\n## Results\n\nPPL 18.97 at step 1,700, 2.04e-3, rate 0.5 (`lr 9.99`, [a](b/1.5.md)), N = 3;"
            "\n<!-- generated from a.md#b -->\n| 123.45 |\n<!-- end generated -->\n\n## Next\n\n77.7\n")
    assert [written for written, _, _ in _cited_numbers(page)] == ["18.97", "1,700", "2.04e-3", "0.5"]
    assert _uncited_numbers(page, ["| 18.9710 | 1700 | 0.00204 | 0.56 |"]) == ["0.5"]


@pytest.mark.parametrize("page", sorted(RESULTS_PAGES))
def test_every_number_a_pages_results_cite_is_in_its_committed_files(page: str) -> None:
    committed = _report_texts(RESULTS_PAGES[page]) + [
        path.read_text(encoding="utf-8") for folder in RESULTS_PAGES[page]
        for pattern in ("*.csv", "sweep.json", "results.json") for path in sorted((REPO_ROOT / folder).rglob(pattern))]
    uncited = _uncited_numbers((REPO_ROOT / page).read_text(encoding="utf-8"), committed)
    assert not uncited, f"{page}'s Results cite numbers no committed file under {RESULTS_PAGES[page]} gives: {uncited}"
