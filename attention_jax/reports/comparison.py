"""One comparison for every sweep: each row against a reference row, paired by seed, metric by metric.

A sweep asks one question: how does each row differ from its reference row? For every scalar a run
records (:data:`METRICS`: dev and test perplexity, BLEU, chrF where present, wall time, parameters,
steps) :func:`compare` gives, per row,

- the mean over the row's finished seeds and its standard error ``s / sqrt(n)`` (``s`` the sample
  standard deviation, ddof=1; none with one seed);
- the change against the reference *paired by seed*: for every seed k finished in both rows,
  ``c_k = x(row, k) / x(ref, k) - 1`` for a metric compared relatively (perplexities, wall time,
  parameters) or ``c_k = x(row, k) - x(ref, k)`` for one compared as a difference (BLEU, chrF, steps);
  its mean and standard error over the ``n`` paired seeds;
- a verdict (:func:`verdict`): ``beyond 2 SE`` when ``n >= 2`` and ``|mean| > 2 se``
  (:data:`attention_jax.reports.sweep_seeds.SPREAD_FACTOR`), ``within noise`` otherwise, ``one seed`` with a
  single paired seed (no standard error), ``pending`` with none, ``unstable`` when a finished seed of the
  row or of the reference diverged (:func:`attention_jax.reports.sweep_seeds.diverged`), and ``reference``
  for the reference row itself.

Rows of a root without seed directories are one run each, paired with the reference's one run.
:mod:`attention_jax.reports.comparison_report` writes the comparison as Markdown, CSV and plots.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from typing import Callable, Mapping, Sequence

from attention_jax.reports import sweep_seeds
from attention_jax.reports.sweep_rows import RowReport, SeedRun

REFERENCE_VERDICT = "reference"
BEYOND_VERDICT = f"beyond {sweep_seeds.SPREAD_FACTOR:g} SE"
WITHIN_VERDICT = "within noise"
ONE_SEED_VERDICT = "one seed"
PENDING_VERDICT = "pending"
UNSTABLE_VERDICT = "unstable"
VALIDATION_REPORT = "eval_validation.json"  # What the final evaluation of the dev split writes (its chrF).


@dataclasses.dataclass(frozen=True)
class Metric:
    """A scalar every run of a sweep may record, and how two rows' values of it compare.

    Attributes
    ----------
    name : str
        Its name in the CSV, e.g. ``"dev_ppl"``.
    label : str
        Its name in the Markdown and the plots, e.g. ``"dev PPL"``.
    digits : int
        Decimals shown for its values (its changes: one decimal of a percent when relative).
    relative : bool
        Whether a change is the ratio to the reference minus one (shown in percent) rather than the
        difference.
    read : Callable[[str, SeedRun], float | None]
        The value of one run (from its directory and its :class:`SeedRun`); None where the run has none.
    """

    name: str
    label: str
    digits: int
    relative: bool
    read: Callable[[str, SeedRun], float | None] = dataclasses.field(repr=False, compare=False)

    @property
    def change_unit(self) -> str:
        """``"%"`` for a relative change, ``""`` for a difference in the metric's own unit."""
        return "%" if self.relative else ""


def _results_key(key: str) -> Callable[[str, SeedRun], float | None]:
    def read(run_dir: str, run: SeedRun) -> float | None:
        value = run.results.get(key)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    return read


def _dev_chrf(run_dir: str, run: SeedRun) -> float | None:
    path = os.path.join(run_dir, VALIDATION_REPORT)
    if not run.results or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            value = json.load(file).get("chrf")
    except (OSError, json.JSONDecodeError, AttributeError):  # A damaged report leaves the cell empty.
        return None
    return float(value) if isinstance(value, (int, float)) else None


METRICS: tuple[Metric, ...] = (
    Metric("dev_ppl", "dev PPL", 2, True, lambda run_dir, run: sweep_seeds.reported_ppl(run.results)),
    Metric("test_ppl", "test PPL", 2, True, _results_key("test_ppl")),
    Metric("dev_bleu", "dev BLEU", 1, False, lambda run_dir, run: sweep_seeds.reported_bleu(run.results)),
    Metric("test_bleu", "test BLEU", 1, False, _results_key("test_bleu")),
    Metric("dev_chrf", "dev chrF", 1, False, _dev_chrf),
    Metric("wall_s", "wall s", 0, True, _results_key("wall_s")),
    Metric("params", "params", 0, True, _results_key("params")),
    Metric("step", "steps", 0, False, _results_key("step")),
)
"""Every scalar the comparison reads, in report order (``dev_ppl`` and ``dev_bleu`` as the Table 2 report
reads them: :func:`attention_jax.reports.sweep_seeds.reported_ppl` and ``reported_bleu``)."""


@dataclasses.dataclass(frozen=True)
class MetricStats:
    """One metric of one row: its seeds' mean, the paired change against the reference, a verdict.

    Attributes
    ----------
    metric : Metric
        The metric.
    values : dict
        Seed (None without seed directories) -> the finished run's value, for the runs that have one.
    mean, se : float or None
        Mean of ``values`` and its standard error (None with fewer than two seeds).
    changes : dict
        Seed -> paired change against the reference (a fraction when the metric is relative).
    change_mean, change_se : float or None
        Mean of ``changes`` and its standard error (None with fewer than two paired seeds).
    verdict : str
        One of the module's verdicts.
    """

    metric: Metric
    values: dict[int | None, float]
    mean: float | None
    se: float | None
    changes: dict[int | None, float]
    change_mean: float | None
    change_se: float | None
    verdict: str

    @property
    def seeds(self) -> int:
        """How many finished seeds have the metric."""
        return len(self.values)

    @property
    def paired_seeds(self) -> int:
        """How many seeds are paired with the reference."""
        return len(self.changes)


