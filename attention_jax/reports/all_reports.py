"""Every report a sweep calls for, written by one function (the ``report`` command's library half)."""

from __future__ import annotations

import os

from attention_jax.reports import comparison_report, sweep_diagnostics, sweep_rows, transfer_report


def write_reports(root: str, out_dir: str, *, all_rows: bool = False,
                  sustained_tflops: float | None = None, reference: str | None = None) -> list[str]:
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
    reference : str, optional
        The row every other is compared with (``--reference``); see
        :func:`attention_jax.reports.comparison_report.resolve_reference`.

    Returns
    -------
    list[str]
        The paths written.
    """
    corpora = transfer_report.read_corpora(root, all_rows=all_rows, reference=reference)
    if not corpora:
        return _write_sweep_reports(root, out_dir, all_rows=all_rows, sustained_tflops=sustained_tflops,
                                    reference=reference)
    files = {corpus.name: _write_sweep_reports(
        corpus.directory, out_dir if corpus.flat else os.path.join(out_dir, os.path.basename(corpus.directory)),
        all_rows=all_rows, sustained_tflops=sustained_tflops, reference=corpus.requested) for corpus in corpora}
    paths = [path for corpus_paths in files.values() for path in corpus_paths]
    if len(corpora) > 1:
        paths += transfer_report._write_transfer_report(root, corpora, out_dir, files)
    return paths


def _write_sweep_reports(root: str, out_dir: str, *, all_rows: bool, sustained_tflops: float | None,
                         reference: str | None) -> list[str]:
    """The reports of one sweep root (of one corpus): :func:`write_reports` without the corpora."""
    record, rows = sweep_rows.read_sweep_rows(root, all_rows=all_rows)
    reference_row, _ = comparison_report.resolve_reference(record, rows, reference)
    paths = comparison_report._write_comparison(root, record, rows, out_dir, reference=reference)
    diagnostics = sweep_diagnostics._write_diagnostics(root, record.get("report_name", "report"), rows,
                                                      out_dir=out_dir, reference=reference_row)
    paths += [diagnostics] if diagnostics else []
    paths += sweep_diagnostics.write_run_tables(root, record.get("report_name", "report"), rows, out_dir=out_dir,
                                                reference=reference_row)
    context = sweep_rows.ReportContext(root, record, rows, out_dir, reference_row, sustained_tflops)
    for extra in sweep_rows.declared_report(record).get("extras", ()):  # What the sweep file's get_report() adds.
        paths += extra(context)
    return paths
