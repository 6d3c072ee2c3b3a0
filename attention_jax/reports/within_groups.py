"""Each row against the reference row of its own group (equal ``d_k``), paired by seed, and the trend across groups.

Declared by ``configs/sweeps/attention_function.py``'s ``get_report()``: each attention function against scaled
dot product at the same ``d_k``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Sequence

from attention_jax.reports import comparison, comparison_plot
from attention_jax.reports.comparison import (
    _directional_reading,
    _paired_changes,
    fit_title,
    format_figure,
    markdown_table,
    mean_and_se,
    write_report_files,
)
from attention_jax.reports.sweep_rows import ReportContext, RowReport, read_sweep_rows

REFERENCE_FUNCTION = "scaled_dot_product"
"""The paper's attention function: every other function is compared with it at the same ``d_k``."""

DEFAULT_FUNCTION = REFERENCE_FUNCTION  # A config without the field is the paper's (configs/base.py).
REPORT_STEM = "attention_functions"
CSV_FIELDS = ("row", "attention_function", "key_dim", "reference_row", "seeds", "dev_ppl_mean", "dev_ppl_se",
              "dev_bleu_mean", "dev_bleu_se", "paired_seeds", "ppl_change_mean", "ppl_change_se",
              "bleu_difference_mean", "bleu_difference_se", "reading", "reading_basis")


@dataclasses.dataclass(frozen=True)
class FunctionRow:
    """A row of the sweep: its attention function, ``d_k``, figures and comparison with scaled dot product.

    Attributes
    ----------
    row : str
        Row name.
    function : str
        ``config.attention_function``.
    key_dim : int
        ``config.key_dim`` (``d_model / h`` where the config leaves it unset).
    reference_row : str or None
        The scaled-dot-product row of the same ``d_k`` (None for such a row itself, or when the sweep has none at this
        ``d_k``).
    dev_ppl, dev_bleu : dict[int or None, float]
        Seed -> the run's dev perplexity and BLEU (the Table 2 report's :func:`reported_ppl` and :func:`reported_bleu`),
        for the finished seeds that have them.
    ppl_changes : dict[int or None, float]
        Seed -> ``ppl(row) / ppl(reference) - 1`` for every seed finished in both.
    bleu_differences : dict[int or None, float]
        Seed -> ``bleu(row) - bleu(reference)`` for every seed with BLEU in both.
    reading : str
        ``higher perplexity``, ``lower perplexity``, ``within noise``, ``1 seed``, ``pending`` (no paired seed yet),
        ``reference`` or ``no reference``.
    reading_basis : str
        How the reading was reached, e.g. ``"|mean| > 2 x SE, 3 paired seeds"``.
    diverged : int
        Diverged seeds, left out of the figures (the seeds column says so).
    """

    row: str
    function: str
    key_dim: int
    reference_row: str | None
    dev_ppl: dict[int | None, float]
    dev_bleu: dict[int | None, float]
    ppl_changes: dict[int | None, float]
    bleu_differences: dict[int | None, float]
    reading: str
    reading_basis: str
    diverged: int = 0


@dataclasses.dataclass(frozen=True)
class _KeyDimTrend:
    """How one function's change against scaled dot product moves from the smallest to the largest ``d_k``."""

    function: str
    small_key_dim: int
    large_key_dim: int
    differences: dict[int | None, float]
    reading: str
    reading_basis: str


PAIRED_METRICS = tuple(metric for metric in comparison.METRICS if metric.name in ("dev_ppl", "dev_bleu"))


def _function_and_key_dim(row: RowReport) -> tuple[str, int]:
    config = row.config
    key_dim = config.get("key_dim") or config["d_model"] // config["num_heads"]
    return config.get("attention_function") or DEFAULT_FUNCTION, int(key_dim)


def applies(rows: Sequence[RowReport]) -> bool:
    """Whether the rows use more than one attention function (this report has something to compare).

    Parameters
    ----------
    rows : Sequence[RowReport]
        The sweep's rows.

    Returns
    -------
    bool
        True when at least two distinct ``config.attention_function`` values appear among rows with a config.
    """
    return len({_function_and_key_dim(row)[0] for row in rows if row.config}) > 1


