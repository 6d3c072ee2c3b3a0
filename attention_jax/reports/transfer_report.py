"""Transfer across corpora: whether a row's change against the reference on one corpus holds on the others."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from typing import Mapping, Sequence

from attention_jax.data import corpora
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.reports import comparison, comparison_plot, comparison_report, sweep_rows
from attention_jax.reports.comparison import Metric, MetricStats, _fit_title, markdown_table, write_report_files
from attention_jax.reports.sweep_rows import RowReport

CORPUS_KEY = "corpus"  # The field of a run's config.json naming its corpus.
PRE_CORPORA_CORPUS = corpora.MESSAGES_EN_DE.name
"""The corpus of flat runs recorded before the ``corpus`` field whose dataset is no recipe's (all ran on it)."""
HEADLINE_METRICS = ("dev_bleu", "dev_ppl")  # comparison.METRICS compared across corpora (with the evaluations').
STEM = "transfer"
HOLDS, REVERSES, ONE_CORPUS, NOISE, SOME_CORPORA = "holds", "reverses", "one corpus", "noise", "some corpora"
RULE = ("Change: mean over the n paired seeds of row − reference at the same seed (perplexities as x / x_ref − 1, "
        "in %; a derived measure, such as the length trend in pp, is its seed's change itself); ± is one "
        "standard error of the mean over the n seeds (their spread over √n, ddof=1); *beyond*: |change| > 2 SE. "
        "A diverged seed is left out of n and of every mean and SE (the cell says how many). "
        "Verdict: `unstable` a seed diverged on some corpus; `pending` a corpus with n < 2 paired seeds (one seed "
        "has no SE); `holds` beyond "
        "on every corpus with one sign; `reverses` beyond on two corpora with opposite signs; `one corpus` beyond "
        "on exactly one; `noise` beyond on none; `some corpora` (3+ corpora) beyond with one sign on several, "
        "not all.")


@dataclasses.dataclass(frozen=True)
class _Corpus:
    """One corpus of the sweep: its directory below the root, read as a sweep root of its own."""

    name: str
    directory: str
    record: dict
    rows: list[RowReport]
    reference: str
    requested: str | None
    flat: bool = False


@dataclasses.dataclass(frozen=True)
class _Transfer:
    """One row's change on every corpus for one metric, and the verdict."""

    row: str
    metric: Metric
    stats: tuple[MetricStats | None, ...]
    verdict: str


def _is_corpus_directory(path: str) -> bool:
    if not os.path.isdir(path) or sweep_rows._is_row_directory(path):
        return False
    return os.path.isfile(os.path.join(path, run_files.SWEEP_FILE)) or any(
        sweep_rows._is_row_directory(os.path.join(path, name)) for name in os.listdir(path)
        if not sweep_rows.SEED_DIR_PATTERN.match(name))


def _run_configs(directory: str, rows: Sequence[RowReport]) -> list[dict]:
    configs = []
    for row in rows:
        for run in row.runs:
            path = os.path.join(comparison.run_directory(directory, row, run), run_files.CONFIG_FILE)
            if os.path.isfile(path):  # Valid JSON: read_sweep_rows read it.
                with open(path, encoding="utf-8") as file:
                    configs.append(json.load(file))
    return configs


def _corpus_name(directory: str, rows: Sequence[RowReport], flat: bool) -> str:
    configs = _run_configs(directory, rows)
    named = sorted({value for value in (config.get(CORPUS_KEY) for config in configs)
                    if value and isinstance(value, str)})
    if len(named) > 1:
        raise UserInputError(f"{directory} holds runs of corpora {', '.join(named)}: a sweep over corpora keeps "
                             f"one directory per corpus (ROOT/<corpus>/<row>/seed_<k>); move the runs apart.")
    if named or not flat:
        return named[0] if named else os.path.basename(os.path.normpath(directory))
    datasets = sorted({str(config.get("dataset")) for config in configs})
    recipes = [name for name in corpora.CORPORA if corpora.CORPORA[name].dataset in datasets]
    if len(recipes) == 1:
        return recipes[0]
    if configs and all(CORPUS_KEY not in config for config in configs):
        return PRE_CORPORA_CORPUS
    return ", ".join(datasets) or os.path.basename(os.path.normpath(directory))


