"""Each row against the reference row of its own group, paired by seed, and the trend across groups.

A sweep file declares a :class:`GroupComparison` in ``get_report()`` (``configs/sweeps/attention_function.py``: each
attention function against scaled dot product at the same ``d_k``). :class:`PairedRow` and :class:`Trend` serve the
length-bucket report too (:mod:`attention_jax.reports.by_bucket`: a bucket is its group).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Sequence

from attention_jax.reports import comparison, comparison_plot
from attention_jax.reports.comparison import (
    directional_reading,
    fit_title,
    format_figure,
    markdown_table,
    mean_and_se,
    paired_changes,
    write_report_files,
)
from attention_jax.reports.sweep_rows import ReportContext, RowReport


@dataclasses.dataclass(frozen=True)
class PairedRow:
    """A row against the reference row of its group (a length bucket, a ``d_k``), paired by seed.

    The dicts map a seed to the row's dev perplexity and BLEU, and to their changes against the reference at that
    seed (relative for perplexity, a difference for BLEU; empty for a reference); ``diverged`` counts the seeds left
    out (:func:`~attention_jax.reports.comparison.counted_runs`).
    """

    row: str
    value: str  # The row's value of the field the sweep varies.
    group: Any
    ppl: dict[int | None, float]
    bleu: dict[int | None, float]
    ppl_changes: dict[int | None, float]
    bleu_differences: dict[int | None, float]
    reading: str  # Of the perplexity change (directional_reading), "reference" or "no reference".
    reading_basis: str
    diverged: int = 0
    reference_row: str | None = None
    bleu_reading: str = ""

    def figures(self) -> list[tuple[float | None, float | None]]:
        """Mean and standard error of the perplexities, the BLEUs, the perplexity changes and the BLEU differences.

        Returns
        -------
        list[tuple[float or None, float or None]]
            Four ``(mean, se)`` (:func:`mean_and_se`), in that order.
        """
        return [mean_and_se(list(values.values()))
                for values in (self.ppl, self.bleu, self.ppl_changes, self.bleu_differences)]


@dataclasses.dataclass(frozen=True)
class Trend:
    """How a perplexity change against the reference moves from one group to another, paired by seed."""

    name: str  # A row, or a value of the field compared.
    value: str
    first: Any  # The groups, e.g. the first and last length buckets.
    last: Any
    differences: dict[int | None, float]  # Seed -> change in ``last`` minus change in ``first``.
    reading: str
    reading_basis: str


def paired_trend(name: str, first: PairedRow, last: PairedRow, above: str, below: str,
                 pending: str = "no seed finished in both rows") -> Trend:
    """Return the trend from ``first``'s change to ``last``'s, seed by seed, read by :func:`directional_reading`.

    Parameters
    ----------
    name : str
        What the trend is of (:attr:`Trend.name`).
    first, last : PairedRow
        The same row or value in two groups.
    above, below : str
        The reading of a trend beyond the seeds' spread, growing or shrinking.
    pending : str
        The basis when no seed is paired in both.

    Returns
    -------
    Trend
        Its differences in the fraction's units (percentage points once times 100).
    """
    differences = paired_changes(last.ppl_changes, first.ppl_changes, relative=False)
    reading, basis = directional_reading(list(differences.values()), above, below, pending)
    return Trend(name, first.value, first.group, last.group, differences, reading, basis)


@dataclasses.dataclass(frozen=True)
class GroupComparison:
    """What a sweep file declares: the field compared, its reference value, and the group rows are compared within.

    Attributes
    ----------
    field : str
        The config field the rows vary (a config without it has :attr:`reference`); the CSV's column.
    reference : str
        The value every other row is compared with, in its own group.
    group : Callable[[dict], int]
        A row's group (a number, plotted on a log2 axis) from its config.
    group_field : str
        The CSV's column of the group.
    group_label, group_axis : str
        The group's name in the tables and on the figure's x axis.
    label : str
        What a value is called, e.g. ``"attention function"`` (its last word stands for it in sentences).
    reference_label, reference_short : str
        The reference in the tables and on the figure's y axis.
    stem, title : str
        The files' name (``OUT/<stem>.md``, ``.csv``, ``.png``) and the title (``"<title> at equal <group_label>"``).
    """

    field: str
    reference: str
    group: Callable[[dict], int]
    group_field: str
    group_label: str
    group_axis: str
    label: str
    reference_label: str
    reference_short: str
    stem: str
    title: str

    def write(self, context: ReportContext) -> list[str]:
        """Write the report when the rows hold two values of :attr:`field` or more.

        Parameters
        ----------
        context : ReportContext
            The sweep being reported.

        Returns
        -------
        list[str]
            The paths written; none when there is nothing to compare.
        """
        if not _applies(context.rows, self):
            return []
        compared = _compare_within_groups(context.rows, self)
        stem = os.path.join(context.out_dir, self.stem)
        csv_fields = tuple({"value": self.field, "group": self.group_field}.get(field, field) for field in CSV_FIELDS)
        paths = write_report_files(stem, _markdown_report(context.root, compared, _group_trends(compared, self), self),
                                   csv_fields, _csv_records(compared, self))
        _plot(compared, stem + ".png", f"{self.title.lower()} at equal {self.group_label} ({context.root})", self)
        return paths + [stem + ".png"]


CSV_FIELDS = ("row", "value", "group", "reference_row", "seeds", "dev_ppl_mean", "dev_ppl_se", "dev_bleu_mean",
              "dev_bleu_se", "paired_seeds", "ppl_change_mean", "ppl_change_se", "bleu_difference_mean",
              "bleu_difference_se", "reading", "reading_basis")
PAIRED_METRICS = tuple(metric for metric in comparison.METRICS if metric.name in ("dev_ppl", "dev_bleu"))


def _value_and_group(row: RowReport, declared: GroupComparison) -> tuple[str, int]:
    return row.config.get(declared.field) or declared.reference, int(declared.group(row.config))


def _applies(rows: Sequence[RowReport], declared: GroupComparison) -> bool:
    """Whether the rows with a config hold two values of the declared field or more."""
    return len({_value_and_group(row, declared)[0] for row in rows if row.config}) > 1


def _compare_within_groups(rows: Sequence[RowReport], declared: GroupComparison) -> list[PairedRow]:
    """Compare every row with the reference row of its group, paired by seed."""
    reference_value = declared.reference
    described = [(row, *_value_and_group(row, declared)) for row in rows if row.config]
    references: dict[int, RowReport] = {}
    for row, value, group in described:
        if value == reference_value:
            references.setdefault(group, row)
    stats: dict[str, dict[str, comparison.MetricStats]] = {}
    for group in dict.fromkeys(group for _, _, group in described):  # One comparison per group.
        members = [row for row, _, row_group in described if row_group == group]
        if group in references:
            stats.update(comparison.compare("", members, references[group].row, PAIRED_METRICS))
        else:  # No reference in this group: each row's own figures only.
            for row in members:
                stats.update(comparison.compare("", [row], row.row, PAIRED_METRICS))
    order = [reference_value] + [v for v in dict.fromkeys(v for _, v, _ in described) if v != reference_value]
    compared = []
    for row, value, group in sorted(described, key=lambda item: (order.index(item[1]), item[2])):
        ppl, bleu = stats[row.row]["dev_ppl"], stats[row.row]["dev_bleu"]
        reference = references.get(group)
        if reference is row or reference is None:
            basis = (f"{declared.reference_label} at this {declared.group_label}" if reference is row
                     else f"no {reference_value} row at {declared.group_label} = {group}")
            compared.append(PairedRow(row.row, value, group, ppl.values, bleu.values, {}, {},
                                      "reference" if reference is row else "no reference", basis, len(ppl.diverged)))
            continue
        reading, basis = directional_reading(list(ppl.changes.values()), "higher perplexity", "lower perplexity")
        compared.append(PairedRow(row.row, value, group, ppl.values, bleu.values, ppl.changes, bleu.changes, reading,
                                  basis, len(ppl.diverged), reference.row))
    return compared


def _group_trends(compared: Sequence[PairedRow], declared: GroupComparison) -> list[Trend]:
    """Return, for each value in two groups or more, whether its change grows from the smallest group to the largest."""
    by_value: dict[str, list[PairedRow]] = {}
    for row in compared:
        if row.reference_row is not None:
            by_value.setdefault(row.value, []).append(row)
    trends = []
    for value, members in by_value.items():
        if len({row.group for row in members}) < 2:
            continue
        small, large = (function(members, key=lambda row: row.group) for function in (min, max))
        trends.append(paired_trend(value, small, large, f"grows with {declared.group_label}",
                                   f"shrinks with {declared.group_label}"))
    return trends


def _markdown_report(root: str, compared: Sequence[PairedRow], trends: Sequence[Trend],
                     declared: GroupComparison) -> str:
    """The report as Markdown: the comparison within each group, the trend across groups, and the rule."""
    group, reference = declared.group_label, declared.reference_label
    lines = [f"# {declared.title} at equal {group}: {root}", "",
             "Every ± is one standard error of the mean (sample standard deviation over √n) over the row's n "
             "seeds (the seeds column).", "",
             *markdown_table(["row", declared.label, group, "seeds", "dev PPL", "dev BLEU",
                              f"ΔPPL vs {reference}, same {group}", "ΔBLEU", "reading"],
                             ([record["row"], row.value, row.group,
                               comparison.seeds_cell(record["seeds"], row.diverged),
                               format_figure(record["dev_ppl_mean"], record["dev_ppl_se"], 2),
                               format_figure(record["dev_bleu_mean"], record["dev_bleu_se"], 1),
                               format_figure(record["ppl_change_mean"], record["ppl_change_se"], 1, percent=True,
                                             sign=True),
                               format_figure(record["bleu_difference_mean"], record["bleu_difference_se"], 1,
                                             sign=True), record["reading"]]
                              for row, record in zip(compared, _csv_records(compared, declared))))]
    lines += ["", "Dev PPL and BLEU: mean ± standard error. ΔPPL: "
              f"the dev perplexity's change against the {reference.replace(' ', '-')} row of the same {group}, "
              "paired by seed, mean ± standard error; ΔBLEU the same for the BLEU difference. Reading: the change "
              "is beyond the seeds' spread when |mean| > 2 x SE (the Table 2 report's rule; with 3 seeds a "
              "loose bar), else `within noise`."]
    if trends:
        rows = {(row.value, row.group): row for row in compared}
        table = []
        for trend in trends:
            small, large = (rows[(trend.value, group)].ppl_changes for group in (trend.first, trend.last))
            cells = [format_figure(*mean_and_se(list(values.values())), 1, percent=True, sign=True)
                     for values in (small, large, trend.differences)]
            table.append([trend.value, f"{trend.first} → {trend.last}", *cells, trend.reading])
        lines += ["", f"## Does the change grow with {group}?", "",
                  *markdown_table([declared.label, group, f"ΔPPL at the smaller {group}",
                                   f"ΔPPL at the larger {group}", "difference, paired", "reading"], table)]
        lines += ["", f"Difference: per seed, the change at the larger {group} minus the change at the smaller "
                  f"(percentage points), mean ± standard error. `grows with {group}`: the "
                  f"{declared.label.split()[-1]} falls further behind {reference} as {group} grows, beyond the "
                  "seeds' spread."]
    return "\n".join(lines) + "\n"


def _csv_records(compared: Sequence[PairedRow], declared: GroupComparison) -> list[dict[str, Any]]:
    records = []
    for row in compared:
        figures = row.figures()
        records.append({"row": row.row, declared.field: row.value, declared.group_field: row.group,
                        "reference_row": row.reference_row or "", "seeds": len(row.ppl),
                        "dev_ppl_mean": figures[0][0], "dev_ppl_se": figures[0][1], "dev_bleu_mean": figures[1][0],
                        "dev_bleu_se": figures[1][1], "paired_seeds": len(row.ppl_changes),
                        "ppl_change_mean": figures[2][0], "ppl_change_se": figures[2][1],
                        "bleu_difference_mean": figures[3][0], "bleu_difference_se": figures[3][1],
                        "reading": row.reading, "reading_basis": row.reading_basis})
    return records


def _plot(compared: Sequence[PairedRow], path: str, title: str, declared: GroupComparison) -> None:
    """Plot dev perplexity and the paired change against the reference, both against the group."""
    plt = comparison_plot.pyplot()

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for value in dict.fromkeys(row.value for row in compared):
        members = sorted((row for row in compared if row.value == value), key=lambda row: row.group)
        groups = [row.group for row in members]
        ppl = [mean_and_se(list(row.ppl.values())) for row in members]
        line = left.errorbar(groups, [math.nan if m is None else m for m, _ in ppl],
                             yerr=[0.0 if s is None else s for _, s in ppl], fmt="o-", capsize=3, label=value)
        changes = [mean_and_se(list(row.ppl_changes.values())) for row in members]
        if value == declared.reference:
            continue
        right.errorbar(groups, [math.nan if m is None else 100 * m for m, _ in changes],
                       yerr=[0.0 if s is None else 100 * s for _, s in changes], fmt="o-", capsize=3,
                       color=line[0].get_color(), label=value)
    right.axhline(0.0, color="black", linewidth=0.8, label=declared.reference)
    groups = sorted({row.group for row in compared})
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(groups, [str(group) for group in groups])
        axis.minorticks_off()
        axis.set_xlabel(declared.group_axis)
        axis.legend(fontsize=8)
    left.set_ylabel("dev perplexity (mean ± SE over seeds)")
    right.set_ylabel(f"ΔPPL vs {declared.reference_short}, same {declared.group_label} (%, mean ± SE)")
    fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
