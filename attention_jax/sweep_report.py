"""Tabulate a sweep in the layout of the paper's Table 2, beside the paper's figures.

:func:`write_report` (the command ``python -m attention_jax.report ROOT [--all_rows]``) reads
``ROOT/sweep.json`` (the row order, written by ``launch.sweep``), and for each row
``ROOT/<row>/results.json`` (our dev perplexity, BLEU, parameters, steps, wall time) and
``ROOT/<row>/config.json`` (the row's hyperparameters and ``config.paper``, the paper's figures). It
writes ``ROOT/<name>.md``, ``ROOT/<name>.csv`` and ``ROOT/<name>.png``, where ``<name>`` is the sweep
file's stem (``table2`` for ``configs/table2.py``). Rows that have not finished are listed with their
status (``failed``, ``incomplete``, ``submitted``, ``not run``) and no figures.

Without ``sweep.json`` (work directories made by hand), every subdirectory holding a ``config.json``
(or ``seed_<k>/config.json``) is a row, in name order. Perplexities are per token of each run's own
vocabulary on its own dev split: comparable with the paper's only for runs on WMT14 EN-DE with the
paper's 37k-token vocabulary.

Seeds
-----
A sweep launched with seeds (``launch.sweep --seeds=K``) has one run per row and seed in
``ROOT/<row>/seed_<k>/``; ``sweep.json`` lists the seeds. The report aggregates the finished seeds of
each row (:func:`aggregate`):

- dev perplexity (:func:`reported_ppl`) and BLEU (:func:`reported_bleu`): the mean and the sample
  standard deviation (``ddof=1``; empty with one seed) over the row's finished seeds;
- the change against base *paired by seed*: for every seed k finished in both the row and base,
  ``c_k = ppl(row, k) / ppl(base, k) - 1``; its mean ``m``, sample standard deviation ``s`` and
  standard error ``se = s / sqrt(n)`` over the ``n`` paired seeds. Pairing removes what the runs of
  seed k share: the same order of training batches in every row that batches the corpus alike, and
  the same initial parameters in rows of the same shapes;
- a verdict against the paper's direction ``d = sign(paper ppl(row) - paper ppl(base))``. The change is
  *beyond the seeds' spread* when ``n >= 2`` and ``|m| > 2 se`` (:data:`SPREAD_FACTOR`; with 3 seeds
  that is a t statistic above 2 on 2 degrees of freedom, a two-sided p of about 0.18, so a loose
  bar: read the spread beside it). Then:

  - ``reproduced``: beyond the spread, with the paper's sign;
  - ``opposite``: beyond the spread, against the paper's sign;
  - ``within noise``: not beyond the spread.

  Where the paper shows no difference (row E: 4.92 against base's 4.92, ``d = 0``) ``reproduced``
  means within noise, and a change beyond the spread is ``differs``. With one paired seed there is no
  spread: the verdict follows the sign of the change alone (``verdict_basis`` says so), and a row
  where the paper shows no difference is ``undecided``. A row without a paired seed yet is
  ``pending``; base and rows without the paper's figures get no verdict.

A row whose seeds have not all finished shows the finished ones and how many are pending (status
``partial``). Roots without seeds (one run per row in ``ROOT/<row>/``, e.g. ``docs/table2_small/``)
are read as one seed per row, paired with base's one run.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import re
import statistics
from typing import Any, Sequence

from attention_jax import run_files

SEED_DIR_PATTERN = re.compile(r"^seed_(\d+)$")  # ROOT/<row>/seed_<k>, as launch.sweep names them.
SPREAD_FACTOR = 2.0
"""A paired change is beyond the seeds' spread when ``|mean| > SPREAD_FACTOR x standard error``."""
STOPPED_EARLY = "early_stopping"  # results.json's stop_reason when patience ran out.

# (column header as in the paper, config field), Table 2's order.
HPARAM_COLUMNS = (("N", "num_layers"), ("d_model", "d_model"), ("d_ff", "d_ff"), ("h", "num_heads"),
                  ("d_k", "key_dim"), ("d_v", "value_dim"), ("P_drop", "dropout_rate"),
                  ("eps_ls", "label_smoothing"), ("PE", "positional_encoding"))
PE_ABBREVIATIONS = {"sinusoidal": "sinusoid", "learned": "learned"}


