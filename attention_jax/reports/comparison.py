"""One comparison for every sweep: each row against a reference row, paired by seed, metric by metric.

The statistics every report uses (mean ± standard error over seeds, ddof=1; paired changes; verdicts; diverged seeds
left out, :func:`counted_runs`), and the one Markdown table writer, CSV writer and figure title.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import statistics
import textwrap
from typing import Any, Callable, Iterable, Mapping, Sequence

from attention_jax.reports.sweep_rows import DIVERGED_STATUS, RowReport, SeedRun
from attention_jax.training.early_stopping import STOPPED_EARLY

SPREAD_FACTOR = 2.0
"""A paired change is beyond the seeds' spread when ``|mean| > SPREAD_FACTOR x standard error``."""

DIVERGED_FACTOR = 2.0
"""A run diverged when its last dev perplexity is more than ``DIVERGED_FACTOR`` times its best ..."""

ACCURACY_COLLAPSE = 0.5
"""... and its last dev accuracy is below ``ACCURACY_COLLAPSE`` times the accuracy at its best."""

REFERENCE_VERDICT = "reference"
BEYOND_VERDICT = f"beyond {SPREAD_FACTOR:g} SE"
WITHIN_VERDICT = "within noise"
ONE_SEED_VERDICT = "one seed"
PENDING_VERDICT = "pending"
UNSTABLE_VERDICT = "unstable"
VALIDATION_REPORT = "eval_validation.json"  # What the final evaluation of the dev split writes (its chrF).
ONE_SEED_READING = "1 seed"  # _directional_reading's word for a single paired seed (no spread to compare with).


def _reported_bleu(results: dict) -> float | None:
    """A run's dev BLEU for the reports: of the whole dev split when training ended, else the sampled one."""
    full = results.get("dev_bleu")
    return full if full is not None else results.get("bleu")


def _reported_ppl(results: dict) -> float | None:
    """A run's dev perplexity for the reports: of the parameters whose BLEU is reported."""
    for key in ("dev_ppl",) + (("best_eval_ppl",) if results.get("stop_reason") == STOPPED_EARLY else ()):
        if results.get(key) is not None:
            return results[key]
    return results.get("eval_ppl")


def diverged(run: SeedRun) -> bool:
    """Whether a finished run blew up after its best evaluation.

    Parameters
    ----------
    run : SeedRun
        The run (its ``results.json`` and its dev accuracy at the best evaluation).

    Returns
    -------
    bool
        Stopped on a non-finite loss, or last dev PPL over ``DIVERGED_FACTOR`` x its best with dev accuracy under
        ``ACCURACY_COLLAPSE`` x that at its best (the perplexity test alone when that accuracy is unknown).
    """
    if run.status == DIVERGED_STATUS:  # Stopped on a non-finite loss, with no results.
        return True
    best, last = run.results.get("best_eval_ppl"), run.results.get("eval_ppl")
    if best is None or last is None or best <= 0 or last <= DIVERGED_FACTOR * best:
        return False
    last_accuracy = run.results.get("eval_accuracy")
    if run.dev_accuracy_at_best is None or last_accuracy is None:
        return True
    return last_accuracy < ACCURACY_COLLAPSE * run.dev_accuracy_at_best


@dataclasses.dataclass(frozen=True)
class Metric:
    """A scalar every run of a sweep may record, and how two rows' values of it compare."""

    name: str  # In the CSV, e.g. "dev_ppl".
    label: str  # In the Markdown and the plots, e.g. "dev PPL".
    digits: int  # Decimals of its values (its changes: one decimal of a percent when relative).
    relative: bool  # A change is the ratio to the reference minus one (in percent), else the difference.
    # One run's value (from its directory and SeedRun); None where the run has none.
    read: Callable[[str, SeedRun], float | None] = dataclasses.field(repr=False, compare=False)
    unit: str = ""  # A difference's unit where it is not the metric's own ("pp").
    # A derived measure's change itself (derived_metric): of a row's run directory against the reference run's.
    derive: Callable[[str, str], float | None] | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def change_unit(self) -> str:
        """``"%"`` for a relative change, else :attr:`unit` (``""``: the metric's own unit).

        Returns
        -------
        str
            The unit of a change.
        """
        return "%" if self.relative else self.unit


