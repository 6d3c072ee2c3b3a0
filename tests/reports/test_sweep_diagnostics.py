"""attention_jax.reports.sweep_diagnostics: learning speed, overfitting and how runs ended, against hand figures."""

from __future__ import annotations

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
    assert paths[-1] == str(root / "table2_diagnostics.md")
    assert "| C1 | 2 |" in pathlib.Path(paths[-1]).read_text()
    for path in root.rglob("metrics.jsonl"):
        path.unlink()
    assert not any(path.endswith("_diagnostics.md") for path in all_reports.write_reports(str(root), str(root)))
