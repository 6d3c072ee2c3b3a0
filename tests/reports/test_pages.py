"""attention_jax.reports.pages: a page's generated blocks, rewritten from its reports and refused when broken."""

from __future__ import annotations

import pathlib

import pytest

from attention_jax.foundation.user_errors import UserInputError
from attention_jax.reports import pages

REPORT = """# sweep: every run

Counts.

## At a glance

| row | dev PPL |
|---|---|
| base | 7.35 ± 0.11 |

## Every run

| row | seed |
"""
PAGE = """# A page

Prose.

<!-- generated from sweep/sweep_runs.md#at-a-glance -->
| row | dev PPL |
|---|---|
| base | 7.00 ± 0.11 |
<!-- end generated -->

More prose, kept.
"""


@pytest.fixture()
def page(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep_runs.md").write_text(REPORT)
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    return path


def test_a_stale_block_is_found_and_rewritten_and_the_rest_of_the_page_kept(page: pathlib.Path) -> None:
    [block] = pages.generated_blocks(str(page))
    assert (block.source, block.anchor) == ("sweep/sweep_runs.md", "at-a-glance")
    assert block.body != block.expected == "| row | dev PPL |\n|---|---|\n| base | 7.35 ± 0.11 |\n"
    assert pages.refresh_page(str(page)) == 1
    text = page.read_text()
    assert "| base | 7.35 ± 0.11 |\n<!-- end generated -->\n\nMore prose, kept.\n" in text
    assert text.startswith("# A page\n\nProse.\n\n<!-- generated from sweep/sweep_runs.md#at-a-glance -->\n| row")
    assert "## Every run" not in text  # The section ends at the next heading.
    assert pages.refresh_page(str(page)) == 0  # Up to date: nothing changes.
    assert [block.body == block.expected for block in pages.generated_blocks(str(page))] == [True]


def test_a_missing_page_report_or_section_is_one_line_naming_the_fix(page: pathlib.Path,
                                                                     tmp_path: pathlib.Path) -> None:
    with pytest.raises(UserInputError, match=r"--page=.*nope.md does not exist"):
        pages.check_page(str(tmp_path / "nope.md"))
    plain = tmp_path / "plain.md"
    plain.write_text("# No blocks\n")
    with pytest.raises(UserInputError, match=r"has no generated block .* leave out --page"):
        pages.check_page(str(plain))
    page.write_text(PAGE.replace("#at-a-glance", "#at-a-distance"))
    with pytest.raises(UserInputError, match=r"sweep_runs.md has no section #at-a-distance"):
        pages.refresh_page(str(page))
    (tmp_path / "sweep" / "sweep_runs.md").unlink()
    with pytest.raises(UserInputError, match=r"sweep_runs.md \(a page's generated block\) does not exist"):
        pages.generated_blocks(str(page))
