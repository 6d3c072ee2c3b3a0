"""Tabulate a sweep in the layout of the paper's Table 2, beside the paper's figures."""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from attention_jax.reports import comparison, comparison_plot, comparison_report, sweep_diagnostics, sweep_seeds
from attention_jax.reports.comparison import (
    ACCURACY_COLLAPSE,
    DIVERGED_FACTOR,
    SPREAD_FACTOR,
    MetricStats,
    fit_title,
    format_figure,
    markdown_table,
    mean_and_se,
    write_report_files,
)
from attention_jax.reports.sweep_rows import RowReport, plot_panels, read_sweep_rows
from attention_jax.reports.sweep_seeds import PaperRow, aggregate

# (column header as in the paper, config field), Table 2's order.
HPARAM_COLUMNS = (("N", "num_layers"), ("d_model", "d_model"), ("d_ff", "d_ff"), ("h", "num_heads"),
                  ("d_k", "key_dim"), ("d_v", "value_dim"), ("P_drop", "dropout_rate"),
                  ("eps_ls", "label_smoothing"), ("PE", "positional_encoding"))
PE_ABBREVIATIONS = {"sinusoidal": "sinusoid", "learned": "learned"}


def _duration(seconds: Any) -> str:
    if seconds is None:
        return ""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _hparam_text(field: str, value: Any) -> str:
    if value is None:
        return ""
    if field == "positional_encoding":
        return PE_ABBREVIATIONS.get(value, str(value))
    return str(value)


def _shown_in_full(rows: Sequence[RowReport], reference: str) -> RowReport | None:
    with_config = [row for row in rows if row.config]
    candidates = [row for row in with_config if row.row == reference] or with_config
    return candidates[0] if candidates else None


def _hparam_cells(row: RowReport, reference: RowReport | None) -> list[str]:
    """The hyperparameter cells of a row, blank where equal to the reference row (as in the paper)."""
    cells = []
    for _, field in HPARAM_COLUMNS:
        value = row.config.get(field)
        same = reference is not None and row is not reference and reference.config.get(field) == value
        cells.append("" if same else _hparam_text(field, value))
    return cells


def _other_changes(row: RowReport, record: dict) -> str:
    """The row's own settings outside the Table 2 columns (e.g. ``seed=1``), with their actual values."""
    shown = {field for _, field in HPARAM_COLUMNS} | {"name", "paper"}
    own = record.get("row_overrides", {}).get(row.row, {})
    return ", ".join(f"{key}={row.config[key] if key in row.config else value}"  # {}: the run has not started.
                     for key, value in own.items() if key not in shown)


def _params_millions(row: RowReport) -> str:
    ours = row.results.get("params")
    ours_text = format_figure(None if ours is None else ours / 1e6, None, 1)
    paper = row.paper.get("params_millions")
    return f"{ours_text or '—'} / {paper if paper is not None else '—'}"


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
    shadowed = []
    for row in record.get("rows", []):
        for key, value in record.get("row_overrides", {}).get(row, {}).items():
            if key in common and str(value) != common[key]:
                shadowed.append(f"{row} {key}={value} -> {common[key]}")
    return shadowed


def _shared_or_mean(values: Sequence[Any]) -> Any:
    """The value all finished seeds share (e.g. ``params``), else their mean; None when none."""
    known = [value for value in values if value is not None]
    if not known:
        return None
    if all(value == known[0] for value in known):
        return known[0]
    return statistics.fmean(known) if all(isinstance(value, (int, float)) for value in known) else None


def _steps_cell(row: RowReport) -> str:
    steps = sorted({run.results["step"] for run in row.finished if run.results.get("step") is not None})
    if not steps:
        return ""
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"


def _seeds_cell(row: RowReport, stats: PaperRow) -> str:
    """The seeds column: finished seeds, and how many are pending (``"2 (+1 pending)"``)."""
    pending = f" (+{len(row.pending)} pending)" if row.pending and row.seeded else ""
    diverged = sum(run.status == "done" for run in row.runs if run.seed in stats.ppl.diverged)
    return f"{comparison.seeds_cell(len(comparison.counted_runs(row)), diverged)}{pending}"


