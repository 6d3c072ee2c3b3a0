"""Why a row's dev perplexity differs from the reference row: how fast it learned, how well it fits, how it ended.

Also every run's own figures (``<name>_runs.md`` and ``.csv``), the per-seed values, counts and ranges that a page's
prose cites, with the rows at a glance that a page includes verbatim (:func:`attention_jax.reports.pages`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import statistics
from typing import Sequence

from attention_jax.reports import comparison, comparison_plot, comparison_report
from attention_jax.reports.comparison import (
    ACCURACY_COLLAPSE,
    DIVERGED_FACTOR,
    _mean_and_se,
    _reported_bleu,
    diverged,
    format_figure,
    markdown_table,
    run_directory,
    write_report_files,
)
from attention_jax.reports.sweep_rows import RowReport, SeedRun, _read_metric_records

TRAIN_PPL_KEY = "train/perplexity"
TARGET_FACTOR = 1.25
"""The target dev perplexity of "steps to target" is this many times the reference's mean best: a level a healthy row
reaches well before its end, so that the step measures speed and not the final level."""
RUN_FIELDS = ("row", "seed", "status", "ended_by", "dev_ppl", "dev_bleu", "best_step", "best_dev_ppl",
              "first_eval_step", "first_dev_ppl", "step_s", "dev_ppl_at_step_s", "train_ppl_at_best", "dev_over_train",
              "steps_to_target", "first_train_loss", "last_train_loss", "peak_learning_rate", "wall_s")
"""The columns of ``<name>_runs.csv``: one line per run (``step_s``: the diagnostics step, half of the reference's
mean best step)."""
_DEV_PPL = next(metric for metric in comparison.METRICS if metric.name == "dev_ppl")


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

    def first_step_under(self, target: float) -> int | None:
        """The first evaluated step whose dev perplexity is at or under ``target`` (None if none was)."""
        return _first_step_at_or_under(self.dev_steps, self.dev_ppls, target)


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


def _first_step_at_or_under(steps: Sequence[int], perplexities: Sequence[float], target: float) -> int | None:
    return next((step for step, ppl in zip(steps, perplexities) if ppl <= target), None)


def _first_step_under(run_dir: str, target: float) -> int | None:
    """The first evaluated step of the run in ``run_dir`` whose dev perplexity is at or under ``target``."""
    return _first_step_at_or_under(*comparison_plot.read_metric_curve(run_dir, comparison_plot.EVAL_PPL_KEY), target)


def _target_perplexity(root: str, rows: Sequence[RowReport], reference: str) -> float | None:
    """``TARGET_FACTOR`` times the reference's mean best dev perplexity over its healthy seeds."""
    base = next((row for row in rows if row.row == reference), None)
    if base is None:
        return None
    bests = []
    for run in base.finished:
        run_dir = run_directory(root, base, run)
        perplexities = comparison_plot.read_metric_curve(run_dir, comparison_plot.EVAL_PPL_KEY)[1]
        if perplexities and not diverged(run):
            bests.append(min(perplexities))
    return TARGET_FACTOR * statistics.fmean(bests) if bests else None


def _mean(values: Sequence[float | None]) -> float | None:
    return _mean_and_se([value for value in values if value is not None])[0]  # A run may lack a figure.


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


def _write_diagnostics(root: str, name: str, rows: Sequence[RowReport], *, out_dir: str | None = None,
                      reference: str) -> str | None:
    """Write ``OUT/<name>_diagnostics.md`` (:func:`_diagnostics_markdown`)."""
    text = _diagnostics_markdown(root, name, rows, reference)
    if text is None:
        return None
    return write_report_files(os.path.join(out_dir or root, f"{name}_diagnostics"), text)[0]



