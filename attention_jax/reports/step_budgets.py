"""A sweep read at several step budgets: which of the paper's directions hold after S steps, for each S.

The learning-rate schedule does not depend on ``num_train_steps``, so a run's dev perplexity at step S is what a
run trained for exactly S steps would score: one sweep trained to the largest budget answers for every smaller one.
Per budget and row: the paired change against the reference judged as the table does, the reference's dev / train
perplexity ratio and recent improvement, and the CPU minutes to reach S. Writes ``step_budgets.md`` and ``.png``::

    python -m attention_jax.reports.step_budgets --root=runs/table2_pilot --budgets=3000,4500,6000 \
        --out=docs/table2_pilot
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections.abc import Sequence

from attention_jax.foundation import run_files
from attention_jax.reports import comparison_plot
from attention_jax.reports.comparison import markdown_table, paired_changes, run_directory
from attention_jax.reports.sweep_rows import read_metric_curve, read_sweep_rows
from attention_jax.reports.sweep_seeds import sign, verdict

IMPROVEMENT_WINDOW = 1000  # Steps over which "still improving" is measured.


@dataclasses.dataclass(frozen=True)
class _RunCurve:
    """One run's evaluations."""

    row: str
    seed: int
    dev_ppl: dict[int, float]
    train_ppl: dict[int, float]
    seconds_per_step: float | None
    paper_dev_ppl: float | None

    def _dev_at(self, step: int) -> float | None:
        """Dev perplexity at ``step`` exactly (None when it was not evaluated there)."""
        return self.dev_ppl.get(step)

    def _train_near(self, step: int, window: int) -> float | None:
        """Mean logged training perplexity over ``(step - window, step]``."""
        values = [ppl for logged, ppl in self.train_ppl.items() if step - window < logged <= step]
        return statistics.fmean(values) if values else None


def read_sweep(root: str) -> dict[str, dict[int, _RunCurve]]:
    """Every run under ``root/<row>/seed_<k>`` with metrics: row -> seed -> curve.

    Parameters
    ----------
    root : str
        The sweep root (:func:`attention_jax.reports.sweep_rows.read_sweep_rows`, every row of the sweep).

    Returns
    -------
    dict
        Row -> seed -> :class:`_RunCurve`, rows in the sweep's order; runs without ``metrics.jsonl`` left out.
    """
    runs: dict[str, dict[int, _RunCurve]] = {}
    for row in read_sweep_rows(root, all_rows=True)[1]:
        for run in row.runs:
            run_dir = run_directory(root, row, run)
            if run.seed is None or not os.path.exists(os.path.join(run_dir, run_files.METRICS_FILE)):
                continue
            wall_s, step = run.results.get("wall_s"), run.results.get("step")
            runs.setdefault(row.row, {})[run.seed] = _RunCurve(
                row.row, run.seed, dict(zip(*read_metric_curve(run_dir, "eval/perplexity"))),
                dict(zip(*read_metric_curve(run_dir, "train/perplexity"))),
                float(wall_s) / int(step) if wall_s and step else None, row.paper.get("dev_ppl"))
    return runs


@dataclasses.dataclass(frozen=True)
class _RowAtBudget:
    """One row judged at one budget."""

    row: str
    dev_ppl: tuple[float, ...]
    changes: tuple[float, ...]
    paper_change: float | None
    verdict: str
    basis: str


def _judge_budget(runs: dict[str, dict[int, _RunCurve]], step: int, reference: str | None = None) -> list[_RowAtBudget]:
    """Judge every row at ``step`` against the reference row, paired by seed."""
    reference = reference or next(iter(runs), "")
    base = runs.get(reference, {})
    base_at: dict[int | None, float] = {seed: dev for seed, curve in base.items() if (dev := curve._dev_at(step))}
    paper_base = next((curve.paper_dev_ppl for curve in base.values()), None)
    judged = []
    for row, seeds in runs.items():
        at_step = {seed: dev for seed, curve in seeds.items() if (dev := curve._dev_at(step))}
        in_seed_order: dict[int | None, float] = dict(sorted(at_step.items()))
        changes = tuple(paired_changes(in_seed_order, base_at, relative=True).values())
        paper_row = next((curve.paper_dev_ppl for curve in seeds.values()), None)
        paper_change = (paper_row / paper_base - 1) if row != reference and paper_row and paper_base else None
        if row == reference:
            label, basis = "", "reference row"
        elif paper_change is None:
            label, basis = "", "no paper figures"
        else:
            label, basis = verdict(list(changes), sign(paper_change), reference)
        if at_step:
            judged.append(_RowAtBudget(row, tuple(at_step[seed] for seed in sorted(at_step)), changes,
                                      paper_change, label, basis))
    return judged


