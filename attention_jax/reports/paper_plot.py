"""The Table 2 report's figure: each row's paired change against the reference row, the paper's beside it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from attention_jax.reports import comparison, comparison_plot, sweep_seeds
from attention_jax.reports.comparison import MetricStats, fit_title
from attention_jax.reports.sweep_rows import RowReport, plot_panels

OURS_COLOR, PAPER_COLOR = "tab:blue", "tab:orange"
_OFFSET = 0.15  # Ours left of the row's tick, the paper's right of it.
PLOTTED = {"dev_ppl": "Δ dev PPL vs {reference} (%)", "dev_bleu": "Δ dev BLEU vs {reference} (points)"}
"""The metrics drawn (:data:`attention_jax.reports.comparison.METRICS`, also the paper's figures' keys)."""


def _draw_changes(axis: Any, members: Sequence[RowReport], reference: RowReport,
                  ours: Mapping[str, MetricStats], metric: comparison.Metric, label: str) -> None:
    scale = 100.0 if metric.relative else 1.0
    positions = list(range(len(members)))
    means = [ours[row.row].change_mean for row in members]
    errors = [ours[row.row].change_se for row in members]
    axis.errorbar([x - _OFFSET for x in positions], [math.nan if mean is None else scale * mean for mean in means],
                  yerr=[0.0 if se is None else scale * se for se in errors], fmt="o", color=OURS_COLOR,
                  capsize=3, label="ours (mean ± SE, paired seeds)")
    paper = [sweep_seeds.paper_change(row, reference, metric.name, metric.relative) for row in members]
    if any(value is not None for value in paper):
        axis.plot([x + _OFFSET for x in positions], [math.nan if value is None else scale * value for value in paper],
                  "s", color=PAPER_COLOR, linestyle="none", label="paper")
    axis.axhline(0.0, color="black", linewidth=0.8)
    axis.set_ylabel(label)

    def tick(row: RowReport) -> str:
        if row.status == "partial":
            return f"{row.row}\n({len(row.finished)}/{len(row.runs)} seeds)"
        return row.row if row.status == "done" else f"{row.row}\n({row.status})"

    axis.set_xticks(positions, [tick(row) for row in members], fontsize=8)
    axis.set_xlim(-0.6, len(members) - 0.4)
    if all(mean is None for mean in means) and all(value is None for value in paper):
        axis.text(0.5, 0.5, "no paired figures", transform=axis.transAxes, ha="center", color="gray")


def draw_report(rows: Sequence[RowReport], reference: str) -> Any:
    """The figure of :func:`_plot_report`, not yet titled or saved.

    Parameters
    ----------
    rows : Sequence[RowReport]
        Rows in order (the reference among them; without it the panels say there is nothing to pair).
    reference : str
        The reference row (``base`` in Table 2).

    Returns
    -------
    matplotlib.figure.Figure
        One column per Table 2 group (:func:`~attention_jax.reports.sweep_rows.plot_panels`), a row of dev-perplexity
        changes and, when any row has a BLEU (ours or the paper's), a row of BLEU changes; 3.6 x 3.2 inches a panel.
    """
    plt = comparison_plot._pyplot()

    panels = plot_panels(rows, reference)
    reference_row = next((row for row in rows if row.row == reference), None)
    ours = comparison.compare("", rows, reference, [metric for metric in comparison.METRICS
                                                    if metric.name in PLOTTED]) if reference_row else {}
    metrics = [metric for metric in comparison.METRICS if metric.name == "dev_ppl"]
    if any(comparison.reported_bleu(run.results) is not None for row in rows for run in row.finished) or any(
            row.paper.get("dev_bleu") is not None for row in rows):
        metrics += [metric for metric in comparison.METRICS if metric.name == "dev_bleu"]
    columns = max(len(panels), 1)
    figure, axes = plt.subplots(len(metrics), columns, squeeze=False, figsize=(3.6 * columns, 3.2 * len(metrics)),
                                layout="constrained")
    for column, (name, members) in enumerate(panels):
        changed = [row for row in members if row.row != reference]
        for line, metric in enumerate(metrics):
            axis = axes[line][column]
            axis.set_title(f"({name})" if len(name) == 1 else name)
            if reference_row is None or not changed:
                message = f"no {reference} row to pair with" if reference_row is None else f"{reference} only"
                axis.text(0.5, 0.5, message, transform=axis.transAxes, ha="center", color="gray")
                continue
            _draw_changes(axis, changed, reference_row, {row: stats[metric.name] for row, stats in ours.items()},
                          metric, PLOTTED[metric.name].format(reference=reference))
            if column == 0 and line == 0:
                axis.legend(fontsize=7, loc="best")
    return figure


def _plot_report(rows: Sequence[RowReport], reference: str, path: str, title: str) -> None:
    """Plot each row's paired change of dev perplexity and BLEU against the reference beside the paper's."""
    plt = comparison_plot._pyplot()
    figure = draw_report(rows, reference)
    fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