@dataclasses.dataclass(frozen=True)
class SeedRun:
    """One run of a row: one seed, or the row's only run in a sweep without seeds.

    Attributes
    ----------
    seed : int or None
        ``config.seed`` of the run (``ROOT/<row>/seed_<k>``); None for ``ROOT/<row>`` itself.
    status : str
        ``done``, ``failed``, ``incomplete``, ``submitted`` or ``not run``.
    config : dict
        The run's ``config.json`` (``{}`` before it started).
    results : dict
        ``results.json`` (``{}`` until the run finished).
    """

    seed: int | None
    status: str
    config: dict
    results: dict

    @property
    def name(self) -> str:
        """``seed_<k>``, or ``""`` for a run without a seed directory."""
        return "" if self.seed is None else f"seed_{self.seed}"


@dataclasses.dataclass(frozen=True)
class RowReport:
    """One row of the report.

    Attributes
    ----------
    row : str
        Row name.
    group : str
        Table 2 group (``A``-``E``), or the row name for ``base``/``big``, or ``""`` outside Table 2.
    status : str
        ``done`` (every run finished), ``partial`` (some seeds finished, others pending), else the runs'
        common status: ``failed``, ``incomplete``, ``submitted``, ``not run`` (``pending`` when the
        unfinished seeds differ).
    config : dict
        The row's config (``config.json`` of its first run that has one, else the sweep record's copy;
        ``{}`` when neither).
    results : dict
        ``results.json`` of the row's single run (``{}`` until it finished); with seeds, that of its
        first finished seed (the figures shared by all seeds, such as ``params``). Use :attr:`finished`
        and :func:`aggregate` for the figures that vary with the seed.
    runs : tuple[SeedRun, ...]
        Every run of the row, in seed order (one, with seed None, in a sweep without seeds).
    """

    row: str
    group: str
    status: str
    config: dict
    results: dict
    runs: tuple[SeedRun, ...] = ()

    @property
    def finished(self) -> list[SeedRun]:
        """The runs that wrote ``results.json``."""
        return [run for run in self.runs if run.status == "done"]

    @property
    def pending(self) -> list[SeedRun]:
        """The runs that have not finished (failed, running, queued or never started)."""
        return [run for run in self.runs if run.status != "done"]

    @property
    def seeded(self) -> bool:
        """Whether the row's runs are seed directories (a sweep with seeds)."""
        return any(run.seed is not None for run in self.runs)

    @property
    def paper(self) -> dict:
        """The paper's figures for the row (``dev_ppl``, ``dev_bleu``, ``params_millions``)."""
        return self.config.get("paper") or {}


def group_of(row: str) -> str:
    """Table 2 group of a row name.

    Parameters
    ----------
    row : str
        Row name, e.g. ``"C4"``.

    Returns
    -------
    str
        ``"A"``..``"E"`` for ``A1``..``E``; the name itself for ``base`` and ``big``; ``""`` otherwise.
    """
    match = re.fullmatch(r"([A-E])\d*", row)
    if match:
        return match.group(1)
    return row if row in ("base", "big") else ""


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def _row_status(row_dir: str, results: dict) -> str:
    if results:
        return "done"
    launch = _read_json(os.path.join(row_dir, run_files.LAUNCH_FILE))
    if launch.get("returncode") not in (None, 0):
        return "failed"
    if os.path.isfile(os.path.join(row_dir, run_files.CONFIG_FILE)):
        return "incomplete"
    if launch.get("job_id"):
        return "submitted"
    return "not run"


def _seeds_on_disk(row_dir: str) -> list[int]:
    if not os.path.isdir(row_dir):
        return []
    found = (SEED_DIR_PATTERN.match(name) for name in os.listdir(row_dir))
    return sorted(int(match.group(1)) for match in found
                  if match and os.path.isdir(os.path.join(row_dir, match.group(0))))


def _read_run(run_dir: str, seed: int | None) -> SeedRun:
    results = _read_json(os.path.join(run_dir, run_files.RESULTS_FILE))
    config = _read_json(os.path.join(run_dir, run_files.CONFIG_FILE))
    return SeedRun(seed, _row_status(run_dir, results), config, results)


def _combined_status(runs: Sequence[SeedRun]) -> str:
    statuses = {run.status for run in runs}
    if statuses == {"done"}:
        return "done"
    if "done" in statuses:
        return "partial"
    return statuses.pop() if len(statuses) == 1 else "pending"


