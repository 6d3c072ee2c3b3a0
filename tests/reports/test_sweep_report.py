"""attention_jax.report of a sweep with the paper's figures: its columns, missing rows, CSV and PNG outputs."""

from __future__ import annotations

import csv
import json
import pathlib
import subprocess
import sys
from typing import Any

import matplotlib.image
import pytest

from attention_jax.reports import all_reports, comparison, comparison_plot, paper_figures, sweep_rows
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


def _tables(markdown: str) -> dict[str, dict[str, dict[str, str]]]:
    """Section title (``""`` for the rows' table) -> row -> header -> cell."""
    tables: dict[str, dict[str, dict[str, str]]] = {}
    title, header = "", None
    for line in markdown.splitlines():
        if line.startswith("## "):
            title, header = line[3:], None
        elif line.startswith("| "):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if header is None:
                header = cells
            else:
                tables.setdefault(title, {})[cells[0]] = dict(zip(header, cells))
    return tables


def test_markdown_has_the_paper_columns_with_missing_rows_marked(sweep_root: pathlib.Path) -> None:
    paths = all_reports.write_reports(str(sweep_root), str(sweep_root))
    # The comparison, then every run's own figures (no metrics.jsonl here: no curves, no diagnostics).
    assert paths == [str(sweep_root / name) for name in ("table2.md", "table2.csv", "table2.png", "table2_runs.md",
                                                          "table2_runs.csv")]
    markdown = (sweep_root / "table2.md").read_text()
    tables = _tables(markdown)
    overview, ppl = tables[""], tables["dev PPL"]
    assert list(overview) == list(ppl) == ["base", "A1", "B1", "C1", "C4", "E"]  # The sweep's order.
    # What each row changes from the sweep file (Table 2's hyperparameters where they differ), and its status.
    assert overview["A1"] == {"row": "A1", "status": "done", "seeds finished": "1 of 1",
                              "overrides": "num_heads=1, key_dim=512, value_dim=512"}
    assert overview["C4"]["overrides"] == "d_model=256, key_dim=32, value_dim=32"
    assert overview["E"]["overrides"] == "positional_encoding=learned" and overview["E"]["status"] == "not run"
    assert overview["C1"]["status"] == "failed" and overview["B1"]["status"] == "not run"
    # One run per row (no seeds): the change against base is the one pair, the verdict its sign (8.5 / 7.25 - 1 =
    # +17.2%, the paper's 5.29 / 4.92 - 1 = +7.5%).
    assert ppl["base"] == {"row": "base", "seeds": "1", "dev PPL ± SE": "7.25", "change vs base ± SE": "",
                           "paired seeds": "", "verdict": "reference", "paper": "4.92", "paper change vs base": "",
                           "paper verdict": ""}
    assert ppl["A1"] == {"row": "A1", "seeds": "1", "dev PPL ± SE": "8.50", "change vs base ± SE": "+17.2%",
                         "paired seeds": "1", "verdict": "one seed", "paper": "5.29", "paper change vs base": "+7.5%",
                         "paper verdict": "reproduced (sign only)"}
    assert (ppl["C4"]["dev PPL ± SE"], ppl["C4"]["paper"]) == ("9.75", "5.75")
    assert tables["params"]["C4"]["params ± SE"] == "26800000" and tables["params"]["C4"]["paper"] == "28000000"
    # Rows without results: the paper's figures, none of ours, verdict pending.
    assert (ppl["B1"]["dev PPL ± SE"], ppl["B1"]["paper"], ppl["B1"]["paper change vs base"],
            ppl["B1"]["paper verdict"]) == ("", "5.16", "+4.9%", "pending")
    assert tables["dev BLEU"]["A1"]["dev BLEU ± SE"] == "" and tables["dev BLEU"]["A1"]["paper"] == "24.9"
    assert tables["wall s"]["A1"]["wall s ± SE"] == "60" and tables["steps"]["base"]["steps ± SE"] == "100"
    assert "3 of 6 rows finished." in markdown
    assert "Common overrides: --config.num_train_steps=100." in markdown


