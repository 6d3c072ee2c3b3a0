"""The comparison report of any sweep: Markdown, CSV and plots of every row against its reference row.

Also the registry of per-run evaluations (a run's extra JSON files) whose figures join the compared metrics.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Callable, Mapping, Sequence

from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.reports import comparison, comparison_plot, paper_figures, sweep_rows
from attention_jax.reports.comparison import (
    Metric,
    MetricStats,
    format_figure,
    markdown_table,
    run_directory,
    write_report_files,
)
from attention_jax.reports.sweep_rows import RowReport, SeedRun

__all__ = ["format_figure"]  # Re-exported: every report's cells.

CSV_FIELDS = ("row", "metric", "reference", "status", "seeds", "mean", "se", "change_mean", "change_se",
              "change_unit", "paired_seeds", "verdict")
PLOTTED_METRICS = ("dev_ppl", "dev_bleu")
"""The metrics :func:`write_comparison` plots by default (those recorded; the first recorded otherwise)."""


def resolve_reference(record: Mapping, rows: Sequence[RowReport], requested: str | None = None) -> tuple[str, str]:
    """The reference row of a report, and where the choice came from.

    Parameters
    ----------
    record : Mapping
        The sweep record (``sweep.json``; empty for a root without one).
    rows : Sequence[RowReport]
        The rows reported.
    requested : str, optional
        ``report --reference=ROW``.

    Returns
    -------
    tuple[str, str]
        The row's name and its source, e.g. ``("heads2", "the first row of get_sweep()")``.
    """
    names = [row.row for row in rows]
    if not names:
        raise UserInputError("the sweep has no rows to compare.")
    recorded = record.get("reference")
    for choice, source, fix in ((requested, "--reference", "pass one of them as --reference=ROW"),
                                (recorded, f"get_reference() of {record.get('config_file')}",
                                 "launch that row, or pass --reference=ROW")):
        if choice is None:
            continue
        if choice not in names:
            raise UserInputError(f"{source}: row {choice!r} is not among the rows reported ({', '.join(names)}): "
                                 f"{fix}.")
        return choice, source
    first = (record.get("all_rows") or [None])[0]
    if first in names:
        return first, "the first row of get_sweep()"
    return names[0], "the first row reported"


def _number(value: float | None, digits: int, *, sign: bool = False) -> str:
    if value is None:
        return ""
    return f"{value:{'+' if sign else ''}.{digits}f}"


def value_cell(stats: MetricStats) -> str:
    """``"mean ± se"`` of a row's metric (``"mean"`` with one seed, ``""`` with none).

    Parameters
    ----------
    stats : MetricStats
        The row's figures of one metric.

    Returns
    -------
    str
        The cell.
    """
    return format_figure(stats.mean, stats.se, stats.metric.digits)


def change_cell(stats: MetricStats) -> str:
    """``"+1.2% ± 0.4%"`` (relative) or ``"-0.3 ± 0.1"`` (difference): the paired change and its SE.

    Parameters
    ----------
    stats : MetricStats
        The row's figures of one metric.

    Returns
    -------
    str
        The cell; ``""`` without a paired seed.
    """
    if stats.change_mean is None:
        return ""
    scale, digits = (100.0, 1) if stats.metric.relative else (1.0, stats.metric.digits)
    unit = stats.metric.change_unit
    text = _number(stats.change_mean * scale, digits, sign=True) + unit
    if stats.change_se is not None:
        text += f" ± {_number(stats.change_se * scale, digits)}{unit}"
    return text


def _overrides_text(record: Mapping, row: RowReport) -> str:
    """The row's own overrides as its runs on disk have them, and what the sweep file says now where that differs."""
    own = record.get("row_overrides", {}).get(row.row, {})
    text = ", ".join(f"{key}={row.config.get(key, value)}" for key, value in own.items()) or "—"
    changed = sweep_rows._changed_since_run(row, dict(record))
    if changed:
        now = ", ".join(f"{key}={value}" for key, (_, value) in changed.items())
        text += f" (its runs; the sweep file now says {now}: rerun the row in a new --root)"
    return text