def read_corpora(root: str, *, all_rows: bool = False, reference: str | None = None) -> list[_Corpus]:
    """The corpora of a sweep over corpora, read and checked; ``[]`` for any other root.

    Parameters
    ----------
    root : str
        The sweep root.
    all_rows : bool
        Report rows never launched too.
    reference : str, optional
        ``report --reference=ROW``, for every corpus.

    Returns
    -------
    list[Corpus]
        The root's own runs' corpus first where it holds row directories (flat), then one per corpus directory
        (``ROOT/<corpus>/`` holding ``sweep.json`` or row directories), in name order; ``[]`` when ``root`` has no
        corpus directory, holds a row itself or is not a directory.

    Raises
    ------
    UserInputError
        A damaged file, a reference that is not a row of some corpus, a directory holding runs of two corpora, or two
        directories of one corpus.
    """
    if not os.path.isdir(root) or sweep_rows._is_row_directory(root):
        return []
    names = sorted(os.listdir(root))
    directories = [os.path.join(root, name) for name in names if _is_corpus_directory(os.path.join(root, name))]
    if not directories:
        return []
    flat = any(sweep_rows._is_row_directory(os.path.join(root, name)) for name in names)
    root_record = sweep_rows.read_sweep_rows(root)[0] if os.path.isfile(os.path.join(root, run_files.SWEEP_FILE)) \
        else {}
    corpora_found: list[_Corpus] = []
    for directory in [root] * flat + directories:
        record, rows = sweep_rows.read_sweep_rows(directory, all_rows=all_rows)
        requested = reference or (None if record or flat else root_record.get("reference"))
        reference_row, _ = comparison_report.resolve_reference(record, rows, requested)
        corpora_found.append(_Corpus(_corpus_name(directory, rows, directory == root), directory, record, rows,
                                    reference_row, requested, directory == root))
    seen = [corpus.name for corpus in corpora_found]
    twice = sorted({name for name in seen if seen.count(name) > 1})
    if twice:
        raise UserInputError(f"corpus {twice[0]} is in more than one directory of {root}: keep one directory per "
                             f"corpus (ROOT/<corpus>/<row>/seed_<k>).")
    return corpora_found


def _transfer_verdict(per_corpus: Sequence[MetricStats | None]) -> str:
    """The verdict on a row's changes on every corpus (the rule of the module docstring)."""
    present = [stats for stats in per_corpus if stats is not None]
    if any(stats.verdict == comparison.UNSTABLE_VERDICT for stats in present):
        return comparison.UNSTABLE_VERDICT
    if len(present) < len(per_corpus) or any(stats.paired_seeds < 2 for stats in present):
        return comparison.PENDING_VERDICT
    signs = [sum(stats.changes.values()) > 0 for stats in present
             if comparison._beyond_spread(list(stats.changes.values()))[0]]
    if not signs:
        return NOISE
    if len(set(signs)) > 1:
        return REVERSES
    if len(signs) == len(present):
        return HOLDS
    return ONE_CORPUS if len(signs) == 1 else SOME_CORPORA


def _headline_metrics(corpora: Sequence[_Corpus]) -> list[Metric]:
    """:data:`HEADLINE_METRICS`, the registered headline measures, and the per-run evaluations' metrics."""
    metrics = [metric for metric in comparison.METRICS if metric.name in HEADLINE_METRICS]
    metrics += list(comparison_report.HEADLINE_MEASURES.values())
    for corpus in corpora:  # Those the sweep file's get_report() declares.
        metrics += [metric for metric in sweep_rows.declared_report(corpus.record).get("headline_measures", ())
                    if metric.name not in {known.name for known in metrics}]
    for corpus in corpora:
        metrics += [metric for metric in comparison_report._evaluation_metrics(corpus.directory, corpus.rows)
                    if metric.name not in {known.name for known in metrics}]
    return metrics


def _compare_corpora(corpora: Sequence[_Corpus], metrics: Sequence[Metric] | None = None) -> list[_Transfer]:
    """Every row other than the reference, metric by metric, on every corpus."""
    metrics = _headline_metrics(corpora) if metrics is None else metrics
    compared = [comparison.compare(corpus.directory, corpus.rows, corpus.reference, metrics) for corpus in corpora]
    recorded = {metric.name for figures in compared for metric in comparison._recorded_metrics(figures)}
    rows = dict.fromkeys(row.row for corpus in corpora for row in corpus.rows if row.row != corpus.reference)
    transfers = []
    for row, metric in itertools.product(rows, [metric for metric in metrics if metric.name in recorded]):
        per_corpus = tuple(None if row == corpus.reference else figures.get(row, {}).get(metric.name)
                           for figures, corpus in zip(compared, corpora))
        transfers.append(_Transfer(row, metric, per_corpus, _transfer_verdict(per_corpus)))
    return transfers


def _change_text(stats: MetricStats | None) -> str:
    """``"+1.2% ± 0.4% (n=3)"``: the paired change ± its standard error, with n; ``"no SE"`` with one seed."""
    left_out = f"; {len(stats.diverged)} diverged" if stats is not None and stats.diverged else ""
    if stats is None or stats.change_mean is None:
        return f"— (n=0{left_out})"
    return comparison_report.change_cell(stats) + (f" (n=1, no SE{left_out})" if stats.paired_seeds == 1
                                                   else f" (n={stats.paired_seeds}{left_out})")


