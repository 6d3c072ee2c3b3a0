"""Write a sweep's report: the command-line entry point.

Usage::

    python -m attention_jax.report ROOT [--reference=ROW] [--all_rows] [--out=DIR] [--page=PAGE ...]

writes ``ROOT/<name>.md``, ``.csv`` and ``.png``, or the same files in ``--out`` (e.g. for a root you cannot
write: the root is then only read). Any sweep gets the comparison of every row against a reference row,
paired by seed (:mod:`attention_jax.reports.comparison_report`): ``--reference=ROW``, else the sweep file's
``get_reference()``, else the first row of ``get_sweep()``; every metric the runs record with its mean ±
standard error, the paired change ± standard error and a verdict. A sweep whose file gives the paper's
figures (``get_paper_figures()``, e.g. ``configs/table2.py``) gets the paper's figure, its change against the
reference row and (dev perplexity) a verdict against the paper's direction (``reproduced``, ``opposite``,
``within noise``) as more columns of the same tables (:mod:`attention_jax.reports.paper_figures`).
A sweep of ``configs/table3.py`` also gets ``ROOT/table3.md`` and ``.csv``: test BLEU and training cost
beside the paper's (``configs/table3.py``'s ``get_report()``). A sweep whose rows use more than one
attention function (``configs/sweeps/attention_function.py``) also gets ``ROOT/attention_functions.md``,
``.csv`` and ``.png``: each function against scaled dot product at the same ``d_k``, paired by seed
(:mod:`attention_jax.reports.within_groups`). A sweep whose runs were scored on length buckets
(``configs/sweeps/positions.py``) also gets ``ROOT/positions_by_length.md``, ``.csv`` and ``.png``: each positional
encoding against sinusoidal, bucket by bucket (a bucket is its group:
:mod:`attention_jax.reports.within_groups` too).

Every sweep also gets ``ROOT/<name>_runs.md`` and ``.csv``: the rows at a glance and each run's own figures
(:func:`attention_jax.reports.sweep_diagnostics.write_run_tables`). ``--page=PAGE`` (repeatable) then rewrites the
page's generated blocks, the report sections it includes verbatim (:mod:`attention_jax.reports.pages`).

A sweep over corpora (``ROOT/<corpus>/<row>/seed_<k>/``) gets each corpus's reports in ``ROOT/<corpus>/`` and,
for two corpora or more, ``ROOT/transfer.md``, ``.csv`` and ``.png``: each row's change on every corpus and whether
it holds across them (:mod:`attention_jax.reports.transfer_report`); the command prints ``transfer.md`` too.

A root that is missing or a file, a damaged JSON file in it (a half-written ``results.json``) or an output
directory that cannot be written is one line on stderr with exit status 2, before anything is written.
"""

from __future__ import annotations

import os

from absl import app, flags

from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError, exit_with_error
from attention_jax.reports import all_reports, pages, sweep_rows, transfer_report

_ALL_ROWS = flags.DEFINE_bool("all_rows", False, "Report every row of the sweep, also those never launched.")
_SUSTAINED_TFLOPS = flags.DEFINE_float("sustained_tflops", None,
                                       "Table 3 sweeps: sustained TFLOP/s per device of our hardware, for "
                                       "the paper-style cost estimate (time x devices x FLOP/s).")
_REFERENCE = flags.DEFINE_string("reference", None,
                                 "The row every other row is compared with, paired by seed (default: the sweep "
                                 "file's get_reference(), else the first row of get_sweep()).")
_OUT = flags.DEFINE_string("out", None, "Directory for the report's files (default: ROOT); created if missing.")
_PAGES = flags.DEFINE_multi_string("page", [], "A Markdown page whose generated blocks (report sections it includes "
                                   "verbatim) are rewritten after the reports are written; repeatable.")


def main(argv: list[str]) -> None:
    """Write the report of the sweep root given on the command line (``python -m attention_jax.report ROOT``).

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line: the program and ``ROOT``.
    """
    if len(argv) != 2:
        raise app.UsageError("usage: python -m attention_jax.report ROOT [--reference=ROW] [--all_rows] [--out=DIR] "
                             "[--page=PAGE ...]")
    root = argv[1]
    out_dir = _OUT.value or root
    try:
        corpora = transfer_report.read_corpora(root, all_rows=_ALL_ROWS.value, reference=_REFERENCE.value)
        # Every file readable before anything is written: the runs' files, the sweep file's get_report().
        records = ([corpus.record for corpus in corpora]
                   or [sweep_rows.read_sweep_rows(root, all_rows=_ALL_ROWS.value)[0]])
        for record in records:
            sweep_rows.declared_report(record)
        for page in _PAGES.value:
            pages.check_page(page)
        run_files.check_directory(out_dir, "--out" if _OUT.value else "ROOT", writable=True,
                                  instead="" if _OUT.value else "Pass --out=DIR to write the report elsewhere.")
        paths = all_reports.write_reports(root, out_dir, all_rows=_ALL_ROWS.value,
                                          sustained_tflops=_SUSTAINED_TFLOPS.value, reference=_REFERENCE.value)
        refreshed = {page: pages.refresh_page(page) for page in _PAGES.value}
    except (FileNotFoundError, UserInputError) as error:  # schema.ConfigError is a UserInputError.
        exit_with_error("attention_jax.report", str(error))
    except OSError as error:  # E.g. the disk filled while writing.
        exit_with_error("attention_jax.report", f"cannot write {error.filename or out_dir}: {error.strerror}.")
    for path in paths:
        print(path)
    for page, changed in refreshed.items():
        print(f"{page}: {changed} generated block(s) rewritten")
    transfer = os.path.join(out_dir, transfer_report.STEM + ".md")
    if transfer in paths:
        with open(transfer, encoding="utf-8") as file:
            print("\n" + file.read(), end="")


if __name__ == "__main__":
    app.run(main)
