"""attention_jax.report: Table 2 layout from a sweep root, missing rows, CSV and PNG outputs."""

from __future__ import annotations

import csv
import json
import pathlib

import matplotlib.image
import pytest

from attention_jax import sweep_report
from configs import table2
from launch import sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT


def _write_row(root: pathlib.Path, row: str, results: dict | None, *, returncode: int | None = None) -> None:
    row_dir = root / row
    row_dir.mkdir(parents=True)
    (row_dir / "config.json").write_text(table2.get_config(row).to_json_best_effort())
    if results is not None:
        (row_dir / "results.json").write_text(json.dumps(results))
    if returncode is not None:
        sweep_record.write_launch(str(row_dir), executor="local", returncode=returncode)


RESULTS = {
    "base": dict(step=100, eval_ppl=7.25, bleu=12.5, params=63_100_000, wall_s=3725.0),
    "A1": dict(step=100, eval_ppl=8.5, bleu=None, params=63_100_000, wall_s=59.6),
    "C4": dict(step=100, eval_ppl=9.75, bleu=10.0, params=26_800_000, wall_s=30.0),
}


@pytest.fixture()
def sweep_root(tmp_path: pathlib.Path) -> pathlib.Path:
    """A Table 2 root where base, A1, C4 finished, C1 failed, and B1 and E never started."""
    root = tmp_path / "t2"
    sweep = sweep_spec.load_sweep(str(REPO_ROOT / "configs" / "table2.py"))
    description = sweep_record.sweep_description(sweep, ["num_train_steps=100"])
    sweep_record.record_launch(str(root), description, ["base", "A1", "B1", "C1", "C4", "E"], "local",
                               force=False)
    for row, results in RESULTS.items():
        _write_row(root, row, results)
    _write_row(root, "C1", None, returncode=1)
    return root


def _table_lines(markdown: str) -> dict[str, list[str]]:
    rows = {}
    for line in markdown.splitlines():
        if line.startswith("| ") and not line.startswith("|  | row"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[1]] = cells
    return rows


def test_markdown_has_the_paper_layout_with_missing_rows_marked(sweep_root: pathlib.Path) -> None:
    paths = sweep_report.write_report(str(sweep_root))
    assert paths == [str(sweep_root / f"table2.{ext}") for ext in ("md", "csv", "png")]
    markdown = (sweep_root / "table2.md").read_text()
    rows = _table_lines(markdown)
    assert list(rows) == ["base", "A1", "B1", "C1", "C4", "E"]  # The sweep's order.
    header_line = next(line for line in markdown.splitlines() if line.startswith("|  | row"))
    assert [cell.strip() for cell in header_line.strip("|").split("|")] == [
        "", "row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "PE", "other changes",
        "seeds", "steps", "params ×10⁶ (ours / paper)", "dev PPL", "paper PPL", "ΔPPL vs base", "paper ΔPPL",
        "BLEU", "paper BLEU", "verdict", "wall", "status"]
    assert rows["base"] == ["", "base", "6", "512", "2048", "8", "64", "64", "0.1", "0.1", "sinusoid", "",
                            "1", "100", "63.1 / 65", "7.25", "4.92", "", "", "12.5", "25.8", "", "1h02m", "done"]
    # Only the changed hyperparameters, as in the paper; group labels on each group's first row. One run
    # per row (no seeds): the change against base is the one pair, the verdict its sign (8.5 / 7.25 - 1 =
    # +17.2%, the paper's 5.29 / 4.92 - 1 = +7.5%).
    assert rows["A1"] == ["(A)", "A1", "", "", "", "1", "512", "512", "", "", "", "", "1", "100", "63.1 / —",
                          "8.50", "5.29", "+17.2%", "+7.5%", "", "24.9", "reproduced (sign only)", "1m00s",
                          "done"]
    assert rows["C4"][:8] == ["", "C4", "", "256", "", "", "32", "32"]
    assert rows["C4"][14:17] == ["26.8 / 28", "9.75", "5.75"]
    # Rows without results: their status, the paper's figures, no figures of ours, verdict pending.
    assert rows["B1"] == ["(B)", "B1", "", "", "", "", "16", "", "", "", "", "", "0", "", "— / 58", "", "5.16",
                          "", "+4.9%", "", "25.1", "pending", "", "not run"]
    assert rows["C1"][0] == "(C)" and rows["C1"][-1] == "failed" and rows["C1"][15] == ""
    assert rows["E"][10] == "learned" and rows["E"][-1] == "not run"
    assert "3 of 6 rows finished." in markdown
    assert "Common overrides: --config.num_train_steps=100." in markdown


def test_wall_time_format() -> None:
    assert [sweep_report._duration(s) for s in (59.6, 61, 3725, None)] == ["1m00s", "1m01s", "1h02m", ""]


def test_csv_holds_full_values(sweep_root: pathlib.Path) -> None:
    sweep_report.write_report(str(sweep_root))
    with open(sweep_root / "table2.csv", newline="") as file:
        records = {record["row"]: record for record in csv.DictReader(file)}
    assert list(records) == ["base", "A1", "B1", "C1", "C4", "E"]
    for row, results in RESULTS.items():
        assert float(records[row]["eval_ppl"]) == results["eval_ppl"]
        assert int(records[row]["params"]) == results["params"]
        assert records[row]["status"] == "done"
    assert records["A1"]["bleu"] == ""
    assert records["A1"]["d_model"] == "512"  # Full values, not blanks.
    assert (records["C4"]["d_model"], records["C4"]["paper_dev_ppl"]) == ("256", "5.75")
    assert (records["C1"]["status"], records["C1"]["eval_ppl"]) == ("failed", "")


