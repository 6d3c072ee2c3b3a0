"""Each row against the reference row of its own group, paired by seed, and the trend across groups.

A sweep file declares what its groups are in ``get_report()``: a :class:`GroupComparison` groups rows by a config
field (``configs/sweeps/attention_function.py``: each attention function against scaled dot product at the same
``d_k``); a :class:`BucketComparison` groups a run's length-bucket evaluation by bucket
(``configs/sweeps/positions.py``: each positional encoding against sinusoidal, bucket by bucket, and
:data:`LENGTH_TREND`, the change in the last bucket minus the first, a headline measure of transfer).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Sequence

from attention_jax.foundation import run_files
from attention_jax.reports import comparison, comparison_plot, comparison_report
from attention_jax.reports.comparison import (
    _directional_reading,
    _fit_title,
    _mean_and_se,
    _paired_changes,
    format_figure,
    markdown_table,
    run_directory,
    write_report_files,
)
from attention_jax.reports.sweep_rows import ReportContext, RowReport


@dataclasses.dataclass(frozen=True)
class PairedRow:
    """A row against the reference row of its group (a length bucket, a ``d_k``), paired by seed.

    The dicts map a seed to the row's dev perplexity and BLEU, and to their changes against the reference at that
    seed (relative for perplexity, a difference for BLEU; empty for a reference); ``diverged`` counts the seeds left
    out (:func:`~attention_jax.reports.comparison._counted_runs`).
    """

    row: str
    value: str  # The row's value of the field the sweep varies.
    group: Any
    ppl: dict[int | None, float]
    bleu: dict[int | None, float]
    ppl_changes: dict[int | None, float]
    bleu_differences: dict[int | None, float]
    reading: str  # Of the perplexity change (_directional_reading), "reference" or "no reference".
    reading_basis: str
    diverged: int = 0
    reference_row: str | None = None
    bleu_reading: str = ""

    def figures(self, value_prefix: str = "") -> dict[str, Any]:
        """Mean and standard error of the perplexities, the BLEUs, the perplexity changes and the BLEU differences.

        Parameters
        ----------
        value_prefix : str
            Before the names of the values' figures (``"dev_"``: ``dev_ppl_mean``).

        Returns
        -------
        dict[str, Any]
            The seed counts (``seeds``, ``paired_seeds``) and each figure's ``_mean`` and ``_se`` (:func:`mean_and_se`):
            ``ppl``, ``bleu``, ``ppl_change``, ``bleu_difference``.
        """
        record: dict[str, Any] = {"seeds": len(self.ppl), "paired_seeds": len(self.ppl_changes)}
        for name, values in ((value_prefix + "ppl", self.ppl), (value_prefix + "bleu", self.bleu),
                             ("ppl_change", self.ppl_changes), ("bleu_difference", self.bleu_differences)):
            record[f"{name}_mean"], record[f"{name}_se"] = _mean_and_se(list(values.values()))
        return record


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


def _paired_trend(name: str, first: PairedRow, last: PairedRow, above: str, below: str,
                  pending: str = "no seed finished in both rows") -> Trend:
    """The trend from ``first``'s change to ``last``'s (the same row or value in two groups), seed by seed, read by
    :func:`directional_reading`; its differences are fractions (percentage points once times 100)."""
    differences = _paired_changes(last.ppl_changes, first.ppl_changes, relative=False)
    reading, basis = _directional_reading(list(differences.values()), above, below, pending)
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


def _value(row: RowReport, field: str, reference: str) -> str:
    """The row's value of the field compared (a config without the field has the reference's)."""
    return row.config.get(field) or reference


def _value_and_group(row: RowReport, declared: GroupComparison) -> tuple[str, int]:
    return _value(row, declared.field, declared.reference), int(declared.group(row.config))


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
        reading, basis = _directional_reading(list(ppl.changes.values()), "higher perplexity", "lower perplexity")
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
        trends.append(_paired_trend(value, small, large, f"grows with {declared.group_label}",
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
                               comparison._seeds_cell(record["seeds"], row.diverged),
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
            cells = [format_figure(*_mean_and_se(list(values.values())), 1, percent=True, sign=True)
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
    return [{"row": row.row, declared.field: row.value, declared.group_field: row.group,
             "reference_row": row.reference_row or "", **row.figures("dev_"), "reading": row.reading,
             "reading_basis": row.reading_basis} for row in compared]


def _errorbar(axis: Any, positions: Sequence[Any], stats: Sequence[tuple[float | None, float | None]],
              scale: float = 1.0, **style: Any) -> Any:
    """Draw ``(mean, se)`` pairs as points joined by a line with error bars (a missing mean: a gap)."""
    return axis.errorbar(positions, [math.nan if mean is None else scale * mean for mean, _ in stats],
                         yerr=[0.0 if se is None else scale * se for _, se in stats], fmt="o-", capsize=3, **style)


def _plot(compared: Sequence[PairedRow], path: str, title: str, declared: GroupComparison) -> None:
    """Plot dev perplexity and the paired change against the reference, both against the group."""
    plt = comparison_plot.pyplot()

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for value in dict.fromkeys(row.value for row in compared):
        members = sorted((row for row in compared if row.value == value), key=lambda row: row.group)
        groups = [row.group for row in members]
        line = _errorbar(left, groups, [_mean_and_se(list(row.ppl.values())) for row in members], label=value)
        if value != declared.reference:
            _errorbar(right, groups, [_mean_and_se(list(row.ppl_changes.values())) for row in members], 100.0,
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
    _fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)


EVALUATION = "length_buckets"  # The per-run evaluation compared (attention_jax.reports.comparison_report).
BUCKET_CSV_FIELDS = ("row", "value", "bucket", "min_words", "max_words", "num_pairs", "seeds", "ppl_mean",
              "ppl_se", "bleu_mean", "bleu_se", "paired_seeds", "ppl_change_mean", "ppl_change_se", "ppl_reading",
              "bleu_difference_mean", "bleu_difference_se", "bleu_reading", "reading_basis")


@dataclasses.dataclass(frozen=True)
class BucketComparison:
    """What a sweep file declares for the length-bucket report (``get_report()``'s ``extras``: :meth:`write`).

    Attributes
    ----------
    field : str
        The config field the rows vary, e.g. ``"positional_encoding"``; the CSV's column of each row's value.
    reference : str
        The field's value every other row is compared with (also a config without the field).
    label : str
        What a value is called in the tables, e.g. ``"encoding"``.
    reference_basis : str
        The reference row's reading basis, e.g. ``"the paper's encoding"``.
    stem : str
        The files' name: ``OUT/<stem>.md``, ``.csv`` and ``.png``.
    title, plot_title : str
        The Markdown title and the figure's (the root follows each).
    """

    field: str
    reference: str
    label: str
    reference_basis: str
    stem: str
    title: str
    plot_title: str

    def write(self, context: ReportContext) -> list[str]:
        """Write the report when some run holds ``length_buckets.json``.

        Parameters
        ----------
        context : ReportContext
            The sweep being reported.

        Returns
        -------
        list[str]
            The paths written; none when no run is scored.
        """
        if not _read_bucket_results(context.root, context.rows):
            return []
        compared = _compare_encodings(context.root, context.rows, self)
        stem = os.path.join(context.out_dir, self.stem)
        write_report_files(stem, _bucket_markdown(context.root, compared, _length_trends(compared), self),
                           tuple(self.field if field == "value" else field for field in BUCKET_CSV_FIELDS),
                           _bucket_records(compared, self))
        _plot_buckets(compared, stem + ".png", f"{self.plot_title} ({os.path.basename(context.root.rstrip('/'))})",
                      self)
        return [stem + ".md", stem + ".csv", stem + ".png"]


@dataclasses.dataclass(frozen=True)
class _BucketRow(PairedRow):
    """A row on one length bucket (its :attr:`group`), and the bucket's target lengths and size."""

    min_words: int = 0
    max_words: int = 0
    num_pairs: int = 0


def _read_bucket_results(root: str, rows: Sequence[RowReport]) -> dict[str, dict[int | None, dict]]:
    """Every scored run's ``length_buckets.json``, by row and seed."""
    found: dict[str, dict[int | None, dict]] = {}
    for row in rows:
        for run in row.runs:
            record = run_files.read_length_buckets(run_directory(root, row, run))
            if record.get("buckets"):
                found.setdefault(row.row, {})[run.seed] = record
    return found


_PENDING = "no seed scored in both rows"  # A run is paired once both are scored on the buckets.


def _compare_encodings(root: str, rows: Sequence[RowReport], declared: BucketComparison) -> list[_BucketRow]:
    """Every row against the reference row on every bucket, paired by seed (the reference first)."""
    results = _read_bucket_results(root, rows)
    scored = [row for row in rows if row.row in results]
    if not scored:
        return []
    reference = next((row for row in scored if _value(row, declared.field, declared.reference) == declared.reference),
                     None)
    ordered = ([reference] if reference else []) + [row for row in scored if row is not reference]
    metrics = [metric for metric in comparison_report._evaluation_metrics(root, scored, every_run=True)
               if metric.name.startswith(EVALUATION + "/")]
    stats: dict[str, dict[str, comparison.MetricStats]] = {}
    for row in ([reference] if reference else ordered):  # Without a reference row: each row's own figures.
        stats.update(comparison.compare(root, scored if reference else [row], row.row, metrics, every_run=True))
    first = next(iter(results[ordered[0].row].values()))
    compared = []
    for bucket, described in first["buckets"].items():
        size = (described["min_words"], described["max_words"], described["num_pairs"])
        for row in ordered:
            ppl = stats[row.row][f"{EVALUATION}/{bucket}/perplexity"]
            bleu = stats[row.row][f"{EVALUATION}/{bucket}/bleu"]
            if row is reference:  # Its changes are empty.
                readings = ("reference", declared.reference_basis, "reference")
            else:
                ppl_reading, basis = _directional_reading(list(ppl.changes.values()), "higher", "lower", _PENDING)
                readings = (ppl_reading, basis if reference else f"no {declared.reference} row",
                            _directional_reading(list(bleu.changes.values()), "higher", "lower", _PENDING)[0])
            compared.append(_BucketRow(row.row, _value(row, declared.field, declared.reference), bucket, ppl.values,
                                       bleu.values, ppl.changes, bleu.changes, readings[0], readings[1],
                                       len(ppl.diverged), None, readings[2], *size))
    return compared


def _length_trends(compared: Sequence[_BucketRow]) -> list[Trend]:
    """Whether each row's change against the reference grows from the first bucket to the last, per seed."""
    buckets = list(dict.fromkeys(row.group for row in compared))
    if len(buckets) < 2:
        return []
    by_key = {(row.row, row.group): row for row in compared}
    trends = []
    for row in dict.fromkeys(row.row for row in compared if row.reading != "reference"):
        first, last = by_key.get((row, buckets[0])), by_key.get((row, buckets[-1]))
        if first is None or last is None:
            continue
        trends.append(_paired_trend(row, first, last, "worse with length", "better with length", _PENDING))
    return trends


def _length_trend(run_dir: str, reference_dir: str) -> float | None:
    """One seed's trend with length against the reference run at that seed, in percentage points."""
    read = comparison_report._read_json_file
    run, reference = (read(os.path.join(directory, run_files.LENGTH_BUCKETS_FILE)).get("buckets") or {}
                      for directory in (run_dir, reference_dir))
    buckets = list(run)
    if len(buckets) < 2 or list(reference) != buckets:
        return None
    changes = []
    for bucket in (buckets[0], buckets[-1]):
        ppl, reference_ppl = run[bucket].get("perplexity"), reference[bucket].get("perplexity")
        if not all(isinstance(value, (int, float)) and value > 0 for value in (ppl, reference_ppl)):
            return None
        changes.append(ppl / reference_ppl - 1)
    return 100.0 * (changes[1] - changes[0])


LENGTH_TREND = comparison.derived_metric(f"{EVALUATION}/trend", "length trend (ΔPPL last − first bucket)", 1,
                                         _length_trend, unit="pp")


def _bucket_records(compared: Sequence[_BucketRow], declared: BucketComparison) -> list[dict]:
    """One record per (row, bucket), keys :data:`BUCKET_BUCKET_CSV_FIELDS` (``value`` named by the declared field)."""
    return [{"row": row.row, declared.field: row.value, "bucket": row.group, "min_words": row.min_words,
             "max_words": row.max_words, "num_pairs": row.num_pairs, **row.figures(), "ppl_reading": row.reading,
             "bleu_reading": row.bleu_reading, "reading_basis": row.reading_basis} for row in compared]


def _bucket_markdown(root: str, compared: Sequence[_BucketRow], trends: Sequence[Trend],
                    declared: BucketComparison) -> str:
    """Return the report as Markdown: one table of every (bucket, value), the trend with length, the rule."""
    label, reference = declared.label, declared.reference
    lines = [f"# {declared.title}: {root}", "",
             "Every ± is one standard error of the mean (sample standard deviation over √n) over the n seeds "
             "of the seeds column.", "",
             *markdown_table(["bucket (target words, pairs)", label, "seeds", "PPL", f"ΔPPL vs {reference}",
                              "reading", "BLEU", "ΔBLEU", "reading"],
                             ([f"{record['bucket']} ({record['min_words']}-{record['max_words']}, "
                               f"{record['num_pairs']})", record[declared.field],
                               comparison._seeds_cell(record["seeds"], row.diverged),
                               format_figure(record["ppl_mean"], record["ppl_se"], 2),
                               format_figure(record["ppl_change_mean"], record["ppl_change_se"], 1, percent=True,
                                             sign=True), record["ppl_reading"],
                               format_figure(record["bleu_mean"], record["bleu_se"], 1),
                               format_figure(record["bleu_difference_mean"], record["bleu_difference_se"], 1,
                                             sign=True), record["bleu_reading"]]
                              for row, record in zip(compared, _bucket_records(compared, declared))))]
    lines += ["", "PPL: perplexity per target piece (teacher-forced, unsmoothed); BLEU: sacrebleu of beam-search "
              "translations; both mean ± standard error over the row's scored seeds. ΔPPL: the change against "
              f"the {reference} row, paired by seed, mean ± standard error; ΔBLEU the same for the BLEU "
              "difference. Reading: beyond the seeds' spread when |mean| > 2 x SE (the Table 2 report's rule; "
              "with 3 seeds a loose bar), else `within noise`."]
    if trends:
        lines += ["", "## Does the gap grow with length?", "",
                  *markdown_table([label, "buckets", "ΔPPL change, last minus first, paired", "reading"],
                                  ([trend.value, f"{trend.first} → {trend.last}",
                                    format_figure(*_mean_and_se(list(trend.differences.values())), 1, percent=True,
                                                  sign=True), trend.reading] for trend in trends))]
        lines += ["", f"Per seed, the change against {reference} in the longest bucket minus the change within the "
                  f"cap (percentage points), mean ± standard error. `worse with length`: the {label} falls "
                  f"further behind {reference} beyond the training lengths, beyond the seeds' spread."]
    return "\n".join(lines) + "\n"


def _change_series(compared: Sequence[_BucketRow]) -> dict[str, list[tuple[float | None, float | None]]]:
    """Row -> its perplexity change against the reference in %, ``(mean, SE)`` per bucket (None: unpaired)."""
    buckets = list(dict.fromkeys(row.group for row in compared))
    series: dict[str, list[tuple[float | None, float | None]]] = {}
    for row in compared:
        if row.reading == "reference":
            continue
        mean, se = _mean_and_se([100.0 * change for change in row.ppl_changes.values()])
        series.setdefault(row.row, [(None, None)] * len(buckets))[buckets.index(row.group)] = (mean, se)
    return series


def _plot_buckets(compared: Sequence[_BucketRow], path: str, title: str, declared: BucketComparison) -> None:
    """Plot perplexity, BLEU and the paired perplexity change against the length bucket, mean ± SE over seeds."""
    import matplotlib.ticker

    plt = comparison_plot.pyplot()

    buckets = list(dict.fromkeys(row.group for row in compared))
    labels = {row.group: f"{row.group}\n{row.min_words}-{row.max_words} words" for row in compared}
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4.4), layout="constrained")
    changes = _change_series(compared)
    for index_of_row, row_name in enumerate(dict.fromkeys(row.row for row in compared)):
        members = {row.group: row for row in compared if row.row == row_name}
        positions = [index for index, bucket in enumerate(buckets) if bucket in members]
        encoding = members[buckets[positions[0]]].value
        color = f"C{index_of_row % 10}"
        for axis, values in ((left, "ppl"), (middle, "bleu")):
            _errorbar(axis, positions, [_mean_and_se(list(getattr(members[buckets[index]], values).values()))
                                        for index in positions], label=encoding, color=color)
        if row_name in changes:
            _errorbar(right, range(len(buckets)), changes[row_name], label=encoding, color=color)
        else:
            right.axhline(0.0, color=color, linewidth=1, label=f"{encoding} (reference)")
    for axis, label in ((left, "perplexity per target piece (mean ± SE over seeds)"),
                        (middle, "BLEU (beam 4) (mean ± SE over seeds)"),
                        (right, f"perplexity change vs {declared.reference}, %\n(paired by seed, mean ± SE)")):
        axis.set_xticks(range(len(buckets)), [labels[bucket] for bucket in buckets], fontsize=8)
        axis.set_xlabel("target length bucket (training targets: the first)")
        axis.set_ylabel(label)
        axis.legend(fontsize=8)
    left.set_yscale("log")
    for ticks in (left.yaxis.set_major_formatter, left.yaxis.set_minor_formatter):
        ticks(matplotlib.ticker.FormatStrFormatter("%g"))  # 6, 10, 20 rather than 6 x 10^0.
    _fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
