"""The one learning-curve plot (attention_jax.reports.comparison_plot): dev curves from metrics.jsonl, per group."""

from __future__ import annotations

import json
import pathlib

import matplotlib.image
import matplotlib.pyplot
import pytest

from attention_jax.reports import all_reports, comparison, comparison_plot, sweep_rows
from configs import table2
from launch import sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT


def test_read_metric_curve_keeps_the_last_record_of_a_step_and_skips_a_torn_line(tmp_path: pathlib.Path) -> None:
    lines = [{"step": 100, "train/loss": 5.0}, {"step": 100, "eval/perplexity": 90.0},
             {"step": 200, "eval/perplexity": 60.0}, {"step": 200, "eval/perplexity": 55.0},  # Resumed.
             {"step": 300, "eval/perplexity": float("nan")}]
    text = "".join(json.dumps(line) + "\n" for line in lines) + '{"step": 400, "eval/perp'  # Killed mid-line.
    (tmp_path / "metrics.jsonl").write_text(text)
    assert sweep_rows.read_metric_curve(str(tmp_path), comparison_plot.EVAL_PPL_KEY) == ([100, 200], [90.0, 55.0])
    assert sweep_rows.read_metric_curve(str(tmp_path / "missing"), comparison_plot.EVAL_PPL_KEY) == ([], [])


def _sweep(root: pathlib.Path, curves: dict[str, list[list[float]]]) -> None:
    sweep = sweep_spec.load_sweep(str(REPO_ROOT / "configs" / "table2.py"))
    description = sweep_record.sweep_description(sweep, [], seeds=[0, 1])
    sweep_record.record_launch(str(root), description, list(curves), "local", force=False)
    for row, seeds in curves.items():
        for seed, perplexities in enumerate(seeds):
            run_dir = root / row / f"seed_{seed}"
            run_dir.mkdir(parents=True)
            config = table2.get_config(row)
            config.seed = seed
            (run_dir / "config.json").write_text(config.to_json_best_effort())
            (run_dir / "metrics.jsonl").write_text("".join(
                json.dumps({"step": 100 * (index + 1), "eval/perplexity": ppl}) + "\n"
                for index, ppl in enumerate(perplexities)))
            (run_dir / "results.json").write_text(json.dumps({"dev_ppl": min(perplexities), "step": 100}))


def test_report_writes_one_curve_panel_per_group_only_when_runs_have_metrics(tmp_path: pathlib.Path) -> None:
    curves = {"base": [[50.0, 30.0, 31.0], [52.0, 29.0, 30.0]], "A1": [[55.0, 33.0], [54.0, 32.0]],
              "C1": [[40.0, 35.0, 34.0, 36.0], [41.0, 34.0, 35.0]], "E": [[50.0, 30.0], [49.0, 31.0]]}
    root = tmp_path / "t2"
    _sweep(root, curves)
    paths = all_reports.write_reports(str(root), str(root))
    assert str(root / "table2_curves.png") in paths
    height, width = matplotlib.image.imread(str(root / "table2_curves.png")).shape[:2]
    # Panels A, C and E, each with base (base has no panel of its own): one line of three.
    assert (height, width) == (round(3.4 * 110), round(4.2 * 3 * 110))
    _, rows = sweep_rows.read_sweep_rows(str(root))
    assert not comparison_plot._plot_learning_curves(str(tmp_path / "empty"), [], "base", str(tmp_path / "x.png"), "t")
    for row in rows:  # Every run's curve is read back from its own directory.
        for run, expected in zip(row.runs, curves[row.row]):
            assert sweep_rows.read_metric_curve(comparison.run_directory(str(root), row, run),
                                                comparison_plot.EVAL_PPL_KEY)[1] == expected
    for path in root.rglob("metrics.jsonl"):
        path.unlink()
    assert not any(path.endswith("_curves.png") for path in all_reports.write_reports(str(root), str(root)))


def test_y_limits_zoom_on_the_end_but_keep_every_runs_best_in_view() -> None:
    # Close runs: the zoom (ZOOM x the lowest) sets the top, far above the first evaluations' cut.
    bottom, top = comparison_plot._curve_y_limits([[900.0, 40.0, 29.0], [800.0, 26.0], []])
    assert bottom == 26.0 * 0.95 and top == 26.0 * comparison_plot.ZOOM
    # A row that ends far above the others (N = 8 at the cap): its best (54) stays in view.
    curves = [[900.0, 40.0, 29.0], [700.0, 19.0], [950.0, 60.0, 54.0]]
    bottom, top = comparison_plot._curve_y_limits(curves)
    assert bottom < 19.0 and all(bottom < min(curve) < top for curve in curves)
    assert top < 900.0


def test_every_learning_curve_plot_tells_seeds_apart_by_line_style(tmp_path: pathlib.Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t2"
    _sweep(root, {"base": [[50.0, 30.0, 31.0], [52.0, 29.0, 30.0]], "A1": [[55.0, 33.0, 32.0], [54.0, 32.0, 31.0]]})
    _, rows = sweep_rows.read_sweep_rows(str(root))
    figures: list = []
    monkeypatch.setattr(matplotlib.pyplot, "close", figures.append)  # Keep each figure to look at.
    for plot in (comparison_plot._plot_learning_curves,):
        assert plot(str(root), rows, "base", str(tmp_path / "curves.png"), "t")
    for figure in figures:
        axis = figure.axes[0]
        curves = [line for line in axis.get_lines() if len(line.get_xdata()) > 1]  # Not the best-point dots.
        assert len(curves) == 4
        styles = {(line.get_color(), line.get_linestyle()) for line in curves}
        assert len(styles) == 4  # Two rows by colour, two seeds by style.
        assert len({line.get_linestyle() for line in curves}) == 2
        legend = [text.get_text() for text in axis.get_legend().get_texts()]
        assert legend == ["base", "A1", "seed 0", "seed 1"]
