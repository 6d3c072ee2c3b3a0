"""What a sweep leaves in its root: ``ROOT/sweep.json`` and, per row, ``ROOT/<row>/launch.json``.

``ROOT/sweep.json`` (read by ``attention_jax.report``)::

    {"config_file": "configs/table2.py",      # the sweep file
     "report_name": "table2",                 # stem of the file: ROOT/table2.{md,csv,png}
     "overrides": ["num_train_steps=20"],     # common overrides, as given
     "all_rows": ["base", "A1", ...],         # every row of the sweep, in order
     "rows": ["base", "A1"],                  # rows launched so far, in order
     "row_overrides": {"A1": {...}, ...},     # the sweep's data
     "row_configs": {"A1": {...}, ...},       # each row's config with the common overrides
     "seeds": [0, 1, 2],                      # seeds launched so far (null: no seed directories)
     "reference": "base",                     # get_reference() of the sweep file (absent: none)
     "paper_figures": {"base": {...}, ...},   # get_paper_figures() of the sweep file (null: none)
     "corpus": "gnome_help_en_de",            # sweeps over corpora only: the corpus of this record's root
     "corpus_overrides": ["corpus=...", ...], # and its recipe's overrides (before a row's own settings)
     "launches": [{"time": ..., "executor": "local", "rows": [...], "seeds": [0, 1, 2]}]}

A root belongs to one sweep: the same file, overrides and rows data, and the same layout (seed
directories ``ROOT/<row>/seed_<k>/`` or not). A sweep over corpora writes one such record per corpus, in
``ROOT/<corpus>/sweep.json`` (each a root the report reads as it reads any), and none in ``ROOT``.
Launching a different sweep into a root is refused unless ``--force`` replaces the record. More rows, or
more seeds, of the same sweep are added to the record.

``ROOT/<row>/launch.json`` (``ROOT/<row>/seed_<k>/launch.json`` with seeds): the launcher's last action
on the run (executor, command, job id, exit status, wall time). The run's own outputs
(``config.json``, checkpoints, ``results.json``) are written by the training entry point into its work
directory.
"""

from __future__ import annotations

import ast
import datetime
import json
import os
import shlex
import subprocess
import time
from typing import Any, Callable, Mapping, Sequence

import ml_collections

from attention_jax.data import corpora
from attention_jax.foundation import run_files
from launch import row_processes, sweep_spec


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def _parse_override_value(current: Any, text: str) -> Any:
    if isinstance(current, str):
        return text
    if isinstance(current, bool):
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"expected true/false, got {text!r}")
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _with_overrides(config: ml_collections.ConfigDict, overrides: Sequence[str],
                    where: str) -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict(config.to_dict())
    for override in overrides:
        key, text = override.split("=", 1)
        *parents, leaf = key.split(".")
        node = config
        for part in parents:
            node = node[part]
        try:
            node[leaf] = _parse_override_value(node[leaf], text)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"--config.{override}: bad value for {where} field {key} "
                f"(currently {node[leaf]!r}): {error}"
            ) from error
    return config


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def sweep_description(sweep: sweep_spec.Sweep, overrides: Sequence[str],
                      seeds: Sequence[int] | None = None, corpus: corpora.Corpus | None = None) -> dict[str, Any]:
    """The sweep's identity and data as recorded in ``sweep.json`` (without rows and launches).

    Parameters
    ----------
    sweep : sweep_spec.Sweep
        The loaded sweep.
    overrides : Sequence[str]
        Common ``"key=value"`` overrides.
    seeds : Sequence[int], optional
        The seeds launched (each row runs once per seed in ``ROOT/<row>/seed_<k>``); None: one run
        per row in ``ROOT/<row>``.
    corpus : corpora.Corpus, optional
        The corpus of this record (a sweep over corpora): its overrides apply before ``overrides``.

    Returns
    -------
    dict
        ``config_file``, ``report_name``, ``overrides``, ``all_rows``, ``row_overrides``,
        ``row_configs`` (each row's config with the overrides applied, as the entry point builds it,
        before ``--config.seed``), ``seeds`` (a list, or None) and, when the sweep file defines
        ``get_reference()``, ``reference`` (the report's reference row), and ``paper_figures``: the
        file's ``get_paper_figures()`` (the paper's figures per row), None when it defines none.

    Notes
    -----
    Raises ``ValueError`` for an override value of the wrong type for its field.
    """
    row_configs = {}
    for row in sweep.row_names:
        own = [] if corpus is None else sweep.corpus_overrides(row, corpus)
        config = _with_overrides(sweep.row_config(row), [*own, *overrides], f"{sweep.config_file}:{row}")
        row_configs[row] = json.loads(config.to_json_best_effort())
    description: dict[str, Any] = {
        "config_file": sweep.config_file,
        "report_name": os.path.splitext(os.path.basename(sweep.config_file))[0],
        "overrides": list(overrides),
        "all_rows": list(sweep.row_names),
        "row_overrides": _jsonable(sweep.row_overrides),
        "row_configs": row_configs,
        "seeds": None if seeds is None else list(seeds),
    }
    if corpus is not None:
        description["corpus"] = corpus.name
        description["corpus_overrides"] = sweep.corpus_overrides(None, corpus)
    if sweep.reference is not None:
        description["reference"] = sweep.reference
    description["paper_figures"] = sweep.paper_figures  # None: no paper columns (recorded, unlike older roots).
    return description