def compare_functions(rows: Sequence[RowReport]) -> list[FunctionRow]:
    """Compare every row with the scaled-dot-product row of the same ``d_k``, paired by seed.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The sweep's rows (rows without a config are left out).

    Returns
    -------
    list[FunctionRow]
        One per row, ordered by function (scaled dot product first, then as they first appear) and ``d_k``.
    """
    described = [(row, *_function_and_key_dim(row)) for row in rows if row.config]
    references: dict[int, RowReport] = {}
    for row, function, key_dim in described:
        if function == REFERENCE_FUNCTION:
            references.setdefault(key_dim, row)
    stats: dict[str, dict[str, comparison.MetricStats]] = {}
    for key_dim in dict.fromkeys(key_dim for _, _, key_dim in described):  # One comparison per d_k.
        members = [row for row, _, row_key_dim in described if row_key_dim == key_dim]
        if key_dim in references:
            stats.update(comparison.compare("", members, references[key_dim].row, PAIRED_METRICS))
        else:  # No reference at this d_k: each row's own figures only.
            for row in members:
                stats.update(comparison.compare("", [row], row.row, PAIRED_METRICS))
    order = [REFERENCE_FUNCTION] + [f for f in dict.fromkeys(f for _, f, _ in described) if f != REFERENCE_FUNCTION]
    compared = []
    for row, function, key_dim in sorted(described, key=lambda item: (order.index(item[1]), item[2])):
        ppl, bleu = stats[row.row]["dev_ppl"], stats[row.row]["dev_bleu"]
        reference = references.get(key_dim)
        if reference is row or reference is None:
            compared.append(FunctionRow(row.row, function, key_dim, None, ppl.values, bleu.values, {}, {},
                                        "reference" if reference is row else "no reference",
                                        "scaled dot product at this d_k" if reference is row
                                        else f"no {REFERENCE_FUNCTION} row at d_k = {key_dim}", len(ppl.diverged)))
            continue
        reading, basis = _directional_reading(list(ppl.changes.values()), "higher perplexity", "lower perplexity")
        compared.append(FunctionRow(row.row, function, key_dim, reference.row, ppl.values, bleu.values, ppl.changes,
                                    bleu.changes, reading, basis, len(ppl.diverged)))
    return compared


def key_dim_trends(compared: Sequence[FunctionRow]) -> list[_KeyDimTrend]:
    """Return, for each function at two or more ``d_k``, whether its change grows from the smallest to the largest.

    Parameters
    ----------
    compared : Sequence[FunctionRow]
        :func:`compare_functions`'s rows.

    Returns
    -------
    list[KeyDimTrend]
        One per such function, in the order of ``compared``.
    """
    by_function: dict[str, list[FunctionRow]] = {}
    for row in compared:
        if row.reference_row is not None:
            by_function.setdefault(row.function, []).append(row)
    trends = []
    for function, members in by_function.items():
        if len({row.key_dim for row in members}) < 2:
            continue
        small = min(members, key=lambda row: row.key_dim)
        large = max(members, key=lambda row: row.key_dim)
        differences = _paired_changes(large.ppl_changes, small.ppl_changes, relative=False)
        reading, basis = _directional_reading(list(differences.values()), "grows with d_k", "shrinks with d_k")
        trends.append(_KeyDimTrend(function, small.key_dim, large.key_dim, differences, reading, basis))
    return trends


def _markdown_report(root: str, compared: Sequence[FunctionRow], trends: Sequence[_KeyDimTrend]) -> str:
    """The report as Markdown: the comparison at equal ``d_k``, the trend with ``d_k``, and the rule."""
    lines = [f"# Attention functions at equal d_k: {root}", "",
             "Every ± is one standard error of the mean (sample standard deviation over √n) over the row's n "
             "seeds (the seeds column).", "",
             *markdown_table(["row", "attention function", "d_k", "seeds", "dev PPL", "dev BLEU",
                              "ΔPPL vs scaled dot product, same d_k", "ΔBLEU", "reading"],
                             ([record["row"], record["attention_function"], record["key_dim"],
                               comparison._seeds_cell(record["seeds"], row.diverged),
                               format_figure(record["dev_ppl_mean"], record["dev_ppl_se"], 2),
                               format_figure(record["dev_bleu_mean"], record["dev_bleu_se"], 1),
                               format_figure(record["ppl_change_mean"], record["ppl_change_se"], 1, percent=True,
                                             sign=True),
                               format_figure(record["bleu_difference_mean"], record["bleu_difference_se"], 1,
                                             sign=True), record["reading"]]
                              for row, record in zip(compared, _csv_records(compared))))]
    lines += ["", "Dev PPL and BLEU: mean ± standard error. ΔPPL: "
              "the dev perplexity's change against the scaled-dot-product row of the same d_k, paired by "
              "seed, mean ± standard error; ΔBLEU the same for the BLEU difference. Reading: the change "
              "is beyond the seeds' spread when |mean| > 2 x SE (the Table 2 report's rule; with 3 seeds a "
              "loose bar), else `within noise`."]
    if trends:
        rows = {(row.function, row.key_dim): row for row in compared}
        table = []
        for trend in trends:
            small = rows[(trend.function, trend.small_key_dim)].ppl_changes
            large = rows[(trend.function, trend.large_key_dim)].ppl_changes
            cells = [format_figure(*mean_and_se(list(values.values())), 1, percent=True, sign=True)
                     for values in (small, large, trend.differences)]
            table.append([trend.function, f"{trend.small_key_dim} → {trend.large_key_dim}", *cells, trend.reading])
        lines += ["", "## Does the change grow with d_k?", "",
                  *markdown_table(["attention function", "d_k", "ΔPPL at the smaller d_k", "ΔPPL at the larger d_k",
                                   "difference, paired", "reading"], table)]
        lines += ["", "Difference: per seed, the change at the larger d_k minus the change at the smaller "
                  "(percentage points), mean ± standard error. `grows with d_k`: the function falls further "
                  "behind scaled dot product as d_k grows, beyond the seeds' spread."]
    return "\n".join(lines) + "\n"


