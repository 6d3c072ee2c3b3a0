"""Table 3 of Vaswani et al. (2017): base and big on WMT 2014 EN-DE and EN-FR, BLEU and training cost.

Rows: ``base_en_de`` (= ``configs/base.py``), ``big_en_de`` (= ``configs/big.py``), ``base_en_fr`` and
``big_en_fr``. EN-FR is "the significantly larger WMT 2014 English-French dataset consisting of 36M
sentences", split "into a 32000 word-piece vocabulary" (Section 5.1); "the Transformer (big) model
trained for English-to-French used dropout rate P_drop = 0.1, instead of 0.3" (Section 6.1). The paper's
figures travel with each row as ``config.paper``: newstest2014 BLEU and the training cost, which the
paper estimates as training time x number of GPUs x sustained single-precision FLOP/s (footnote 5: 9.5
TFLOPS per P100; base 12 hours, big 3.5 days, on 8 P100s).

Run one row::

    python -m attention_jax.main --config=configs/table3.py:base_en_fr --workdir=runs/table3/base_en_fr

or the table as a sweep, then its report (``ROOT/table3.md``, ``.csv``)::

    python -m attention_jax.sweep --config=configs/table3.py --rows=all --executor=local --root=runs/table3
    python -m attention_jax.report runs/table3

(WMT14 EN-FR must be prepared by TFDS first, as for EN-DE:
``tfds.builder('wmt14_translate/fr-en', file_format='array_record').download_and_prepare()``).
Expected: the paper's BLEU below (27.3, 28.4, 38.1, 41.8).
"""

from __future__ import annotations

import os
from typing import Any

import ml_collections

from configs import base, big

P100_TFLOPS = 9.5  # Sustained single precision, the paper's footnote 5.
EN_FR = dict(dataset="wmt14_translate/fr-en", source_lang="en", target_lang="fr", vocab_size=32000)

# (row, overrides, paper figures); Table 3's Transformer rows. Training time and GPUs: Section 5.2.
ROWS: list[tuple[str, dict, dict]] = [
    ("base_en_de", {}, dict(test_bleu=27.3, train_flops=3.3e18, train_hours=12.0, num_gpus=8, dev_ppl=4.92,
                            dev_bleu=25.8, params_millions=65)),
    ("big_en_de", dict(big.BIG_OVERRIDES), dict(test_bleu=28.4, train_flops=2.3e19, train_hours=84.0, num_gpus=8,
                                                dev_ppl=4.33, dev_bleu=26.4, params_millions=213)),
    ("base_en_fr", dict(EN_FR), dict(test_bleu=38.1, train_flops=3.3e18, train_hours=12.0, num_gpus=8)),
    ("big_en_fr", dict(big.BIG_OVERRIDES, **EN_FR, dropout_rate=0.1),
     dict(test_bleu=41.8, train_flops=2.3e19, train_hours=84.0, num_gpus=8)),
]
ROW_NAMES = tuple(name for name, _, _ in ROWS)


def get_sweep() -> dict[str, dict]:
    """Return the rows as a sweep: row name -> overrides of the base config.

    Returns
    -------
    dict[str, dict]
        In Table 3's order; ``launch/`` turns each entry into one job.
    """
    return {name: dict(overrides) for name, overrides, _ in ROWS}


def get_config(row: str = "base_en_de") -> ml_collections.ConfigDict:
    """Return the base config with Table 3 row ``row`` applied.

    Parameters
    ----------
    row : str
        One of ``ROW_NAMES``.

    Returns
    -------
    ml_collections.ConfigDict
        The row's full config; ``config.paper`` holds the paper's test BLEU, its training cost as printed
        (``train_flops``), the training hours, GPUs and sustained TFLOPS per GPU it came from, plus Table
        2's dev figures for the EN-DE rows.

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    by_name = {name: (overrides, paper) for name, overrides, paper in ROWS}
    if row not in by_name:
        raise ValueError(f"unknown Table 3 row {row!r}; choose one of {', '.join(ROW_NAMES)}.")
    overrides, paper = by_name[row]
    config = base.get_config()
    config.update(overrides)
    config.name = row
    figures = dict(dict(dev_ppl=None, dev_bleu=None, params_millions=None), **paper, gpu_tflops=P100_TFLOPS)
    config.paper = ml_collections.ConfigDict(figures)
    return config


CSV_FIELDS = ("row", "status", "dataset", "steps", "train_target_tokens", "dev_bleu", "test_bleu",
              "paper_test_bleu", "train_flops", "schedule_flops", "paper_train_flops",
              "paper_estimate_flops", "our_estimate_flops", "wall_s", "devices")
"""The columns of ``table3.csv``: our BLEU and FLOPs beside the paper's BLEU and cost."""