def _run_figures(root: str, row: RowReport, run: SeedRun, step: int | None, target: float | None) -> dict:
    """One run's line of ``<name>_runs.csv`` (:data:`RUN_FIELDS`; None where the run has no such figure)."""
    figures: dict = dict.fromkeys(RUN_FIELDS)
    figures.update(row=row.row, seed=run.seed, step_s=step,
                   status="diverged" if run.status == "done" and diverged(run) else run.status)
    if run.status != "done":
        return figures
    run_dir = run_directory(root, row, run)
    records = _read_metric_records(run_dir)
    losses = [record["train/loss"] for record in records if "train/loss" in record]
    rates = [record["train/learning_rate"] for record in records if "train/learning_rate" in record]
    figures.update(ended_by=run.results.get("stop_reason"), dev_ppl=_DEV_PPL.read(run_dir, run),
                   dev_bleu=_reported_bleu(run.results), wall_s=run.results.get("wall_s"),
                   first_train_loss=losses[0] if losses else None, last_train_loss=losses[-1] if losses else None,
                   peak_learning_rate=max(rates) if rates else None)
    curves = _run_diagnostics(run_dir, run.results)
    if curves is not None:
        figures.update(best_step=curves.best_step, best_dev_ppl=curves.best_dev_ppl,
                       first_eval_step=curves.dev_steps[0], first_dev_ppl=curves.dev_ppls[0],
                       train_ppl_at_best=curves.train_ppl_at_best,
                       dev_ppl_at_step_s=curves.dev_ppl_at(step) if step is not None else None,
                       steps_to_target=curves.first_step_under(target) if target else None,
                       dev_over_train=(curves.best_dev_ppl / curves.train_ppl_at_best
                                       if curves.train_ppl_at_best else None))
    return figures


def _steps_cell(runs: Sequence[dict]) -> str:
    """Steps to the target over a row's healthy finished runs: ``mean ± SE``, with how many reached it if not all."""
    reached = [run["steps_to_target"] for run in runs if run["steps_to_target"] is not None]
    if not reached:
        return f"none of {len(runs)}" if runs else ""
    cell = format_figure(*_mean_and_se(reached), 0)
    return cell if len(reached) == len(runs) else f"{cell} ({len(reached)} of {len(runs)})"


def _glance_table(rows: Sequence[RowReport], per_run: Sequence[dict], compared: dict, reference: str,
                  step_text: str, target: float | None) -> list[str]:
    """One line per row: its comparison (dev PPL, dev BLEU) beside its speed and fit, as a page shows it."""
    header = ["row", "seeds", "dev PPL", f"change vs {reference}", "dev BLEU", f"change vs {reference}",
              f"steps to dev PPL {target:.2f}" if target else "steps to target", f"dev PPL at {step_text}",
              "dev / train PPL at best"]
    cells = []
    for row in rows:
        healthy = [run for run in per_run if run["row"] == row.row and run["status"] == "done"]
        if not healthy and not any(run["row"] == row.row and run["status"] == "diverged" for run in per_run):
            continue
        ppl, bleu = compared[row.row]["dev_ppl"], compared[row.row]["dev_bleu"]
        seeds = comparison._seeds_cell(ppl.seeds, len(ppl.diverged))
        seeds += f" ({len(row.pending)} to run)" if row.pending else ""
        cells.append([row.row, seeds, comparison_report.value_cell(ppl), comparison_report.change_cell(ppl),
                      comparison_report.value_cell(bleu), comparison_report.change_cell(bleu), _steps_cell(healthy),
                      _format(_mean([run["dev_ppl_at_step_s"] for run in healthy]), 2),
                      _format(_mean([run["dev_over_train"] for run in healthy]), 2)])
    return markdown_table(header, cells)


def _cell(value: float | int | None, digits: int | None = None) -> str:
    if value is None:
        return ""
    if digits is None:
        return f"{value:.3g}"
    return f"{value:,.{digits}f}"


