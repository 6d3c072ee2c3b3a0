"""Learning curves of a sweep: dev perplexity against step for every row and seed, each group beside the reference."""

from __future__ import annotations

from typing import Sequence

from attention_jax.reports import comparison_plot
from attention_jax.reports.comparison import run_directory
from attention_jax.reports.sweep_rows import RowReport, plot_panels, read_metric_curve
from attention_jax.reports.writers import fit_title

EVAL_PPL_KEY = "eval/perplexity"
PANEL_COLUMNS = 3
ZOOM = 2.5
"""The y axis runs from just below the lowest dev perplexity of the sweep to ``ZOOM`` times it, or higher where a run's
best is above that (every run's best stays in view): the end of training, where the rows separate (the first
evaluations, at hundreds, would flatten it)."""


def curve_y_limits(perplexity_curves: list[list[float]]) -> tuple[float, float]:
    """The learning-curve plot's y range: zoomed on the end of training, every run's best in view.

    Parameters
    ----------
    perplexity_curves : list of list of float
        Each run's dev perplexities (empty lists are skipped; at least one must not be empty).

    Returns
    -------
    tuple of float
        ``(bottom, top)``: 5% under the lowest perplexity of all runs, and ``ZOOM`` times it or 1.3 times the highest of
        the runs' bests, whichever is higher.
    """
    bests = [min(perplexities) for perplexities in perplexity_curves if perplexities]
    return min(bests) * 0.95, max(min(bests) * ZOOM, max(bests) * 1.3)


def read_dev_curve(run_dir: str) -> tuple[list[int], list[float]]:
    """Dev perplexity at each evaluated step of a run (:func:`read_metric_curve` of ``eval/perplexity``).

    Parameters
    ----------
    run_dir : str
        The run's directory.

    Returns
    -------
    tuple[list[int], list[float]]
        Steps and perplexities.
    """
    return read_metric_curve(run_dir, EVAL_PPL_KEY)


def plot_learning_curves(root: str, rows: Sequence[RowReport], reference: str, path: str, title: str) -> bool:
    """Plot dev perplexity against step for every run of ``rows``, one panel per group with the reference in each.

    Parameters
    ----------
    root : str
        Sweep root (the runs are ``ROOT/<row>[/seed_<k>]``).
    rows : Sequence[RowReport]
        Rows in order (:func:`attention_jax.reports.sweep_rows.read_sweep_rows`).
    reference : str
        The reference row (``base`` in Table 2).
    path : str
        PNG file to write.
    title : str
        Figure title.

    Returns
    -------
    bool
        Whether a figure was written (False when no run has dev evaluations yet).
    """
    curves = {(row.row, run.name): read_dev_curve(run_directory(root, row, run)) for row in rows for run in row.runs}
    if not any(steps for steps, _ in curves.values()):
        return False
    plt = comparison_plot.pyplot()

    panels = plot_panels(rows, reference)
    columns = min(PANEL_COLUMNS, len(panels))
    lines = -(-len(panels) // columns)
    figure, axes = plt.subplots(lines, columns, squeeze=False, sharey=True, figsize=(4.2 * columns, 3.4 * lines),
                                 layout="constrained")
    bottom, top = curve_y_limits([perplexities for _, perplexities in curves.values()])
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = comparison_plot.seed_styles(rows)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    for axis, (name, members) in zip(axes.flat, panels):
        row_colours = {}
        for index, row in enumerate(members):  # The reference first.
            colour = "black" if row.row == reference else colours[index % len(colours)]
            for run in row.runs:
                steps, perplexities = curves[(row.row, run.name)]
                if not steps:
                    continue
                row_colours[row.row] = colour
                axis.plot(steps, perplexities, color=colour, linestyle=styles[run.name], linewidth=1.0, alpha=0.8)
                best = min(range(len(steps)), key=perplexities.__getitem__)
                axis.plot(steps[best], perplexities[best], "o", color=colour, markersize=3.5)
        axis.set_yscale("log")
        axis.set_ylim(bottom, top)  # Where rows separate; the first steps are above.
        axis.set_xlabel("step")
        axis.set_title(f"({name})" if len(name) == 1 else name)
        axis.grid(True, which="both", alpha=0.25)
        comparison_plot.row_and_seed_legend(axis, row_colours, styles)
    for axis in axes[:, 0]:
        axis.set_ylabel("dev perplexity (dot: a run's best)", fontsize=8)
    fit_title(figure, title, fontsize=12)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True