def mean_and_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (sample standard deviation, ddof=1, over ``sqrt(n)``).

    Parameters
    ----------
    values : Sequence[float]
        One value per seed.

    Returns
    -------
    tuple
        ``(mean, se)``: ``(None, None)`` without values, ``(mean, None)`` with one.
    """
    if not values:
        return None, None
    mean = statistics.fmean(values)
    return mean, (statistics.stdev(values) / math.sqrt(len(values)) if len(values) >= 2 else None)


def paired_changes(values: Mapping[int | None, float], reference_values: Mapping[int | None, float],
                   relative: bool) -> dict[int | None, float]:
    """The change of a row against the reference for each seed both have.

    Parameters
    ----------
    values, reference_values : Mapping
        Seed -> value, of the row and of the reference.
    relative : bool
        ``x / x_ref - 1`` (a reference value of 0 leaves its seed out) rather than ``x - x_ref``.

    Returns
    -------
    dict
        Seed -> change, in seed order of the row.
    """
    changes = {}
    for seed, value in values.items():
        if seed not in reference_values:
            continue
        reference_value = reference_values[seed]
        if relative and reference_value == 0:
            continue
        changes[seed] = value / reference_value - 1 if relative else value - reference_value
    return changes


def verdict(changes: Sequence[float], *, unstable: bool = False) -> str:
    """The verdict on a row's paired changes against the reference.

    Parameters
    ----------
    changes : Sequence[float]
        The paired changes, one per seed.
    unstable : bool
        Whether a seed of the row or of the reference diverged.

    Returns
    -------
    str
        ``unstable``; else ``pending`` (no paired seed), ``one seed`` (no standard error), else
        ``beyond 2 SE`` when ``|mean| > 2 x se`` (a nonzero mean with zero spread is beyond), else
        ``within noise``.
    """
    if unstable:
        return UNSTABLE_VERDICT
    if not changes:
        return PENDING_VERDICT
    if len(changes) == 1:
        return ONE_SEED_VERDICT
    beyond, _ = sweep_seeds.beyond_spread(changes)
    return BEYOND_VERDICT if beyond else WITHIN_VERDICT


def run_directory(root: str, row: RowReport, run: SeedRun) -> str:
    """The work directory of one run: ``ROOT/<row>/seed_<k>``, or ``ROOT/<row>`` without seeds."""
    return os.path.join(root, row.row, run.name) if run.name else os.path.join(root, row.row)


def _finished_values(root: str, row: RowReport, metric: Metric) -> dict[int | None, float]:
    values = {}
    for run in row.finished:
        value = metric.read(run_directory(root, row, run), run)
        if value is not None:
            values[run.seed] = value
    return values


def _diverged(row: RowReport) -> bool:
    return any(sweep_seeds.diverged(run) for run in row.finished)


def compare(root: str, rows: Sequence[RowReport], reference: str,
            metrics: Sequence[Metric] = METRICS) -> dict[str, dict[str, MetricStats]]:
    """Every row against the reference row, paired by seed, for every metric.

    Parameters
    ----------
    root : str
        The sweep root (for the files a metric reads beside ``results.json``).
    rows : Sequence[RowReport]
        The rows (:func:`attention_jax.reports.sweep_rows.read_sweep_rows`).
    reference : str
        The reference row's name (one of ``rows``).
    metrics : Sequence[Metric]
        What to compare.

    Returns
    -------
    dict
        Row name -> metric name -> :class:`MetricStats`.

    Notes
    -----
    Raises ``KeyError`` when ``reference`` is not one of the rows.
    """
    by_name = {row.row: row for row in rows}
    reference_row = by_name[reference]
    reference_unstable = _diverged(reference_row)
    comparison: dict[str, dict[str, MetricStats]] = {}
    for metric in metrics:
        reference_values = _finished_values(root, reference_row, metric)
        for row in rows:
            values = _finished_values(root, row, metric)
            mean, se = mean_and_se(list(values.values()))
            if row.row == reference:
                stats = MetricStats(metric, values, mean, se, {}, None, None, REFERENCE_VERDICT)
            else:
                changes = paired_changes(values, reference_values, metric.relative)
                change_mean, change_se = mean_and_se(list(changes.values()))
                row_verdict = verdict(list(changes.values()),
                                      unstable=bool(changes) and (reference_unstable or _diverged(row)))
                stats = MetricStats(metric, values, mean, se, changes, change_mean, change_se, row_verdict)
            comparison.setdefault(row.row, {})[metric.name] = stats
    return comparison


def recorded_metrics(comparison: Mapping[str, Mapping[str, MetricStats]]) -> list[Metric]:
    """The metrics compared that at least one finished run of the sweep recorded, in the order compared."""
    if not comparison:
        return []
    compared = [stats.metric for stats in next(iter(comparison.values())).values()]
    return [metric for metric in compared if any(stats[metric.name].values for stats in comparison.values())]
