"""Per-run evaluations in the comparison report: one small registry of what a run's extra files hold."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Callable, Sequence

from attention_jax.foundation import run_files
from attention_jax.reports.comparison import Metric, run_directory
from attention_jax.reports.sweep_rows import RowReport, SeedRun


@dataclasses.dataclass(frozen=True)
class _EvaluationMetric:
    """One figure of an evaluation's key: its name in the file, its label, decimals, how changes compare."""

    name: str
    label: str
    digits: int
    relative: bool


@dataclasses.dataclass(frozen=True)
class _RunEvaluation:
    """A per-run evaluation's file and how to read it."""

    name: str
    file_name: str
    metrics: tuple[_EvaluationMetric, ...]
    keys: Callable[[dict], dict[str, dict[str, Any]]]


RUN_EVALUATIONS: dict[str, _RunEvaluation] = {}


def _register_run_evaluation(evaluation: _RunEvaluation) -> None:
    """Add an evaluation to the registry the comparison report reads (a name registered twice is replaced)."""
    RUN_EVALUATIONS[evaluation.name] = evaluation


_register_run_evaluation(_RunEvaluation(
    name="length_buckets", file_name=run_files.LENGTH_BUCKETS_FILE,
    metrics=(_EvaluationMetric("perplexity", "PPL", 2, True), _EvaluationMetric("bleu", "BLEU", 1, False)),
    keys=lambda record: dict(record.get("buckets") or {}),
))


HEADLINE_MEASURES: dict[str, Metric] = {}


def register_headline_measure(metric: Metric) -> None:
    """Add a measure to the transfer table beside dev BLEU and perplexity (a name registered twice is replaced).

    Parameters
    ----------
    metric : Metric
        Compared as every metric is; a run or row without it is left out (``None``).
    """
    HEADLINE_MEASURES[metric.name] = metric


def _read_file(path: str) -> dict:
    """The JSON object an evaluation wrote at ``path``; ``{}`` when absent or half-written."""
    try:
        with open(path, encoding="utf-8") as file:
            value = json.load(file)
    except (OSError, json.JSONDecodeError):  # Absent, or half-written by a running evaluation.
        return {}
    return value if isinstance(value, dict) else {}


def _reader(evaluation: _RunEvaluation, key: str, metric: str) -> Callable[[str, SeedRun], float | None]:
    def read(run_dir: str, run: SeedRun) -> float | None:
        value = evaluation.keys(_read_file(os.path.join(run_dir, evaluation.file_name))).get(key, {}).get(metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return None
        return float(value)

    return read


def evaluation_metrics(root: str, rows: Sequence[RowReport], *, every_run: bool = False) -> list[Metric]:
    """The metrics of every registered evaluation that some finished run of the sweep has, key by key.

    Parameters
    ----------
    root : str
        The sweep root.
    rows : Sequence[RowReport]
        Its rows.
    every_run : bool
        Look in every run of a row, not only the finished ones (:func:`attention_jax.reports.comparison.compare`'s
        ``every_run``).

    Returns
    -------
    list[Metric]
        Named ``<evaluation>/<key>/<metric>`` and labelled ``<key> <label>``, in registry order, keys in the order the
        first run holding them lists them.
    """
    found: list[Metric] = []
    for evaluation in RUN_EVALUATIONS.values():
        keys: list[str] = []
        for row in rows:
            for run in (row.runs if every_run else row.finished):
                path = os.path.join(run_directory(root, row, run), evaluation.file_name)
                keys += [key for key in evaluation.keys(_read_file(path)) if key not in keys]
        for key in keys:
            for metric in evaluation.metrics:
                found.append(Metric(f"{evaluation.name}/{key}/{metric.name}", f"{key} {metric.label}", metric.digits,
                                    metric.relative, _reader(evaluation, key, metric.name)))
    return found