def _status_cell(row: RowReport) -> str:
    """The status column: the row's status, and which seeds are pending and why."""
    if not row.seeded or not row.pending or row.status not in ("partial", "pending"):
        return row.status
    return f"{row.status} (" + ", ".join(f"{run.name} {run.status}" for run in row.pending) + ")"


def _verdict_cell(stats: PaperRow) -> str:
    """The verdict column: the verdict, marked when it rests on one seed's sign or a seed diverged."""
    if stats.verdict == "unstable":
        return f"unstable ({sweep_seeds.diverged_label(stats.ppl.diverged)} diverged)"
    return stats.verdict + (" (sign only)" if stats.verdict_basis.startswith("sign only") else "")


def _verdict_notes(rows: Sequence[RowReport], stats: dict[str, PaperRow], reference: str) -> list[str]:
    """The report's notes on seeds and verdicts: the rule, and how many rows got each verdict."""
    seeded = any(row.seeded for row in rows)
    counts: dict[str, int] = {}
    for row in rows:
        if stats[row.row].verdict:
            counts[stats[row.row].verdict] = counts.get(stats[row.row].verdict, 0) + 1
    notes = [
        ("Seeds: every ± is one standard error of the mean (sample standard deviation, ddof=1, over √n) over "
         "the row's n finished seeds, n being the seeds column (no ± with one seed). " if seeded else
         "One run per row (no seeds): no spread to show. ")
        + f"ΔPPL vs {reference}: the relative change of dev PPL against {reference} paired by seed (row seed k "
        f"against {reference} seed k), mean ± standard error over the paired seeds.",
        f"Verdict, on dev PPL against the paper's direction: with two or more paired seeds the change is "
        f"beyond the seeds' spread when |mean| > {SPREAD_FACTOR:g} x its standard error (std / √n; with 3 "
        "seeds a t above 2 on 2 degrees of freedom, two-sided p ≈ 0.18: a loose bar); then `reproduced` "
        "(the paper's sign) or `opposite`, else `within noise`. Where the paper shows no difference (E: "
        "4.92 against 4.92) `reproduced` means within noise and `differs` beyond it. With one seed the "
        "verdict is the sign alone, marked (sign only), and E is `undecided`; `pending`: no seed "
        f"finished in both the row and {reference}. `unstable`: a seed diverged (its last dev PPL more than "
        f"{DIVERGED_FACTOR:g}x its best and its dev accuracy under {ACCURACY_COLLAPSE:g}x that at its "
        "best); it is left out of every mean and standard error (the seeds column says so), and the CSV's "
        "verdict_basis gives the other seeds' verdict.",
    ]
    if counts:
        notes.append("Verdicts: " + ", ".join(f"{count} {name}" for name, count in counts.items()) + ".")
    return notes


