"""attention_jax.reports.training_speed: steps to a fixed dev perplexity and gradient norms, by hand figures."""

from __future__ import annotations

import json
import pathlib

from attention_jax.reports import all_reports, sweep_diagnostics, sweep_rows, training_speed
from configs.sweeps import normalization as sweep_config
from launch import sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT

# Per row and seed: dev perplexity by step and the gradient norms (step 1, step 50) of encoder_0 and decoder_0.
RUNS = {
    "base": [({100: 90.0, 200: 50.0, 300: 40.0}, (8.0, 1.0), (2.0, 0.5)),
             ({100: 80.0, 200: 44.0, 300: 42.0}, (6.0, 3.0), (4.0, 1.5))],
    "post_batch_norm": [({100: 120.0, 200: 70.0, 300: 50.0}, (1.0, 1.0), (1.0, 1.0)),
                        ({100: 100.0, 200: 60.0, 300: 55.0, 400: 51.0}, (3.0, 1.0), (1.0, 1.0))],
    # Seed 0 never reaches the target; seed 1 diverges (dev PPL 90 -> 900, dev accuracy 0.10 -> 0.02).
    "no_residual": [({100: 300.0, 200: 250.0, 300: 200.0}, (0.5, 0.5), (0.5, 0.5)),
                    ({100: 100.0, 200: 90.0, 300: 400.0, 400: 900.0}, (0.5, 0.5), (0.5, 0.5))],
}
DEV_ACCURACY = {("no_residual", 1): {200: 0.10, 400: 0.02}}


def _write_sweep(root: pathlib.Path) -> None:
    sweep = sweep_spec.load_sweep(str(REPO_ROOT / "configs" / "sweeps" / "normalization.py"))
    sweep_record.record_launch(str(root), sweep_record.sweep_description(sweep, [], seeds=[0, 1]), list(RUNS),
                               "local", force=False)
    for row, seeds in RUNS.items():
        for seed, (dev, (init_encoder, init_decoder), (early_encoder, early_decoder)) in enumerate(seeds):
            run_dir = root / row / f"seed_{seed}"
            run_dir.mkdir(parents=True)
            config = sweep_config.get_config(row)
            config.seed = seed
            (run_dir / "config.json").write_text(config.to_json_best_effort())
            records = [{"step": 50, "train/loss": 5.0, "train/grad_norm/encoder_0": early_encoder,
                        "train/grad_norm/decoder_0": early_decoder, "train/init/grad_norm/encoder_0": init_encoder,
                        "train/init/grad_norm/decoder_0": init_decoder},
                       {"step": 100, "train/loss": 4.0, "train/grad_norm/encoder_0": 99.0}]
            accuracy = DEV_ACCURACY.get((row, seed), {})
            records += [{"step": step, "eval/perplexity": ppl, **({"eval/accuracy": accuracy[step]}
                                                                  if step in accuracy else {})}
                        for step, ppl in dev.items()]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
            best_step = min(dev, key=dev.get)
            (run_dir / "results.json").write_text(json.dumps({
                "dev_ppl": dev[best_step], "step": max(dev), "stop_reason": "num_train_steps", "best_step": best_step,
                "best_eval_ppl": dev[best_step], "eval_ppl": dev[max(dev)], "eval_accuracy": accuracy.get(max(dev))}))


def test_steps_to_the_target_and_gradient_norms_match_hand_figures(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "normalization"
    _write_sweep(root)
    _, rows = sweep_rows.read_sweep_rows(str(root))
    assert training_speed._applies(rows, "base", ("normalization", "residual_connections"))
    target = sweep_diagnostics._target_perplexity(str(root), rows, "base")
    assert target == 1.25 * (40.0 + 42.0) / 2  # 51.25
    compared = {row.row: row for row in training_speed._compare_rows(str(root), rows, target, "base")}
    base, batch_norm, no_residual = compared["base"], compared["post_batch_norm"], compared["no_residual"]
    assert base.steps == {0: 200, 1: 200} and base.reading == "reference"
    assert batch_norm.steps == {0: 300, 1: 400} and batch_norm.step_changes == {0: 100.0, 1: 200.0}
    assert batch_norm.reading == "slower"  # Mean 150, SE 50: beyond 2 x SE.
    assert no_residual.steps == {0: None} and no_residual.diverged_seeds == (1,)
    assert no_residual.reading == "pending"
    assert base.init_norms == {"encoder_0": 7.0, "decoder_0": 2.0}
    assert base.early_norms == {"encoder_0": 3.0, "decoder_0": 1.0} and base.early_step == 50
    text = training_speed._markdown_report(str(root), list(compared.values()), target, "base")
    steps_table, init_table, _ = text.split("## Gradient norm per module")
    lines = {line.split(" | ")[0].lstrip("| "): line for line in steps_table.splitlines() if line.startswith("| ")}
    assert lines["post_batch_norm"] == "| post_batch_norm | 2 | 0 | 0 | 350 ± 50 | +150 ± 50 | slower |"
    assert lines["no_residual"] == "| no_residual | 2 | 1 | 1 |  |  | pending |"
    assert "Target dev perplexity: 51.25" in text
    assert "| base | 7 | 2 |" in init_table and "| post_batch_norm | 2 | 1 |" in init_table


def test_the_report_command_writes_it_only_for_a_normalisation_sweep(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "normalization"
    _write_sweep(root)
    paths = all_reports.write_reports(str(root), str(tmp_path / "out"))
    assert str(tmp_path / "out" / "normalization_training.md") in paths
    # The sweep's own comparison report keeps its name (the sweep file's): neither overwrites the other.
    assert len(paths) == len(set(paths))
    assert "## Gradient norm per module" in (tmp_path / "out" / "normalization_training.md").read_text()
    assert "## Gradient norm per module" not in (tmp_path / "out" / "normalization.md").read_text()
    _, rows = sweep_rows.read_sweep_rows(str(root))
    assert not training_speed._applies([row for row in rows if row.row == "base"], "base", ("normalization",))


def test_a_partial_sweep_reports_what_has_finished(tmp_path: pathlib.Path) -> None:
    # The sweep still running: base seed 1 has not finished and no_residual has not started.
    root = tmp_path / "normalization"
    _write_sweep(root)
    (root / "base" / "seed_1" / "results.json").unlink()
    for path in sorted((root / "no_residual").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    paths = all_reports.write_reports(str(root), str(tmp_path / "out"))
    text = (tmp_path / "out" / "normalization_training.md").read_text(encoding="utf-8")
    assert str(tmp_path / "out" / "normalization_training.md") in paths
    assert "Target dev perplexity: 50.00 (1.25 x base's mean best)" in text  # Base seed 0 alone: 1.25 x 40.
    steps_table = text.split("## Gradient norm per module")[0]
    lines = {line.split(" | ")[0].lstrip("| "): line for line in steps_table.splitlines() if line.startswith("| ")}
    # Seed 0 reaches 50 at step 300 against base's 200; seed 1 (51 at best) does not, and has no base seed.
    assert lines["post_batch_norm"] == "| post_batch_norm | 2 | 0 | 1 | 300 | +100 | 1 seed |"
    assert "no_residual" not in lines
