"""The Table 2 report's figure: each row's paired change against base, with the paper's change beside it.

A Table 2 row changes one thing of the base model, and what the table is read for is the direction and
size of that change. So each panel (one per Table 2 group) plots, for every row of the group, the
change of dev perplexity against base in percent and the change of dev BLEU in points:

- ours: the mean over the seeds finished in both the row and base, paired by seed, with error bars of
  one standard error (sample standard deviation over ``sqrt(n)``; no bar with one seed);
- the paper's: its row against its base, drawn beside ours on the same axis (no twin axis, no lines
  joining categorical rows).

The zero line is base. Titles are wrapped to the figure's width
(:func:`~attention_jax.reports.figure_titles.fit_title`), so a long sweep root is never clipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from attention_jax.reports.attention_function_report import mean_and_se
from attention_jax.reports.figure_titles import fit_title
from attention_jax.reports.sweep_rows import RowReport, plot_panels
from attention_jax.reports.sweep_seeds import reported_bleu, reported_ppl

OURS_COLOR, PAPER_COLOR = "tab:blue", "tab:orange"
_OFFSET = 0.15  # Ours left of the row's tick, the paper's right of it.


def paired_changes(row: RowReport, base: RowReport, metric: Callable[[dict], float | None],
                   relative: bool) -> list[float]:
    """The row's change against base for each seed finished in both.

    Parameters
    ----------
    row, base : RowReport
        The row and the base row of the same sweep.
    metric : callable
        ``results.json`` -> the figure (:func:`~attention_jax.reports.sweep_seeds.reported_ppl` or
        :func:`~attention_jax.reports.sweep_seeds.reported_bleu`), or None where the run has none.
    relative : bool
        True: ``row / base - 1`` (a fraction); False: ``row - base``.

    Returns
    -------
    list[float]
        One change per paired seed, in the row's seed order (a sweep without seeds pairs its one run).
    """
    base_values = {run.seed: value for run in base.finished if (value := metric(run.results)) is not None}
    changes = []
    for run in row.finished:
        value, reference = metric(run.results), base_values.get(run.seed)
        if value is None or reference is None or (relative and reference <= 0):
            continue
        changes.append(value / reference - 1.0 if relative else value - reference)
    return changes


def paper_change(row: RowReport, base: RowReport, key: str, relative: bool) -> float | None:
    """The paper's change of ``key`` (``"dev_ppl"``, ``"dev_bleu"``) from its base to the row, or None."""
    value, reference = row.paper.get(key), base.paper.get(key)
    if value is None or reference is None or (relative and not reference):
        return None
    return value / reference - 1.0 if relative else value - reference


def _draw_changes(axis: Any, members: Sequence[RowReport], base: RowReport, metric: Callable[[dict], float | None],
                  paper_key: str, relative: bool, label: str) -> None:
    scale = 100.0 if relative else 1.0
    positions = list(range(len(members)))
    ours = [mean_and_se(paired_changes(row, base, metric, relative)) for row in members]
    axis.errorbar([x - _OFFSET for x in positions], [math.nan if mean is None else scale * mean for mean, _ in ours],
                  yerr=[0.0 if se is None else scale * se for _, se in ours], fmt="o", color=OURS_COLOR,
                  capsize=3, label="ours (mean ± SE, paired seeds)")
    paper = [paper_change(row, base, paper_key, relative) for row in members]
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
    if all(mean is None for mean, _ in ours) and all(value is None for value in paper):
        axis.text(0.5, 0.5, "no paired figures", transform=axis.transAxes, ha="center", color="gray")


def draw_report(rows: Sequence[RowReport]) -> Any:
    """The figure of :func:`plot_report`, not yet titled or saved.

    Parameters
    ----------
    rows : Sequence[RowReport]
        Rows in order (``base`` among them; without it the panels say there is nothing to pair).

    Returns
    -------
    matplotlib.figure.Figure
        One column per Table 2 group (:func:`~attention_jax.reports.sweep_rows.plot_panels`), a row of
        dev-perplexity changes and, when any row has a BLEU (ours or the paper's), a row of BLEU changes;
        3.6 x 3.2 inches a panel.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = plot_panels(rows)
    base = next((row for row in rows if row.row == "base"), None)
    metrics: list[tuple[Callable[[dict], float | None], str, bool, str]] = [
        (reported_ppl, "dev_ppl", True, "Δ dev PPL vs base (%)")]
    if any(reported_bleu(run.results) is not None for row in rows for run in row.finished) or any(
            row.paper.get("dev_bleu") is not None for row in rows):
        metrics.append((reported_bleu, "dev_bleu", False, "Δ dev BLEU vs base (points)"))
    columns = max(len(panels), 1)
    figure, axes = plt.subplots(len(metrics), columns, squeeze=False, figsize=(3.6 * columns, 3.2 * len(metrics)),
                                layout="constrained")
    for column, (name, members) in enumerate(panels):
        changed = [row for row in members if row.row != "base"]
        for line, (metric, paper_key, relative, label) in enumerate(metrics):
            axis = axes[line][column]
            axis.set_title(f"({name})" if len(name) == 1 else name)
            if base is None or not changed:
                axis.text(0.5, 0.5, "no base row to pair with" if base is None else "base only",
                          transform=axis.transAxes, ha="center", color="gray")
                continue
            _draw_changes(axis, changed, base, metric, paper_key, relative, label)
            if column == 0 and line == 0:
                axis.legend(fontsize=7, loc="best")
    return figure


def plot_report(rows: Sequence[RowReport], path: str, title: str) -> None:
    """Plot each row's paired change of dev perplexity and BLEU against base beside the paper's.

    Parameters
    ----------
    rows : Sequence[RowReport]
        Rows in order.
    path : str
        PNG file to write.
    title : str
        Figure title (wrapped to fit: :func:`~attention_jax.reports.figure_titles.fit_title`).

    Notes
    -----
    See the module docstring for what is drawn. A scaled-down run cannot match the paper's values, but
    its changes should point the paper's way; the report's verdict column says whether they do.
    """
    import matplotlib.pyplot as plt

    figure = draw_report(rows)
    fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