def derived_metric(name: str, label: str, digits: int, derive: Callable[[str, str], float | None], *,
                   unit: str = "") -> Metric:
    """A measure of a row's run against the reference run at its seed, such as a paired trend.

    Parameters
    ----------
    name, label : str
        As :class:`Metric`'s.
    digits : int
        Decimals shown.
    derive : Callable[[str, str], float or None]
        ``(run directory, reference run directory) -> value``: the run's change itself (mean and SE over seeds).
    unit : str
        The value's unit (``"pp"``).

    Returns
    -------
    Metric
        With no per-run value and :attr:`Metric.derive` set.
    """
    return Metric(name, label, digits, False, lambda run_dir, run: None, unit, derive)


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
    Metric("dev_ppl", "dev PPL", 2, True, lambda run_dir, run: _reported_ppl(run.results)),
    Metric("test_ppl", "test PPL", 2, True, _results_key("test_ppl")),
    Metric("dev_bleu", "dev BLEU", 1, False, lambda run_dir, run: _reported_bleu(run.results)),
    Metric("test_bleu", "test BLEU", 1, False, _results_key("test_bleu")),
    Metric("dev_chrf", "dev chrF", 1, False, _dev_chrf),
    Metric("wall_s", "wall s", 0, True, _results_key("wall_s")),
    Metric("params", "params", 0, True, _results_key("params")),
    Metric("step", "steps", 0, False, _results_key("step")),
)
"""Every scalar the comparison reads, in report order (``dev_ppl`` and ``dev_bleu``: :func:`reported_ppl` and
:func:`reported_bleu`)."""


@dataclasses.dataclass(frozen=True)
class MetricStats:
    """One metric of one row: its seeds' mean, the paired change against the reference, a verdict.

    Seeds are None without seed directories; changes are fractions for a relative metric; standard errors and
    deviations (ddof=1) are None with fewer than two (paired) seeds; diverged seeds (:func:`counted_runs`) are left
    out of ``values`` and ``changes``.
    """

    metric: Metric
    values: dict[int | None, float]  # Seed -> the finished run's value.
    mean: float | None
    se: float | None
    changes: dict[int | None, float]  # Seed -> paired change against the reference.
    change_mean: float | None
    change_se: float | None
    verdict: str
    std: float | None = None
    change_std: float | None = None
    diverged: tuple[int | None, ...] = ()

    @property
    def seeds(self) -> int:
        """How many finished seeds have the metric.

        Returns
        -------
        int
            The count.
        """
        return len(self.values)

    @property
    def paired_seeds(self) -> int:
        """How many seeds are paired with the reference.

        Returns
        -------
        int
            The count.
        """
        return len(self.changes)


