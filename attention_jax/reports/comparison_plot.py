"""The comparison report's figures: the paired change of every row with its standard error, and learning curves."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from attention_jax.reports import paper_figures
from attention_jax.reports.comparison import Metric, MetricStats, _fit_title, run_directory
from attention_jax.reports.sweep_rows import RowReport, _plot_panels, read_metric_curve

EVAL_PPL_KEY = "eval/perplexity"
TRAIN_LOSS_KEY = "train/loss"
MIN_EVALUATIONS = 3
"""Fewer dev evaluations than this in any run with metrics: the curves show the training loss instead."""
PANEL_COLUMNS = 3
ZOOM = 2.5
"""The learning curves' y axis ends at ``ZOOM`` times the sweep's lowest dev perplexity (:func:`_curve_y_limits`)."""


RATIO_AXIS_BEYOND = 1.0
"""A relative metric's panel plots ``x / x_ref`` on a log axis once a row's mean change is beyond +-100%."""
RATIO_FLOOR = 1e-3
"""The lower end of a ratio's error bar when the mean change minus one SE is at or below -100%."""


def _uses_ratio_axis(changes: Sequence[float | None]) -> bool:
    """Whether a relative metric's paired changes span too much for a linear percent axis."""
    present = [change for change in changes if change is not None]
    return any(change > RATIO_AXIS_BEYOND or change <= -0.5 for change in present)


def _ratio_ticks(low: float, high: float) -> list[float]:
    """Where a ratio axis from ``low`` to ``high`` is labelled: 1, 2 and 5 in each decade, fewer on wide axes."""
    decades = math.log10(high / low)
    mantissas = (1, 2, 5) if decades <= 1.5 else (1, 3) if decades <= 3 else (1,)
    exponents = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    return [mantissa * 10.0 ** exponent for exponent in exponents for mantissa in mantissas
            if low <= mantissa * 10.0 ** exponent <= high]


def pyplot() -> Any:
    """Return ``matplotlib.pyplot`` on the file-only Agg backend (imported on first use: reading needs no plots).

    Returns
    -------
    module
        ``matplotlib.pyplot``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_paired_changes(rows: Sequence[RowReport], compared: Mapping[str, Mapping[str, MetricStats]],
                        reference: str, metrics: Sequence[Metric], path: str, title: str, *,
                        paper: bool = False) -> None:
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
    paper : bool
        Also mark the paper's change of each row (an orange square).
    """
    plt = pyplot()
    figure = _draw_paired_changes(rows, compared, reference, metrics, paper)
    _fit_title(figure, title, fontsize=11)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _draw_paired_changes(rows: Sequence[RowReport], compared: Mapping[str, Mapping[str, MetricStats]],
                         reference: str, metrics: Sequence[Metric], paper: bool) -> Any:
    """The figure of :func:`plot_paired_changes`, not yet titled or saved."""
    plt = pyplot()
    by_name = {row.row: row for row in rows}
    others = [row.row for row in rows if row.row != reference]
    panels = max(1, len(metrics))
    figure, axes = plt.subplots(1, panels, squeeze=False, figsize=(4.5 * panels, 1.2 + 0.45 * max(2, len(others))),
                                layout="constrained")
    if not metrics:
        axes[0, 0].text(0.5, 0.5, "no metric recorded yet", ha="center", va="center", transform=axes[0, 0].transAxes)
        axes[0, 0].set_axis_off()
    for axis, metric in zip(axes.flat, metrics):
        panel = [(position, compared[row][metric.name]) for position, row in enumerate(others)
                 if compared[row][metric.name].change_mean is not None]
        as_ratio = metric.relative and _uses_ratio_axis([stats.change_mean for _, stats in panel])
        for position, stats in panel:
            assert stats.change_mean is not None  # Only rows with a paired seed are in the panel.
            if as_ratio:
                ratio = 1.0 + stats.change_mean
                bounds = None if stats.change_se is None else [[ratio - max(ratio - stats.change_se, RATIO_FLOOR)],
                                                               [stats.change_se]]
                axis.errorbar(ratio, position, xerr=bounds, fmt="o", color="C0", capsize=3)
            else:
                scale = 100.0 if metric.relative else 1.0
                error = None if stats.change_se is None else stats.change_se * scale
                axis.errorbar(stats.change_mean * scale, position, xerr=error, fmt="o", color="C0", capsize=3)
        key = paper_figures.PAPER_KEYS.get(metric.name, ("", 1.0))[0]
        paper_changes = [(position, paper_figures.paper_change(by_name[row], by_name.get(reference), key,
                                                               metric.relative)) for position, row in enumerate(others)]
        drawn = [(position, change) for position, change in paper_changes if change is not None]
        if paper and drawn:
            scale = 100.0 if metric.relative else 1.0
            axis.plot([1.0 + change if as_ratio else scale * change for _, change in drawn],
                      [position for position, _ in drawn], "s", color="tab:orange", label="paper")
            axis.legend(fontsize=7)
        axis.axvline(1.0 if as_ratio else 0.0, color="black", linewidth=0.8)
        axis.set_yticks(range(len(others)), others)
        axis.set_ylim(len(others) - 0.5, -0.5)
        if as_ratio:
            axis.set_xscale("log")
            low, high = axis.get_xlim()
            ticks = _ratio_ticks(low, high)
            axis.set_xticks(ticks, [f"{tick:g}x" for tick in ticks])
            axis.set_xticks([], minor=True)
            axis.set_xlabel(f"{metric.label} / {reference}'s, paired by seed (log scale), ± 1 SE")
            axis.grid(True, axis="x", alpha=0.3)
        else:
            unit = " (%)" if metric.relative else ""
            axis.set_xlabel(f"change of {metric.label} vs {reference}{unit}, ± 1 SE")
        axis.set_title(metric.label)
        axis.grid(True, axis="x", alpha=0.3)
    return figure