def test_png_has_one_panel_column_per_group(sweep_root: pathlib.Path) -> None:
    sweep_report.write_report(str(sweep_root))
    image = matplotlib.image.imread(sweep_root / "table2.png")
    height, width = image.shape[:2]
    # Four group columns (A, B, C, E) of 3.6 in, two metric rows (PPL, BLEU) of 3.2 in.
    assert width / height == pytest.approx((4 * 3.6) / (2 * 3.2), rel=0.02)
    panels = sweep_report._panels(sweep_report.read_sweep_rows(str(sweep_root))[1])
    assert [(name, [row.row for row in members]) for name, members in panels] == [
        ("A", ["base", "A1"]), ("B", ["base", "B1"]), ("C", ["base", "C1", "C4"]), ("E", ["base", "E"])]


def test_all_rows_lists_rows_never_launched(sweep_root: pathlib.Path) -> None:
    record, rows = sweep_report.read_sweep_rows(str(sweep_root), all_rows=True)
    assert [row.row for row in rows] == list(table2.ROW_NAMES)
    statuses = {row.row: row.status for row in rows}
    assert statuses["big"] == "not run" and statuses["C1"] == "failed" and statuses["base"] == "done"
    big = next(row for row in rows if row.row == "big")
    assert big.config["d_model"] == 1024 and big.paper["dev_ppl"] == 4.33  # From sweep.json.
    assert big.config["num_train_steps"] == 100  # The common override applies to every row.


def test_incomplete_and_submitted_rows(sweep_root: pathlib.Path) -> None:
    (sweep_root / "C1" / "launch.json").unlink()  # Started (config.json) but no results: incomplete.
    (sweep_root / "E").mkdir()
    sweep_record.write_launch(str(sweep_root / "E"), executor="slurm", job_id="42")
    statuses = {row.row: row.status for row in sweep_report.read_sweep_rows(str(sweep_root))[1]}
    assert (statuses["C1"], statuses["E"]) == ("incomplete", "submitted")


def test_root_without_sweep_record_uses_row_directories(tmp_path: pathlib.Path) -> None:
    _write_row(tmp_path, "D2", dict(step=5, eval_ppl=3.0))
    _write_row(tmp_path, "C2", None)
    record, rows = sweep_report.read_sweep_rows(str(tmp_path))
    assert record == {} and [(row.row, row.status) for row in rows] == [("C2", "incomplete"), ("D2", "done")]
    assert sweep_report.write_report(str(tmp_path))[0] == str(tmp_path / "report.md")


def test_missing_root_and_empty_root_are_named(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sweep_report.read_sweep_rows(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="not a sweep root"):
        sweep_report.read_sweep_rows(str(tmp_path))


def test_group_of_follows_table2() -> None:
    assert [sweep_report.group_of(row) for row in table2.ROW_NAMES] == (
        ["base"] + ["A"] * 4 + ["B"] * 2 + ["C"] * 7 + ["D"] * 4 + ["E", "big"])
    assert sweep_report.group_of("fused_seed0") == ""


def test_overridden_row_settings_are_listed() -> None:
    record = {"rows": ["base", "C1", "C4", "big"], "overrides": ["d_model=64", "num_train_steps=20"],
              "row_overrides": {"base": {}, "C1": {"num_layers": 2}, "C4": {"d_model": 256, "key_dim": 32},
                                "big": {"d_model": 1024, "num_train_steps": 300000}}}
    assert sweep_report.overridden_row_settings(record) == [
        "C4 d_model=256 -> 64", "big d_model=1024 -> 64", "big num_train_steps=300000 -> 20"]
    assert sweep_report.overridden_row_settings({"rows": ["C1"], "overrides": ["num_layers=2"],
                                           "row_overrides": {"C1": {"num_layers": 2}}}) == []


def test_other_changes_name_settings_outside_the_table2_columns(sweep_root: pathlib.Path) -> None:
    record, rows = sweep_report.read_sweep_rows(str(sweep_root), all_rows=True)
    changes = {row.row: sweep_report.other_changes(row, record) for row in rows}
    # big's own settings beyond the columns, with the actual values (the common override replaced one).
    assert changes["big"] == "num_train_steps=100, keep_checkpoints=20, average_last_checkpoints=20"
    assert changes["A1"] == changes["base"] == ""
    seed_config = {"seed": 1, "attention_implementation": "fused"}
    seed_row = sweep_report.RowReport("fused_seed1", "", "done", seed_config, {})
    seed_record = {"row_overrides": {"fused_seed1": {"attention_implementation": "fused", "seed": 1}}}
    assert sweep_report.other_changes(seed_row, seed_record) == "attention_implementation=fused, seed=1"


def test_report_prefers_the_whole_dev_split_bleu() -> None:
    assert sweep_report.reported_bleu({"bleu": 3.0, "dev_bleu": 5.5}) == 5.5  # Whole dev split.
    assert sweep_report.reported_bleu({"bleu": 3.0, "dev_bleu": None}) == 3.0  # Sampled, older runs.
    assert sweep_report.reported_bleu({}) is None
