"""The step-budget report (attention_jax/reports/step_budgets.py) on sweeps written by hand."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from attention_jax.reports import step_budgets

from tests.support import REPO_ROOT

PAPER = {"base": 4.92, "A1": 5.29, "C1": 6.11, "E": 4.92}


def _write_run(root: pathlib.Path, row: str, seed: int, dev: dict[int, float], train: dict[int, float],
               wall_s: float | None = None) -> None:
    run_dir = root / row / f"seed_{seed}"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"name": row, "paper": {"dev_ppl": PAPER[row]}}))
    records = [{"step": step, "train/perplexity": ppl} for step, ppl in train.items()]
    records += [{"step": step, "eval/perplexity": ppl} for step, ppl in dev.items()]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    if wall_s is not None:
        last = max(dev)
        (run_dir / "results.json").write_text(json.dumps({"step": last, "wall_s": wall_s, "finished": True}))


@pytest.fixture()
def sweep_root(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "pilot"
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps({"all_rows": ["base", "A1", "C1", "E"]}))
    for seed, noise in ((0, 1.0), (1, 1.02)):
        _write_run(root, "base", seed, {1000: 40 * noise, 2000: 20 * noise, 3000: 10 * noise},
                   {2500: 12.0, 2900: 14.0, 3000: 16.0, 2000: 99.0}, wall_s=600.0)
        # A1 is worse than base at step 2,000 (the paper's direction) but better at 3,000.
        _write_run(root, "A1", seed, {1000: 42 * noise, 2000: 22 * noise, 3000: 9 * noise}, {3000: 10.0},
                   wall_s=900.0)
        # C1 is better than base at every step (against the paper's direction).
        _write_run(root, "C1", seed, {1000: 30 * noise, 2000: 15 * noise, 3000: 9.5 * noise}, {3000: 9.0})
    _write_run(root, "E", 0, {1000: 41.0, 2000: 20.1}, {2000: 20.0})  # One seed, stopped before 3,000.
    return root


def test_each_budget_judges_rows_by_seed_against_the_paper(sweep_root: pathlib.Path) -> None:
    runs = step_budgets.read_sweep(str(sweep_root))
    at_2000 = {item.row: item for item in step_budgets._judge_budget(runs, 2000)}
    at_3000 = {item.row: item for item in step_budgets._judge_budget(runs, 3000)}
    assert at_2000["A1"].verdict == "reproduced" and at_3000["A1"].verdict == "opposite"
    assert at_2000["C1"].verdict == at_3000["C1"].verdict == "opposite"
    assert at_2000["A1"].changes == pytest.approx((22 / 20 - 1, 22 / 20 - 1))
    assert at_2000["A1"].paper_change == pytest.approx(5.29 / 4.92 - 1)
    assert "E" in at_2000 and "E" not in at_3000  # Not evaluated at step 3,000.
    assert at_2000["E"].paper_change == 0.0 and at_2000["E"].verdict == "undecided"


def test_summary_gives_counts_ratio_improvement_and_minutes(sweep_root: pathlib.Path) -> None:
    runs = step_budgets.read_sweep(str(sweep_root))
    text = step_budgets.budget_markdown(runs, [2000, 3000], window=500)
    summary = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[1:-1]]
               for line in text.splitlines() if line.startswith("| 2,000") or line.startswith("| 3,000")}
    assert summary["2,000"][1] == "1 of 2" and summary["3,000"][1] == "0 of 2"
    assert summary["3,000"][2] == "2"
    # Base at 3,000: dev 10.0 and 10.2, training perplexity averaged over (2,500, 3,000]: (14 + 16) / 2.
    assert summary["3,000"][4] == f"{(10.0 + 10.2) / 2:.2f}"
    assert summary["3,000"][5] == f"{(10.0 / 15 + 10.2 / 15) / 2:.2f}"
    assert summary["3,000"][6] == "-50.0%"  # Dev perplexity halved over the last 1,000 steps.
    # Base: 600 s for 3,000 steps, so 10 minutes to 3,000; A1 is the slowest: 15 minutes.
    assert summary["3,000"][7] == "10; 15 (A1)"


@pytest.mark.slow
def test_command_writes_report_and_plot_and_names_a_bad_root(sweep_root: pathlib.Path,
                                                             tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    command = [sys.executable, "-m", "attention_jax.reports.step_budgets", f"--root={sweep_root}",
               "--budgets=2000,3000", f"--out={out}"]
    completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "## 3,000 steps" in (out / "step_budgets.md").read_text()
    assert (out / "step_budgets.png").read_bytes()[:4] == b"\x89PNG"
    bad = subprocess.run([sys.executable, "-m", "attention_jax.reports.step_budgets", f"--root={tmp_path}"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        f"attention_jax.reports.step_budgets: error: --root={str(tmp_path)!r} holds no sweep.json; point it at a sweep root."]