def _override_dict(overrides: Sequence[str]) -> dict[str, str]:
    return dict(override.split("=", 1) for override in overrides)


def sweep_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """How the sweep recorded in a root differs from the one being launched.

    Parameters
    ----------
    recorded : dict
        Contents of ``ROOT/sweep.json``.
    current : dict
        :func:`sweep_description` of the sweep being launched.

    Returns
    -------
    list[str]
        One sentence per difference (config file, common overrides, the corpus recipe's, rows' data, seed
        directories or not); empty if the same. Other seeds of a sweep with seeds are not a difference.
    """
    differences = []
    old_seeds, new_seeds = recorded.get("seeds"), current.get("seeds")
    if (old_seeds is None) != (new_seeds is None):
        def layout(seeds: Any) -> str:
            return "no seeds (ROOT/<row>)" if seeds is None else f"seeds {seeds} (ROOT/<row>/seed_<k>)"
        differences.append(f"{layout(old_seeds)} -> {layout(new_seeds)}")
    if recorded.get("config_file") != current["config_file"]:
        differences.append(f"config file {recorded.get('config_file')} -> {current['config_file']}")
    old, new = _override_dict(recorded.get("overrides", [])), _override_dict(current["overrides"])
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            before = f"{key}={old[key]}" if key in old else "(none)"
            after = f"{key}={new[key]}" if key in new else "(none)"
            differences.append(f"override --config.{before} -> --config.{after}")
    old_corpus, new_corpus = recorded.get("corpus_overrides", []), current.get("corpus_overrides", [])
    if old_corpus != new_corpus:
        differences.append(f"corpus overrides {old_corpus} -> {new_corpus}")
    old_rows, new_rows = recorded.get("row_overrides", {}), current["row_overrides"]
    for row in sorted(set(old_rows) | set(new_rows)):
        if old_rows.get(row) != new_rows.get(row):
            differences.append(f"row {row}: overrides {old_rows.get(row)} -> {new_rows.get(row)}")
    return differences


