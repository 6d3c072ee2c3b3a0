"""The comparison report's figures: the paired change of every row with its standard error, and learning curves.

:func:`plot_paired_changes` draws one panel per chosen metric: each row other than the reference, its mean
change against the reference paired by seed, with an error bar of one standard error either side (none
with one paired seed) and a line at zero. :func:`plot_learning_curves` draws every run's dev perplexity
against step, or, when a run has fewer than :data:`MIN_EVALUATIONS` dev evaluations (a short run), every
run's logged training loss instead; the reference row is black.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from attention_jax.reports.comparison import Metric, MetricStats, run_directory
from attention_jax.reports.figure_titles import fit_title
from attention_jax.reports.sweep_rows import RowReport, read_metric_curve

EVAL_PPL_KEY = "eval/perplexity"
TRAIN_LOSS_KEY = "train/loss"
MIN_EVALUATIONS = 3
"""Fewer dev evaluations than this in any run with metrics: the curves show the training loss instead."""


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (imported on first use: reading a sweep needs no plots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_paired_changes(rows: Sequence[RowReport], compared: Mapping[str, Mapping[str, MetricStats]],
                        reference: str, metrics: Sequence[Metric], path: str, title: str) -> None:
    """Plot each row's paired change against the reference, one panel per metric.

    Parameters
    ----------
    rows : Sequence[RowReport]
        Rows in order.
    compared : Mapping
        :func:`attention_jax.reports.comparison.compare`'s result.
    reference : str
        The reference row (left out of the panels: its change is zero by definition).
    metrics : Sequence[Metric]
        One panel each (at least one panel is drawn: "no metric recorded yet" without any).
    path : str
        PNG file to write.
    title : str
        Figure title.

    Notes
    -----
    Error bars are one standard error of the paired change. A relative change is in percent. A row without
    a paired seed is named on its axis with no point.
    """
    plt = pyplot()
    others = [row.row for row in rows if row.row != reference]
    panels = max(1, len(metrics))
    figure, axes = plt.subplots(1, panels, squeeze=False, figsize=(4.5 * panels, 1.2 + 0.45 * max(2, len(others))),
                                layout="constrained")
    if not metrics:
        axes[0, 0].text(0.5, 0.5, "no metric recorded yet", ha="center", va="center", transform=axes[0, 0].transAxes)
        axes[0, 0].set_axis_off()
    for axis, metric in zip(axes.flat, metrics):
        scale = 100.0 if metric.relative else 1.0
        for position, row in enumerate(others):
            stats = compared[row][metric.name]
            if stats.change_mean is None:
                continue
            error = None if stats.change_se is None else stats.change_se * scale
            axis.errorbar(stats.change_mean * scale, position, xerr=error, fmt="o", color="C0", capsize=3)
        axis.axvline(0.0, color="black", linewidth=0.8)
        axis.set_yticks(range(len(others)), others)
        axis.set_ylim(len(others) - 0.5, -0.5)
        unit = " (%)" if metric.relative else ""
        axis.set_xlabel(f"change of {metric.label} vs {reference}{unit}, ± 1 SE")
        axis.set_title(metric.label)
        axis.grid(True, axis="x", alpha=0.3)
    fit_title(figure, title, fontsize=11)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def learning_curves(root: str, rows: Sequence[RowReport]) -> tuple[str, dict[tuple[str, str], tuple[list, list]]]:
    """The curves the learning-curve figure draws: dev perplexity, or the training loss for short runs.

    Parameters
    ----------
    root : str
        The sweep root.
    rows : Sequence[RowReport]
        Rows in order.

    Returns
    -------
    tuple
        The metric's key in ``metrics.jsonl`` and ``(row, run name) -> (steps, values)`` for every run.
    """
    runs = [(row, run) for row in rows for run in row.runs]
    dev = {(row.row, run.name): read_metric_curve(run_directory(root, row, run), EVAL_PPL_KEY) for row, run in runs}
    logged = [steps for steps, _ in dev.values() if steps]
    if logged and min(len(steps) for steps in logged) >= MIN_EVALUATIONS:
        return EVAL_PPL_KEY, dev
    return TRAIN_LOSS_KEY, {(row.row, run.name): read_metric_curve(run_directory(root, row, run), TRAIN_LOSS_KEY)
                            for row, run in runs}


def plot_learning_curves(root: str, rows: Sequence[RowReport], reference: str, path: str, title: str) -> bool:
    """Plot every run's learning curve, a colour per row (the reference black), a line per seed.

    Parameters
    ----------
    root : str
        The sweep root.
    rows : Sequence[RowReport]
        Rows in order.
    reference : str
        The reference row.
    path : str
        PNG file to write.
    title : str
        Figure title.

    Returns
    -------
    bool
        Whether a figure was written (False when no run has logged metrics).
    """
    key, curves = learning_curves(root, rows)
    if not any(steps for steps, _ in curves.values()):
        return False
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, row in enumerate(rows):
        colour = "black" if row.row == reference else colours[index % len(colours)]
        labelled = False
        for run in row.runs:
            steps, values = curves[(row.row, run.name)]
            if steps:
                axis.plot(steps, values, color=colour, linewidth=1.0, alpha=0.8,
                          label=None if labelled else row.row)
                labelled = True
    axis.set_yscale("log")
    axis.set_xlabel("step")
    axis.set_ylabel("dev perplexity" if key == EVAL_PPL_KEY else "training loss (too few dev evaluations)")
    axis.grid(True, which="both", alpha=0.25)
    axis.legend(fontsize=7)
    fit_title(figure, title, fontsize=11)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
