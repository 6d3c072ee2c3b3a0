"""The length-bucket evaluation compared with a reference row, bucket by bucket, paired by seed.

A sweep file declares a :class:`BucketComparison` in ``get_report()`` (``configs/sweeps/positions.py``: each
positional encoding against sinusoidal): the per-bucket table, and the per-seed trend (change in the last bucket
minus the first), :data:`LENGTH_TREND` also a headline measure of transfer.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence

from attention_jax.foundation import run_files
from attention_jax.reports import comparison, comparison_plot, comparison_report
from attention_jax.reports.comparison import (
    directional_reading,
    fit_title,
    format_figure,
    markdown_table,
    mean_and_se,
    run_directory,
    write_report_files,
)
from attention_jax.reports.sweep_rows import ReportContext, RowReport
from attention_jax.reports.within_groups import PairedRow, Trend, paired_trend

EVALUATION = "length_buckets"  # The per-run evaluation compared (attention_jax.reports.comparison_report).
CSV_FIELDS = ("row", "value", "bucket", "min_words", "max_words", "num_pairs", "seeds", "ppl_mean",
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
        if not _applies(context.root, context.rows):
            return []
        compared = _compare_encodings(context.root, context.rows, self)
        stem = os.path.join(context.out_dir, self.stem)
        write_report_files(stem, _markdown_report(context.root, compared, _length_trends(compared), self),
                           _csv_fields(self), _csv_records(compared, self))
        _plot_buckets(compared, stem + ".png", f"{self.plot_title} ({os.path.basename(context.root.rstrip('/'))})",
                      self)
        return [stem + ".md", stem + ".csv", stem + ".png"]


def _csv_fields(declared: BucketComparison) -> tuple[str, ...]:
    return tuple(declared.field if field == "value" else field for field in CSV_FIELDS)


@dataclasses.dataclass(frozen=True)
class _BucketRow(PairedRow):
    """A row on one length bucket (its :attr:`group`), and the bucket's target lengths and size."""

    min_words: int = 0
    max_words: int = 0
    num_pairs: int = 0


def _encoding(row: RowReport, declared: BucketComparison) -> str:
    return row.config.get(declared.field) or declared.reference


def _read_bucket_results(root: str, rows: Sequence[RowReport]) -> dict[str, dict[int | None, dict]]:
    """Every scored run's ``length_buckets.json``, by row and seed."""
    found: dict[str, dict[int | None, dict]] = {}
    for row in rows:
        for run in row.runs:
            record = run_files.read_length_buckets(run_directory(root, row, run))
            if record.get("buckets"):
                found.setdefault(row.row, {})[run.seed] = record
    return found


def _applies(root: str, rows: Sequence[RowReport]) -> bool:
    """Whether some run of the sweep holds ``length_buckets.json``."""
    return bool(_read_bucket_results(root, rows))


_PENDING = "no seed scored in both rows"  # A run is paired once both are scored on the buckets.


