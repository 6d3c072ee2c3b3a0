"""The paper's figures as declared columns of the generic report, and the paper-direction verdict.

For a sweep file with ``get_paper_figures()`` (Table 2 and the sweeps built on it) the comparison report's metric
tables gain the paper's value, its change against the reference row and (dev PPL) a verdict: ``reproduced`` /
``opposite`` when our paired change is beyond the seeds' spread
(:func:`~attention_jax.reports.comparison._beyond_spread`) with / against the paper's sign, else ``within noise``;
where the paper shows no difference, ``reproduced`` means within noise and ``differs`` beyond it; one paired seed:
the sign alone. A row with a diverged seed is ``unstable``, the other seeds' verdict in its basis. The CSV keeps one
line per row with every hyperparameter in full (``notebooks/03_ablations.ipynb`` reads it).
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Mapping, Sequence

from attention_jax.reports import comparison
from attention_jax.reports.comparison import SPREAD_FACTOR, MetricStats, _beyond_spread, format_figure
from attention_jax.reports.sweep_rows import RowReport

__all__ = ["SPREAD_FACTOR", "aggregate", "paper_change", "verdict"]
PAPER_KEYS = {"dev_ppl": ("dev_ppl", 1.0), "dev_bleu": ("dev_bleu", 1.0), "params": ("params_millions", 1e6)}
"""Metric -> the paper's figure (a ``get_paper_figures()`` key) and its scale to the metric's unit."""
HPARAM_FIELDS = ("num_layers", "d_model", "d_ff", "num_heads", "key_dim", "value_dim", "dropout_rate",
                 "label_smoothing", "positional_encoding")  # Table 2's columns, in its order.


def has_paper_figures(rows: Sequence[RowReport]) -> bool:
    """Whether the sweep file gave the paper's figures (``get_paper_figures()``): only then the paper's columns.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The sweep's rows.

    Returns
    -------
    bool
        True when some row's :attr:`~attention_jax.reports.sweep_rows.RowReport.paper` holds a value.
    """
    return any(value is not None for row in rows for value in row.paper.values())


@dataclasses.dataclass(frozen=True)
class PaperRow:
    """A row's dev perplexity and BLEU as the comparison core gives them, and its verdict against the paper."""

    ppl: MetricStats  # Its change is against the reference row (none for the reference itself).
    bleu: MetricStats
    paper_change: float | None  # The paper's relative change of dev PPL against its reference row.
    verdict: str  # "" for the reference row and a row without the paper's figures.
    verdict_basis: str


def verdict(changes: Sequence[float], paper_direction: int, reference: str = "base") -> tuple[str, str]:
    """Judge paired changes of dev perplexity against the paper's direction (the module docstring's rule).

    Parameters
    ----------
    changes : Sequence[float]
        Relative changes against the reference, one per paired seed.
    paper_direction : int
        Sign of the paper's change: 1 (perplexity up), -1 (down), 0 (no difference, row E).
    reference : str
        The reference row's name, for the basis of a pending verdict.

    Returns
    -------
    tuple[str, str]
        The verdict and its basis.
    """
    if not changes:
        return "pending", f"no seed finished in both the row and {reference}"
    mean = statistics.fmean(changes)
    ours = (mean > 0) - (mean < 0)
    if len(changes) == 1:
        if paper_direction == 0:
            return "undecided", "1 seed: no spread to compare with"
        return ("reproduced" if ours == paper_direction else "opposite"), "sign only, 1 seed"
    beyond, basis = _beyond_spread(changes)
    if paper_direction == 0:
        return ("differs" if beyond else "reproduced"), basis
    if not beyond:
        return "within noise", basis
    return ("reproduced" if ours == paper_direction else "opposite"), basis


def _diverged_label(diverged_seeds: Sequence[int | None]) -> str:
    """``"seed 1"``, ``"seeds 0, 2"``, or ``"the run"`` for a run without a seed directory."""
    seeds = [str(seed) for seed in diverged_seeds if seed is not None]
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}" if seeds else "the run"


def paper_change(row: RowReport, reference: RowReport | None, key: str = "dev_ppl",
                 relative: bool = True) -> float | None:
    """The paper's change of one figure from the reference row to ``row``.

    Parameters
    ----------
    row : RowReport
        The row.
    reference : RowReport or None
        The reference row (None: no reference reported).
    key : str
        The figure (``dev_ppl``, ``dev_bleu``).
    relative : bool
        ``paper(row) / paper(reference) - 1`` rather than ``paper(row) - paper(reference)``.

    Returns
    -------
    float or None
        None for the reference itself, without both figures, or a relative change from zero.
    """
    if reference is None or row is reference:
        return None
    value, reference_value = row.paper.get(key), reference.paper.get(key)
    if value is None or reference_value is None or (relative and not reference_value):
        return None
    return value / reference_value - 1 if relative else value - reference_value