def _csv_records(compared: Sequence[FunctionRow]) -> list[dict]:
    records = []
    for row in compared:
        ppl_mean, ppl_se = mean_and_se(list(row.dev_ppl.values()))
        bleu_mean, bleu_se_of_mean = mean_and_se(list(row.dev_bleu.values()))
        change_mean, change_se = mean_and_se(list(row.ppl_changes.values()))
        bleu_difference, bleu_se = mean_and_se(list(row.bleu_differences.values()))
        records.append(dict(row=row.row, attention_function=row.function, key_dim=row.key_dim,
                            reference_row=row.reference_row or "", seeds=len(row.dev_ppl),
                            dev_ppl_mean=ppl_mean, dev_ppl_se=ppl_se, dev_bleu_mean=bleu_mean,
                            dev_bleu_se=bleu_se_of_mean, paired_seeds=len(row.ppl_changes), ppl_change_mean=change_mean,
                            ppl_change_se=change_se, bleu_difference_mean=bleu_difference,
                            bleu_difference_se=bleu_se, reading=row.reading, reading_basis=row.reading_basis))
    return records


def _plot_functions(compared: Sequence[FunctionRow], path: str, title: str) -> None:
    """Plot dev perplexity and the paired change against scaled dot product, both against ``d_k``."""
    plt = comparison_plot._pyplot()

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for function in dict.fromkeys(row.function for row in compared):
        members = sorted((row for row in compared if row.function == function), key=lambda row: row.key_dim)
        key_dims = [row.key_dim for row in members]
        ppl = [mean_and_se(list(row.dev_ppl.values())) for row in members]
        line = left.errorbar(key_dims, [math.nan if m is None else m for m, _ in ppl],
                             yerr=[0.0 if s is None else s for _, s in ppl], fmt="o-", capsize=3, label=function)
        changes = [mean_and_se(list(row.ppl_changes.values())) for row in members]
        if function == REFERENCE_FUNCTION:
            continue
        right.errorbar(key_dims, [math.nan if m is None else 100 * m for m, _ in changes],
                       yerr=[0.0 if s is None else 100 * s for _, s in changes], fmt="o-", capsize=3,
                       color=line[0].get_color(), label=function)
    right.axhline(0.0, color="black", linewidth=0.8, label=REFERENCE_FUNCTION)
    key_dims = sorted({row.key_dim for row in compared})
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(key_dims, [str(key_dim) for key_dim in key_dims])
        axis.minorticks_off()
        axis.set_xlabel("d_k (query/key width per head)")
        axis.legend(fontsize=8)
    left.set_ylabel("dev perplexity (mean ± SE over seeds)")
    right.set_ylabel("ΔPPL vs scaled, same d_k (%, mean ± SE)")
    fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _write_attention_function_report(root: str, rows: Sequence[RowReport] | None = None, *,
                                    out_dir: str | None = None) -> list[str]:
    """Write ``ROOT/attention_functions.{md,csv,png}`` for a sweep over attention functions."""
    if rows is None:
        rows = read_sweep_rows(root)[1]
    compared = compare_functions(rows)
    stem = os.path.join(out_dir or root, REPORT_STEM)
    paths = write_report_files(stem, _markdown_report(root, compared, key_dim_trends(compared)), CSV_FIELDS,
                               _csv_records(compared))
    _plot_functions(compared, stem + ".png", f"attention functions at equal d_k ({root})")
    return paths + [stem + ".png"]


def write(context: ReportContext) -> list[str]:
    """Write the report when the rows use two attention functions or more (a ``get_report()`` extra).

    Parameters
    ----------
    context : ReportContext
        The sweep being reported.

    Returns
    -------
    list[str]
        The paths written; none when there is nothing to compare.
    """
    if not applies(context.rows):
        return []
    return _write_attention_function_report(context.root, context.rows, out_dir=context.out_dir)