def _markdown_table_report(record: dict, rows: Sequence[RowReport], reference: str) -> str:
    """The report as Markdown: Table 2's columns, ours (mean ± standard error over seeds) beside the paper's."""
    shown = _shown_in_full(rows, reference)
    stats = aggregate(rows, reference)
    header = ["", "row", *[name for name, _ in HPARAM_COLUMNS], "other changes", "seeds", "steps",
              "params ×10⁶ (ours / paper)", "dev PPL", "paper PPL", f"ΔPPL vs {reference}", "paper ΔPPL",
              "BLEU", "paper BLEU", "verdict", "wall", "status"]
    table = []
    previous_group = None
    for row in rows:
        starts_group = len(row.group) == 1 and row.group != previous_group  # A-E, as in the paper.
        group_cell = f"({row.group})" if starts_group else ""
        previous_group = row.group
        row_stats = stats[row.row]
        wall, _ = mean_and_se([run.results["wall_s"] for run in comparison.counted_runs(row)
                               if run.results.get("wall_s") is not None])
        cells = [group_cell, row.row, *_hparam_cells(row, shown), _other_changes(row, record),
                 _seeds_cell(row, row_stats), _steps_cell(row), _params_millions(row),
                 format_figure(row_stats.ppl.mean, row_stats.ppl.se, 2),
                 format_figure(row.paper.get("dev_ppl"), None, 2),
                 format_figure(row_stats.ppl.change_mean, row_stats.ppl.change_se, 1, percent=True, sign=True),
                 format_figure(row_stats.paper_change, None, 1, percent=True, sign=True),
                 format_figure(row_stats.bleu.mean, row_stats.bleu.se, 1),
                 format_figure(row.paper.get("dev_bleu"), None, 1), _verdict_cell(row_stats), _duration(wall),
                 _status_cell(row)]
        table.append(cells)
    lines = markdown_table(header, table)
    title = f"# {record.get('report_name', 'sweep')}: {record.get('config_file', '(no sweep.json)')}"
    dataset = (shown.config.get("dataset") if shown else None) or "?"
    notes = [
        title,
        f"Common overrides: {' '.join('--config.' + o for o in record.get('overrides', [])) or 'none'}. "
        f"Dataset: {dataset}. Hyperparameters are shown in full for {shown.row if shown else '—'} "
        "and where they differ for the other rows (as in the paper).",
        "dev PPL: perplexity per target token of our vocabulary on the run's dev split (the whole split with "
        "the parameters BLEU used when the run has it, else the best evaluation of a run that stopped early, "
        "else the last evaluation); the paper's is per "
        "wordpiece on newstest2013 (comparable only on WMT14 with a 37k vocabulary). BLEU: sacrebleu, beam "
        "search on the whole dev split when training ended (config.final_bleu), else on the dev sentences "
        "sampled at the last evaluation. wall: per seed (the mean over finished seeds).",
        *_verdict_notes(rows, stats, reference),
    ]
    shadowed = overridden_row_settings(record)
    if shadowed:
        notes.append(f"Common overrides replace these rows' own settings (the rows then differ from {reference} "
                     "less than in the paper): " + "; ".join(shadowed) + ".")
    done = sum(row.status == "done" for row in rows)
    footer = f"\n\n{done} of {len(rows)} rows finished."
    if any(row.seeded for row in rows):
        runs = sum(len(row.runs) for row in rows)
        pending = sum(len(row.pending) for row in rows)
        footer += f" {pending} of {runs} seed runs pending."
    return "\n\n".join(notes) + "\n\n" + "\n".join(lines) + footer + "\n"


SUMMARY_FIELDS = ("row", "seeds", "dev_ppl_mean", "dev_ppl_std", "dev_bleu_mean", "dev_bleu_std", "verdict",
                  "group", "status", "seeds_pending", "dev_ppl_change_pct_mean", "dev_ppl_change_pct_std",
                  "paired_seeds", "paper_dev_ppl_change_pct", "verdict_basis", "dev_ppl_se", "dev_bleu_se",
                  "dev_ppl_change_pct_se")
RESULT_FIELDS = ("step", "params", "eval_ppl", "bleu", "dev_bleu", "eval_loss", "train_loss", "wall_s",
                 "train_tokens_per_s")
CSV_FIELDS = (*SUMMARY_FIELDS, *[field for _, field in HPARAM_COLUMNS], "other_changes", *RESULT_FIELDS[:2],
              "paper_params_millions", "eval_ppl", "paper_dev_ppl", "bleu", "dev_bleu", "paper_dev_bleu",
              "eval_loss", "train_loss", "wall_s", "train_tokens_per_s")


def _percent(fraction: float | None) -> float | None:
    """``fraction`` in percent; None stays None."""
    return None if fraction is None else 100 * fraction


