"""launch.export_results: a sweep's finished runs copied without checkpoints, readable by the report."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from attention_jax.reports import all_reports, paper_figures, sweep_rows
from configs import table2
from launch import export_results, sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT

DEV_PPL = {"base": [10.0, 11.0], "A1": [11.0, None]}  # A1 seed 1 still running.


def _write_run(root: pathlib.Path, row: str, seed: int, ppl: float | None) -> None:
    run_dir = root / row / f"seed_{seed}"
    (run_dir / "checkpoints" / "100").mkdir(parents=True)
    (run_dir / "checkpoints" / "100" / "state").write_bytes(b"\0" * 1024)
    config = table2.get_config(row)
    config.seed = seed
    (run_dir / "config.json").write_text(config.to_json_best_effort())
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 100, "eval/perplexity": ppl or 50.0}) + "\n")
    (run_dir / "log.txt").write_text("a log\n")
    if ppl is not None:
        (run_dir / "results.json").write_text(json.dumps(dict(step=100, params=1000, dev_ppl=ppl, dev_bleu=5.0)))
        (run_dir / "eval_dev.json").write_text(json.dumps({"bleu": 5.0}))
        (run_dir / "data_splits.json").write_text(json.dumps({"validation": {"pairs": 3, "sha256": "ab"}}))
        (run_dir / "length_buckets.json").write_text(json.dumps({"buckets": {"within_cap": {"bleu": 5.0}}}))
        (run_dir / "position_losses.json").write_text(json.dumps({"sums": [1.0], "counts": [1]}))


@pytest.fixture()
def sweep_root(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "runs" / "t2"
    sweep = sweep_spec.load_sweep(str(REPO_ROOT / "configs" / "table2.py"))
    description = sweep_record.sweep_description(sweep, [], seeds=[0, 1])
    sweep_record.record_launch(str(root), description, ["base", "A1", "B1"], "local", force=False)
    for row, values in DEV_PPL.items():
        for seed, ppl in enumerate(values):
            _write_run(root, row, seed, ppl)
    return root


def test_copies_finished_runs_only_without_checkpoints(sweep_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    destination = tmp_path / "docs" / "t2"
    written = export_results.export_results(str(sweep_root), str(destination))
    expected = {"sweep.json"} | {f"{row}/seed_{seed}/{name}" for row, seed in [("base", 0), ("base", 1), ("A1", 0)]
                                  for name in ("config.json", "results.json", "metrics.jsonl", "eval_dev.json",
                                               "data_splits.json", "length_buckets.json", "position_losses.json")}
    assert set(written) == expected
    copied = {str(path.relative_to(destination)) for path in destination.rglob("*") if path.is_file()}
    assert copied == expected  # No checkpoints, logs, or files of the running seed.


def test_report_of_the_copy_equals_the_report_of_the_sweep(sweep_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    destination = tmp_path / "docs" / "t2"
    export_results.export_results(str(sweep_root), str(destination))
    original = paper_figures.aggregate(sweep_rows.read_sweep_rows(str(sweep_root))[1])
    copy = paper_figures.aggregate(sweep_rows.read_sweep_rows(str(destination))[1])
    assert copy == original
    assert list(copy["A1"].ppl.changes.values()) == pytest.approx([11.0 / 10.0 - 1])
    all_reports.write_reports(str(destination), str(destination))
    markdown = (destination / "table2.md").read_text()
    assert "| A1 | partial | 1 of 2 |" in markdown and "| B1 | not run | 0 of 2 |" in markdown  # A1 half done.


def test_rerun_copies_only_what_is_new_or_changed(sweep_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    destination = tmp_path / "docs" / "t2"
    export_results.export_results(str(sweep_root), str(destination))
    assert export_results.export_results(str(sweep_root), str(destination)) == []
    a1_results = sweep_root / "A1" / "seed_1" / "results.json"
    a1_results.write_text(json.dumps(dict(step=100, params=1000, dev_ppl=12.0, dev_bleu=4.0)))
    (sweep_root / "base" / "seed_0" / "metrics.jsonl").write_text('{"step": 200}\n')
    assert set(export_results.export_results(str(sweep_root), str(destination))) == {
        "A1/seed_1/config.json", "A1/seed_1/results.json", "A1/seed_1/metrics.jsonl", "base/seed_0/metrics.jsonl"}
    assert (destination / "base" / "seed_0" / "metrics.jsonl").read_text() == '{"step": 200}\n'


@pytest.mark.slow
def test_missing_root_is_named_with_exit_status_2(tmp_path: pathlib.Path) -> None:
    result = subprocess.run([sys.executable, "-m", "launch.export_results", f"--root={tmp_path / 'nowhere'}",
                             f"--to={tmp_path / 'out'}"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert "nowhere does not exist" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_destination_or_root_that_is_a_file_is_one_line(sweep_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    for root, destination, expected in ((sweep_root, a_file, f"--to={a_file} is a file, not a directory"),
                                        (a_file, tmp_path / "out", f"--root={a_file} is a file, not a directory")):
        result = subprocess.run([sys.executable, "-m", "launch.export_results", f"--root={root}",
                                 f"--to={destination}"], cwd=REPO_ROOT, capture_output=True, text=True)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert expected in result.stderr
    assert a_file.read_text() == "not a directory" and not (tmp_path / "out").exists()
