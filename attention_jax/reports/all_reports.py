"""Every report a sweep calls for, written by one function (the ``report`` command's library half).

:func:`write_reports` holds no command-line flags, so tests and notebooks import it in-process without
defining the command's flags (two modules defining ``--out`` in one process is an absl error).
"""

from __future__ import annotations

from attention_jax.reports import (
    attention_function_report,
    normalization_report,
    positions_report,
    sweep_report,
    sweep_rows,
    table3_report,
)


def write_reports(root: str, out_dir: str, *, all_rows: bool = False,
                  sustained_tflops: float | None = None) -> list[str]:
    """Write every report the sweep in ``root`` calls for into ``out_dir``.

    Parameters
    ----------
    root : str
        The sweep root (only read).
    out_dir : str
        Where the files go (``root`` by default on the command line).
    all_rows : bool
        Report rows never launched too.
    sustained_tflops : float, optional
        Table 3 sweeps: our sustained TFLOP/s per device.

    Returns
    -------
    list[str]
        The paths written.

    Notes
    -----
    Every row is read (and checked) before the first file is written, so a damaged ``results.json`` or a
    config the schema refuses leaves nothing behind: :class:`UserInputError` (``schema.ConfigError``
    among them) or ``FileNotFoundError`` for a root that is not a sweep.
    """
    record, rows = sweep_rows.read_sweep_rows(root, all_rows=all_rows)
    paths = sweep_report.write_report(root, all_rows=all_rows, out_dir=out_dir)
    if record.get("report_name") == "table3":  # configs/table3.py
        paths += table3_report.write_table3_report(root, sustained_tflops=sustained_tflops, out_dir=out_dir)
    if attention_function_report.applies(rows):  # e.g. configs/sweeps/attention_function.py
        paths += attention_function_report.write_attention_function_report(root, rows, out_dir=out_dir)
    if positions_report.applies(root, rows):  # Runs scored on length buckets: configs/sweeps/positions.py
        paths += positions_report.write_positions_report(root, rows, out_dir=out_dir)
    if normalization_report.applies(rows):  # configs/sweeps/normalization.py
        paths += normalization_report.write_normalization_report(root, rows, out_dir=out_dir)
    return paths