def _mean_std_se(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """Mean, sample standard deviation (ddof=1) and standard error of the mean (``std / sqrt(n)``)."""
    if not values:
        return None, None, None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None, None
    std = statistics.stdev(values)
    return mean, std, std / math.sqrt(len(values))


def _mean_and_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean (:func:`_mean_std_se` without the standard deviation)."""
    mean, _, se = _mean_std_se(values)
    return mean, se


def _beyond_spread(changes: Sequence[float]) -> tuple[bool, str]:
    """Whether paired changes are beyond their seeds' spread: ``|mean| > SPREAD_FACTOR x standard error``."""
    count = len(changes)
    if count < 2:
        raise ValueError(f"a spread needs two or more paired changes, got {count}.")
    mean, se = statistics.fmean(changes), statistics.stdev(changes) / math.sqrt(count)
    beyond = abs(mean) > SPREAD_FACTOR * se if se > 0 else mean != 0
    return beyond, f"|mean| {'>' if beyond else '<='} {SPREAD_FACTOR:g} x SE, {count} paired seeds"


def _directional_reading(changes: Sequence[float], above: str, below: str,
                        pending: str = "no seed finished in both rows") -> tuple[str, str]:
    """Return the reading of paired changes in an experiment's own words, and its basis (:func:`beyond_spread`)."""
    if not changes:
        return PENDING_VERDICT, pending
    if len(changes) == 1:
        return ONE_SEED_READING, "no spread to compare with"
    beyond, basis = _beyond_spread(changes)
    if not beyond:
        return WITHIN_VERDICT, basis
    return (above if statistics.fmean(changes) > 0 else below), basis


def _paired_changes(values: Mapping[int | None, float], reference_values: Mapping[int | None, float],
                   relative: bool) -> dict[int | None, float]:
    """Return the change of a row against the reference for each seed both have."""
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
        ``unstable``; else ``pending`` (no paired seed), ``one seed`` (no standard error), else ``beyond 2 SE`` when
        ``|mean| > 2 x se`` (a nonzero mean with zero spread is beyond), else ``within noise``.
    """
    if unstable:
        return UNSTABLE_VERDICT
    if not changes:
        return PENDING_VERDICT
    if len(changes) == 1:
        return ONE_SEED_VERDICT
    beyond, _ = _beyond_spread(changes)
    return BEYOND_VERDICT if beyond else WITHIN_VERDICT


def run_directory(root: str, row: RowReport, run: SeedRun) -> str:
    """The work directory of one run: ``ROOT/<row>/seed_<k>``, or ``ROOT/<row>`` without seeds.

    Parameters
    ----------
    root : str
        The sweep root.
    row : RowReport
        The row.
    run : SeedRun
        One of its runs.

    Returns
    -------
    str
        The directory.
    """
    return os.path.join(root, row.row, run.name) if run.name else os.path.join(root, row.row)


def _counted_runs(row: RowReport, every_run: bool = False) -> list[SeedRun]:
    """Return the runs whose figures enter means and standard errors: finished, and not :func:`diverged`."""
    return [run for run in (row.runs if every_run else row.finished) if not diverged(run)]


def _seeds_cell(count: int, diverged_count: int) -> str:
    """Return a table's seed count, saying how many diverged seeds it leaves out: ``"2 of 3; 1 diverged"``."""
    if not diverged_count:
        return str(count)
    return f"{count} of {count + diverged_count}; {diverged_count} diverged"


def _finished_values(root: str, row: RowReport, metric: Metric, every_run: bool = False) -> dict[int | None, float]:
    values = {}
    for run in _counted_runs(row, every_run):
        value = metric.read(run_directory(root, row, run), run)
        if value is not None:
            values[run.seed] = value
    return values


def _derived_changes(root: str, row: RowReport, reference: RowReport, metric: Metric,
                     every_run: bool) -> dict[int | None, float]:
    assert metric.derive is not None
    reference_runs = {run.seed: run for run in _counted_runs(reference, every_run)}
    changes = {}
    for run in _counted_runs(row, every_run):
        if run.seed not in reference_runs:
            continue
        value = metric.derive(run_directory(root, row, run), run_directory(root, reference, reference_runs[run.seed]))
        if value is not None and math.isfinite(value):
            changes[run.seed] = float(value)
    return changes


def _diverged(row: RowReport) -> bool:
    return any(diverged(run) for run in row.runs)


def compare(root: str, rows: Sequence[RowReport], reference: str, metrics: Sequence[Metric] = METRICS, *,
            every_run: bool = False) -> dict[str, dict[str, MetricStats]]:
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
    every_run : bool
        Read every run of a row, not only the finished ones (a per-run evaluation scored apart from training, such as
        the length buckets, holds for a run without ``results.json``).

    Returns
    -------
    dict
        Row name -> metric name -> :class:`MetricStats`.
    """
    by_name = {row.row: row for row in rows}
    reference_row = by_name[reference]
    reference_unstable = _diverged(reference_row)
    comparison: dict[str, dict[str, MetricStats]] = {}
    for metric in metrics:
        reference_values = _finished_values(root, reference_row, metric, every_run)
        for row in rows:
            derived = metric.derive is not None and row.row != reference
            values = (_derived_changes(root, row, reference_row, metric, every_run) if derived
                      else _finished_values(root, row, metric, every_run))  # A derived value is the change.
            mean, std, se = _mean_std_se(list(values.values()))
            left_out = tuple(run.seed for run in row.runs if diverged(run))
            if row.row == reference:
                stats = MetricStats(metric, values, mean, se, {}, None, None, REFERENCE_VERDICT, std, None, left_out)
            else:
                changes = dict(values) if derived else _paired_changes(values, reference_values, metric.relative)
                change_mean, change_std, change_se = _mean_std_se(list(changes.values()))
                stopped = any(run.status == DIVERGED_STATUS for run in row.runs)  # No results, so no changes.
                row_verdict = verdict(list(changes.values()),
                                      unstable=stopped or bool(changes) and (reference_unstable or _diverged(row)))
                stats = MetricStats(metric, values, mean, se, changes, change_mean, change_se, row_verdict, std,
                                    change_std, left_out)
            comparison.setdefault(row.row, {})[metric.name] = stats
    return comparison


def _recorded_metrics(comparison: Mapping[str, Mapping[str, MetricStats]]) -> list[Metric]:
    """Return the metrics compared that at least one finished run of the sweep recorded, in the order compared."""
    if not comparison:
        return []
    compared = [stats.metric for stats in next(iter(comparison.values())).values()]
    return [metric for metric in compared if any(stats[metric.name].values for stats in comparison.values())]

def format_figure(value: float | None, spread: float | None, digits: int, *, percent: bool = False,
                  sign: bool = False) -> str:
    """Return a table cell such as ``"+8.9 ± 0.9%"`` or ``"7.24 ± 0.11"``; ``""`` for no value.

    Parameters
    ----------
    value : float or None
        The figure (a fraction when ``percent``).
    spread : float or None
        Its standard error, shown after ``±``.
    digits : int
        Digits after the point.
    percent : bool
        Show ``value`` and ``spread`` times 100 with a ``%``.
    sign : bool
        Always show the sign.

    Returns
    -------
    str
        The cell.
    """
    if value is None:
        return ""
    scale, suffix = (100.0, "%") if percent else (1.0, "")
    text = f"{value * scale:{'+' if sign else ''}.{digits}f}"
    return text + (f" ± {spread * scale:.{digits}f}" if spread is not None else "") + suffix


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: Sequence[str] = ()) -> list[str]:
    """Return the lines of a Markdown table.

    Parameters
    ----------
    header : Sequence[str]
        Column titles.
    rows : Iterable[Sequence]
        One sequence of cells per line (formatted with ``str``).
    align : Sequence[str]
        Each column's rule (``"---:"`` right-aligns); ``"---"`` for every column by default.

    Returns
    -------
    list[str]
        The header, the rule and one line per row.
    """
    rule = "|" + "|".join(align or ["---"] * len(header)) + "|"
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(map(str, row)) + " |" for row in rows)]


def write_report_files(stem: str, markdown: str, fields: Sequence[str] = (),
                       records: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """Write ``STEM.md`` and, given ``fields``, ``STEM.csv`` (creating the directory): every report's one writer.

    Parameters
    ----------
    stem : str
        The path without its suffix.
    markdown : str
        The Markdown text.
    fields : Sequence[str]
        The CSV's columns; none: no CSV.
    records : Iterable[Mapping]
        The CSV's lines.

    Returns
    -------
    list[str]
        The paths written.
    """
    os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
    with open(stem + ".md", "w", encoding="utf-8") as file:
        file.write(markdown)
    if not fields:
        return [stem + ".md"]
    with open(stem + ".csv", "w", encoding="utf-8", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fields)
        writer.writeheader()
        writer.writerows(records)
    return [stem + ".md", stem + ".csv"]


def _fit_title(figure: Any, title: str, fontsize: float = 10.0) -> None:
    """Set a figure's title, wrapped (at a path's slashes too) so that a long sweep root is not clipped."""
    width_in_characters = max(20, int(0.9 * figure.get_figwidth() * 72 / (0.6 * fontsize)))
    spaced = title.replace("/", "/\u200b")  # A zero-width space after each slash: a place to break.
    lines = textwrap.wrap(spaced, width=width_in_characters, break_long_words=True)
    figure.suptitle("\n".join(line.replace("\u200b", "") for line in lines), fontsize=fontsize)