SEED_LINE_STYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
"""A seed's line style in every learning-curve plot (the 7th seed repeats the 1st's)."""


def _seed_styles(rows: Sequence[RowReport]) -> dict[str, Any]:
    """``run.name`` (``seed_<k>``, ``""`` without seeds) -> its line style, the same in every row."""
    names = sorted({run.name for row in rows for run in row.runs}, key=lambda name: (len(name), name))
    return {name: SEED_LINE_STYLES[index % len(SEED_LINE_STYLES)] for index, name in enumerate(names)}


def _row_and_seed_legend(axis: Any, row_colours: Mapping[str, str], styles: Mapping[str, Any]) -> None:
    """A legend naming each row drawn on ``axis`` by its colour and, with several seeds, each seed by its style."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour, label=row) for row, colour in row_colours.items()]
    if len(styles) > 1:
        handles += [Line2D([], [], color="grey", linestyle=style, label=name.replace("_", " "))
                    for name, style in styles.items()]
    axis.legend(handles=handles, fontsize=7)


def _learning_curves(root: str, rows: Sequence[RowReport]) -> tuple[str, dict[tuple[str, str], tuple[list, list]]]:
    """Return the curves the learning-curve figure draws: dev perplexity, or the training loss for short runs."""
    runs = [(row, run) for row in rows for run in row.runs]
    dev = {(row.row, run.name): read_metric_curve(run_directory(root, row, run), EVAL_PPL_KEY) for row, run in runs}
    logged = [steps for steps, _ in dev.values() if steps]
    train = {(row.row, run.name): read_metric_curve(run_directory(root, row, run), TRAIN_LOSS_KEY) for row, run in runs}
    if logged and min(len(steps) for steps in logged) >= MIN_EVALUATIONS or not any(s for s, _ in train.values()):
        return EVAL_PPL_KEY, dev
    return TRAIN_LOSS_KEY, train


def _curve_y_limits(perplexity_curves: list[list[float]]) -> tuple[float, float]:
    """Return the learning-curve plot's y range: zoomed on the end of training, every run's best in view."""
    bests = [min(perplexities) for perplexities in perplexity_curves if perplexities]
    return min(bests) * 0.95, max(min(bests) * ZOOM, max(bests) * 1.3)


def _plot_learning_curves(root: str, rows: Sequence[RowReport], reference: str, path: str, title: str) -> bool:
    """Plot every run's learning curve: a panel per group (:func:`plot_panels`), a colour per row, a style per seed."""
    key, curves = _learning_curves(root, rows)
    if not any(steps for steps, _ in curves.values()):
        return False
    plt = pyplot()
    dev = key == EVAL_PPL_KEY
    panels = _plot_panels(rows, reference)
    columns = min(PANEL_COLUMNS, len(panels))
    lines = -(-len(panels) // columns)
    size = (4.2 * columns, 3.4 * lines) if len(panels) > 1 else (6.4, 4.2)
    figure, axes = plt.subplots(lines, columns, squeeze=False, sharey=True, figsize=size, layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = _seed_styles(rows)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    for axis, (name, members) in zip(axes.flat, panels):
        row_colours = {}
        for index, row in enumerate(members):  # The reference first.
            colour = "black" if row.row == reference else colours[index % len(colours)]
            for run in row.runs:
                steps, values = curves[(row.row, run.name)]
                if not steps:
                    continue
                row_colours[row.row] = colour
                axis.plot(steps, values, color=colour, linestyle=styles[run.name], linewidth=1.0, alpha=0.8)
                if dev:
                    best = min(range(len(steps)), key=values.__getitem__)
                    axis.plot(steps[best], values[best], "o", color=colour, markersize=3.5)
        axis.set_yscale("log")
        if dev:
            axis.set_ylim(*_curve_y_limits([values for _, values in curves.values()]))
        axis.set_xlabel("step")
        axis.set_title(f"({name})" if len(name) == 1 else name if len(panels) > 1 else "")
        axis.grid(True, which="both", alpha=0.25)
        _row_and_seed_legend(axis, row_colours, styles)
    for axis in axes[:, 0]:
        axis.set_ylabel("dev perplexity (dot: a run's best)" if dev else "training loss (too few dev evaluations)",
                        fontsize=8)
    _fit_title(figure, title, fontsize=12)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
