"""Tabulate a sweep in the layout of the paper's Table 2, beside the paper's figures.

:func:`write_report` (the command ``python -m attention_jax.report ROOT [--all_rows]``) reads
``ROOT/sweep.json`` (the row order, written by ``launch.sweep``), and for each row
``ROOT/<row>/results.json`` (our dev perplexity, BLEU, parameters, steps, wall time) and
``ROOT/<row>/config.json`` (the row's hyperparameters and ``config.paper``, the paper's figures). It
writes ``ROOT/<name>.md``, ``ROOT/<name>.csv`` and ``ROOT/<name>.png``, where ``<name>`` is the sweep
file's stem (``table2`` for ``configs/table2.py``). Rows that have not finished are listed with their
status (``failed``, ``incomplete``, ``submitted``, ``not run``) and no figures.

Without ``sweep.json`` (work directories made by hand), every subdirectory holding a ``config.json``
is a row, in name order. Perplexities are per token of each run's own vocabulary on its own dev split:
comparable with the paper's only for runs on WMT14 EN-DE with the paper's 37k-token vocabulary.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import re
from typing import Any, Sequence

from attention_jax import run_files

# (column header as in the paper, config field), Table 2's order.
HPARAM_COLUMNS = (("N", "num_layers"), ("d_model", "d_model"), ("d_ff", "d_ff"), ("h", "num_heads"),
                  ("d_k", "key_dim"), ("d_v", "value_dim"), ("P_drop", "dropout_rate"),
                  ("eps_ls", "label_smoothing"), ("PE", "positional_encoding"))
PE_ABBREVIATIONS = {"sinusoidal": "sinusoid", "learned": "learned"}


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
        ``done``, ``failed``, ``incomplete``, ``submitted`` or ``not run``.
    config : dict
        The row's config (``config.json``, else the sweep record's copy; ``{}`` when neither).
    results : dict
        ``results.json`` (``{}`` until the row finished).
    """

    row: str
    group: str
    status: str
    config: dict
    results: dict

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
    Raises ``FileNotFoundError`` when ``root`` does not exist or holds neither ``sweep.json`` nor row
    directories with a ``config.json``.
    """
    if not os.path.isdir(root):
        raise FileNotFoundError(f"sweep root {root} does not exist.")
    record = _read_json(os.path.join(root, run_files.SWEEP_FILE))
    if record:
        names = record["all_rows"] if all_rows else record["rows"]
    else:
        names = sorted(name for name in os.listdir(root)
                       if os.path.isfile(os.path.join(root, name, run_files.CONFIG_FILE)))
        if not names:
            raise FileNotFoundError(
                f"{root} holds no {run_files.SWEEP_FILE} and no <row>/config.json: not a sweep root "
                f"(launch one with python -m launch.sweep --root={root} ...)."
            )
    rows = []
    for name in names:
        row_dir = os.path.join(root, name)
        saved = _read_json(os.path.join(row_dir, run_files.CONFIG_FILE))
        config = saved or record.get("row_configs", {}).get(name, {})
        results = _read_json(os.path.join(row_dir, run_files.RESULTS_FILE))
        rows.append(RowReport(name, group_of(name), _row_status(row_dir, results), config, results))
    return record, rows


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


def markdown_table(record: dict, rows: Sequence[RowReport]) -> str:
    """The report as Markdown: Table 2's columns, ours beside the paper's.

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
    header = ["", "row", *[name for name, _ in HPARAM_COLUMNS], "other changes", "steps",
              "params ×10⁶ (ours / paper)",
              "dev PPL", "paper PPL", "BLEU", "paper BLEU", "wall", "status"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    previous_group = None
    for row in rows:
        starts_group = len(row.group) == 1 and row.group != previous_group  # A-E, as in the paper.
        group_cell = f"({row.group})" if starts_group else ""
        previous_group = row.group
        cells = [group_cell, row.row, *hparam_cells(row, reference), other_changes(row, record),
                 str(row.results.get("step", "")),
                 _params_millions(row), _number(row.results.get("eval_ppl"), 2),
                 _number(row.paper.get("dev_ppl"), 2), _number(reported_bleu(row.results), 1),
                 _number(row.paper.get("dev_bleu"), 1), _duration(row.results.get("wall_s")), row.status]
        lines.append("| " + " | ".join(cells) + " |")
    title = f"# {record.get('report_name', 'sweep')}: {record.get('config_file', '(no sweep.json)')}"
    dataset = reference.config.get("dataset", "?") if reference else "?"
    notes = [
        title, "",
        f"Common overrides: {' '.join('--config.' + o for o in record.get('overrides', [])) or 'none'}. "
        f"Dataset: {dataset}. Hyperparameters are shown in full for {reference.row if reference else '—'} "
        "and where they differ for the other rows (as in the paper).",
        "dev PPL: perplexity per target token of our vocabulary on the run's dev split; the paper's is per "
        "wordpiece on newstest2013 (comparable only on WMT14 with a 37k vocabulary). BLEU: sacrebleu, beam "
        "search on the whole dev split when training ended (config.final_bleu), else on the dev sentences "
        "sampled at the last evaluation.", "",
    ]
    shadowed = overridden_row_settings(record)
    if shadowed:
        notes.insert(-1, "Common overrides replace these rows' own settings (the rows then differ from base "
                     "less than in the paper): " + "; ".join(shadowed) + ".")
    done = sum(row.status == "done" for row in rows)
    return "\n".join(notes + lines) + f"\n\n{done} of {len(rows)} rows finished.\n"


CSV_FIELDS = ("group", "row", "status", *[field for _, field in HPARAM_COLUMNS], "other_changes", "step",
              "params",
              "paper_params_millions", "eval_ppl", "paper_dev_ppl", "bleu", "dev_bleu", "paper_dev_bleu", "eval_loss",
              "train_loss", "wall_s", "train_tokens_per_s")


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
        Keys :data:`CSV_FIELDS`; ``None`` where a value is unknown.
    """
    records = []
    for row in rows:
        flat = {"group": row.group, "row": row.row, "status": row.status}
        flat.update({field: row.config.get(field) for _, field in HPARAM_COLUMNS})
        flat["other_changes"] = other_changes(row, record)
        flat.update({key: row.results.get(key) for key in ("step", "params", "eval_ppl", "bleu", "dev_bleu",
                                                           "eval_loss", "train_loss", "wall_s",
                                                           "train_tokens_per_s")})
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


def _plot_metric(axis: Any, members: Sequence[RowReport], ours_key: str, paper_key: str, label: str) -> None:
    positions = list(range(len(members)))
    ours = [reported_bleu(row.results) if ours_key == "bleu" else row.results.get(ours_key) for row in members]
    paper = [row.paper.get(paper_key) for row in members]
    axis.plot(positions, [math.nan if v is None else v for v in ours], "o-", color="tab:blue")
    axis.set_ylabel(f"ours: {label}", color="tab:blue")
    if all(value is None for value in ours):
        axis.set_yticks([])
        axis.text(0.5, 0.5, f"no {label} of ours", transform=axis.transAxes, ha="center", color="tab:blue")
    axis.set_xticks(positions, [row.row if row.status == "done" else f"{row.row}\n({row.status})"
                                for row in members], fontsize=8)
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
    Ours on the left axis (blue), the paper's on the right axis (orange, dashed): a scaled-down run
    cannot match the paper's values but should follow its trends within each group. The BLEU panels
    are drawn only when some row has a BLEU score (ours or the paper's).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(rows)
    metrics = [("eval_ppl", "dev_ppl", "dev PPL")]
    if any(reported_bleu(row.results) is not None or row.paper.get("dev_bleu") is not None for row in rows):
        metrics.append(("bleu", "dev_bleu", "BLEU"))
    figure, axes = plt.subplots(len(metrics), max(len(panels), 1), squeeze=False,
                                figsize=(3.6 * max(len(panels), 1), 3.2 * len(metrics)))
    for column, (name, members) in enumerate(panels):
        for line, (ours_key, paper_key, label) in enumerate(metrics):
            _plot_metric(axes[line][column], members, ours_key, paper_key, label)
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