def read_sweep_record(root: str) -> dict[str, Any] | None:
    """Read ``ROOT/sweep.json``.

    Parameters
    ----------
    root : str
        Sweep root.

    Returns
    -------
    dict or None
        The record, or ``None`` when the root holds none.
    """
    path = os.path.join(root, run_files.SWEEP_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def record_launch(root: str, description: dict[str, Any], rows: Sequence[str], executor: str, *,
                  force: bool) -> dict[str, Any]:
    """Check the root against the sweep, then add this launch to ``ROOT/sweep.json``.

    Parameters
    ----------
    root : str
        Sweep root (created if missing).
    description : dict
        :func:`sweep_description` of the sweep being launched.
    rows : Sequence[str]
        Rows launched now.
    executor : str
        ``local``, ``slurm`` or ``tpu``.
    force : bool
        Replace a record of a different sweep instead of refusing.

    Returns
    -------
    dict
        The record written.

    Notes
    -----
    Raises ``ValueError`` naming each difference when the root holds a different sweep and ``force``
    is False. Rows launched earlier stay in ``rows`` (in the sweep's order), seeds launched earlier in
    ``seeds`` (in increasing order).
    """
    recorded = read_sweep_record(root)
    if recorded is not None and not force:
        differences = sweep_differences(recorded, description)
        if differences:
            raise ValueError(
                f"{os.path.join(root, run_files.SWEEP_FILE)} records a different sweep: " + "; ".join(differences)
                + ". Use a new --root for this sweep, or --force to replace the record (finished rows "
                "are then rerun: the entry point resumes each from its checkpoints, or refuses a "
                "changed model; delete ROOT/<row> to start a row afresh)."
            )
    keep = recorded if recorded is not None and not force else {}
    launched = set(keep.get("rows", [])) | set(rows)
    record = dict(description)
    record["rows"] = [row for row in description["all_rows"] if row in launched]
    seeds = description.get("seeds")
    if seeds is not None:
        record["seeds"] = sorted(set(keep.get("seeds") or []) | set(seeds))
    record["launches"] = keep.get("launches", []) + [
        {"time": _now(), "executor": executor, "rows": list(rows), "seeds": seeds}
    ]
    run_files.write_json_atomically(os.path.join(root, run_files.SWEEP_FILE), record)
    return record


def results_exist(record_dir: str) -> bool:
    """Whether the row in ``record_dir`` finished (its ``results.json`` exists).

    Parameters
    ----------
    record_dir : str
        The row's directory ``ROOT/<row>``.

    Returns
    -------
    bool
        True once the entry point wrote the final results.
    """
    return os.path.isfile(os.path.join(record_dir, run_files.RESULTS_FILE))


def read_launch(record_dir: str) -> dict[str, Any]:
    """Read ``ROOT/<row>/launch.json`` (empty dict when absent).

    Parameters
    ----------
    record_dir : str
        The row's directory.

    Returns
    -------
    dict
        The launcher's last record of the row.
    """
    path = os.path.join(record_dir, run_files.LAUNCH_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def write_launch(record_dir: str, **fields: Any) -> None:
    """Write ``ROOT/<row>/launch.json`` with ``fields`` and the time.

    Parameters
    ----------
    record_dir : str
        The row's directory (created if missing).
    **fields
        JSON-serializable values (executor, argv, job_id, returncode, wall_s, ...).
    """
    run_files.write_json_atomically(os.path.join(record_dir, run_files.LAUNCH_FILE), dict(fields, time=_now()))


def log_tail(path: str, num_lines: int = 15) -> str:
    """The last lines of a log file, indented for printing under a progress line.

    Parameters
    ----------
    path : str
        Log file.
    num_lines : int
        How many lines.

    Returns
    -------
    str
        The lines, each prefixed by ``"    | "``; a note when the file does not exist.
    """
    if not os.path.isfile(path):
        return f"    | ({path} does not exist)"
    with open(path, encoding="utf-8", errors="replace") as file:
        lines = file.read().splitlines()[-num_lines:]
    return "\n".join("    | " + line for line in lines)


def progress_line(job: sweep_spec.RowJob, status: str, detail: str = "") -> str:
    """One progress line: ``[ 3/20] B1      done        41.2 s``.

    Parameters
    ----------
    job : sweep_spec.RowJob
        The row.
    status : str
        What happened.
    detail : str
        Wall time, job id or log path.

    Returns
    -------
    str
        The line.
    """
    width = len(str(job.total))
    return f"[{job.index:>{width}}/{job.total}] {job.name:<8} {status:<10} {detail}".rstrip()


def run_logged(job: sweep_spec.RowJob, argv: Sequence[str], *, executor: str, say: Callable[[str], None],
               cwd: str | None = None, env: Mapping[str, str] | None = None,
               cpus: frozenset[int] | None = None) -> tuple[int, float, str]:
    """Run one row's command to completion, its output appended to the row's log.

    Parameters
    ----------
    job : sweep_spec.RowJob
        The row; its ``record_dir`` receives ``log.txt`` and ``launch.json``.
    argv : Sequence[str]
        The command (the entry point itself, or the remote shell that starts it).
    executor : str
        Recorded in ``launch.json`` (``"local"``, ``"tpu"``).
    say : Callable[[str], None]
        Where the ``started`` progress line goes.
    cwd : str, optional
        Working directory of the command.
    env : Mapping[str, str], optional
        Its environment (default: this process's).
    cpus : frozenset[int], optional
        CPUs it may run on (default: the sweep's).

    Returns
    -------
    (returncode, wall_s, log_path)
        The command's exit status, its wall time in seconds, and the log it wrote to.

    Notes
    -----
    The command runs in its own process group (:func:`launch.row_processes.run`: the sweep's stop
    signals are passed on, and it never outlives the sweep). Raises
    :class:`launch.row_processes.StopRequested` once the sweep was asked to stop. The log gets a
    ``=== <time> <command>`` header per attempt, so a resumed row's log reads as one
    history. ``launch.json`` records the command, exit status and wall time for ``report`` and reruns.
    """
    log_path = os.path.join(job.record_dir, run_files.LOG_FILE)
    if row_processes.stop_requested():
        raise row_processes.StopRequested("the sweep was asked to stop")
    os.makedirs(job.record_dir, exist_ok=True)
    say(progress_line(job, "started", f"log: {log_path}"))
    start = time.monotonic()
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(argv)}\n")
        log.flush()
        returncode = row_processes.run(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                       env=None if env is None else dict(env), cpus=cpus)
    wall_s = time.monotonic() - start
    write_launch(job.record_dir, executor=executor, argv=list(argv), returncode=returncode,
                 wall_s=round(wall_s, 1))
    return returncode, wall_s, log_path