def _row_report(root: str, name: str, record: dict) -> RowReport:
    row_dir = os.path.join(root, name)
    recorded_seeds = record.get("seeds")
    seeds = sorted(set(recorded_seeds or []) | set(_seeds_on_disk(row_dir)))
    if recorded_seeds is None and not seeds:
        runs = (_read_run(row_dir, None),)
    else:
        runs = tuple(_read_run(os.path.join(row_dir, f"seed_{seed}"), seed) for seed in seeds)
    configs = [run.config for run in runs if run.config]
    config = configs[0] if configs else record.get("row_configs", {}).get(name, {})
    finished = [run.results for run in runs if run.status == "done"]
    status = _combined_status(runs) if runs else "not run"
    return RowReport(name, group_of(name), status, config, finished[0] if finished else {}, runs)


def read_sweep_rows(root: str, *, all_rows: bool = False) -> tuple[dict, list[RowReport]]:
    """Read the sweep record and every row's config and results.

    Parameters
    ----------
    root : str
        Sweep root.
    all_rows : bool
        Report every row of the sweep, not only those launched.

    Returns
    -------
    tuple[dict, list[RowReport]]
        The sweep record (``{}`` without ``sweep.json``) and the rows in order.

    Notes
    -----
    A row's runs are ``ROOT/<row>/seed_<k>`` for the seeds in ``sweep.json`` (and any other seed
    directory found), else ``ROOT/<row>`` itself. Raises ``FileNotFoundError`` when ``root`` does not
    exist or holds neither ``sweep.json`` nor row directories with a ``config.json``.
    """
    if not os.path.isdir(root):
        raise FileNotFoundError(f"sweep root {root} does not exist.")
    record = _read_json(os.path.join(root, run_files.SWEEP_FILE))
    if record:
        names = record["all_rows"] if all_rows else record["rows"]
    else:
        def is_row(name: str) -> bool:
            row_dir = os.path.join(root, name)
            return os.path.isfile(os.path.join(row_dir, run_files.CONFIG_FILE)) or any(
                os.path.isfile(os.path.join(row_dir, f"seed_{seed}", run_files.CONFIG_FILE))
                for seed in _seeds_on_disk(row_dir))

        names = sorted(name for name in os.listdir(root) if is_row(name))
        if not names:
            raise FileNotFoundError(
                f"{root} holds no {run_files.SWEEP_FILE} and no <row>/config.json: not a sweep root "
                f"(launch one with python -m launch.sweep --root={root} ...)."
            )
    return record, [_row_report(root, name, record) for name in names]