def test_csv_holds_full_values(sweep_root: pathlib.Path) -> None:
    all_reports.write_reports(str(sweep_root), str(sweep_root))
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


def test_png_has_a_panel_per_metric_and_plot_panels_follow_the_groups(sweep_root: pathlib.Path) -> None:
    all_reports.write_reports(str(sweep_root), str(sweep_root))
    image = matplotlib.image.imread(sweep_root / "table2.png")
    height, width = image.shape[:2]
    # Two metric panels (dev PPL, dev BLEU) of 4.5 in; 5 rows besides base, 0.45 in each.
    assert width / height == pytest.approx((2 * 4.5) / (1.2 + 0.45 * 5), rel=0.02)
    panels = sweep_rows._plot_panels(sweep_rows.read_sweep_rows(str(sweep_root))[1], "base")
    assert [(name, [row.row for row in members]) for name, members in panels] == [
        ("A", ["base", "A1"]), ("B", ["base", "B1"]), ("C", ["base", "C1", "C4"]), ("E", ["base", "E"])]


def test_all_rows_lists_rows_never_launched(sweep_root: pathlib.Path) -> None:
    record, rows = sweep_rows.read_sweep_rows(str(sweep_root), all_rows=True)
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
    statuses = {row.row: row.status for row in sweep_rows.read_sweep_rows(str(sweep_root))[1]}
    assert (statuses["C1"], statuses["E"]) == ("incomplete", "submitted")


def test_root_without_sweep_record_uses_row_directories(tmp_path: pathlib.Path) -> None:
    _write_row(tmp_path, "D2", dict(step=5, eval_ppl=3.0))
    _write_row(tmp_path, "C2", None)
    record, rows = sweep_rows.read_sweep_rows(str(tmp_path))
    assert record == {} and [(row.row, row.status) for row in rows] == [("C2", "incomplete"), ("D2", "done")]
    assert all_reports.write_reports(str(tmp_path), str(tmp_path))[0] == str(tmp_path / "report.md")