def _markdown_report(root: str, corpora: Sequence[_Corpus], transfers: Sequence[_Transfer],
                    corpus_files: Mapping[str, Sequence[str]], out_dir: str) -> str:
    """The transfer report as Markdown: each corpus's reference and report files, then the Transfer table."""
    sections = [f"# Transfer across corpora: {root}"]
    for corpus in corpora:
        links = ", ".join(f"[{os.path.relpath(path, out_dir)}]({os.path.relpath(path, out_dir)})"
                          for path in corpus_files.get(corpus.name, []))
        sections.append(f"## {corpus.name}\n\n`{corpus.directory}`: {len(corpus.rows)} rows, reference "
                        f"**{corpus.reference}**; paired-by-seed tables: {links or 'none written'}.")
    table = markdown_table(["row", "metric", *(f"{corpus.name}: change ± SE (n)" for corpus in corpora), "verdict"],
                           ([transfer.row, transfer.metric.label, *map(_change_text, transfer.stats), transfer.verdict]
                            for transfer in transfers))
    sections.append("## Transfer\n\n" + RULE + "\n\n" + ("\n".join(table) if transfers else "No row to compare yet."))
    return "\n\n".join(sections) + "\n"


CSV_FIELDS = ("row", "metric", "corpus", "reference", "change_mean", "change_se", "change_unit", "paired_seeds",
              "corpus_verdict", "verdict")


def _csv_records(corpora: Sequence[_Corpus], transfers: Sequence[_Transfer]) -> list[dict]:
    """One record per (row, metric, corpus), keys :data:`CSV_FIELDS`; a relative change and its SE in percent."""
    records = []
    for transfer in transfers:
        scale = 100.0 if transfer.metric.relative else 1.0
        for corpus, stats in zip(corpora, transfer.stats):
            mean, se = (None, None) if stats is None else (stats.change_mean, stats.change_se)
            records.append({
                "row": transfer.row, "metric": transfer.metric.name, "corpus": corpus.name,
                "reference": corpus.reference, "change_mean": None if mean is None else mean * scale,
                "change_se": None if se is None else se * scale,
                "change_unit": transfer.metric.change_unit or "absolute",
                "paired_seeds": 0 if stats is None else stats.paired_seeds,
                "corpus_verdict": comparison.PENDING_VERDICT if stats is None else stats.verdict,
                "verdict": transfer.verdict})
    return records


def _plot_transfer(corpora: Sequence[_Corpus], transfers: Sequence[_Transfer], path: str, title: str) -> None:
    """Plot each row's change on one corpus against another: a panel per metric (columns) and pair (rows)."""
    plt = comparison_plot.pyplot()
    metrics = list({transfer.metric.name: transfer.metric for transfer in transfers}.values())
    pairs = list(itertools.combinations(range(len(corpora)), 2))
    figure, axes = plt.subplots(len(pairs), max(1, len(metrics)), squeeze=False, layout="constrained",
                                figsize=(4.6 * max(1, len(metrics)), 1.0 + 4.2 * len(pairs)))
    for (first, second), panels in zip(pairs, axes):
        for axis, metric in zip(panels, metrics):
            scale = 100.0 if metric.relative else 1.0
            unit = f" ({metric.change_unit})" if metric.change_unit else ""
            limit = 0.0
            for transfer in (transfer for transfer in transfers if transfer.metric.name == metric.name):
                x_stats, y_stats = transfer.stats[first], transfer.stats[second]
                if x_stats is None or y_stats is None or x_stats.change_mean is None or y_stats.change_mean is None:
                    continue
                x, y = x_stats.change_mean * scale, y_stats.change_mean * scale
                x_err, y_err = (None if stats.change_se is None else stats.change_se * scale
                                for stats in (x_stats, y_stats))
                axis.errorbar(x, y, xerr=x_err, yerr=y_err, fmt="o", color="C0", capsize=3)
                label = f"{transfer.row}: {transfer.verdict}, n={x_stats.paired_seeds}/{y_stats.paired_seeds}"
                axis.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
                limit = max(limit, abs(x) + (x_err or 0.0), abs(y) + (y_err or 0.0))
            limit = 1.1 * limit or 1.0
            axis.plot([-limit, limit], [-limit, limit], color="grey", linestyle="--", linewidth=0.8)
            axis.axhline(0.0, color="black", linewidth=0.8)
            axis.axvline(0.0, color="black", linewidth=0.8)
            axis.set_xlim(-limit, limit)
            axis.set_ylim(-limit, limit)
            axis.set_xlabel(f"change on {corpora[first].name}{unit}, ± 1 SE")
            axis.set_ylabel(f"change on {corpora[second].name}{unit}, ± 1 SE")
            axis.set_title(metric.label)
            axis.grid(True, alpha=0.3)
    _fit_title(figure, title, fontsize=11)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _write_transfer_report(root: str, corpora: Sequence[_Corpus], out_dir: str,
                          corpus_files: Mapping[str, Sequence[str]]) -> list[str]:
    """Write ``OUT/transfer.md``, ``.csv`` and ``.png`` for two or more corpora."""
    transfers = _compare_corpora(corpora)
    stem = os.path.join(out_dir, STEM)
    write_report_files(stem, _markdown_report(root, corpora, transfers, corpus_files, out_dir), CSV_FIELDS,
                       _csv_records(corpora, transfers))
    _plot_transfer(corpora, transfers, stem + ".png",
                  f"transfer: change on {' vs '.join(corpus.name for corpus in corpora)}, paired by seed ({root})")
    return [stem + ".md", stem + ".csv", stem + ".png"]
