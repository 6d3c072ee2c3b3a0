"""The comparison report of any sweep: every row against a reference row, paired by seed (issue 72).

A sweep of one's own (rows ``heads2``, ``heads4``, ``heads8`` of the tiny config, three seeds) is written
by hand into a temporary root, as ``launch.sweep`` and training would leave it; the report's figures are
checked against NumPy (mean, standard error with ddof=1, paired change per seed).
"""

from __future__ import annotations

import csv
import json
import pathlib
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

from attention_jax.foundation.user_errors import UserInputError
from attention_jax.reports import all_reports, comparison, comparison_report, sweep_rows
from launch import sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT

SWEEP_FILE = '''
from configs import tiny


def get_config():
    return tiny.get_config()


def get_sweep():
    return {"heads2": dict(num_heads=2), "heads4": dict(num_heads=4), "heads8": dict(num_heads=8)}
'''
DEV_PPL = {"heads2": [10.0, 12.0, 11.0], "heads4": [9.0, 11.5, 9.9], "heads8": [10.5, None, None]}
DEV_BLEU = {"heads2": [20.0, 18.0, 19.0], "heads4": [21.0, 18.5, 20.5], "heads8": [19.0, None, None]}


def _write_sweep(tmp_path: pathlib.Path, sweep_text: str = SWEEP_FILE) -> pathlib.Path:
    sweep_path = tmp_path / "my_sweep.py"
    sweep_path.write_text(sweep_text)
    sweep = sweep_spec.load_sweep(str(sweep_path))
    root = tmp_path / "runs"
    description = sweep_record.sweep_description(sweep, [], seeds=[0, 1, 2])
    sweep_record.record_launch(str(root), description, list(sweep.row_names), "local", force=False)
    for row in sweep.row_names:
        for seed, ppl in enumerate(DEV_PPL[row]):
            run_dir = root / row / f"seed_{seed}"
            run_dir.mkdir(parents=True)
            config = sweep.row_config(row)
            config.seed = seed
            (run_dir / "config.json").write_text(config.to_json_best_effort())
            # Two logged training steps and one evaluation: the curves fall back to the training loss.
            (run_dir / "metrics.jsonl").write_text(
                "".join(json.dumps({"step": step, "train/loss": 5.0 / step + seed}) + "\n" for step in (1, 2))
                + json.dumps({"step": 2, "eval/perplexity": 30.0}) + "\n")
            if ppl is not None:
                results = dict(step=2, params=1000 * int(row[len("heads"):]), dev_ppl=ppl,
                               dev_bleu=DEV_BLEU[row][seed], wall_s=60.0 + seed)
                (run_dir / "results.json").write_text(json.dumps(results))
    return root


@pytest.fixture()
def own_root(tmp_path: pathlib.Path) -> pathlib.Path:
    """A sweep root of one's own: heads2 and heads4 with 3 seeds finished, heads8 with seed 0 only."""
    return _write_sweep(tmp_path)


def _se(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))


def test_paired_changes_match_numpy(own_root: pathlib.Path) -> None:
    _, rows = sweep_rows.read_sweep_rows(str(own_root))
    compared = comparison.compare(str(own_root), rows, "heads2")
    ppl = compared["heads4"]["dev_ppl"]
    expected = np.array(DEV_PPL["heads4"]) / np.array(DEV_PPL["heads2"]) - 1
    assert ppl.mean == pytest.approx(np.mean(DEV_PPL["heads4"]))
    assert ppl.se == pytest.approx(_se(DEV_PPL["heads4"]))
    assert ppl.change_mean == pytest.approx(expected.mean())
    assert ppl.change_se == pytest.approx(_se(list(expected)))
    assert ppl.paired_seeds == 3
    bleu = compared["heads4"]["dev_bleu"]  # A difference, not a ratio.
    differences = np.array(DEV_BLEU["heads4"]) - np.array(DEV_BLEU["heads2"])
    assert bleu.change_mean == pytest.approx(differences.mean())
    assert bleu.change_se == pytest.approx(_se(list(differences)))
    beyond = abs(expected.mean()) > 2 * _se(list(expected))
    assert ppl.verdict == (comparison.BEYOND_VERDICT if beyond else comparison.WITHIN_VERDICT)
    assert compared["heads8"]["dev_ppl"].verdict == comparison.ONE_SEED_VERDICT  # Seed 0 only: no SE.
    assert compared["heads8"]["dev_ppl"].change_mean == pytest.approx(10.5 / 10.0 - 1)
    assert compared["heads2"]["dev_ppl"].verdict == comparison.REFERENCE_VERDICT