def _csv_records(record: dict, rows: Sequence[RowReport], reference: str) -> list[dict]:
    """The report as flat records (every hyperparameter in full), one per row."""
    stats = aggregate(rows, reference)
    records = []
    for row in rows:
        row_stats = stats[row.row]
        ppl, bleu = row_stats.ppl, row_stats.bleu
        flat = {"group": row.group, "row": row.row, "seeds": len(comparison.counted_runs(row)),
                "seeds_pending": len(row.pending), "status": row.status,
                "dev_ppl_mean": ppl.mean, "dev_ppl_std": ppl.std, "dev_bleu_mean": bleu.mean, "dev_bleu_std": bleu.std,
                "dev_ppl_change_pct_mean": _percent(ppl.change_mean),
                "dev_ppl_change_pct_std": _percent(ppl.change_std), "dev_ppl_se": ppl.se, "dev_bleu_se": bleu.se,
                "dev_ppl_change_pct_se": _percent(ppl.change_se),
                "paired_seeds": ppl.paired_seeds if row.row != reference else None,
                "paper_dev_ppl_change_pct": _percent(row_stats.paper_change),
                "verdict": row_stats.verdict, "verdict_basis": row_stats.verdict_basis}
        flat.update({field: row.config.get(field) for _, field in HPARAM_COLUMNS})
        flat["other_changes"] = _other_changes(row, record)
        flat.update({key: _shared_or_mean([run.results.get(key) for run in comparison.counted_runs(row)])
                     for key in RESULT_FIELDS})
        flat.update(paper_params_millions=row.paper.get("params_millions"),
                    paper_dev_ppl=row.paper.get("dev_ppl"), paper_dev_bleu=row.paper.get("dev_bleu"))
        records.append(flat)
    return records


def write_report(root: str, *, all_rows: bool = False, out_dir: str | None = None,
                 reference: str | None = None) -> list[str]:
    """Write ``ROOT/<name>.md``, ``.csv`` and ``.png`` for the sweep in ``root``.

    Parameters
    ----------
    root : str
        Sweep root.
    all_rows : bool
        Include rows of the sweep that were never launched.
    out_dir : str, optional
        Where the files go instead of ``root`` (created if missing), e.g. for a read-only root.
    reference : str, optional
        ``report --reference=ROW``; else the sweep's own reference row
        (:func:`attention_jax.reports.comparison_report.resolve_reference`).

    Returns
    -------
    list[str]
        The paths written: the three above, and when the runs have metrics ``ROOT/<name>_curves.png`` (dev perplexity
        against step per row and seed, :func:`~attention_jax.reports.comparison_plot.plot_learning_curves`) and
        ``ROOT/<name>_diagnostics.md``
        (learning speed, overfitting and how runs ended, per row, :mod:`attention_jax.reports.sweep_diagnostics`).
    """
    record, rows = read_sweep_rows(root, all_rows=all_rows)
    reference_row, _ = comparison_report.resolve_reference(record, rows, reference)
    name = record.get("report_name", "report")
    out_dir = out_dir or root
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, name)
    write_report_files(stem, _markdown_table_report(record, rows, reference_row), CSV_FIELDS,
                       _csv_records(record, rows, reference_row))
    _plot_report(rows, reference_row, stem + ".png",
                            f"{name}: paired changes against {reference_row}, ours vs the paper ({root})")
    paths = [stem + ".md", stem + ".csv", stem + ".png"]
    if comparison_plot.plot_learning_curves(root, rows, reference_row, stem + "_curves.png",
                                            f"{name}: dev perplexity ({root})"):
        paths.append(stem + "_curves.png")
    diagnostics = sweep_diagnostics.write_diagnostics(root, name, rows, out_dir=out_dir, reference=reference_row)
    return paths + ([diagnostics] if diagnostics else [])

