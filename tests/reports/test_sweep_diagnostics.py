"""attention_jax.reports.sweep_diagnostics: learning speed, overfitting and how runs ended, against hand figures."""

from __future__ import annotations

import csv
import json
import pathlib

from attention_jax.reports import all_reports, sweep_diagnostics, sweep_rows
from configs import table2
from launch import sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT

# Per row and seed: dev perplexity by step, training perplexity by step, stop reason.
RUNS = {
    "base": [({100: 90.0, 200: 50.0, 300: 40.0, 400: 41.0}, {100: 95.0, 200: 45.0, 300: 20.0, 400: 18.0},
              "early_stopping"),
             ({100: 80.0, 200: 48.0, 300: 44.0, 400: 42.0, 500: 43.0}, {100: 85.0, 400: 21.0},
              "early_stopping")],
    "C1": [({100: 60.0, 200: 30.0, 300: 31.0}, {100: 70.0, 150: 40.0, 300: 10.0}, "early_stopping"),
           ({100: 70.0, 200: 34.0}, {100: 75.0, 200: 17.0}, "num_train_steps")],
    # Seed 1 diverges as table2_small's C3 seed 1 did: dev PPL 150 -> 900, dev accuracy 0.10 -> 0.02.
    "C3": [({100: 100.0, 200: 70.0, 300: 60.0}, {100: 110.0, 300: 30.0}, "num_train_steps"),
           ({100: 200.0, 200: 150.0, 300: 400.0, 400: 900.0}, {100: 210.0, 400: 180.0}, "early_stopping")],
}
DEV_ACCURACY = {("C3", 1): {200: 0.10, 400: 0.02}}


def _write_sweep(root: pathlib.Path) -> None:
    sweep = sweep_spec.load_sweep(str(REPO_ROOT / "configs" / "table2.py"))
    sweep_record.record_launch(str(root), sweep_record.sweep_description(sweep, [], seeds=[0, 1]), list(RUNS),
                               "local", force=False)
    for row, seeds in RUNS.items():
        for seed, (dev, train, stop_reason) in enumerate(seeds):
            run_dir = root / row / f"seed_{seed}"
            run_dir.mkdir(parents=True)
            config = table2.get_config(row)
            config.seed = seed
            (run_dir / "config.json").write_text(config.to_json_best_effort())
            records = [{"step": step, "train/perplexity": ppl} for step, ppl in train.items()]
            accuracy = DEV_ACCURACY.get((row, seed), {})
            records += [{"step": step, "eval/perplexity": ppl, **({"eval/accuracy": accuracy[step]}
                                                                  if step in accuracy else {})}
                        for step, ppl in dev.items()]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
            best_step = min(dev, key=dev.get)
            (run_dir / "results.json").write_text(json.dumps({
                "dev_ppl": dev[best_step], "step": max(dev), "stop_reason": stop_reason, "best_step": best_step,
                "best_eval_ppl": dev[best_step], "eval_ppl": dev[max(dev)],
                "eval_accuracy": accuracy.get(max(dev))}))