def test_missing_root_and_empty_root_are_named(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sweep_rows.read_sweep_rows(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="not a sweep root"):
        sweep_rows.read_sweep_rows(str(tmp_path))


def test_group_of_follows_table2() -> None:
    assert [table2.group_of(row) for row in table2.ROW_NAMES] == (
        ["base"] + ["A"] * 4 + ["B"] * 2 + ["C"] * 7 + ["D"] * 4 + ["E", "big"])
    assert table2.group_of("fused_seed0") == ""


def test_overridden_row_settings_are_listed() -> None:
    record = {"rows": ["base", "C1", "C4", "big"], "overrides": ["d_model=64", "num_train_steps=20"],
              "row_overrides": {"base": {}, "C1": {"num_layers": 2}, "C4": {"d_model": 256, "key_dim": 32},
                                "big": {"d_model": 1024, "num_train_steps": 300000}}}
    assert paper_figures.overridden_row_settings(record) == [
        "C4 d_model=256 -> 64", "big d_model=1024 -> 64", "big num_train_steps=300000 -> 20"]
    assert paper_figures.overridden_row_settings({"rows": ["C1"], "overrides": ["num_layers=2"],
                                           "row_overrides": {"C1": {"num_layers": 2}}}) == []


def test_other_changes_name_settings_outside_the_table2_columns(sweep_root: pathlib.Path) -> None:
    record, rows = sweep_rows.read_sweep_rows(str(sweep_root), all_rows=True)
    changes = {row.row: paper_figures._other_changes(row, record) for row in rows}
    # big's own settings beyond the columns, with the actual values (the common override replaced one).
    assert changes["big"] == "num_train_steps=100, keep_checkpoints=20, average_last_checkpoints=20"
    assert changes["A1"] == changes["base"] == ""
    seed_config = {"seed": 1, "attention_implementation": "fused"}
    seed_row = sweep_rows.RowReport("fused_seed1", "", "done", seed_config, {})
    seed_record = {"row_overrides": {"fused_seed1": {"attention_implementation": "fused", "seed": 1}}}
    assert paper_figures._other_changes(seed_row, seed_record) == "attention_implementation=fused, seed=1"


def test_report_prefers_the_whole_dev_split_bleu() -> None:
    assert comparison._reported_bleu({"bleu": 3.0, "dev_bleu": 5.5}) == 5.5  # Whole dev split.
    assert comparison._reported_bleu({"bleu": 3.0, "dev_bleu": None}) == 3.0  # Sampled, older runs.
    assert comparison._reported_bleu({}) is None


# --- Seeds: aggregation, paired changes, verdicts, pending seeds -------------------------------------

import math  # noqa: E402

import numpy as np  # noqa: E402

# Dev perplexity per seed (None: the seed has not finished). Paper directions against base (4.92):
# A1 5.29 up, A4 5.01 up, B1 5.16 up, C1 6.11 up, D1 5.77 up, E 4.92 no difference.
SEED_PPL = {
    "base": [10.0, 11.0, 12.0],
    "A1": [11.0, 11.55, 13.2],   # +10%, +5%, +10%: beyond 2 x SE, the paper's sign -> reproduced.
    "A4": [9.0, 10.45, 10.8],    # -10%, -5%, -10%: beyond, against the paper -> opposite.
    "B1": [10.5, 10.45, 12.6],   # +5%, -5%, +5%: mean +1.7% < 2 x SE 6.7% -> within noise.
    "E": [10.1, 10.89, 11.88],   # +1%, -1%, -1%: within noise where the paper shows none -> reproduced.
    "D1": [11.0, 12.65, None],   # +10%, +15% on 2 paired seeds, seed 2 pending -> reproduced.
    "C1": [9.5, None, None],     # -5% on 1 seed, 2 pending -> opposite on the sign alone.
    "big": [None, None, None],   # Nothing finished -> pending.
}
SEED_BLEU = {"base": [20.0, 22.0, 27.0], "A1": [18.0, 19.0, None]}  # A1 seed 2: only the sampled BLEU.
SEED_ROWS = list(SEED_PPL)


def _write_seed(root: pathlib.Path, row: str, seed: int, ppl: float | None, *,
                returncode: int | None = None) -> None:
    run_dir = root / row / f"seed_{seed}"
    run_dir.mkdir(parents=True)
    config = table2.get_config(row)
    config.seed = seed
    (run_dir / "config.json").write_text(config.to_json_best_effort())
    if ppl is not None:
        bleu = SEED_BLEU.get(row, [None] * 3)[seed]
        results = dict(step=100 + seed, params=1000, dev_ppl=ppl, eval_ppl=ppl + 1, dev_bleu=bleu, bleu=17.0,
                       wall_s=60.0 * (seed + 1))
        (run_dir / "results.json").write_text(json.dumps(results))
    if returncode is not None:
        sweep_record.write_launch(str(run_dir), executor="local", returncode=returncode)


@pytest.fixture()
def seeded_root(tmp_path: pathlib.Path) -> pathlib.Path:
    """A Table 2 root with 3 seeds per row: see SEED_PPL (C1 seed 1 failed, D1 seed 2 never started)."""
    root = tmp_path / "t2s"
    sweep = sweep_spec.load_sweep(str(REPO_ROOT / "configs" / "table2.py"))
    description = sweep_record.sweep_description(sweep, ["num_train_steps=100"], seeds=[0, 1, 2])
    sweep_record.record_launch(str(root), description, SEED_ROWS, "local", force=False)
    for row, values in SEED_PPL.items():
        for seed, ppl in enumerate(values):
            if row == "C1" and seed == 1:
                _write_seed(root, row, seed, None, returncode=1)
            elif ppl is not None or (row == "C1" and seed == 2):
                _write_seed(root, row, seed, ppl)
    return root


def _expected_changes(row: str) -> list[float]:
    return [ours / base - 1 for ours, base in zip(SEED_PPL[row], SEED_PPL["base"]) if ours is not None]


def test_seed_aggregation_matches_an_independent_computation(seeded_root: pathlib.Path) -> None:
    _, rows = sweep_rows.read_sweep_rows(str(seeded_root))
    stats = paper_figures.aggregate(rows)
    by_name = {row.row: row for row in rows}
    for row in SEED_ROWS:
        finished = [value for value in SEED_PPL[row] if value is not None]
        ppl = stats[row].ppl
        assert ppl.seeds == len(finished) and len(by_name[row].pending) == 3 - len(finished)
        assert len(comparison._counted_runs(by_name[row])) == len(finished)
        if not finished:
            assert ppl.mean is None and ppl.std is None
            continue
        assert ppl.mean == pytest.approx(np.mean(finished))
        if len(finished) > 1:
            assert ppl.std == pytest.approx(np.std(finished, ddof=1))  # Sample std.
            assert ppl.se == pytest.approx(np.std(finished, ddof=1) / math.sqrt(len(finished)))
        else:
            assert ppl.std is None
        if row != "base":
            changes = _expected_changes(row)
            assert list(ppl.changes.values()) == pytest.approx(changes)
            assert ppl.change_mean == pytest.approx(np.mean(changes))
            if len(changes) > 1:
                assert ppl.change_std == pytest.approx(np.std(changes, ddof=1))
                assert ppl.change_se == pytest.approx(np.std(changes, ddof=1) / math.sqrt(len(changes)))
    # BLEU: the whole-split dev_bleu, else the sampled bleu (A1 seed 2), over the finished seeds.
    assert stats["base"].bleu.mean == pytest.approx(23.0)
    assert stats["base"].bleu.std == pytest.approx(np.std([20.0, 22.0, 27.0], ddof=1))
    assert stats["A1"].bleu.mean == pytest.approx(np.mean([18.0, 19.0, 17.0]))
    assert stats["A1"].paper_change == pytest.approx(5.29 / 4.92 - 1)
    assert stats["E"].paper_change == 0.0


def test_each_verdict_case(seeded_root: pathlib.Path) -> None:
    stats = paper_figures.aggregate(sweep_rows.read_sweep_rows(str(seeded_root))[1])
    verdicts = {row: (stats[row].verdict, stats[row].verdict_basis) for row in SEED_ROWS}
    assert verdicts == {
        "base": ("", "reference row"),
        "A1": ("reproduced", "|mean| > 2 x SE, 3 paired seeds"),
        "A4": ("opposite", "|mean| > 2 x SE, 3 paired seeds"),
        "B1": ("within noise", "|mean| <= 2 x SE, 3 paired seeds"),
        "E": ("reproduced", "|mean| <= 2 x SE, 3 paired seeds"),
        "D1": ("reproduced", "|mean| > 2 x SE, 2 paired seeds"),
        "C1": ("opposite", "sign only, 1 seed"),
        "big": ("pending", "no seed finished in both the row and base"),
    }


def test_verdict_rule_directly() -> None:
    # The rule, against hand-computed standard errors: changes (+3, +1, +2)%: mean 2, se 1/√3 = 0.577.
    assert paper_figures.verdict([0.03, 0.01, 0.02], 1) == ("reproduced", "|mean| > 2 x SE, 3 paired seeds")
    assert paper_figures.verdict([0.03, 0.01, 0.02], -1)[0] == "opposite"
    assert paper_figures.verdict([0.03, 0.01, 0.02], 0)[0] == "differs"  # The paper shows no difference.
    # (+3, -1, +2)%: mean 1.33, std 2.08, se 1.20: 1.33 < 2.40.
    assert paper_figures.verdict([0.03, -0.01, 0.02], 1)[0] == "within noise"
    assert paper_figures.verdict([0.03, -0.01, 0.02], 0)[0] == "reproduced"
    assert paper_figures.verdict([0.02, 0.02], 1)[0] == "reproduced"  # No spread at all, nonzero mean.
    assert paper_figures.verdict([0.0, 0.0], 0)[0] == "reproduced"
    assert paper_figures.verdict([-0.01], 1) == ("opposite", "sign only, 1 seed")
    assert paper_figures.verdict([0.01], 0) == ("undecided", "1 seed: no spread to compare with")
    assert paper_figures.verdict([], 1)[0] == "pending"


def test_seeded_csv_columns_and_values(seeded_root: pathlib.Path) -> None:
    all_reports.write_reports(str(seeded_root), str(seeded_root))
    with open(seeded_root / "table2.csv", newline="") as file:
        reader = csv.DictReader(file)
        records = {record["row"]: record for record in reader}
    assert reader.fieldnames[:7] == ["row", "seeds", "dev_ppl_mean", "dev_ppl_std", "dev_bleu_mean",
                                     "dev_bleu_std", "verdict"]
    for kept in ("group", "status", "eval_ppl", "bleu", "params", "paper_dev_ppl", "paper_dev_bleu", "num_heads"):
        assert kept in reader.fieldnames  # What notebook 03 and older readers use.
    assert list(records) == [row for row in table2.ROW_NAMES if row in SEED_PPL]  # The sweep's order.
    a1 = records["A1"]
    assert (a1["seeds"], a1["seeds_pending"], a1["status"], a1["verdict"]) == ("3", "0", "done", "reproduced")
    assert float(a1["dev_ppl_mean"]) == pytest.approx(np.mean(SEED_PPL["A1"]))
    assert float(a1["dev_ppl_std"]) == pytest.approx(np.std(SEED_PPL["A1"], ddof=1))
    assert float(a1["dev_ppl_change_pct_mean"]) == pytest.approx(100 * np.mean(_expected_changes("A1")))
    assert float(a1["dev_ppl_se"]) == pytest.approx(np.std(SEED_PPL["A1"], ddof=1) / math.sqrt(3))
    assert float(a1["dev_ppl_change_pct_se"]) == pytest.approx(100 * np.std(_expected_changes("A1"), ddof=1) / math.sqrt(3))
    table = (seeded_root / "table2.md").read_text(encoding="utf-8")  # The table's ± is the standard error.
    se = np.std(SEED_PPL["A1"], ddof=1) / math.sqrt(3)
    assert f"| {np.mean(SEED_PPL['A1']):.2f} ± {se:.2f} |" in table and "standard error of the mean" in table
    assert float(a1["eval_ppl"]) == pytest.approx(np.mean(SEED_PPL["A1"]) + 1)  # Mean of the raw field.
    assert (a1["params"], a1["step"]) == ("1000", "101.0")  # Shared by the seeds, else their mean.
    d1 = records["D1"]
    assert (d1["seeds"], d1["seeds_pending"], d1["status"], d1["paired_seeds"]) == ("2", "1", "partial", "2")
    c1 = records["C1"]
    assert (c1["seeds"], c1["dev_ppl_std"], c1["verdict"]) == ("1", "", "opposite")
    big = records["big"]
    assert (big["seeds"], big["status"], big["dev_ppl_mean"]) == ("0", "not run", "")
    assert records["base"]["verdict"] == "" and records["base"]["paired_seeds"] == ""


@pytest.mark.integration
def test_seeded_markdown_shows_mean_se_and_pending_seeds(seeded_root: pathlib.Path) -> None:
    all_reports.write_reports(str(seeded_root), str(seeded_root))
    markdown = (seeded_root / "table2.md").read_text()
    tables = _tables(markdown)
    overview, ppl = tables[""], tables["dev PPL"]
    assert overview["A1"]["seeds finished"] == "3 of 3" and overview["A1"]["status"] == "done"
    se = np.std(SEED_PPL["A1"], ddof=1) / math.sqrt(3)  # Every ± is the standard error of the mean.
    assert ppl["A1"]["seeds"] == "3" and ppl["A1"]["dev PPL ± SE"] == f"{np.mean(SEED_PPL['A1']):.2f} ± {se:.2f}"
    changes = 100 * np.array(_expected_changes("A1"))
    assert ppl["A1"]["change vs base ± SE"] == (f"{changes.mean():+.1f}% ± "
                                                f"{changes.std(ddof=1) / math.sqrt(3):.1f}%")
    assert ppl["A1"]["paper change vs base"] == "+7.5%" and ppl["A1"]["paper verdict"] == "reproduced"
    assert tables["dev BLEU"]["A1"]["dev BLEU ± SE"] == "18.0 ± 0.6"
    assert tables["steps"]["A1"]["steps ± SE"] == "101 ± 1"  # Steps 100, 101 and 102.
    assert tables["wall s"]["A1"]["wall s ± SE"] == "120 ± 35"  # Per seed: 1, 2 and 3 minutes.
    assert overview["D1"]["seeds finished"] == "2 of 3" and overview["D1"]["status"] == "partial"
    assert overview["C1"]["seeds finished"] == "1 of 3" and overview["C1"]["status"] == "partial"
    assert ppl["C1"]["dev PPL ± SE"] == "9.50" and ppl["C1"]["paper verdict"] == "opposite (sign only)"
    assert overview["big"]["seeds finished"] == "0 of 3" and ppl["big"]["paper verdict"] == "pending"
    assert overview["big"]["status"] == "not run"
    assert ppl["E"]["paper verdict"] == "reproduced" and ppl["E"]["paper change vs base"] == "+0.0%"
    assert "|mean| > 2 x its standard error" in markdown and "ddof=1" in markdown
    assert "Paper verdicts: 3 reproduced, 2 opposite, 1 within noise, 1 pending." in markdown
    assert "5 of 8 rows finished." in markdown


def _standard_error(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


def _paired_change_figure(rows: list, compared: dict) -> Any:
    metrics = [metric for metric in comparison.METRICS if metric.name in ("dev_ppl", "dev_bleu")]
    return comparison_plot._draw_paired_changes(rows, compared, "base", metrics, paper=True)


def test_seeded_plot_draws_paired_changes_with_standard_errors_beside_the_papers(seeded_root: pathlib.Path) -> None:
    import matplotlib.pyplot as plt

    _, rows = sweep_rows.read_sweep_rows(str(seeded_root))
    compared = comparison.compare(str(seeded_root), rows, "base")
    figure = _paired_change_figure(rows, compared)
    assert len(figure.axes) == 2  # A dev PPL panel and a dev BLEU panel.
    ppl_axis, bleu_axis = figure.axes
    others = [row.row for row in rows if row.row != "base"]
    assert others[:2] == ["A1", "A4"]
    expected = {row: 100 * np.array(_expected_changes(row)) for row in ("A1", "A4")}
    for container, row in zip(ppl_axis.containers, ("A1", "A4")):
        line, _, (horizontal,) = container
        assert list(line.get_xdata()) == pytest.approx([expected[row].mean()])
        (start, end), = horizontal.get_segments()
        assert end[0] - start[0] == pytest.approx(2 * _standard_error(list(expected[row])))
    base_paper = table2.get_config("base").paper.dev_ppl
    paper_marks = [mark for mark in ppl_axis.lines if mark.get_marker() == "s"]
    assert [list(mark.get_xdata()) for mark in paper_marks] == [pytest.approx(
        [100 * (table2.get_config(row).paper.dev_ppl / base_paper - 1) for row in others])]
    assert [label.get_text() for label in ppl_axis.get_yticklabels()] == others
    bleu_ours = bleu_axis.containers[0][0]  # A1: 18 - 20, 19 - 22, and the sampled 17 - 27 (seed 2).
    assert list(bleu_ours.get_xdata())[0] == pytest.approx(np.mean([18 - 20, 19 - 22, 17 - 27]))
    plt.close(figure)
    assert all_reports.write_reports(str(seeded_root), str(seeded_root))[2].endswith("table2.png")


def test_a_long_title_is_wrapped_to_fit_the_figure(seeded_root: pathlib.Path) -> None:
    import matplotlib.pyplot as plt

    _, rows = sweep_rows.read_sweep_rows(str(seeded_root))
    for members in (rows, [row for row in rows if row.row in ("base", "A1")]):  # Wide and narrow figures.
        figure = _paired_change_figure(members, comparison.compare(str(seeded_root), members, "base"))
        title = "table2: paired changes against base, ours vs the paper (" + "/very_long_directory" * 12 + ")"
        comparison._fit_title(figure, title)
        figure.canvas.draw()
        extent = figure._suptitle.get_window_extent()
        assert 0 <= extent.x0 and extent.x1 <= figure.bbox.width, (extent, figure.bbox.width)
        assert "".join(figure.get_suptitle().split()) == "".join(title.split())  # Only line breaks added.
        plt.close(figure)


def test_seeded_root_without_sweep_record(tmp_path: pathlib.Path) -> None:
    _write_seed(tmp_path, "base", 0, 10.0)
    _write_seed(tmp_path, "base", 1, 11.0)
    _write_seed(tmp_path, "A1", 1, 12.1)
    record, rows = sweep_rows.read_sweep_rows(str(tmp_path))
    assert record == {} and [row.row for row in rows] == ["A1", "base"]
    assert [[run.seed for run in row.runs] for row in rows] == [[1], [0, 1]]
    stats = paper_figures.aggregate(rows, "base")
    assert list(stats["A1"].ppl.changes.values()) == pytest.approx([12.1 / 11.0 - 1])  # Paired with base seed 1 only.


def test_reported_ppl_prefers_the_kept_parameters() -> None:
    assert comparison._reported_ppl({"dev_ppl": 5.0, "best_eval_ppl": 6.0, "eval_ppl": 7.0}) == 5.0
    stopped = {"best_eval_ppl": 6.0, "eval_ppl": 7.0, "stop_reason": "early_stopping"}
    assert comparison._reported_ppl(stopped) == 6.0  # The best checkpoint is the model kept.
    assert comparison._reported_ppl(dict(stopped, stop_reason="num_train_steps")) == 7.0
    assert comparison._reported_ppl({}) is None


def test_diverged_tells_a_blow_up_from_overfitting() -> None:
    # table2_small's C3 seed 1 (blew up) and D1 seed 0 (overfit, ran on to 2x): perplexity alone can't
    # tell them apart, the dev accuracy at the end against that at the best evaluation does.
    def run(best_ppl, last_ppl, accuracy_at_best, last_accuracy):
        results = dict(best_eval_ppl=best_ppl, eval_ppl=last_ppl, eval_accuracy=last_accuracy)
        return sweep_rows.SeedRun(0, "done", {}, results, accuracy_at_best)

    assert comparison.diverged(run(200.0, 1584.4, 0.101, 0.020))
    assert not comparison.diverged(run(55.3, 120.0, 0.275, 0.276))  # Overfit: accuracy held.
    assert not comparison.diverged(run(200.0, 399.0, 0.101, 0.020))  # Within 2x.
    assert comparison.diverged(run(200.0, 1584.4, None, 0.020))  # No metrics: perplexity alone.
    assert not comparison.diverged(sweep_rows.SeedRun(0, "done", {}, dict(eval_ppl=1584.4)))  # No best.


def _write_dev_accuracy(run_dir: pathlib.Path, accuracy_by_step: dict[int, float]) -> None:
    with open(run_dir / "metrics.jsonl", "w") as file:
        for step, accuracy in accuracy_by_step.items():
            file.write(json.dumps({"step": step, "eval/accuracy": accuracy}) + "\n")


def test_a_diverged_seed_makes_the_row_unstable(seeded_root: pathlib.Path) -> None:
    # A1 seed 1 as table2_small's C3 seed 1 ended: best dev PPL 200 at step 1,100, 1,584 at its last
    # evaluation, dev accuracy 0.101 then 0.020. The other two seeds still reproduce the paper's
    # direction (+10% and +10% vs base). B1 seed 0 overfits the same way but keeps its accuracy.
    def rewrite(row, accuracy_at_best, last_accuracy):
        run_dir = seeded_root / row / "seed_1"
        results = json.loads((run_dir / "results.json").read_text())
        results.update(best_eval_ppl=200.0, best_step=1100, eval_ppl=1584.4, eval_accuracy=last_accuracy,
                       dev_ppl=200.0, stop_reason="early_stopping")
        (run_dir / "results.json").write_text(json.dumps(results))
        _write_dev_accuracy(run_dir, {1000: 0.09, 1100: accuracy_at_best, 1600: last_accuracy})

    rewrite("A1", 0.101, 0.020)
    rewrite("B1", 0.275, 0.276)
    stats = paper_figures.aggregate(sweep_rows.read_sweep_rows(str(seeded_root))[1])
    a1 = stats["A1"]
    others = [SEED_PPL["A1"][seed] / SEED_PPL["base"][seed] - 1 for seed in (0, 2)]
    expected_others = paper_figures.verdict(others, 1)
    assert expected_others[0] == "reproduced"
    assert a1.verdict == "unstable" and a1.ppl.diverged == (1,)
    assert a1.verdict_basis == ("seed 1 diverged (a non-finite loss, or last dev PPL > 2x its best); the other seeds: "
                                f"{expected_others[0]} ({expected_others[1]})")
    healthy = [SEED_PPL["A1"][0], SEED_PPL["A1"][2]]  # The one rule: a diverged seed is left out of the means.
    assert a1.ppl.seeds == 2 and a1.ppl.mean == pytest.approx(np.mean(healthy))
    assert a1.ppl.se == pytest.approx(np.std(healthy, ddof=1) / np.sqrt(2))
    assert a1.ppl.change_mean == pytest.approx(np.mean(others)) and a1.ppl.paired_seeds == 2
    assert stats["B1"].ppl.diverged == () and stats["B1"].verdict != "unstable"

    all_reports.write_reports(str(seeded_root), str(seeded_root))
    a1_cells = _tables((seeded_root / "table2.md").read_text())["dev PPL"]["A1"]
    assert a1_cells["paper verdict"] == "unstable (seed 1 diverged)" and a1_cells["seeds"] == "2 of 3; 1 diverged"
    with open(seeded_root / "table2.csv", newline="") as file:
        assert {record["row"]: record["verdict"] for record in csv.DictReader(file)}["A1"] == "unstable"


def _report_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_jax.report", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)


def _files(directory: pathlib.Path) -> dict[str, int]:
    return {str(path.relative_to(directory)): path.stat().st_mtime_ns for path in directory.rglob("*")}


@pytest.mark.slow
def test_report_cli_mistakes_are_one_line_and_write_nothing(sweep_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("not a sweep")
    on_file = _report_cli(str(a_file))
    assert on_file.returncode == 2 and on_file.stderr.count("\n") == 1, on_file.stderr
    assert "is a file, not a directory" in on_file.stderr and "sweep.json" in on_file.stderr
    (sweep_root / "A1" / "results.json").write_text('{"step": 100, "eval_')  # Half-written.
    before = _files(sweep_root)
    half = _report_cli(str(sweep_root))
    assert half.returncode == 2 and half.stderr.count("\n") == 1, half.stderr
    assert "A1/results.json is not valid JSON" in half.stderr and _files(sweep_root) == before


@pytest.mark.slow
def test_report_of_a_read_only_root_is_refused_or_written_elsewhere(sweep_root: pathlib.Path,
                                                                    tmp_path: pathlib.Path) -> None:
    from tests.support.read_only import read_only

    before = _files(sweep_root)
    with read_only(sweep_root):
        refused = _report_cli(str(sweep_root))
        elsewhere = _report_cli(str(sweep_root), f"--out={tmp_path / 'report'}")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "read-only file system" in refused.stderr or "not writable" in refused.stderr
    assert "Pass --out=DIR to write the report elsewhere" in refused.stderr
    assert "Traceback" not in refused.stderr and _files(sweep_root) == before
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    assert elsewhere.stdout.split()[0] == str(tmp_path / "report" / "table2.md")
    assert "| A1 |" in (tmp_path / "report" / "table2.md").read_text()
