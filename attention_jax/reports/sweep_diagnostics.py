"""Why a row's dev perplexity differs from the reference row: how fast it learned, how well it fits, how it ended."""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Sequence

from attention_jax.reports import comparison_plot
from attention_jax.reports.comparison import (
    ACCURACY_COLLAPSE,
    DIVERGED_FACTOR,
    diverged,
    markdown_table,
    mean_and_se,
    run_directory,
    write_report_files,
)
from attention_jax.reports.sweep_rows import RowReport

TRAIN_PPL_KEY = "train/perplexity"


@dataclasses.dataclass(frozen=True)
class _RunDiagnostics:
    """The diagnostic figures of one finished run."""

    best_step: int
    best_dev_ppl: float
    train_ppl_at_best: float | None
    stop_reason: str
    dev_steps: tuple[int, ...]
    dev_ppls: tuple[float, ...]
    diverged: bool = False

    def dev_ppl_at(self, step: int) -> float | None:
        """Dev perplexity at the last evaluation at or before ``step`` (None if none was)."""
        earlier = [ppl for evaluated, ppl in zip(self.dev_steps, self.dev_ppls) if evaluated <= step]
        return earlier[-1] if earlier else None


def _run_diagnostics(run_dir: str, results: dict, *, run_diverged: bool = False) -> _RunDiagnostics | None:
    """Read one finished run's curves into :class:`_RunDiagnostics` (None without dev evaluations)."""
    dev_steps, dev_ppls = comparison_plot.read_metric_curve(run_dir, comparison_plot.EVAL_PPL_KEY)
    if not dev_steps:
        return None
    best = min(range(len(dev_ppls)), key=dev_ppls.__getitem__)
    train_steps, train_ppls = comparison_plot.read_metric_curve(run_dir, TRAIN_PPL_KEY)
    at_or_before = [ppl for step, ppl in zip(train_steps, train_ppls) if step <= dev_steps[best]]
    return _RunDiagnostics(best_step=dev_steps[best], best_dev_ppl=dev_ppls[best],
                          train_ppl_at_best=at_or_before[-1] if at_or_before else None,
                          stop_reason=str(results.get("stop_reason", "unknown")),
                          dev_steps=tuple(dev_steps), dev_ppls=tuple(dev_ppls), diverged=run_diverged)


def _mean(values: Sequence[float | None]) -> float | None:
    return mean_and_se([value for value in values if value is not None])[0]  # A run may lack a figure.


def _reference_step(base_runs: Sequence[_RunDiagnostics]) -> int | None:
    """``S``: half of the reference's mean best step, rounded down to a step it evaluated (None without it)."""
    if not base_runs:
        return None
    half = sum(run.best_step for run in base_runs) / len(base_runs) / 2
    evaluated = [step for step in base_runs[0].dev_steps if step <= half]
    return evaluated[-1] if evaluated else base_runs[0].dev_steps[0]


def _format(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _ended_by(runs: Sequence[_RunDiagnostics]) -> str:
    counts = collections.Counter("diverged" if run.diverged else run.stop_reason for run in runs)
    return ", ".join(f"{reason} x{count}" for reason, count in sorted(counts.items()))


def _collect(root: str, rows: Sequence[RowReport]) -> dict[str, list[_RunDiagnostics]]:
    """Row -> its finished runs that have dev curves, in seed order (``[]`` for a row with none)."""
    collected: dict[str, list[_RunDiagnostics]] = {}
    for row in rows:
        runs = [_run_diagnostics(run_directory(root, row, run), run.results,
                                run_diverged=diverged(run)) for run in row.finished]
        collected[row.row] = [run for run in runs if run is not None]
    return collected


def _row_cells(row: str, all_runs: list[_RunDiagnostics], step: int | None, reference_at_step: float | None,
               reference: str) -> list[str]:
    runs = [run for run in all_runs if not run.diverged]
    at_step = _mean([run.dev_ppl_at(step) for run in runs]) if step is not None else None
    change = (100 * (at_step / reference_at_step - 1) if at_step is not None and reference_at_step and row != reference
              else None)
    train = _mean([run.train_ppl_at_best for run in runs])
    gap = _mean([run.best_dev_ppl / run.train_ppl_at_best for run in runs if run.train_ppl_at_best])
    cells = [row, str(len(all_runs)), _ended_by(all_runs), _format(_mean([run.best_step for run in runs]), 0),
             _format(_mean([run.best_dev_ppl for run in runs]), 2), _format(at_step, 2),
             "" if change is None else f"{change:+.1f}%", _format(train, 2), _format(gap, 2)]
    return cells


def _diagnostics_markdown(root: str, name: str, rows: Sequence[RowReport], reference: str) -> str | None:
    """The diagnostics table of a sweep (module docstring), or None when no run has dev curves."""
    collected = _collect(root, rows)
    if not any(collected.values()):
        return None
    step = _reference_step(collected.get(reference, []))
    reference_at_step = (_mean([run.dev_ppl_at(step) for run in collected[reference] if not run.diverged])
                         if step is not None else None)
    step_text = f"step {step:,}" if step is not None else f"step S (no {reference} run yet)"
    lines = [f"# {name}: why rows differ from {reference} ({root})", "",
             "Means over each row's finished seeds, read from the runs' `metrics.jsonl` and `results.json` "
             f"(`attention_jax/reports/sweep_diagnostics.py`). Dev PPL at {step_text} (half of {reference}'s mean "
             f"best step): how fast the row learned, against {reference} at the same step. Dev / train PPL at best: "
             "how much it overfits at the checkpoint it is judged on (training perplexity is measured on "
             "the training batches with dropout on: compare rows of the same dropout rate). Ended by: early "
             "stopping "
             "(`early_stopping`) or the step cap (`num_train_steps`), per seed; a seed that `diverged` (last "
             f"dev PPL over {DIVERGED_FACTOR:g}x its best, dev accuracy under {ACCURACY_COLLAPSE:g}x that at "
             "its best) is left out of the row's figures.", ""]
    lines += markdown_table(["row", "seeds", "ended by", "best step", "dev PPL at best", f"dev PPL at {step_text}",
                             f"vs {reference}", "train PPL at best", "dev / train PPL at best"],
                            [_row_cells(row.row, collected[row.row], step, reference_at_step, reference)
                             for row in rows if collected.get(row.row)])
    return "\n".join(lines) + "\n"


def write_diagnostics(root: str, name: str, rows: Sequence[RowReport], *, out_dir: str | None = None,
                      reference: str) -> str | None:
    """Write ``OUT/<name>_diagnostics.md`` (:func:`_diagnostics_markdown`).

    Parameters
    ----------
    root : str
        Sweep root.
    name : str
        The report's name.
    rows : Sequence[RowReport]
        The sweep's rows.
    out_dir : str, optional
        Where the file goes (``root`` by default).
    reference : str
        The reference row.

    Returns
    -------
    str or None
        The path written; None when no run has dev curves.
    """
    text = _diagnostics_markdown(root, name, rows, reference)
    if text is None:
        return None
    return write_report_files(os.path.join(out_dir or root, f"{name}_diagnostics"), text)[0]