def _markdown_report(record: Mapping, rows: Sequence[RowReport], compared: Mapping[str, Mapping[str, MetricStats]],
                     reference: str, reference_source: str, paper: bool = False) -> str:
    """The comparison as Markdown: what each row changes, then one table per recorded metric (``paper``: with the
    paper's columns, :mod:`attention_jax.reports.paper_figures`)."""
    title = f"# {record.get('report_name', 'sweep')}: {record.get('config_file', '(no sweep.json)')}"
    relative = [metric.label for metric in comparison._recorded_metrics(compared) if metric.relative]
    difference = [metric.label for metric in comparison._recorded_metrics(compared) if not metric.relative]
    notes = [
        title,
        f"Every row against **{reference}** ({reference_source}; `report --reference=ROW` picks another), paired "
        f"by seed: row seed k against {reference} seed k. Common overrides: "
        f"{' '.join('--config.' + o for o in record.get('overrides', [])) or 'none'}.",
        "± is one standard error of the mean (sample standard deviation, ddof=1, over √n), over the row's "
        f"finished seeds for a value and over the paired seeds for a change. change: {', '.join(relative)} as "
        f"the relative change x / x_ref − 1 in percent; {', '.join(difference)} as the difference x − x_ref. "
        f"Verdict: `{comparison.BEYOND_VERDICT}` when |mean change| > 2 × its standard error with two or more "
        f"paired seeds, else `{comparison.WITHIN_VERDICT}`; `{comparison.ONE_SEED_VERDICT}`: one paired seed, "
        f"no standard error; `{comparison.PENDING_VERDICT}`: no seed finished in both rows; "
        f"`{comparison.UNSTABLE_VERDICT}`: a finished seed of the row or the reference diverged. A diverged seed "
        f"is left out of every mean and standard error; the seeds column says how many (`2 of 3; 1 diverged`).",
        *(paper_figures.notes(rows, record, reference) if paper else []),
    ]
    lines = markdown_table(["row", "status", "seeds finished", "overrides"],
                           ([row.row, row.status, f"{len(row.finished)} of {len(row.runs)}",
                             _overrides_text(record, row)] for row in rows))
    sections = ["\n".join(lines)]
    for metric in comparison._recorded_metrics(compared):
        headers, declared = paper_figures.columns(metric, rows, reference) if paper else ([], {})
        cells = []
        for row in rows:
            stats = compared[row.row][metric.name]
            paired = "" if row.row == reference else str(stats.paired_seeds)
            cells.append([row.row, comparison._seeds_cell(stats.seeds, len(stats.diverged)), value_cell(stats),
                          change_cell(stats), paired, stats.verdict, *declared.get(row.row, [])])
        table = markdown_table(["row", "seeds", f"{metric.label} ± SE", f"change vs {reference} ± SE", "paired seeds",
                                "verdict", *headers], cells)
        sections.append("\n".join([f"## {metric.label}", "", *table]))
    done = sum(row.status == "done" for row in rows)
    footer = f"{done} of {len(rows)} rows finished."
    return "\n\n".join(notes + sections + [footer]) + "\n"


def _csv_records(rows: Sequence[RowReport], compared: Mapping[str, Mapping[str, MetricStats]],
                reference: str) -> list[dict]:
    """The comparison as flat records: one per row and recorded metric, keys :data:`CSV_FIELDS`."""
    records = []
    for metric in comparison._recorded_metrics(compared):
        scale = 100.0 if metric.relative else 1.0
        for row in rows:
            stats = compared[row.row][metric.name]
            records.append({
                "row": row.row, "metric": metric.name, "reference": reference, "status": row.status,
                "seeds": stats.seeds, "mean": stats.mean, "se": stats.se,
                "change_mean": None if stats.change_mean is None else stats.change_mean * scale,
                "change_se": None if stats.change_se is None else stats.change_se * scale,
                "change_unit": metric.change_unit or "absolute",
                "paired_seeds": None if row.row == reference else stats.paired_seeds, "verdict": stats.verdict})
    return records


def plotted_metrics(compared: Mapping[str, Mapping[str, MetricStats]]) -> list[Metric]:
    """:data:`PLOTTED_METRICS` among the recorded metrics (else the first recorded one).

    Parameters
    ----------
    compared : Mapping
        :func:`attention_jax.reports.comparison.compare`'s result.

    Returns
    -------
    list[Metric]
        The metrics plotted.
    """
    recorded = comparison._recorded_metrics(compared)
    chosen = [metric for metric in recorded if metric.name in PLOTTED_METRICS]
    return chosen or recorded[:1]