OURS_COLOR, PAPER_COLOR = "tab:blue", "tab:orange"
_OFFSET = 0.15  # Ours left of the row's tick, the paper's right of it.
PLOTTED = {"dev_ppl": "Δ dev PPL vs {reference} (%)", "dev_bleu": "Δ dev BLEU vs {reference} (points)"}
"""The metrics drawn (:data:`attention_jax.reports.comparison.METRICS`, also the paper's figures' keys)."""


def _draw_changes(axis: Any, members: Sequence[RowReport], reference: RowReport,
                  ours: Mapping[str, MetricStats], metric: comparison.Metric, label: str) -> None:
    scale = 100.0 if metric.relative else 1.0
    positions = list(range(len(members)))
    means = [ours[row.row].change_mean for row in members]
    errors = [ours[row.row].change_se for row in members]
    axis.errorbar([x - _OFFSET for x in positions], [math.nan if mean is None else scale * mean for mean in means],
                  yerr=[0.0 if se is None else scale * se for se in errors], fmt="o", color=OURS_COLOR,
                  capsize=3, label="ours (mean ± SE, paired seeds)")
    paper = [sweep_seeds.paper_change(row, reference, metric.name, metric.relative) for row in members]
    if any(value is not None for value in paper):
        axis.plot([x + _OFFSET for x in positions], [math.nan if value is None else scale * value for value in paper],
                  "s", color=PAPER_COLOR, linestyle="none", label="paper")
    axis.axhline(0.0, color="black", linewidth=0.8)
    axis.set_ylabel(label)

    def tick(row: RowReport) -> str:
        if row.status == "partial":
            return f"{row.row}\n({len(row.finished)}/{len(row.runs)} seeds)"
        return row.row if row.status == "done" else f"{row.row}\n({row.status})"

    axis.set_xticks(positions, [tick(row) for row in members], fontsize=8)
    axis.set_xlim(-0.6, len(members) - 0.4)
    if all(mean is None for mean in means) and all(value is None for value in paper):
        axis.text(0.5, 0.5, "no paired figures", transform=axis.transAxes, ha="center", color="gray")


def _draw_report(rows: Sequence[RowReport], reference: str) -> Any:
    """The figure of :func:`_plot_report`, not yet titled or saved."""
    plt = comparison_plot.pyplot()

    panels = plot_panels(rows, reference)
    reference_row = next((row for row in rows if row.row == reference), None)
    ours = comparison.compare("", rows, reference, [metric for metric in comparison.METRICS
                                                    if metric.name in PLOTTED]) if reference_row else {}
    metrics = [metric for metric in comparison.METRICS if metric.name == "dev_ppl"]
    if any(comparison.reported_bleu(run.results) is not None for row in rows for run in row.finished) or any(
            row.paper.get("dev_bleu") is not None for row in rows):
        metrics += [metric for metric in comparison.METRICS if metric.name == "dev_bleu"]
    columns = max(len(panels), 1)
    figure, axes = plt.subplots(len(metrics), columns, squeeze=False, figsize=(3.6 * columns, 3.2 * len(metrics)),
                                layout="constrained")
    for column, (name, members) in enumerate(panels):
        changed = [row for row in members if row.row != reference]
        for line, metric in enumerate(metrics):
            axis = axes[line][column]
            axis.set_title(f"({name})" if len(name) == 1 else name)
            if reference_row is None or not changed:
                message = f"no {reference} row to pair with" if reference_row is None else f"{reference} only"
                axis.text(0.5, 0.5, message, transform=axis.transAxes, ha="center", color="gray")
                continue
            _draw_changes(axis, changed, reference_row, {row: stats[metric.name] for row, stats in ours.items()},
                          metric, PLOTTED[metric.name].format(reference=reference))
            if column == 0 and line == 0:
                axis.legend(fontsize=7, loc="best")
    return figure


def _plot_report(rows: Sequence[RowReport], reference: str, path: str, title: str) -> None:
    """Plot each row's paired change of dev perplexity and BLEU against the reference beside the paper's."""
    plt = comparison_plot.pyplot()
    figure = _draw_report(rows, reference)
    fit_title(figure, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
