"""Speed of training: steps to a fixed dev perplexity, paired by seed, and gradient norms per module.

Declared by the ``get_report()`` of ``configs/sweeps/normalization.py`` and ``configs/sweeps/feed_forward.py``.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Sequence

from attention_jax.reports.comparison import (
    _directional_reading,
    _mean_and_se,
    diverged,
    format_figure,
    markdown_table,
    run_directory,
    write_report_files,
)
from attention_jax.reports.sweep_diagnostics import TARGET_FACTOR, _first_step_under, _target_perplexity
from attention_jax.reports.sweep_rows import ReportContext, RowReport, _read_metric_records

REPORT_STEM = "normalization_training"  # Not the sweep's own report name (configs/sweeps/normalization.py).
INIT_PREFIX, LOGGED_PREFIX = "train/init/grad_norm/", "train/grad_norm/"


@dataclasses.dataclass(frozen=True)
class _NormalizationRow:
    """One row's figures."""

    row: str
    steps: dict[int | None, int | None]
    diverged_seeds: tuple[int | None, ...]
    step_changes: dict[int | None, float]
    reading: str
    basis: str
    init_norms: dict[str, float]
    early_norms: dict[str, float]
    early_step: int | None


def _applies(rows: Sequence[RowReport], reference: str, fields: Sequence[str]) -> bool:
    """Whether some row's config differs from the reference row's in one of ``fields`` (False without it)."""
    base = next((row.config for row in rows if row.row == reference and row.config), None)
    return base is not None and any(row.config.get(field) != base.get(field)
                                    for row in rows if row.config for field in fields)


def _gradient_norms(run_dir: str) -> tuple[dict[str, float], dict[str, float], int | None]:
    """Module -> gradient norm at step 1 and at the first later logged step of one run's ``metrics.jsonl``."""
    init: dict[str, float] = {}
    early: dict[str, float] = {}
    early_step = None
    for record in _read_metric_records(run_dir):
        if not init:
            init = {key[len(INIT_PREFIX):]: value for key, value in record.items()
                    if key.startswith(INIT_PREFIX) and value is not None}
        logged = {key[len(LOGGED_PREFIX):]: value for key, value in record.items()
                  if key.startswith(LOGGED_PREFIX) and value is not None}
        if logged and early_step is None and record.get("step", 0) > 1:
            early, early_step = logged, int(record["step"])
    return init, early, early_step


def _mean_norms(per_seed: list[dict[str, float]]) -> dict[str, float]:
    modules = dict.fromkeys(module for norms in per_seed for module in norms)
    return {module: statistics.fmean([norms[module] for norms in per_seed if module in norms]) for module in modules}


def _compare_rows(root: str, rows: Sequence[RowReport], target: float | None,
                 reference: str) -> list[_NormalizationRow]:
    """Every row's figures (module docstring), paired by seed against the reference row."""
    finished = [row for row in rows if row.finished]
    healthy = {row.row: [run for run in row.finished if not diverged(run)] for row in finished}
    directories = {row.row: [run_directory(root, row, run) for run in healthy[row.row]] for row in finished}
    steps_by_row = {row.row: {run.seed: _first_step_under(path, target) if target else None
                              for run, path in zip(healthy[row.row], directories[row.row])} for row in finished}
    base_reached = {seed: step for seed, step in steps_by_row.get(reference, {}).items() if step is not None}
    compared = []
    for row in finished:
        steps = steps_by_row[row.row]
        changes = {seed: float(step - base_reached[seed]) for seed, step in steps.items()
                   if row.row != reference and step is not None and seed in base_reached}
        reading, basis = (("reference", "the reference row") if row.row == reference
                          else _directional_reading(list(changes.values()), "slower", "faster"))
        norms = [_gradient_norms(path) for path in directories[row.row]]
        compared.append(_NormalizationRow(
            row.row, steps, tuple(run.seed for run in row.finished if diverged(run)), changes, reading, basis,
            _mean_norms([init for init, _, _ in norms]), _mean_norms([early for _, early, _ in norms]),
            next((step for _, _, step in norms if step is not None), None)))
    return compared


def _norm_table(compared: Sequence[_NormalizationRow], early: bool) -> list[str]:
    modules = list(dict.fromkeys(m for row in compared for m in (row.early_norms if early else row.init_norms)))
    return markdown_table(["row", *modules], ([row.row, *(f"{norms[m]:.3g}" if m in norms else "" for m in modules)]
                                              for row in compared
                                              for norms in [row.early_norms if early else row.init_norms]))


def _markdown_report(root: str, compared: Sequence[_NormalizationRow], target: float | None,
                     reference: str) -> str:
    """The report's Markdown: steps to the target perplexity per row, then the gradient norms per module."""
    target_text = f"{target:.2f}" if target else f"pending (no finished {reference} run)"
    lines = [f"# Normalisation: speed of training and gradient norms ({root})", "",
             f"Target dev perplexity: {target_text} ({TARGET_FACTOR:g} x {reference}'s mean best). Steps: the "
             "first evaluated step at or under it, mean ± standard error (SE) over the row's n healthy seeds (every ± "
             "here is one; `not reached` counted "
             f"apart); vs {reference}: the paired difference in steps; a change is beyond the seeds' spread when "
             "|mean| > 2 x SE (`attention_jax/reports/comparison.py`).", ""]
    cells = []
    for row in compared:
        reached = [step for step in row.steps.values() if step is not None]
        change, change_se = _mean_and_se(list(row.step_changes.values()))
        cells.append([row.row, len(row.steps) + len(row.diverged_seeds), len(row.diverged_seeds),
                      len(row.steps) - len(reached), format_figure(*_mean_and_se(reached), 0),
                      format_figure(change, change_se, 0, sign=True) if row.step_changes else "", row.reading])
    lines += markdown_table(["row", "seeds", "diverged", "not reached", "steps to target",
                             f"vs {reference} (steps)", "reading"], cells)
    early_step = next((row.early_step for row in compared if row.early_step is not None), None)
    healthy = "mean over the healthy seeds (a diverged seed left out)"
    lines += ["", f"## Gradient norm per module at step 1 (the initial parameters), {healthy}", ""]
    lines += _norm_table(compared, early=False)
    lines += ["", f"## Gradient norm per module at step {early_step or 'of the first later log'}, {healthy}", ""]
    lines += _norm_table(compared, early=True)
    return "\n".join(lines) + "\n"


def _write_normalization_report(root: str, rows: Sequence[RowReport], out_dir: str, reference: str) -> list[str]:
    """Write ``OUT/normalization_training.md``."""
    target = _target_perplexity(root, rows, reference)
    return write_report_files(os.path.join(out_dir, REPORT_STEM),
                              _markdown_report(root, _compare_rows(root, rows, target, reference), target, reference))


@dataclasses.dataclass(frozen=True)
class TrainingSpeed:
    """What a sweep file declares in ``get_report()``'s ``extras``: the fields whose change calls for the report.

    Attributes
    ----------
    fields : tuple[str, ...]
        Config fields, e.g. ``("normalization", "residual_connections")``.
    """

    fields: tuple[str, ...]

    def write(self, context: ReportContext) -> list[str]:
        """Write the report when a row changes one of :attr:`fields` from the reference row.

        Parameters
        ----------
        context : ReportContext
            The sweep being reported.

        Returns
        -------
        list[str]
            The path written; none when no row changes them.
        """
        if not _applies(context.rows, context.reference, self.fields):
            return []
        return _write_normalization_report(context.root, context.rows, context.out_dir, context.reference)