def test_diagnostics_of_each_run_and_row_match_hand_figures(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    _write_sweep(root)
    _, rows = sweep_rows.read_sweep_rows(str(root))
    collected = sweep_diagnostics._collect(str(root), rows)
    base_0, base_1 = collected["base"]
    assert (base_0.best_step, base_0.best_dev_ppl, base_0.train_ppl_at_best) == (300, 40.0, 20.0)
    assert (base_1.best_step, base_1.train_ppl_at_best) == (400, 21.0)
    c1_0 = collected["C1"][0]
    assert (c1_0.best_step, c1_0.train_ppl_at_best) == (200, 40.0)  # The last training log at or before 200.
    assert c1_0.dev_ppl_at(250) == 30.0 and c1_0.dev_ppl_at(99) is None
    # S: half of base's mean best step (350 / 2 = 175), down to an evaluated step: 100.
    assert sweep_diagnostics._reference_step(collected["base"]) == 100
    text = sweep_diagnostics._diagnostics_markdown(str(root), "table2", rows, "base")
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    # base: best steps 300 and 400, bests 40 and 42, at step 100: 90 and 80, train 20 and 21, gaps 2 and 2.
    assert lines["base"] == "| base | 2 | early_stopping x2 | 350 | 41.00 | 85.00 |  | 20.50 | 2.00 |"
    # C1: at step 100: 60 and 70 (65, -23.5% against 85); gaps 30/40 and 34/17.
    assert lines["C1"] == ("| C1 | 2 | early_stopping x1, num_train_steps x1 | 200 | 32.00 | 65.00 | -23.5% "
                           "| 28.50 | 1.38 |")
    assert "step 100" in text


def test_a_diverged_seed_is_counted_but_left_out_of_the_figures(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    _write_sweep(root)
    _, rows = sweep_rows.read_sweep_rows(str(root))
    collected = sweep_diagnostics._collect(str(root), rows)
    assert [run.diverged for run in collected["C3"]] == [False, True]
    assert not any(run.diverged for run in collected["base"] + collected["C1"])  # Base ends within 2x.
    text = sweep_diagnostics._diagnostics_markdown(str(root), "table2", rows, "base")
    lines = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    # Seed 0 alone: best 60 at step 300, 100 at step 100 (+17.6% against base's 85), train 30, gap 2.
    assert lines["C3"] == ("| C3 | 2 | diverged x1, num_train_steps x1 | 300 | 60.00 | 100.00 | +17.6% "
                           "| 30.00 | 2.00 |")


def test_report_writes_the_diagnostics_only_when_runs_have_curves(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    _write_sweep(root)
    paths = all_reports.write_reports(str(root), str(root))
    assert str(root / "table2_diagnostics.md") in paths
    assert "| C1 | 2 |" in (root / "table2_diagnostics.md").read_text()
    for path in root.rglob("metrics.jsonl"):
        path.unlink()
    assert not any(path.endswith("_diagnostics.md") for path in all_reports.write_reports(str(root), str(root)))


def _csv_lines(path: pathlib.Path) -> dict[tuple[str, str], dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as file:
        return {(line["row"], line["seed"]): line for line in csv.DictReader(file)}


def test_every_run_gets_its_own_figures_and_the_rows_their_glance(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    _write_sweep(root)
    for run_dir, losses, rates in ((root / "base" / "seed_0", (8.0, 6.5, 3.0), (1e-4, 2e-3, 1e-3)),
                                   (root / "C1" / "seed_1", (7.0,), (5e-4,))):
        with (run_dir / "metrics.jsonl").open("a") as file:
            file.writelines(json.dumps({"step": 10 * (i + 1), "train/loss": loss, "train/learning_rate": rate}) + "\n"
                            for i, (loss, rate) in enumerate(zip(losses, rates)))
    for row, seed, wall_s in (("base", 0, 100.0), ("base", 1, 300.0), ("C1", 0, 250.0)):
        results = root / row / f"seed_{seed}" / "results.json"
        results.write_text(json.dumps({**json.loads(results.read_text()), "wall_s": wall_s}))
    paths = all_reports.write_reports(str(root), str(root))
    assert {str(root / "table2_runs.md"), str(root / "table2_runs.csv")} <= set(paths)
    lines = _csv_lines(root / "table2_runs.csv")
    # Target: 1.25 x base's mean best (40 and 42) = 51.25, first reached at step 200 by every healthy run.
    base_0, c1_0, c3_1 = lines[("base", "0")], lines[("C1", "0")], lines[("C3", "1")]
    assert (base_0["status"], base_0["best_step"], base_0["first_dev_ppl"], base_0["steps_to_target"]) == (
        "done", "300", "90.0", "200")
    assert (base_0["first_train_loss"], base_0["last_train_loss"], base_0["peak_learning_rate"]) == (
        "8.0", "3.0", "0.002")
    # C1 seed 0 at S = step 100: 60; best 30 at 200 over training perplexity 40 there.
    assert (c1_0["dev_ppl_at_step_s"], c1_0["dev_over_train"], c1_0["wall_s"]) == ("60.0", "0.75", "250.0")
    assert (c3_1["status"], c3_1["steps_to_target"]) == ("diverged", "")  # 150 and up: never under 51.25.
    text = (root / "table2_runs.md").read_text()
    assert "6 runs: 6 finished (1 diverged), 0 not finished. Wall time of the finished runs: 100-300 s" in text
    glance = {line.split(" | ")[0].lstrip("| "): line for line in text.split("## Every run")[0].splitlines()
              if line.startswith("| ")}
    # base: dev PPL 40 and 42 (41 ± 1); C1: 30 and 34, paired -25.0% and -19.0% (-22.0% ± 3.0%); C3 seed 0 alone.
    assert glance["base"] == "| base | 2 | 41.00 ± 1.00 |  |  |  | 200 ± 0 | 85.00 | 2.00 |"
    assert glance["C1"].startswith("| C1 | 2 | 32.00 ± 2.00 | -22.0% ± 3.0% |")
    assert glance["C3"].startswith("| C3 | 1 of 2; 1 diverged | 60.00 |") and "| none of 1 |" in glance["C3"]
