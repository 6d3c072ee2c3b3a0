"""Notebook 03 on a sweep that is not Table 2 (issue 72): the comparison against the reference row, no paper."""

from __future__ import annotations

import pytest

from tests.support.notebooks import ABLATIONS_NOTEBOOK, REPO_ROOT, execute_notebook

POSITIONS_ROOT = REPO_ROOT / "docs" / "positions"  # The committed positions sweep: no paper figures.


def _printed(notebook) -> str:
    return "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                   for output in cell.outputs)


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("reference", ["", "rotary"])
def test_ablations_notebook_takes_any_sweep_root(reference: str, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = execute_notebook(ABLATIONS_NOTEBOOK, monkeypatch, {"ATTENTION_JAX_SWEEP_ROOT": str(POSITIONS_ROOT),
                                                                  "ATTENTION_JAX_REFERENCE": reference})
    printed = _printed(notebook)
    expected = reference or "sinusoidal"
    assert f"Every row against {expected} (" in printed
    assert "the Table 2 sections below are skipped" in printed
    assert "paper PPL" not in printed and "reproduced" not in printed
    table = [line for line in printed.splitlines() if line.strip().startswith("learned ")]
    assert len(table) == 1 and "%" in table[0] and " 3 | " in table[0], table  # A paired change over 3 seeds.
    images = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
              if "image/png" in output.get("data", {})]
    assert images, "the paired changes were not drawn"
