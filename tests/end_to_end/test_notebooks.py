"""Every notebook under notebooks/ executes top to bottom without raising (tests/support/notebooks.py), and
is committed with the outputs of one such run, so that it reads where the repository is browsed.

Notebook 02 reads the quickstart's trained run, so ``tests/end_to_end/test_quickstart.py`` runs it: with
``--dist=loadfile`` that keeps every reader of the run in one pytest-xdist work unit, trained once.
"""

import csv
import pathlib

import pytest

from attention_jax.reports import paper_figures
from tests.support.notebooks import ABLATIONS_NOTEBOOK, NOTEBOOKS, QUICKSTART_NOTEBOOK, REPO_ROOT, execute_notebook

COMMITTED_REPORT = REPO_ROOT / "docs" / "table2_small_subset" / "table2_small.csv"  # 20 rows x 3 seeds.
SEED_COLUMNS = ("seeds", "seeds_pending", "dev_ppl_mean", "dev_ppl_std", "dev_bleu_mean", "dev_bleu_std",
                "paired_seeds", "dev_ppl_change_pct_mean", "dev_ppl_change_pct_std", "paper_dev_ppl_change_pct",
                "verdict", "verdict_basis", "dev_ppl_se", "dev_bleu_se", "dev_ppl_change_pct_se")

# Notebooks committed without outputs, and why; their outputs test is a strict xfail, so that committing
# them with outputs fails it until the entry here goes.
WITHOUT_OUTPUTS: dict[str, str] = {}
REFRESH = "refresh with `python -m tests.support.notebooks notebooks/NAME.ipynb` (docs/notebooks.md)"


def test_the_quickstart_notebook_exists() -> None:
    assert QUICKSTART_NOTEBOOK in NOTEBOOKS, f"{QUICKSTART_NOTEBOOK} is gone; update tests/support/notebooks.py"


@pytest.mark.parametrize("notebook_path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_committed_with_outputs(notebook_path: pathlib.Path, request: pytest.FixtureRequest) -> None:
    nbformat = pytest.importorskip("nbformat")
    if notebook_path.name in WITHOUT_OUTPUTS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=WITHOUT_OUTPUTS[notebook_path.name]))
    code_cells = [cell for cell in nbformat.read(notebook_path, as_version=4).cells if cell.cell_type == "code"]
    # One run, top to bottom, in one kernel: execution counts 1, 2, ... in order.
    assert [cell.execution_count for cell in code_cells] == list(range(1, len(code_cells) + 1)), (
        f"{notebook_path.name}: not committed from one run top to bottom; {REFRESH}")
    outputs = [output for cell in code_cells for output in cell.outputs]
    assert outputs, f"{notebook_path.name}: committed without outputs; {REFRESH}"
    assert not [output for output in outputs if output.output_type == "error"], (
        f"{notebook_path.name}: committed with an error output")
    if any("plt." in cell.source for cell in code_cells):  # A notebook that plots shows its plots.
        assert any("image/png" in output.get("data", {}) for output in outputs), (
            f"{notebook_path.name}: plots, but no image is committed; {REFRESH}")


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("notebook_path", [path for path in NOTEBOOKS if path != QUICKSTART_NOTEBOOK],
                         ids=lambda path: path.name)
def test_notebook_executes(notebook_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    committed = notebook_path.read_bytes()
    execute_notebook(notebook_path, monkeypatch)
    assert notebook_path.read_bytes() == committed, "executing a notebook in a test wrote it back"


def _one_seed(line: dict[str, str]) -> dict[str, str]:
    # The line as a one-seed report writes it: no spreads, and the verdict of the sign alone.
    line = dict(line, seeds="1", dev_ppl_std="", dev_bleu_std="", dev_ppl_change_pct_std="", dev_ppl_se="",
                dev_bleu_se="", dev_ppl_change_pct_se="")
    if line["row"] != "base":
        change, paper = float(line["dev_ppl_change_pct_mean"]) / 100, float(line["paper_dev_ppl_change_pct"])
        line["paired_seeds"] = "1"
        line["verdict"], line["verdict_basis"] = paper_figures.verdict([change], (paper > 0) - (paper < 0))
    return line


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("report, notice", [("without_seed_columns", "FALLBACK: this report has no verdict column"),
                                            ("one_seed", "One seed per row")], ids=["without_seed_columns", "one_seed"])
def test_ablations_notebook_falls_back_without_seeds(report: str, notice: str, tmp_path: pathlib.Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # Notebook 03 on a report older than the aggregation of seeds, and on a one-seed report: it says so,
    # draws no error bars, and still runs its checks.
    with open(COMMITTED_REPORT, newline="", encoding="utf-8") as file:
        lines = list(csv.DictReader(file))
    if report == "without_seed_columns":
        lines = [{key: value for key, value in line.items() if key not in SEED_COLUMNS} for line in lines]
    else:
        lines = [_one_seed(line) for line in lines]
    with open(tmp_path / "table2_small.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)
    notebook = execute_notebook(ABLATIONS_NOTEBOOK, monkeypatch, {"ATTENTION_JAX_SWEEP_ROOT": str(tmp_path)})
    printed = "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for output in cell.outputs)
    assert notice in printed and "error bars: none" in printed
    assert "sign only, 1 seed" in printed