def _paper_verdict(ppl: MetricStats, paper_figure_change: float | None, reference: str) -> tuple[str, str]:
    if paper_figure_change is None:
        return "", "no paper figures"
    direction = (paper_figure_change > 0) - (paper_figure_change < 0)
    if not ppl.diverged:
        return verdict(list(ppl.changes.values()), direction, reference)
    others = verdict([change for seed, change in ppl.changes.items() if seed not in ppl.diverged], direction,
                     reference)
    return "unstable", (f"{_diverged_label(ppl.diverged)} diverged (a non-finite loss, or last dev PPL > "
                        f"{comparison.DIVERGED_FACTOR:g}x its best); the other seeds: {others[0]} ({others[1]})")


def aggregate(rows: Sequence[RowReport], reference: str | None = None) -> dict[str, PaperRow]:
    """Compare every row's dev perplexity and BLEU with the reference row's, and judge it against the paper.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The rows.
    reference : str, optional
        The reference row; None: the first row.

    Returns
    -------
    dict[str, PaperRow]
        Row name -> its figures (:func:`~attention_jax.reports.comparison.compare`'s) and its verdict.
    """
    if not rows:
        return {}
    reference_row = {row.row: row for row in rows}[reference or rows[0].row]
    metrics = [metric for metric in comparison.METRICS if metric.name in ("dev_ppl", "dev_bleu")]
    compared = comparison.compare("", rows, reference_row.row, metrics)
    stats = {}
    for row in rows:
        ppl, change = compared[row.row]["dev_ppl"], paper_change(row, reference_row)
        judged = ("", "reference row") if row is reference_row else _paper_verdict(ppl, change, reference_row.row)
        stats[row.row] = PaperRow(ppl, compared[row.row]["dev_bleu"], change, *judged)
    return stats


def _verdict_cell(stats: PaperRow) -> str:
    """The verdict, marked when it rests on one seed's sign (``"(sign only)"``) or a seed diverged."""
    if stats.verdict == "unstable":
        return f"unstable ({_diverged_label(stats.ppl.diverged)} diverged)"
    return stats.verdict + (" (sign only)" if stats.verdict_basis.startswith("sign only") else "")


def columns(metric: comparison.Metric, rows: Sequence[RowReport], reference: str) -> tuple[list[str], dict]:
    """The paper's columns of one metric's table: its value, its change against the reference, the verdict.

    Parameters
    ----------
    metric : Metric
        The metric of the table (only those of :data:`PAPER_KEYS` get columns).
    rows : Sequence[RowReport]
        The rows.
    reference : str
        The reference row.

    Returns
    -------
    tuple[list[str], dict]
        The headers and row name -> its cells; ``([], {})`` for a metric the paper gives no figure of.
    """
    if metric.name not in PAPER_KEYS:
        return [], {}
    key, scale = PAPER_KEYS[metric.name]
    by_name = {row.row: row for row in rows}
    stats = aggregate(rows, reference) if metric.name == "dev_ppl" else {}
    cells = {}
    for row in rows:
        value = row.paper.get(key)
        change = paper_change(row, by_name.get(reference), key, metric.relative)
        cells[row.row] = [format_figure(None if value is None else value * scale, None, metric.digits),
                          format_figure(change, None, 1 if metric.relative else metric.digits,
                                        percent=metric.relative, sign=True)]
        cells[row.row] += [_verdict_cell(stats[row.row])] if stats else []
    return ["paper", f"paper change vs {reference}", *(["paper verdict"] if stats else [])], cells


def notes(rows: Sequence[RowReport], record: Mapping, reference: str) -> list[str]:
    """The report's paragraphs on the paper's figures: what they are, the verdict rule and its counts.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The rows.
    record : Mapping
        The sweep record.
    reference : str
        The reference row.

    Returns
    -------
    list[str]
        Markdown paragraphs.
    """
    counts: dict[str, int] = {}
    for stats in aggregate(rows, reference).values():
        if stats.verdict:
            counts[stats.verdict] = counts.get(stats.verdict, 0) + 1
    dataset = next((row.config.get("dataset") for row in rows if row.config), None) or "?"
    text = [
        f"Dataset: {dataset}. dev PPL is per target token of our vocabulary on the run's dev split (the whole split "
        "with the parameters BLEU used when the run has it, else the best evaluation of a run that stopped early, "
        "else the last evaluation); the paper's is per wordpiece on newstest2013 (comparable only on WMT14 with a "
        "37k vocabulary). dev BLEU: sacrebleu, beam search on the whole dev split when training ended "
        "(config.final_bleu), else on the dev sentences sampled at the last evaluation. paper: the paper's figure "
        "(params: its millions); paper change: the change of the paper's figure from the reference row's.",
        f"Paper verdict, on dev PPL against the paper's direction: with two or more paired seeds the change is "
        f"beyond the seeds' spread when |mean| > {SPREAD_FACTOR:g} x its standard error (std / √n; with 3 seeds a "
        "t above 2 on 2 degrees of freedom, two-sided p ≈ 0.18: a loose bar); then `reproduced` (the paper's sign) "
        "or `opposite`, else `within noise`. Where the paper shows no difference (E: 4.92 against 4.92) "
        "`reproduced` means within noise and `differs` beyond it. With one seed the verdict is the sign alone, "
        f"marked (sign only), and E is `undecided`; `pending`: no seed finished in both the row and {reference}. "
        "`unstable`: a seed diverged; the CSV's verdict_basis gives the other seeds' verdict.",
    ]
    if counts:
        text.append("Paper verdicts: " + ", ".join(f"{count} {name}" for name, count in counts.items()) + ".")
    shadowed = overridden_row_settings(dict(record))
    if shadowed:
        text.append(f"Common overrides replace these rows' own settings (the rows then differ from {reference} "
                    "less than in the paper): " + "; ".join(shadowed) + ".")
    return text