def _write_comparison(root: str, record: Mapping, rows: Sequence[RowReport], out_dir: str, *,
                     reference: str | None = None) -> list[str]:
    """Write ``OUT/<name>.md``, ``.csv``, ``.png`` and (with metrics) ``_curves.png``: the report of any sweep."""
    reference_row, source = resolve_reference(record, rows, reference)
    metrics = [*comparison.METRICS, *_evaluation_metrics(root, rows)]
    compared = comparison.compare(root, rows, reference_row, metrics)
    name = str(record.get("report_name", "report"))
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, name)
    paper = paper_figures.has_paper_figures(rows)
    markdown = _markdown_report(record, rows, compared, reference_row, source, paper)
    if paper:  # One line per row, every hyperparameter in full (notebooks/03_ablations.ipynb reads it).
        write_report_files(stem, markdown, paper_figures.CSV_FIELDS, paper_figures._csv_records(record, rows,
                                                                                                reference_row))
    else:
        write_report_files(stem, markdown, CSV_FIELDS, _csv_records(rows, compared, reference_row))
    comparison_plot.plot_paired_changes(rows, compared, reference_row, plotted_metrics(compared), stem + ".png",
                                        f"{name}: paired change against {reference_row} ({root})", paper=paper)
    paths = [stem + ".md", stem + ".csv", stem + ".png"]
    if comparison_plot._plot_learning_curves(root, rows, reference_row, stem + "_curves.png",
                                            f"{name}: learning curves ({root})"):
        paths.append(stem + "_curves.png")
    return paths


@dataclasses.dataclass(frozen=True)
class _RunEvaluation:
    """A per-run evaluation's file, its keys, and each key's figures: ``(name, label, digits, relative)``."""

    name: str
    file_name: str
    metrics: tuple[tuple[str, str, int, bool], ...]
    keys: Callable[[dict], dict[str, dict[str, Any]]]


RUN_EVALUATIONS = {"length_buckets": _RunEvaluation(
    "length_buckets", run_files.LENGTH_BUCKETS_FILE, (("perplexity", "PPL", 2, True), ("bleu", "BLEU", 1, False)),
    lambda record: dict(record.get("buckets") or {}))}
"""The per-run evaluations (a run's extra JSON files) whose figures join the compared metrics."""


HEADLINE_MEASURES: dict[str, Metric] = {}


def register_headline_measure(metric: Metric) -> None:
    """Add a measure to the transfer table beside dev BLEU and perplexity (a name registered twice is replaced).

    Parameters
    ----------
    metric : Metric
        Compared as every metric is; a run or row without it is left out (``None``).
    """
    HEADLINE_MEASURES[metric.name] = metric


def _read_json_file(path: str) -> dict:
    """Return the JSON object an evaluation wrote at ``path``."""
    try:
        with open(path, encoding="utf-8") as file:
            value = json.load(file)
    except (OSError, json.JSONDecodeError):  # Absent, or half-written by a running evaluation.
        return {}
    return value if isinstance(value, dict) else {}


def _reader(evaluation: _RunEvaluation, key: str, metric: str) -> Callable[[str, SeedRun], float | None]:
    def read(run_dir: str, run: SeedRun) -> float | None:
        value = evaluation.keys(_read_json_file(os.path.join(run_dir, evaluation.file_name))).get(key, {}).get(metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return None
        return float(value)

    return read


def _evaluation_metrics(root: str, rows: Sequence[RowReport], *, every_run: bool = False) -> list[Metric]:
    """The metrics of every registered evaluation that some finished run of the sweep has, key by key."""
    found: list[Metric] = []
    for evaluation in RUN_EVALUATIONS.values():
        keys: list[str] = []
        for row in rows:
            for run in (row.runs if every_run else row.finished):
                path = os.path.join(run_directory(root, row, run), evaluation.file_name)
                keys += [key for key in evaluation.keys(_read_json_file(path)) if key not in keys]
        for key in keys:
            for name, label, digits, relative in evaluation.metrics:
                found.append(Metric(f"{evaluation.name}/{key}/{name}", f"{key} {label}", digits, relative,
                                    _reader(evaluation, key, name)))
    return found