def test_verdict_rule() -> None:
    assert comparison.verdict([]) == comparison.PENDING_VERDICT
    assert comparison.verdict([0.1]) == comparison.ONE_SEED_VERDICT
    assert comparison.verdict([0.10, 0.11, 0.12]) == comparison.BEYOND_VERDICT
    assert comparison.verdict([0.10, -0.12, 0.01]) == comparison.WITHIN_VERDICT
    assert comparison.verdict([0.10, 0.11], unstable=True) == comparison.UNSTABLE_VERDICT


def test_report_of_an_own_sweep_has_no_table2_text(own_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    paths = all_reports.write_reports(str(own_root), str(out))
    names = {pathlib.Path(path).name for path in paths}
    assert {"my_sweep.md", "my_sweep.csv", "my_sweep.png", "my_sweep_curves.png"} <= names, names
    markdown = (out / "my_sweep.md").read_text(encoding="utf-8")
    for table2_text in ("paper", "newstest2013", "4.92", "reproduced", "no base row"):
        assert table2_text not in markdown, table2_text
    assert "against **heads2** (the first row of get_sweep()" in markdown
    change = (np.array(DEV_PPL["heads4"]) / np.array(DEV_PPL["heads2"]) - 1) * 100
    assert f"| heads4 | 3 | {np.mean(DEV_PPL['heads4']):.2f} ± {_se(DEV_PPL['heads4']):.2f} | " \
           f"{change.mean():+.1f}% ± {_se(list(change)):.1f}% | 3 |" in markdown
    with open(out / "my_sweep.csv", encoding="utf-8") as file:
        records = {(record["row"], record["metric"]): record for record in csv.DictReader(file)}
    assert float(records[("heads4", "dev_ppl")]["change_mean"]) == pytest.approx(change.mean())
    assert records[("heads4", "dev_ppl")]["change_unit"] == "%"
    assert records[("heads4", "dev_bleu")]["change_unit"] == "absolute"
    assert ("heads2", "test_bleu") not in records  # Not recorded by any run: no rows of blanks.
    image = matplotlib.image.imread(out / "my_sweep.png")
    assert image.std() > 0.01  # Not a blank figure.


def test_reference_flag_and_get_reference_switch_the_reference(tmp_path: pathlib.Path) -> None:
    root = _write_sweep(tmp_path, SWEEP_FILE + '\n\ndef get_reference():\n    return "heads4"\n')
    record, rows = sweep_rows.read_sweep_rows(str(root))
    assert record["reference"] == "heads4"
    assert comparison_report.resolve_reference(record, rows) == ("heads4", "get_reference() of "
                                                                 f"{tmp_path / 'my_sweep.py'}")
    assert comparison_report.resolve_reference(record, rows, "heads8") == ("heads8", "--reference")
    out = tmp_path / "out"
    all_reports.write_reports(str(root), str(out), reference="heads8")
    markdown = (out / "my_sweep.md").read_text(encoding="utf-8")
    assert "against **heads8** (--reference" in markdown
    assert "| heads8 | 1 | 10.50 |  |  | reference |" in markdown
    assert f"| heads2 | 3 | 11.00 ± {_se(DEV_PPL['heads2']):.2f} | {(10.0 / 10.5 - 1) * 100:+.1f}% | 1 | one seed |" \
        in markdown


def test_a_reference_that_is_not_a_row_is_one_line(own_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    with pytest.raises(UserInputError, match=r"--reference: row 'heads3' is not among the rows reported"):
        all_reports.write_reports(str(own_root), str(tmp_path / "out"), reference="heads3")
    assert not (tmp_path / "out").exists()  # Refused before anything was written.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "my_sweep.py").write_text(SWEEP_FILE + '\n\ndef get_reference():\n    return "heads3"\n')
    with pytest.raises(ValueError, match=r"get_reference\(\) returned 'heads3', not a row of get_sweep\(\)"):
        sweep_spec.load_sweep(str(bad / "my_sweep.py"))


def _stats(metric: comparison.Metric, change_mean: float | None, change_se: float | None) -> comparison.MetricStats:
    return comparison.MetricStats(metric=metric, values={}, mean=None, se=None, changes={}, change_mean=change_mean,
                                  change_se=change_se, verdict="")


def test_a_relative_panel_switches_to_a_log_ratio_axis_only_beyond_doubling_or_halving(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.pyplot as plt

    from attention_jax.reports import comparison_plot

    assert not comparison_plot._uses_ratio_axis([0.05, -0.3, None, 1.0])  # Within doubling and halving.
    assert comparison_plot._uses_ratio_axis([0.05, 45.2]) and comparison_plot._uses_ratio_axis([-0.5])
    ppl = comparison.Metric("dev_ppl", "dev PPL", 2, True, lambda directory, run: None)
    bleu = comparison.Metric("dev_bleu", "dev BLEU", 1, False, lambda directory, run: None)
    rows = [sweep_rows.RowReport(row=name, group="", status="done", config={}, results={})
            for name in ("base", "small", "huge", "lost")]
    compared = {"small": {"dev_ppl": _stats(ppl, -0.08, 0.02), "dev_bleu": _stats(bleu, 2.5, 0.3)},
                "huge": {"dev_ppl": _stats(ppl, 45.0, 46.5), "dev_bleu": _stats(bleu, -30.0, 0.5)},
                "lost": {"dev_ppl": _stats(ppl, None, None), "dev_bleu": _stats(bleu, None, None)}}
    monkeypatch.setattr(plt, "close", lambda figure: None)  # Keep the figure to look at its axes.
    comparison_plot.plot_paired_changes(rows, compared, "base", [ppl, bleu], str(tmp_path / "p.png"), "t")
    ppl_axis, bleu_axis = plt.gcf().axes
    assert (ppl_axis.get_xscale(), bleu_axis.get_xscale()) == ("log", "linear")
    ratio_points = [line.get_xdata()[0] for line in ppl_axis.lines if len(line.get_xdata()) == 1
                    and line.get_marker() == "o"]
    np.testing.assert_allclose(sorted(ratio_points), [0.92, 46.0])  # 1 + the mean change; "lost" has no point.
    assert ppl_axis.get_xlim()[0] > 0  # The lower error bar of 46 +- 46.5 stops above zero.
    assert "log scale" in ppl_axis.get_xlabel() and "(%)" not in ppl_axis.get_xlabel()
    assert [label.get_text() for label in ppl_axis.get_xticklabels()] == [
        f"{tick:g}x" for tick in comparison_plot._ratio_ticks(*ppl_axis.get_xlim())]
    np.testing.assert_allclose(comparison_plot._ratio_ticks(0.8, 6.0), [1, 2, 5])
    np.testing.assert_allclose(comparison_plot._ratio_ticks(0.8, 300.0), [1, 3, 10, 30, 100, 300])
    np.testing.assert_allclose(comparison_plot._ratio_ticks(0.05, 5000.0), [0.1, 1, 10, 100, 1000])
    plt.close("all")


def test_curves_fall_back_to_training_loss_for_short_runs(own_root: pathlib.Path) -> None:
    from attention_jax.reports import comparison_plot

    _, rows = sweep_rows.read_sweep_rows(str(own_root))
    key, curves = comparison_plot._learning_curves(str(own_root), rows)
    assert key == comparison_plot.TRAIN_LOSS_KEY
    assert curves[("heads2", "seed_1")] == ([1, 2], [5.0 + 1, 2.5 + 1])


def test_length_buckets_get_the_same_paired_treatment_as_the_positions_report() -> None:
    # The committed positions sweep (docs/positions): the generic comparison of each length bucket against
    # sinusoidal, read through the evaluation registry, equals the positions report's own CSV.
    from attention_jax.reports import comparison_report

    root = str(pathlib.Path(__file__).resolve().parents[2] / "docs" / "positions")
    _, rows = sweep_rows.read_sweep_rows(root)
    metrics = comparison_report._evaluation_metrics(root, rows)
    assert "length_buckets/beyond_2x/perplexity" in {metric.name for metric in metrics}
    compared = comparison.compare(root, rows, "sinusoidal", metrics)
    with open(pathlib.Path(root) / "positions_by_length.csv", encoding="utf-8") as file:
        expected = list(csv.DictReader(file))
    assert len(expected) == 24  # Six encodings x four buckets.
    for line in expected:
        ppl = compared[line["row"]][f"length_buckets/{line['bucket']}/perplexity"]
        bleu = compared[line["row"]][f"length_buckets/{line['bucket']}/bleu"]
        assert ppl.mean == pytest.approx(float(line["ppl_mean"])) and ppl.se == pytest.approx(float(line["ppl_se"]))
        assert bleu.mean == pytest.approx(float(line["bleu_mean"]))
        if line["row"] != "sinusoidal":
            assert ppl.change_mean == pytest.approx(float(line["ppl_change_mean"]))
            assert ppl.change_se == pytest.approx(float(line["ppl_change_se"]))
            assert bleu.change_mean == pytest.approx(float(line["bleu_difference_mean"]))


def test_a_sweep_file_that_fails_to_import_is_one_user_error(own_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    sweep_path = tmp_path / "my_sweep.py"
    sweep_path.write_text(SWEEP_FILE + "\nraise RuntimeError('broken on purpose')\n")
    record, _ = sweep_rows.read_sweep_rows(str(own_root))
    with pytest.raises(UserInputError, match=f"^importing {sweep_path} raised RuntimeError: broken on purpose$"):
        sweep_rows.declared_report(record)


@pytest.mark.slow
def test_a_sweep_file_that_fails_to_import_is_one_line(own_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    sweep_path = tmp_path / "my_sweep.py"
    sweep_path.write_text(SWEEP_FILE + "\nraise RuntimeError('broken on purpose')\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "attention_jax.report", str(own_root), f"--out={out}"],
                          capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"attention_jax.report: error: importing {sweep_path} raised RuntimeError: broken on purpose"]
    assert not out.exists()  # Refused before anything was written.


def test_a_diverged_seed_is_left_out_of_every_mean_and_the_tables_say_so(own_root: pathlib.Path,
                                                                         tmp_path: pathlib.Path) -> None:
    run_dir = own_root / "heads4" / "seed_1"  # Last dev PPL 8x its best: diverged (no metrics: perplexity alone).
    results = json.loads((run_dir / "results.json").read_text())
    results.update(best_eval_ppl=11.5, eval_ppl=92.0)
    (run_dir / "results.json").write_text(json.dumps(results))
    _, rows = sweep_rows.read_sweep_rows(str(own_root))
    ppl = comparison.compare(str(own_root), rows, "heads2")["heads4"]["dev_ppl"]
    healthy = [DEV_PPL["heads4"][0], DEV_PPL["heads4"][2]]
    expected = np.array(healthy) / np.array([DEV_PPL["heads2"][0], DEV_PPL["heads2"][2]]) - 1
    assert ppl.diverged == (1,) and ppl.seeds == 2 and ppl.paired_seeds == 2
    assert ppl.mean == pytest.approx(np.mean(healthy)) and ppl.se == pytest.approx(_se(healthy))
    assert ppl.change_mean == pytest.approx(expected.mean()) and ppl.change_se == pytest.approx(_se(list(expected)))
    assert ppl.verdict == comparison.UNSTABLE_VERDICT
    all_reports.write_reports(str(own_root), str(tmp_path / "out"))
    markdown = (tmp_path / "out" / "my_sweep.md").read_text(encoding="utf-8")
    assert f"| heads4 | 2 of 3; 1 diverged | {np.mean(healthy):.2f} ± {_se(healthy):.2f} |" in markdown
