"""Test BLEU and training cost beside the paper's (Table 3), declared by ``configs/table3.py``'s ``get_report()``.

Model FLOPs (3 x forward matmuls per token times tokens) and the paper's estimate (hours x GPUs x FLOP/s).
"""

from __future__ import annotations

import os
from typing import Any

from attention_jax.experiment import schema, sections
from attention_jax.foundation import run_files
from attention_jax.models import flops
from attention_jax.reports.sweep_rows import ReportContext, read_sweep_rows
from attention_jax.reports.writers import markdown_table, write_report_files

CSV_FIELDS = ("row", "status", "dataset", "steps", "train_target_tokens", "dev_bleu", "test_bleu",
              "paper_test_bleu", "train_flops", "schedule_flops", "paper_train_flops",
              "paper_estimate_flops", "our_estimate_flops", "wall_s", "devices")


def _scientific(value: Any) -> str:
    return "" if value is None else f"{float(value):.2e}"


def _number(value: Any, digits: int = 1) -> str:
    return "" if value is None else f"{float(value):.{digits}f}"


def _table3_records(root: str, *, sustained_tflops: float | None = None) -> list[dict[str, Any]]:
    """One record per row: our BLEU and FLOPs, the paper's BLEU and cost (fields of :data:`CSV_FIELDS`)."""
    _, rows = read_sweep_rows(root)
    records = []
    for row in rows:
        experiment = (sections.build_experiment(schema.with_old_run_defaults(row.config),
                                                os.path.join(root, row.row, run_files.CONFIG_FILE))
                      if row.config else None)
        results, paper = row.results, row.paper or {}
        tokens = results.get("train_target_tokens")
        train_flops = results.get("train_flops")
        if train_flops is None and tokens is not None and experiment is not None:  # Runs from before the field.
            train_flops = experiment.training_flops(tokens)
        schedule = None
        if experiment is not None:
            schedule = experiment.training_flops(experiment.run.num_train_steps * experiment.data.tokens_per_batch)
        paper_estimate = None
        if paper.get("train_hours") is not None:
            paper_estimate = flops.paper_training_flops(paper["train_hours"], paper["num_gpus"],
                                                        paper["gpu_tflops"])
        ours_estimate = None
        if sustained_tflops and results.get("wall_s") is not None:
            ours_estimate = flops.paper_training_flops(results["wall_s"] / 3600, results.get("devices", 1),
                                                       sustained_tflops)
        records.append(dict(
            row=row.row, status=row.status, dataset=(row.config or {}).get("dataset"), steps=results.get("step"),
            train_target_tokens=tokens, dev_bleu=results.get("dev_bleu"), test_bleu=results.get("test_bleu"),
            paper_test_bleu=paper.get("test_bleu"), train_flops=train_flops, schedule_flops=schedule,
            paper_train_flops=paper.get("train_flops"), paper_estimate_flops=paper_estimate,
            our_estimate_flops=ours_estimate, wall_s=results.get("wall_s"), devices=results.get("devices")))
    return records


def _markdown_table3(root: str, records: list[dict[str, Any]]) -> str:
    """The report as Markdown: a table in Table 3's layout and what each column counts."""
    header = ["Row", "Status", "Corpus", "Steps", "Test BLEU", "Paper BLEU", "Our training FLOPs",
              "Model FLOPs of the row's schedule", "Paper's cost (printed)",
              "Paper's estimate (h x GPUs x FLOP/s)", "Our estimate (h x devices x FLOP/s)"]
    cells = ([record["row"], record["status"], record["dataset"] or "", record["steps"] or "",
              _number(record["test_bleu"]), _number(record["paper_test_bleu"]),
              *(_scientific(record[key]) for key in ("train_flops", "schedule_flops", "paper_train_flops",
                                                     "paper_estimate_flops", "our_estimate_flops"))]
             for record in records)
    lines = [f"# Table 3: {root}", "", *markdown_table(header, cells, ["---"] * 3 + ["---:"] * 8)]
    lines += ["", "Model FLOPs count forward + backward matmuls (3 x forward, `attention_jax.models.flops`) per "
              "token times tokens; attention terms at config.max_len, source tokens taken equal to target "
              "tokens. The paper's estimate is training time x GPUs x sustained single-precision FLOP/s "
              "(footnote 5); ours uses our wall time and `--sustained_tflops` when given.", ""]
    return "\n".join(lines)


def write_table3_report(root: str, *, sustained_tflops: float | None = None, out_dir: str | None = None) -> list[str]:
    """Write ``ROOT/table3.md`` and ``ROOT/table3.csv``.

    Parameters
    ----------
    root : str
        Sweep root.
    sustained_tflops : float, optional
        Sustained TFLOP/s per device of our hardware (for our paper-style estimate).
    out_dir : str, optional
        The directory written instead of ``root``.

    Returns
    -------
    list[str]
        The two paths written.
    """
    records = _table3_records(root, sustained_tflops=sustained_tflops)
    return write_report_files(os.path.join(out_dir or root, "table3"), _markdown_table3(root, records), CSV_FIELDS,
                              records)


def write(context: ReportContext) -> list[str]:
    """Write ``table3.md`` and ``.csv`` (a sweep file's ``get_report()`` extra).

    Parameters
    ----------
    context : ReportContext
        The sweep being reported (its ``sustained_tflops``).

    Returns
    -------
    list[str]
        The two paths.
    """
    return write_table3_report(context.root, sustained_tflops=context.sustained_tflops, out_dir=context.out_dir)
