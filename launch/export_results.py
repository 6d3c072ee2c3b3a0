r"""Copy a sweep's finished runs, without their checkpoints, to a directory you can commit.

Usage, from the repository root::

    python -m launch.export_results --root=runs/table2_small --to=docs/table2_small
    python -m attention_jax.report docs/table2_small

A sweep root holds gigabytes of checkpoints; the report needs only ``sweep.json`` and, per finished run,
``config.json`` and ``results.json``. This copies those, with the run's ``metrics.jsonl`` (learning
curves), its ``data_splits.json`` (which dev and test text it was scored on), its ``length_buckets.json``
and ``position_losses.json`` (the positions experiment's scores per length bucket and its loss by target
position) and its ``eval_*.json`` reports, into ``--to`` in the same layout (``<row>/`` or
``<row>/seed_<k>/``; a sweep over corpora keeps its corpus level, ``<corpus>/<row>/seed_<k>/``), so the
report and ``notebooks/03_ablations.ipynb`` read the copy as they read the
sweep: finished rows with their seeds, the others pending. Runs still going
are not copied. Rerun it as rows finish; it copies runs it has not copied yet (and updates any whose
files changed) and leaves the rest alone, so a long sweep can be committed row by row.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import sys
from typing import Sequence

from absl import app, flags

from attention_jax.commands import entry_points
from attention_jax.foundation import run_files, user_errors
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.reports import sweep_rows

_ROOT = flags.DEFINE_string("root", None, "Sweep root written by launch.sweep.")
_TO = flags.DEFINE_string("to", None, "Directory to copy the finished runs into (created if needed).")

RUN_FILES = (run_files.CONFIG_FILE, run_files.RESULTS_FILE, run_files.METRICS_FILE, run_files.DATA_SPLITS_FILE,
             run_files.LENGTH_BUCKETS_FILE, run_files.POSITION_LOSSES_FILE)
"""Files copied from every finished run, besides its ``eval_*.json`` reports."""


def _run_dirs(root: str) -> list[str]:
    """Every finished run directory of the sweep (or of each corpus's), relative to ``root``.

    ``<row>``, ``<row>/seed_<k>``, and ``<corpus>/...`` for each sweep over corpora's root ``root/<corpus>``.
    """
    corpus_roots = sweep_rows.corpus_roots(root)
    sweeps = {name: os.path.join(root, name) for name in corpus_roots}
    if os.path.isfile(os.path.join(root, run_files.SWEEP_FILE)) or not corpus_roots:
        sweeps[""] = root
    finished = []
    for prefix, sweep_root in sweeps.items():
        for row in sweep_rows.read_sweep_rows(sweep_root)[1]:
            finished += [os.path.join(prefix, row.row, run.name) for run in row.runs if run.status == "done"]
    return [os.path.normpath(path) for path in finished]


def _files_of_run(run_dir: str) -> list[str]:
    names = [name for name in RUN_FILES if os.path.isfile(os.path.join(run_dir, name))]
    names += sorted(name for name in os.listdir(run_dir) if name.startswith("eval_") and name.endswith(".json"))
    return names


def export_results(root: str, destination: str) -> list[str]:
    """Copy ``root``'s sweep record and the small files of its finished runs into ``destination``.

    Parameters
    ----------
    root : str
        A sweep root (``ROOT/sweep.json``, ``ROOT/<row>/[seed_<k>/]``).
    destination : str
        Where the copy goes; created if missing. Files already there and equal are left untouched.

    Returns
    -------
    list[str]
        The files written (new or changed), relative to ``destination``.

    Notes
    -----
    Raises ``FileNotFoundError`` when ``root`` holds no sweep (no ``sweep.json`` and no run
    directories), naming the root, and :class:`attention_jax.foundation.user_errors.UserInputError` when ``root`` is
    a file, a file of the sweep is damaged, or ``destination`` is a file or cannot be written, before
    anything is copied.
    """
    if os.path.exists(root) and not os.path.isdir(root):
        raise UserInputError(f"--root={root} is a file, not a directory: pass the --root of a launch.sweep run.")
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{root} does not exist: pass the --root of a launch.sweep run.")
    run_files.check_directory(destination, "--to", writable=True)
    corpus_records = [os.path.join(name, run_files.SWEEP_FILE) for name in sweep_rows.corpus_roots(root)]
    records = [run_files.SWEEP_FILE, *corpus_records]
    relative_files = [record for record in records if os.path.isfile(os.path.join(root, record))]
    for run_dir in _run_dirs(root):
        relative_files += [os.path.join(run_dir, name) for name in _files_of_run(os.path.join(root, run_dir))]
    if not relative_files:
        raise FileNotFoundError(f"{root} holds no sweep.json and no finished run: nothing to export.")
    written = []
    for relative in relative_files:
        source, target = os.path.join(root, relative), os.path.join(destination, relative)
        if os.path.isfile(target) and filecmp.cmp(source, target, shallow=False):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(source, target + ".tmp")
        os.replace(target + ".tmp", target)  # Never a half-copied file under the real name.
        written.append(relative)
    return written


def main(argv: Sequence[str]) -> None:
    """Entry point: ``python -m launch.export_results --root=ROOT --to=DIR``."""
    del argv
    if not _ROOT.value or not _TO.value:
        raise app.UsageError("pass --root=SWEEP_ROOT and --to=DIRECTORY")
    try:
        written = export_results(_ROOT.value, _TO.value)
    except (FileNotFoundError, UserInputError) as error:
        user_errors.exit_with_error("launch.export_results", str(error))
    for relative in written:
        print(os.path.join(_TO.value, relative))
    print(f"{len(written)} file(s) written to {_TO.value}", file=sys.stderr)


if __name__ == "__main__":
    entry_points.run_in_one_line("launch.export_results", main)