def write_run_tables(root: str, name: str, rows: Sequence[RowReport], *, out_dir: str, reference: str) -> list[str]:
    """Write ``OUT/<name>_runs.md`` and ``.csv``: the rows at a glance and every run's own figures.

    The Markdown's ``## At a glance`` section is what a page includes between its ``generated`` markers
    (:mod:`attention_jax.reports.pages`); its ``## Every run`` table gives each seed's figures, and its first lines
    the counts and wall-time range of the runs. A diverged run is listed with its figures and left out of every
    mean (the comparison's rule).

    Parameters
    ----------
    root : str
        Sweep root.
    name : str
        The report's name.
    rows : Sequence[RowReport]
        The sweep's rows.
    out_dir : str
        Where the files go.
    reference : str
        The reference row.

    Returns
    -------
    list[str]
        The paths written; none when no run finished.
    """
    if not any(row.finished for row in rows):
        return []
    step = _reference_step(_collect(root, [row for row in rows if row.row == reference]).get(reference, []))
    target = _target_perplexity(root, rows, reference)
    per_run = [_run_figures(root, row, run, step, target) for row in rows for run in row.runs]
    compared = comparison.compare(root, rows, reference, comparison.METRICS)
    step_text = f"step {step:,}" if step is not None else "step S"
    finished = [run for run in per_run if run["status"] in ("done", "diverged")]
    walls = [run["wall_s"] for run in finished if run["wall_s"] is not None]
    counts = (f"{len(per_run)} runs: {len(finished)} finished "
              f"({sum(run['status'] == 'diverged' for run in finished)} diverged), "
              f"{len(per_run) - len(finished)} not finished.")
    if walls:
        counts += (f" Wall time of the finished runs: {min(walls):,.0f}-{max(walls):,.0f} s, "
                   f"{sum(walls) / 3600:.1f} hours in all.")
    target_text = f"{target:.2f}" if target else "none yet"
    lines = [f"# {name}: every run ({root})", "", counts, "",
             f"Target dev perplexity {target_text}: {TARGET_FACTOR:g} x {reference}'s mean best; steps to target: the "
             f"first evaluated step at or under it. Dev PPL at {step_text}: half of {reference}'s mean best step. "
             "Dev / train PPL at best: at the run's best evaluation. A diverged run (last dev PPL over "
             f"{DIVERGED_FACTOR:g}x its best, dev accuracy under {ACCURACY_COLLAPSE:g}x that at its best) is listed "
             "below and left out of every mean; ± is one standard error over the seeds counted.", "",
             "## At a glance", "",
             *_glance_table(rows, per_run, compared, reference, step_text, target), "",
             "## Every run", ""]
    lines += markdown_table(
        ["row", "seed", "status", "ended by", "dev PPL", "dev BLEU", "best step", "best dev PPL",
         "first dev PPL (step)", f"dev PPL at {step_text}", "train PPL at best", "dev / train", "steps to target",
         "train loss first, last", "peak logged learning rate", "wall s"],
        ([run["row"], "" if run["seed"] is None else run["seed"], run["status"], run["ended_by"] or "",
          _cell(run["dev_ppl"], 2), _cell(run["dev_bleu"], 1), _cell(run["best_step"], 0),
          _cell(run["best_dev_ppl"], 2),
          "" if run["first_dev_ppl"] is None else f"{run['first_dev_ppl']:,.0f} ({run['first_eval_step']:,})",
          _cell(run["dev_ppl_at_step_s"], 2), _cell(run["train_ppl_at_best"], 2), _cell(run["dev_over_train"], 2),
          _cell(run["steps_to_target"], 0),
          "" if run["first_train_loss"] is None else f"{run['first_train_loss']:.2f}, {run['last_train_loss']:.2f}",
          _cell(run["peak_learning_rate"]), _cell(run["wall_s"], 0)] for run in per_run))
    return write_report_files(os.path.join(out_dir, f"{name}_runs"), "\n".join(lines) + "\n", RUN_FIELDS, per_run)