def _table3_records(root: str, sustained_tflops: float | None) -> list[dict[str, Any]]:
    """One record per row (:data:`CSV_FIELDS`); model FLOPs are 3 x forward matmuls per token times tokens."""
    from attention_jax.experiment import schema, sections  # Only when reporting.
    from attention_jax.foundation import run_files
    from attention_jax.models import flops
    from attention_jax.reports import sweep_rows

    records = []
    for row in sweep_rows.read_sweep_rows(root)[1]:
        config_path = os.path.join(root, row.row, run_files.CONFIG_FILE)
        experiment = (sections.build_experiment(schema.with_old_run_defaults(row.config), config_path)
                      if row.config else None)
        results, paper = row.results, row.paper or {}
        tokens = results.get("train_target_tokens")
        train_flops = results.get("train_flops")
        if train_flops is None and tokens is not None and experiment is not None:  # Runs from before the field.
            train_flops = experiment.training_flops(tokens)
        schedule = None if experiment is None else experiment.training_flops(
            experiment.run.num_train_steps * experiment.data.tokens_per_batch)
        paper_estimate = None if paper.get("train_hours") is None else flops.paper_training_flops(
            paper["train_hours"], paper["num_gpus"], paper["gpu_tflops"])
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


def write_table3_report(root: str, *, sustained_tflops: float | None = None, out_dir: str | None = None) -> list[str]:
    """Write ``table3.md`` and ``table3.csv``: test BLEU and training cost beside the paper's.

    Parameters
    ----------
    root : str
        Sweep root.
    sustained_tflops : float, optional
        Sustained TFLOP/s per device of our hardware (for our paper-style estimate, footnote 5).
    out_dir : str, optional
        The directory written instead of ``root``.

    Returns
    -------
    list[str]
        The two paths written.
    """
    from attention_jax.reports import comparison  # Only when reporting.

    def _number(value: Any, spec: str) -> str:
        return "" if value is None else f"{float(value):{spec}}"

    records = _table3_records(root, sustained_tflops)
    header = ["Row", "Status", "Corpus", "Steps", "Test BLEU", "Paper BLEU", "Our training FLOPs",
              "Model FLOPs of the row's schedule", "Paper's cost (printed)",
              "Paper's estimate (h x GPUs x FLOP/s)", "Our estimate (h x devices x FLOP/s)"]
    cells = ([record["row"], record["status"], record["dataset"] or "", record["steps"] or "",
              _number(record["test_bleu"], ".1f"), _number(record["paper_test_bleu"], ".1f"),
              *(_number(record[key], ".2e") for key in ("train_flops", "schedule_flops", "paper_train_flops",
                                                       "paper_estimate_flops", "our_estimate_flops"))]
             for record in records)
    lines = [f"# Table 3: {root}", "", *comparison.markdown_table(header, cells, ["---"] * 3 + ["---:"] * 8)]
    lines += ["", "Model FLOPs count forward + backward matmuls (3 x forward, `attention_jax.models.flops`) per "
              "token times tokens; attention terms at config.max_len, source tokens taken equal to target "
              "tokens. The paper's estimate is training time x GPUs x sustained single-precision FLOP/s "
              "(footnote 5); ours uses our wall time and `--sustained_tflops` when given.", ""]
    return comparison.write_report_files(os.path.join(out_dir or root, "table3"), "\n".join(lines), CSV_FIELDS, records)


def get_report() -> dict:
    """Return what the report adds: ``table3.md`` and ``.csv`` (:func:`write_table3_report`).

    Returns
    -------
    dict
        See :func:`attention_jax.reports.sweep_rows.declared_report`.
    """
    return dict(extras=[_write])


def _write(context: Any) -> list[str]:
    """The extra of :func:`get_report`: :func:`write_table3_report` for a ``ReportContext``."""
    return write_table3_report(context.root, sustained_tflops=context.sustained_tflops, out_dir=context.out_dir)