def _format(value: float | None, digits: int, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def budget_markdown(runs: dict[str, dict[int, _RunCurve]], budgets: Sequence[int], window: int,
                    reference: str | None = None) -> str:
    """The report: one table per budget, then a summary line per budget.

    Parameters
    ----------
    runs : dict
        :func:`read_sweep`'s result.
    budgets : Sequence[int]
        Steps at which to judge (each must be an evaluated step).
    window : int
        Steps over which training perplexity is averaged (the evaluation interval).
    reference : str, optional
        The reference row (see :func:`_judge_budget`).

    Returns
    -------
    str
        Markdown.
    """
    reference = reference or next(iter(runs), "")
    lines = ["# The sweep read at several step budgets", "",
             "Made by `python -m attention_jax.reports.step_budgets` (module docstring: what each column "
             f"means). Changes are of dev perplexity against {reference}, paired by seed; a verdict needs the mean "
             "change beyond the seeds' spread (the table's rule).", ""]
    summary = []
    for step in budgets:
        judged = _judge_budget(runs, step, reference)
        cells = []
        for item in judged:
            mean = statistics.fmean(item.changes) if item.changes else None
            cells.append([item.row, ", ".join(f"{ppl:.2f}" for ppl in item.dev_ppl),
                          f"{_format(None if mean is None else 100 * mean, 1, sign=True)}%",
                          ", ".join(f"{100 * change:+.1f}%" for change in item.changes) or "-",
                          f"{_format(None if item.paper_change is None else 100 * item.paper_change, 1, sign=True)}%",
                          item.verdict or item.basis])
        lines += [f"## {step:,} steps", "",
                  *markdown_table(["row", "dev PPL per seed", "paired change (mean)", "per seed", "paper's change",
                                   "verdict"], cells, ["---", "---", "---:", "---", "---:", "---"])]
        directional = [item for item in judged if item.paper_change not in (None, 0.0)]
        count = {label: sum(item.verdict == label for item in directional)
                 for label in ("reproduced", "opposite", "within noise")}
        base_runs = list(runs.get(reference, {}).values())
        base_dev = [dev for curve in base_runs if (dev := curve._dev_at(step))]
        ratios = [dev / train for curve in base_runs
                  if (dev := curve._dev_at(step)) and (train := curve._train_near(step, window))]
        earlier = [dev / before - 1 for curve in base_runs
                   if (dev := curve._dev_at(step)) and (before := curve._dev_at(step - IMPROVEMENT_WINDOW))]
        minutes = {row: [curve.seconds_per_step * step / 60 for curve in seeds.values() if curve.seconds_per_step]
                   for row, seeds in runs.items()}
        base_minutes = statistics.fmean(minutes[reference]) if minutes.get(reference) else None
        slowest = max(((statistics.fmean(values), row) for row, values in minutes.items() if values), default=None)
        summary.append([
            f"{step:,}", f"{count['reproduced']} of {len(directional)}", count["opposite"], count["within noise"],
            _format(statistics.fmean(base_dev) if base_dev else None, 2),
            _format(statistics.fmean(ratios) if ratios else None, 2),
            f"{_format(100 * statistics.fmean(earlier) if earlier else None, 1, sign=True)}%",
            f"{_format(base_minutes, 0)}; {'-' if slowest is None else f'{slowest[0]:.0f} ({slowest[1]})'}"])
        lines.append("")
    table = markdown_table(["budget", "directions reproduced", "opposite", "within noise", f"{reference} dev PPL",
                            f"{reference} dev/train PPL",
                            f"{reference} dev PPL change over the last {IMPROVEMENT_WINDOW:,} steps",
                            f"core-minutes per run ({reference}; slowest row)"], summary,
                           ["---:", "---", "---", "---", "---:", "---:", "---:", "---"])
    return "\n".join(lines[:4] + ["## Summary", ""] + table + [""] + lines[4:])


def plot_changes(runs: dict[str, dict[int, _RunCurve]], path: str, reference: str | None = None) -> None:
    """Plot each row's mean paired change of dev perplexity against step, with the paper's change.

    Parameters
    ----------
    runs : dict
        :func:`read_sweep`'s result.
    path : str
        PNG file to write.
    reference : str, optional
        The reference row (see :func:`_judge_budget`).
    """
    reference = reference or next(iter(runs), "")
    plt = comparison_plot.pyplot()

    steps = sorted({step for curve in runs.get(reference, {}).values() for step in curve.dev_ppl})
    rows = [row for row in runs if row != reference]
    figure, axes = plt.subplots(1, max(1, len(rows)), figsize=(3.0 * max(1, len(rows)), 3.2), sharey=True,
                                squeeze=False)
    for axis, row in zip(axes[0], rows):
        means, shown = [], []
        for step in steps:
            item = next((item for item in _judge_budget({reference: runs[reference], row: runs[row]}, step, reference)
                         if item.row == row), None)
            if item is not None and item.changes:
                means.append(100 * statistics.fmean(item.changes))
                shown.append(step)
                for change in item.changes:
                    axis.plot(step, 100 * change, ".", color="0.6", markersize=3)
        axis.plot(shown, means, "-", color="C0", label="ours (mean of seeds)")
        paper = next((curve.paper_dev_ppl for curve in runs[row].values()), None)
        paper_base = next((curve.paper_dev_ppl for curve in runs[reference].values()), None)
        if paper and paper_base:
            axis.axhline(100 * (paper / paper_base - 1), color="C3", linestyle="--", label="paper")
        axis.axhline(0, color="black", linewidth=0.5)
        axis.set_title(row)
        axis.set_xlabel("step")
    axes[0][0].set_ylabel(f"dev PPL change against {reference} (%)")
    axes[0][0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":  # The command (its flags) is in attention_jax/commands/.
    from attention_jax.commands import step_budgets as command

    command.run()