def _compare_encodings(root: str, rows: Sequence[RowReport], declared: BucketComparison) -> list[_BucketRow]:
    """Every row against the reference row on every bucket, paired by seed (the reference first)."""
    results = _read_bucket_results(root, rows)
    scored = [row for row in rows if row.row in results]
    if not scored:
        return []
    reference = next((row for row in scored if _encoding(row, declared) == declared.reference), None)
    ordered = ([reference] if reference else []) + [row for row in scored if row is not reference]
    metrics = [metric for metric in comparison_report.evaluation_metrics(root, scored, every_run=True)
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
            if row is reference:
                compared.append(_BucketRow(row.row, _encoding(row, declared), bucket, ppl.values, bleu.values, {}, {},
                                           "reference", declared.reference_basis, len(ppl.diverged), None,
                                           "reference", *size))
                continue
            ppl_reading, basis = directional_reading(list(ppl.changes.values()), "higher", "lower", _PENDING)
            bleu_reading, _ = directional_reading(list(bleu.changes.values()), "higher", "lower", _PENDING)
            compared.append(_BucketRow(row.row, _encoding(row, declared), bucket, ppl.values, bleu.values,
                                       ppl.changes, bleu.changes, ppl_reading,
                                       basis if reference else f"no {declared.reference} row", len(ppl.diverged),
                                       None, bleu_reading, *size))
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
        trends.append(paired_trend(row, first, last, "worse with length", "better with length", _PENDING))
    return trends


def _length_trend(run_dir: str, reference_dir: str) -> float | None:
    """One seed's trend with length against the reference run at that seed, in percentage points."""
    read = comparison_report.read_json_file
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


def _csv_records(compared: Sequence[_BucketRow], declared: BucketComparison) -> list[dict]:
    """One record per (row, bucket), keys :data:`CSV_FIELDS` (``value`` named by the declared field)."""
    records = []
    for row in compared:
        (ppl_mean, ppl_se), (bleu_mean, bleu_se), (change_mean, change_se), (difference_mean, difference_se) = \
            row.figures()
        records.append({"row": row.row, declared.field: row.value, **dict(bucket=row.group, min_words=row.min_words,
                            max_words=row.max_words, num_pairs=row.num_pairs, seeds=len(row.ppl), ppl_mean=ppl_mean,
                            ppl_se=ppl_se, bleu_mean=bleu_mean, bleu_se=bleu_se, paired_seeds=len(row.ppl_changes),
                            ppl_change_mean=change_mean, ppl_change_se=change_se, ppl_reading=row.reading,
                            bleu_difference_mean=difference_mean, bleu_difference_se=difference_se,
                            bleu_reading=row.bleu_reading, reading_basis=row.reading_basis)})
    return records


def _markdown_report(root: str, compared: Sequence[_BucketRow], trends: Sequence[Trend],
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
                               comparison.seeds_cell(record["seeds"], row.diverged),
                               format_figure(record["ppl_mean"], record["ppl_se"], 2),
                               format_figure(record["ppl_change_mean"], record["ppl_change_se"], 1, percent=True,
                                             sign=True), record["ppl_reading"],
                               format_figure(record["bleu_mean"], record["bleu_se"], 1),
                               format_figure(record["bleu_difference_mean"], record["bleu_difference_se"], 1,
                                             sign=True), record["bleu_reading"]]
                              for row, record in zip(compared, _csv_records(compared, declared))))]
    lines += ["", "PPL: perplexity per target piece (teacher-forced, unsmoothed); BLEU: sacrebleu of beam-search "
              "translations; both mean ± standard error over the row's scored seeds. ΔPPL: the change against "
              f"the {reference} row, paired by seed, mean ± standard error; ΔBLEU the same for the BLEU "
              "difference. Reading: beyond the seeds' spread when |mean| > 2 x SE (the Table 2 report's rule; "
              "with 3 seeds a loose bar), else `within noise`."]
    if trends:
        lines += ["", "## Does the gap grow with length?", "",
                  *markdown_table([label, "buckets", "ΔPPL change, last minus first, paired", "reading"],
                                  ([trend.value, f"{trend.first} → {trend.last}",
                                    format_figure(*mean_and_se(list(trend.differences.values())), 1, percent=True,
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
        mean, se = mean_and_se([100.0 * change for change in row.ppl_changes.values()])
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
            stats = [mean_and_se(list(getattr(members[buckets[index]], values).values())) for index in positions]
            axis.errorbar(positions, [math.nan if mean is None else mean for mean, _ in stats],
                          yerr=[0.0 if se is None else se for _, se in stats], fmt="o-", capsize=3,
                          label=encoding, color=color)
        if row_name in changes:
            stats = changes[row_name]
            right.errorbar(range(len(buckets)), [math.nan if mean is None else mean for mean, _ in stats],
                           yerr=[0.0 if se is None else se for _, se in stats], fmt="o-", capsize=3,
                           label=encoding, color=color)
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
    fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
