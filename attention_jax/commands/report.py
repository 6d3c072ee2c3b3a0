"""Write a sweep's Table 2 report: the command-line entry point.

Usage::

    python -m attention_jax.report ROOT [--all_rows]

writes ``ROOT/<name>.md``, ``.csv`` and ``.png`` (see :mod:`attention_jax.reports.sweep_report`). For a sweep
with seeds (``launch.sweep --seeds=K``) each row shows the mean ± standard deviation over its finished
seeds, the change of dev perplexity against base paired by seed, and a verdict against the paper's
direction (``reproduced``, ``opposite``, ``within noise``); rows with seeds still to run say how many.
A sweep of ``configs/table3.py`` also gets ``ROOT/table3.md`` and ``.csv``: test BLEU and training cost
beside the paper's (:mod:`attention_jax.reports.table3_report`). A sweep whose rows use more than one
attention function (``configs/sweeps/attention_function.py``) also gets ``ROOT/attention_functions.md``,
``.csv`` and ``.png``: each function against scaled dot product at the same ``d_k``, paired by seed
(:mod:`attention_jax.reports.attention_function_report`). A sweep whose runs were scored on length buckets
(``configs/sweeps/positions.py``) also gets ``ROOT/positions.md``, ``.csv`` and ``.png``: each positional
encoding against sinusoidal, bucket by bucket (:mod:`attention_jax.reports.positions_report`).
"""

from __future__ import annotations

from absl import app, flags

from attention_jax.experiment import schema
from attention_jax.reports import attention_function_report, positions_report, sweep_report, sweep_rows, table3_report
from attention_jax.user_errors import exit_with_error

_ALL_ROWS = flags.DEFINE_bool("all_rows", False, "Report every row of the sweep, also those never launched.")
_SUSTAINED_TFLOPS = flags.DEFINE_float("sustained_tflops", None,
                                       "Table 3 sweeps: sustained TFLOP/s per device of our hardware, for "
                                       "the paper-style cost estimate (time x devices x FLOP/s).")


def main(argv: list[str]) -> None:
    """Entry point: ``python -m attention_jax.report ROOT``."""
    if len(argv) != 2:
        raise app.UsageError("usage: python -m attention_jax.report ROOT [--all_rows]")
    try:
        paths = sweep_report.write_report(argv[1], all_rows=_ALL_ROWS.value)
        record, rows = sweep_rows.read_sweep_rows(argv[1], all_rows=_ALL_ROWS.value)
        if record.get("report_name") == "table3":  # configs/table3.py
            paths += table3_report.write_table3_report(argv[1], sustained_tflops=_SUSTAINED_TFLOPS.value)
        if attention_function_report.applies(rows):  # e.g. configs/sweeps/attention_function.py
            paths += attention_function_report.write_attention_function_report(argv[1], rows)
        if positions_report.applies(argv[1], rows):  # Runs scored on length buckets: configs/sweeps/positions.py
            paths += positions_report.write_positions_report(argv[1], rows)
    except FileNotFoundError as error:
        raise app.UsageError(str(error)) from error
    except schema.ConfigError as error:  # A run's config.json the schema refuses: one line, exit 2.
        exit_with_error("attention_jax.report", str(error))
    for path in paths:
        print(path)


if __name__ == "__main__":
    app.run(main)