def overridden_row_settings(record: dict) -> list[str]:
    """Row settings that the sweep's common overrides replace (e.g. row C4's d_model under a tiny model).

    Parameters
    ----------
    record : dict
        The sweep record (``row_overrides`` and ``overrides``).

    Returns
    -------
    list[str]
        ``"C4 d_model=256 -> 32"`` for each row setting a common override replaces, in row order.
    """
    common = dict(override.split("=", 1) for override in record.get("overrides", []))
    return [f"{row} {key}={value} -> {common[key]}" for row in record.get("rows", [])
            for key, value in record.get("row_overrides", {}).get(row, {}).items()
            if key in common and str(value) != common[key]]


def _other_changes(row: RowReport, record: Mapping) -> str:
    """The row's own settings outside Table 2's columns (e.g. ``seed=1``), with their actual values."""
    own = record.get("row_overrides", {}).get(row.row, {})
    return ", ".join(f"{key}={row.config[key] if key in row.config else value}"  # {}: the run has not started.
                     for key, value in own.items() if key not in {*HPARAM_FIELDS, "name", "paper"})


def _shared_or_mean(values: Sequence[Any]) -> Any:
    """The value all finished seeds share (e.g. ``params``), else their mean; None when none."""
    known = [value for value in values if value is not None]
    if not known or all(value == known[0] for value in known):
        return known[0] if known else None
    return statistics.fmean(known) if all(isinstance(value, (int, float)) for value in known) else None


SUMMARY_FIELDS = ("row", "seeds", "dev_ppl_mean", "dev_ppl_std", "dev_bleu_mean", "dev_bleu_std", "verdict",
                  "group", "status", "seeds_pending", "dev_ppl_change_pct_mean", "dev_ppl_change_pct_std",
                  "paired_seeds", "paper_dev_ppl_change_pct", "verdict_basis", "dev_ppl_se", "dev_bleu_se",
                  "dev_ppl_change_pct_se")
RESULT_FIELDS = ("step", "params", "eval_ppl", "bleu", "dev_bleu", "eval_loss", "train_loss", "wall_s",
                 "train_tokens_per_s")
CSV_FIELDS = (*SUMMARY_FIELDS, *HPARAM_FIELDS, "other_changes", *RESULT_FIELDS[:2], "paper_params_millions",
              "eval_ppl", "paper_dev_ppl", "bleu", "dev_bleu", "paper_dev_bleu", *RESULT_FIELDS[5:])


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def _csv_records(record: Mapping, rows: Sequence[RowReport], reference: str) -> list[dict]:
    """The report as flat records, one per row (every hyperparameter in full), keys :data:`CSV_FIELDS`."""
    stats = aggregate(rows, reference)
    records = []
    for row in rows:
        ppl, bleu, counted = stats[row.row].ppl, stats[row.row].bleu, comparison._counted_runs(row)
        records.append({
            "group": row.group, "row": row.row, "seeds": len(counted), "seeds_pending": len(row.pending),
            "status": row.status, "dev_ppl_mean": ppl.mean, "dev_ppl_std": ppl.std, "dev_bleu_mean": bleu.mean,
            "dev_bleu_std": bleu.std, "dev_ppl_change_pct_mean": _percent(ppl.change_mean),
            "dev_ppl_change_pct_std": _percent(ppl.change_std), "dev_ppl_se": ppl.se, "dev_bleu_se": bleu.se,
            "dev_ppl_change_pct_se": _percent(ppl.change_se),
            "paired_seeds": ppl.paired_seeds if row.row != reference else None,
            "paper_dev_ppl_change_pct": _percent(stats[row.row].paper_change), "verdict": stats[row.row].verdict,
            "verdict_basis": stats[row.row].verdict_basis, **{field: row.config.get(field) for field in HPARAM_FIELDS},
            "other_changes": _other_changes(row, record),
            **{key: _shared_or_mean([run.results.get(key) for run in counted]) for key in RESULT_FIELDS},
            "paper_params_millions": row.paper.get("params_millions"), "paper_dev_ppl": row.paper.get("dev_ppl"),
            "paper_dev_bleu": row.paper.get("dev_bleu")})
    return records