def _number(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return f"{value:.{digits}f}"


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


def _reference(rows: Sequence[RowReport]) -> RowReport | None:
    with_config = [row for row in rows if row.config]
    base = [row for row in with_config if row.row == "base"]
    return (base or with_config or [None])[0]


def hparam_cells(row: RowReport, reference: RowReport | None) -> list[str]:
    """The hyperparameter cells of a row, blank where equal to the reference row (as in the paper).

    Parameters
    ----------
    row : RowReport
        The row.
    reference : RowReport or None
        The row shown in full (``base`` when present).

    Returns
    -------
    list[str]
        One cell per :data:`HPARAM_COLUMNS` entry.
    """
    cells = []
    for _, field in HPARAM_COLUMNS:
        value = row.config.get(field)
        same = reference is not None and row is not reference and reference.config.get(field) == value
        cells.append("" if same else _hparam_text(field, value))
    return cells


def other_changes(row: RowReport, record: dict) -> str:
    """The row's own settings outside the Table 2 columns (e.g. ``seed=1``), with their actual values.

    Parameters
    ----------
    row : RowReport
        The row.
    record : dict
        The sweep record (its ``row_overrides``); empty without ``sweep.json``.

    Returns
    -------
    str
        ``"key=value, ..."``; ``""`` when the row changes only Table 2's hyperparameters.
    """
    shown = {field for _, field in HPARAM_COLUMNS} | {"name", "paper"}
    own = record.get("row_overrides", {}).get(row.row, {})
    return ", ".join(f"{key}={row.config.get(key, value)}" for key, value in own.items() if key not in shown)


def _params_millions(row: RowReport) -> str:
    ours = row.results.get("params")
    ours_text = _number(None if ours is None else ours / 1e6, 1)
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


def _mean_std(mean: float | None, std: float | None, digits: int, scale: float = 1.0, sign: bool = False,
              suffix: str = "") -> str:
    if mean is None:
        return ""
    text = f"{mean * scale:{'+' if sign else ''}.{digits}f}"
    if std is not None:
        text += f" ± {std * scale:.{digits}f}"
    return text + suffix


def _shared_or_mean(values: Sequence[Any]) -> Any:
    """The value all finished seeds share (e.g. ``params``), else their mean; None when none."""
    known = [value for value in values if value is not None]
    if not known:
        return None
    if all(value == known[0] for value in known):
        return known[0]
    return statistics.fmean(known) if all(isinstance(value, (int, float)) for value in known) else None


def _steps_cell(row: RowReport) -> str:
    steps = sorted({run.results.get("step") for run in row.finished} - {None})
    if not steps:
        return ""
    return str(steps[0]) if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"


def seeds_cell(row: RowReport, stats: RowStats) -> str:
    """The seeds column: finished seeds, and how many are pending (``"2 (+1 pending)"``).

    Parameters
    ----------
    row : RowReport
        The row.
    stats : RowStats
        Its statistics.

    Returns
    -------
    str
        The finished count, with the pending ones of a sweep with seeds.
    """
    pending = f" (+{stats.pending} pending)" if stats.pending and row.seeded else ""
    return f"{stats.seeds}{pending}"


def status_cell(row: RowReport) -> str:
    """The status column: the row's status, and which seeds are pending and why.

    Parameters
    ----------
    row : RowReport
        The row.

    Returns
    -------
    str
        E.g. ``"done"``, ``"failed"``, ``"partial (seed_2 failed)"``.
    """
    if not row.seeded or not row.pending or row.status not in ("partial", "pending"):
        return row.status
    return f"{row.status} (" + ", ".join(f"{run.name} {run.status}" for run in row.pending) + ")"


def verdict_cell(stats: RowStats) -> str:
    """The verdict column: the verdict, marked when it rests on one seed's sign."""
    return stats.verdict + (" (sign only)" if stats.verdict_basis.startswith("sign only") else "")


def verdict_notes(rows: Sequence[RowReport], stats: dict[str, RowStats]) -> list[str]:
    """The report's notes on seeds and verdicts: the rule, and how many rows got each verdict.

    Parameters
    ----------
    rows : Sequence[RowReport]
        Rows in order.
    stats : dict[str, RowStats]
        :func:`aggregate`'s result.

    Returns
    -------
    list[str]
        Paragraphs of Markdown.
    """
    seeded = any(row.seeded for row in rows)
    counts: dict[str, int] = {}
    for row in rows:
        if stats[row.row].verdict:
            counts[stats[row.row].verdict] = counts.get(stats[row.row].verdict, 0) + 1
    notes = [
        ("Seeds: dev PPL and BLEU are the mean ± sample standard deviation (ddof=1) over each row's finished "
         "seeds (no ± with one seed). " if seeded else "One run per row (no seeds): no spread to show. ")
        + "ΔPPL vs base: the relative change of dev PPL against base paired by seed (row seed k against "
        "base seed k), mean ± standard deviation over the paired seeds.",
        f"Verdict, on dev PPL against the paper's direction: with two or more paired seeds the change is "
        f"beyond the seeds' spread when |mean| > {SPREAD_FACTOR:g} x its standard error (std / √n; with 3 "
        "seeds a t above 2 on 2 degrees of freedom, two-sided p ≈ 0.18: a loose bar); then `reproduced` "
        "(the paper's sign) or `opposite`, else `within noise`. Where the paper shows no difference (E: "
        "4.92 against 4.92) `reproduced` means within noise and `differs` beyond it. With one seed the "
        "verdict is the sign alone, marked (sign only), and E is `undecided`; `pending`: no seed "
        "finished in both the row and base.",
    ]
    if counts:
        notes.append("Verdicts: " + ", ".join(f"{count} {name}" for name, count in counts.items()) + ".")
    return notes


def markdown_table(record: dict, rows: Sequence[RowReport]) -> str:
    """The report as Markdown: Table 2's columns, ours (mean ± std over seeds) beside the paper's.

    Parameters
    ----------
    record : dict
        The sweep record (may be empty).
    rows : Sequence[RowReport]
        Rows in order.

    Returns
    -------
    str
        A title, notes, and the table.
    """
    reference = _reference(rows)
    stats = aggregate(rows)
    header = ["", "row", *[name for name, _ in HPARAM_COLUMNS], "other changes", "seeds", "steps",
              "params ×10⁶ (ours / paper)", "dev PPL", "paper PPL", "ΔPPL vs base", "paper ΔPPL",
              "BLEU", "paper BLEU", "verdict", "wall", "status"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    previous_group = None
    for row in rows:
        starts_group = len(row.group) == 1 and row.group != previous_group  # A-E, as in the paper.
        group_cell = f"({row.group})" if starts_group else ""
        previous_group = row.group
        row_stats = stats[row.row]
        wall = _mean([run.results["wall_s"] for run in row.finished if run.results.get("wall_s") is not None])
        cells = [group_cell, row.row, *hparam_cells(row, reference), other_changes(row, record),
                 seeds_cell(row, row_stats), _steps_cell(row), _params_millions(row),
                 _mean_std(row_stats.dev_ppl_mean, row_stats.dev_ppl_std, 2),
                 _number(row.paper.get("dev_ppl"), 2),
                 _mean_std(row_stats.change_mean, row_stats.change_std, 1, 100, sign=True, suffix="%"),
                 _mean_std(row_stats.paper_change, None, 1, 100, sign=True, suffix="%"),
                 _mean_std(row_stats.dev_bleu_mean, row_stats.dev_bleu_std, 1),
                 _number(row.paper.get("dev_bleu"), 1), verdict_cell(row_stats), _duration(wall),
                 status_cell(row)]
        lines.append("| " + " | ".join(cells) + " |")
    title = f"# {record.get('report_name', 'sweep')}: {record.get('config_file', '(no sweep.json)')}"
    dataset = reference.config.get("dataset", "?") if reference else "?"
    notes = [
        title,
        f"Common overrides: {' '.join('--config.' + o for o in record.get('overrides', [])) or 'none'}. "
        f"Dataset: {dataset}. Hyperparameters are shown in full for {reference.row if reference else '—'} "
        "and where they differ for the other rows (as in the paper).",
        "dev PPL: perplexity per target token of our vocabulary on the run's dev split (the whole split with "
        "the parameters BLEU used when the run has it, else the best evaluation of a run that stopped early, "
        "else the last evaluation); the paper's is per "
        "wordpiece on newstest2013 (comparable only on WMT14 with a 37k vocabulary). BLEU: sacrebleu, beam "
        "search on the whole dev split when training ended (config.final_bleu), else on the dev sentences "
        "sampled at the last evaluation. wall: per seed (the mean over finished seeds).",
        *verdict_notes(rows, stats),
    ]
    shadowed = overridden_row_settings(record)
    if shadowed:
        notes.append("Common overrides replace these rows' own settings (the rows then differ from base "
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
                  "paired_seeds", "paper_dev_ppl_change_pct", "verdict_basis")
RESULT_FIELDS = ("step", "params", "eval_ppl", "bleu", "dev_bleu", "eval_loss", "train_loss", "wall_s",
                 "train_tokens_per_s")
CSV_FIELDS = (*SUMMARY_FIELDS, *[field for _, field in HPARAM_COLUMNS], "other_changes", *RESULT_FIELDS[:2],
              "paper_params_millions", "eval_ppl", "paper_dev_ppl", "bleu", "dev_bleu", "paper_dev_bleu",
              "eval_loss", "train_loss", "wall_s", "train_tokens_per_s")


def csv_records(record: dict, rows: Sequence[RowReport]) -> list[dict]:
    """The report as flat records (every hyperparameter in full), one per row.

    Parameters
    ----------
    record : dict
        The sweep record (may be empty).
    rows : Sequence[RowReport]
        Rows in order.

    Returns
    -------
    list[dict]
        Keys :data:`CSV_FIELDS`; ``None`` where a value is unknown. The seed summary comes first
        (:class:`RowStats`; changes in percent); then the results' own fields (``step`` ..
        ``train_tokens_per_s``), each the value every finished seed shares, else their mean.
    """
    stats = aggregate(rows)
    records = []
    for row in rows:
        row_stats = stats[row.row]
        percent = (lambda value: None if value is None else 100 * value)
        flat = {"group": row.group, "row": row.row, "seeds": row_stats.seeds,
                "seeds_pending": row_stats.pending, "status": row.status,
                "dev_ppl_mean": row_stats.dev_ppl_mean, "dev_ppl_std": row_stats.dev_ppl_std,
                "dev_bleu_mean": row_stats.dev_bleu_mean, "dev_bleu_std": row_stats.dev_bleu_std,
                "dev_ppl_change_pct_mean": percent(row_stats.change_mean),
                "dev_ppl_change_pct_std": percent(row_stats.change_std),
                "paired_seeds": len(row_stats.changes) if row.row != "base" else None,
                "paper_dev_ppl_change_pct": percent(row_stats.paper_change),
                "verdict": row_stats.verdict, "verdict_basis": row_stats.verdict_basis}
        flat.update({field: row.config.get(field) for _, field in HPARAM_COLUMNS})
        flat["other_changes"] = other_changes(row, record)
        flat.update({key: _shared_or_mean([run.results.get(key) for run in row.finished])
                     for key in RESULT_FIELDS})
        flat.update(paper_params_millions=row.paper.get("params_millions"),
                    paper_dev_ppl=row.paper.get("dev_ppl"), paper_dev_bleu=row.paper.get("dev_bleu"))
        records.append(flat)
    return records


def _panels(rows: Sequence[RowReport]) -> list[tuple[str, list[RowReport]]]:
    """Group rows for plotting: one panel per group, each led by the base row (the paper's reference)."""
    base = [row for row in rows if row.row == "base"]
    groups: dict[str, list[RowReport]] = {}
    for row in rows:
        if row.row != "base":
            groups.setdefault(row.group or "rows", []).append(row)
    if not groups:
        return [("base", base)] if base else []
    return [(name, base + members) for name, members in groups.items()]


def reported_bleu(results: dict) -> float | None:
    """A row's BLEU for the report: of the whole dev split when training ended, else the sampled one.

    Parameters
    ----------
    results : dict
        The row's ``results.json``.

    Returns
    -------
    float or None
        ``dev_bleu`` (beam search on the whole dev split, ``config.final_bleu``) when the run has it,
        else ``bleu`` (the ``num_bleu_examples`` dev sentences decoded at the last evaluation), else None.
    """
    full = results.get("dev_bleu")
    return full if full is not None else results.get("bleu")


def reported_ppl(results: dict) -> float | None:
    """A run's dev perplexity for the report: of the parameters whose BLEU is reported.

    Parameters
    ----------
    results : dict
        The run's ``results.json``.

    Returns
    -------
    float or None
        ``dev_ppl`` (the whole dev split, with the parameters of ``dev_bleu``) when the run has it; else
        ``best_eval_ppl`` when the run stopped early (its best checkpoint is the model kept); else
        ``eval_ppl`` (the last evaluation); None when none is known.
    """
    for key in ("dev_ppl",) + (("best_eval_ppl",) if results.get("stop_reason") == STOPPED_EARLY else ()):
        if results.get(key) is not None:
            return results[key]
    return results.get("eval_ppl")


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof=1); None for fewer than two values."""
    return statistics.stdev(values) if len(values) >= 2 else None


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


@dataclasses.dataclass(frozen=True)
class RowStats:
    """A row's figures over its finished seeds, and its verdict against the paper.

    Attributes
    ----------
    row : str
        Row name.
    seeds : int
        Finished runs (seeds) of the row.
    pending : int
        Runs not finished (failed, running, queued or never started).
    dev_ppl : tuple[float, ...]
        :func:`reported_ppl` of each finished seed that has one, in seed order.
    dev_ppl_mean, dev_ppl_std : float or None
        Their mean and sample standard deviation (ddof=1; None with fewer than two).
    dev_bleu_mean, dev_bleu_std : float or None
        The same for :func:`reported_bleu`.
    changes : tuple[float, ...]
        Relative change of dev perplexity against base, paired by seed: ``ppl(row, k) / ppl(base, k) - 1``
        for every seed k finished in both (a fraction; empty for base itself).
    change_mean, change_std, change_se : float or None
        Mean, sample standard deviation (ddof=1) and standard error ``std / sqrt(n)`` of ``changes``.
    paper_change : float or None
        The paper's relative change of dev perplexity against base (None without its figures).
    verdict : str
        ``reproduced``, ``opposite``, ``within noise``, ``differs``, ``undecided``, ``pending`` or ``""``
        (base, or no paper figures); see the module docstring.
    verdict_basis : str
        How the verdict was reached, e.g. ``"|mean| > 2 x SE, 3 paired seeds"`` or ``"sign only, 1 seed"``.
    """

    row: str
    seeds: int
    pending: int
    dev_ppl: tuple[float, ...]
    dev_ppl_mean: float | None
    dev_ppl_std: float | None
    dev_bleu_mean: float | None
    dev_bleu_std: float | None
    changes: tuple[float, ...]
    change_mean: float | None
    change_std: float | None
    change_se: float | None
    paper_change: float | None
    verdict: str
    verdict_basis: str


def verdict(changes: Sequence[float], paper_direction: int) -> tuple[str, str]:
    """Judge paired changes of dev perplexity against the paper's direction.

    Parameters
    ----------
    changes : Sequence[float]
        Relative changes against base, one per paired seed.
    paper_direction : int
        Sign of the paper's change: 1 (perplexity up), -1 (down), 0 (no difference, row E).

    Returns
    -------
    tuple[str, str]
        The verdict and its basis (module docstring): with two or more seeds the change is beyond the
        spread when ``|mean| > SPREAD_FACTOR x standard error`` (a nonzero mean with zero spread counts
        as beyond it); with one seed only its sign counts.
    """
    count = len(changes)
    if count == 0:
        return "pending", "no seed finished in both the row and base"
    mean = statistics.fmean(changes)
    if count == 1:
        if paper_direction == 0:
            return "undecided", "1 seed: no spread to compare with"
        return ("reproduced" if _sign(mean) == paper_direction else "opposite"), "sign only, 1 seed"
    se = statistics.stdev(changes) / math.sqrt(count)
    beyond = abs(mean) > SPREAD_FACTOR * se if se > 0 else mean != 0
    basis = f"|mean| {'>' if beyond else '<='} {SPREAD_FACTOR:g} x SE, {count} paired seeds"
    if paper_direction == 0:
        return ("differs" if beyond else "reproduced"), basis
    if not beyond:
        return "within noise", basis
    return ("reproduced" if _sign(mean) == paper_direction else "opposite"), basis


def _paired_ppl(row: RowReport) -> dict[int | None, float]:
    return {run.seed: reported_ppl(run.results) for run in row.finished if reported_ppl(run.results) is not None}


def aggregate(rows: Sequence[RowReport]) -> dict[str, RowStats]:
    """Aggregate every row's finished seeds and judge it against base and the paper.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The rows (``base`` among them for the paired changes and verdicts).

    Returns
    -------
    dict[str, RowStats]
        Row name -> its statistics (see the module docstring for the rules).
    """
    base = next((row for row in rows if row.row == "base"), None)
    base_ppl = _paired_ppl(base) if base is not None else {}
    paper_base = base.paper.get("dev_ppl") if base is not None else None
    stats = {}
    for row in rows:
        ppl = _paired_ppl(row)
        bleu = [value for value in (reported_bleu(run.results) for run in row.finished) if value is not None]
        changes = [] if row is base else [ppl[seed] / base_ppl[seed] - 1 for seed in ppl
                                          if seed in base_ppl and base_ppl[seed] > 0]
        paper_row = row.paper.get("dev_ppl")
        paper_change = (None if row is base or paper_row is None or not paper_base
                        else paper_row / paper_base - 1)
        if row is base or base is None:
            judged = ("", "reference row" if row is base else "no base row")
        elif paper_change is None:
            judged = ("", "no paper figures")
        else:
            judged = verdict(changes, _sign(paper_change))
        std = _std(changes)
        stats[row.row] = RowStats(
            row=row.row, seeds=len(row.finished), pending=len(row.pending), dev_ppl=tuple(ppl.values()),
            dev_ppl_mean=_mean(list(ppl.values())), dev_ppl_std=_std(list(ppl.values())),
            dev_bleu_mean=_mean(bleu), dev_bleu_std=_std(bleu), changes=tuple(changes),
            change_mean=_mean(changes), change_std=std,
            change_se=None if std is None else std / math.sqrt(len(changes)),
            paper_change=paper_change, verdict=judged[0], verdict_basis=judged[1])
    return stats


def _plot_metric(axis: Any, members: Sequence[RowReport], stats: dict[str, RowStats], ours_key: str,
                 paper_key: str, label: str) -> None:
    positions = list(range(len(members)))
    if ours_key == "bleu":
        pairs = [(stats[row.row].dev_bleu_mean, stats[row.row].dev_bleu_std) for row in members]
    else:
        pairs = [(stats[row.row].dev_ppl_mean, stats[row.row].dev_ppl_std) for row in members]
    ours = [mean for mean, _ in pairs]
    errors = [0.0 if std is None else std for _, std in pairs]
    axis.errorbar(positions, [math.nan if v is None else v for v in ours], yerr=errors, fmt="o-",
                  color="tab:blue", capsize=3)
    axis.set_ylabel(f"ours: {label}" + (" (mean ± std)" if any(errors) else ""), color="tab:blue")
    if all(value is None for value in ours):
        axis.set_yticks([])
        axis.text(0.5, 0.5, f"no {label} of ours", transform=axis.transAxes, ha="center", color="tab:blue")

    def tick(row: RowReport) -> str:
        if row.status == "partial":
            return f"{row.row}\n({len(row.finished)}/{len(row.runs)} seeds)"
        return row.row if row.status == "done" else f"{row.row}\n({row.status})"

    axis.set_xticks(positions, [tick(row) for row in members], fontsize=8)
    paper = [row.paper.get(paper_key) for row in members]
    if any(value is not None for value in paper):
        twin = axis.twinx()
        twin.plot(positions, [math.nan if v is None else v for v in paper], "s--", color="tab:orange",
                  alpha=0.8)
        twin.set_ylabel(f"paper: {label}", color="tab:orange")
        axis.set_zorder(twin.get_zorder() + 1)  # Ours drawn over the paper's where they coincide.
        axis.patch.set_visible(False)


def plot_report(rows: Sequence[RowReport], path: str, title: str) -> None:
    """Plot our dev perplexity and BLEU beside the paper's, one panel per Table 2 group.

    Parameters
    ----------
    rows : Sequence[RowReport]
        Rows in order.
    path : str
        PNG file to write.
    title : str
        Figure title.

    Notes
    -----
    Ours on the left axis (blue; the mean over finished seeds with error bars of one sample standard
    deviation), the paper's on the right axis (orange, dashed): a scaled-down run cannot match the
    paper's values but should follow its trends within each group. The BLEU panels are drawn only when
    some row has a BLEU score (ours or the paper's).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(rows)
    stats = aggregate(rows)
    metrics = [("eval_ppl", "dev_ppl", "dev PPL")]
    if any(stats[row.row].dev_bleu_mean is not None or row.paper.get("dev_bleu") is not None for row in rows):
        metrics.append(("bleu", "dev_bleu", "BLEU"))
    figure, axes = plt.subplots(len(metrics), max(len(panels), 1), squeeze=False,
                                figsize=(3.6 * max(len(panels), 1), 3.2 * len(metrics)))
    for column, (name, members) in enumerate(panels):
        for line, (ours_key, paper_key, label) in enumerate(metrics):
            _plot_metric(axes[line][column], members, stats, ours_key, paper_key, label)
            axes[line][column].set_title(f"({name})" if len(name) == 1 else name)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_report(root: str, *, all_rows: bool = False) -> list[str]:
    """Write ``ROOT/<name>.md``, ``.csv`` and ``.png`` for the sweep in ``root``.

    Parameters
    ----------
    root : str
        Sweep root.
    all_rows : bool
        Include rows of the sweep that were never launched.

    Returns
    -------
    list[str]
        The three paths written.
    """
    record, rows = read_sweep_rows(root, all_rows=all_rows)
    name = record.get("report_name", "report")
    stem = os.path.join(root, name)
    with open(stem + ".md", "w", encoding="utf-8") as file:
        file.write(markdown_table(record, rows))
    with open(stem + ".csv", "w", encoding="utf-8", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(csv_records(record, rows))
    plot_report(rows, stem + ".png", f"{name}: ours vs the paper ({root})")
    return [stem + ".md", stem + ".csv", stem + ".png"]

