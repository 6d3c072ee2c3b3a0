"""The rows of a sweep root as written by ``launch.sweep`` and training: configs, results, seeds, status."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
from typing import Any, Callable, Mapping, Sequence

from attention_jax.experiment import schema
from attention_jax.foundation import python_files, run_files
from attention_jax.foundation.user_errors import UserInputError

SEED_DIR_PATTERN = re.compile(r"^seed_(\d+)$")  # ROOT/<row>/seed_<k>, as launch.sweep names them.
EVAL_ACCURACY_KEY = "eval/accuracy"


@dataclasses.dataclass(frozen=True)
class SeedRun:
    """One run of a row: one seed, or the row's only run in a sweep without seeds.

    Attributes
    ----------
    seed : int or None
        ``config.seed`` of the run (``ROOT/<row>/seed_<k>``); None for ``ROOT/<row>`` itself.
    status : str
        ``done``, ``failed``, ``diverged`` (:data:`DIVERGED_STATUS`), ``incomplete``, ``submitted`` or ``not run``.
    config : dict
        The run's ``config.json`` (``{}`` before it started).
    results : dict
        ``results.json`` (``{}`` until the run finished).
    dev_accuracy_at_best : float or None
        Dev token accuracy at the run's best evaluation (``results.json``'s ``best_step``, read from ``metrics.jsonl``);
        None without either.
    """

    seed: int | None
    status: str
    config: dict
    results: dict
    dev_accuracy_at_best: float | None = None

    @property
    def name(self) -> str:
        """``seed_<k>``, or ``""`` for a run without a seed directory.

        Returns
        -------
        str
            The run's directory name.
        """
        return "" if self.seed is None else f"seed_{self.seed}"


@dataclasses.dataclass(frozen=True)
class RowReport:
    """One row of the report.

    Attributes
    ----------
    row : str
        Row name.
    group : str
        The row's group (the sweep file's ``get_report()``'s ``group_of``, e.g. Table 2's ``A``-``E``), else ``""``.
    status : str
        ``done`` (every run finished), ``partial`` (some seeds finished, others pending), else the runs' common status:
        ``failed``, ``incomplete``, ``submitted``, ``not run`` (``pending`` when the unfinished seeds differ).
    config : dict
        The row's config (``config.json`` of its first run that has one, else the sweep record's copy; ``{}`` when
        neither).
    results : dict
        ``results.json`` of the row's single run (``{}`` until it finished); with seeds, that of its first finished seed
        (the figures shared by all seeds, such as ``params``).
    runs : tuple[SeedRun, ...]
        Every run of the row, in seed order (one, with seed None, in a sweep without seeds).
    paper_figures : dict or None
        The row's entry of the sweep file's ``get_paper_figures()`` as ``sweep.json`` records it (``{}`` for a row it
        leaves out, or a file without the hook); None for a root whose record predates the hook (no ``paper_figures``
        key) or that has no ``sweep.json``: its rows' ``config.paper`` is read instead.
    """

    row: str
    group: str
    status: str
    config: dict
    results: dict
    runs: tuple[SeedRun, ...] = ()
    paper_figures: dict | None = None

    @property
    def finished(self) -> list[SeedRun]:
        """The runs that wrote ``results.json``.

        Returns
        -------
        list[SeedRun]
            In seed order.
        """
        return [run for run in self.runs if run.status == "done"]

    @property
    def pending(self) -> list[SeedRun]:
        """The runs that have not finished (failed, running, queued or never started).

        Returns
        -------
        list[SeedRun]
            In seed order.
        """
        return [run for run in self.runs if run.status != "done"]

    @property
    def seeded(self) -> bool:
        """Whether the row's runs are seed directories (a sweep with seeds).

        Returns
        -------
        bool
            True for ``ROOT/<row>/seed_<k>`` runs.
        """
        return any(run.seed is not None for run in self.runs)

    @property
    def paper(self) -> dict:
        """The paper's figures for the row (``dev_ppl``, ``dev_bleu``, ``params_millions``); ``{}`` without them.

        Returns
        -------
        dict
            From ``get_paper_figures()`` as ``sweep.json`` records it, else (a root launched before the hook) the
            row config's ``paper``.
        """
        if self.paper_figures is not None:
            return self.paper_figures
        return self.config.get("paper") or {}


def _changed_since_run(row: RowReport, record: dict) -> dict[str, tuple[Any, Any]]:
    """The row's own overrides whose value in its runs' ``config.json`` differs from the sweep record's now."""
    changed = {}
    for key, value in record.get("row_overrides", {}).get(row.row, {}).items():
        if key in row.config and json.dumps(row.config[key]) != json.dumps(_plain(value)):
            changed[key] = (row.config[key], value)
    return changed


def _plain(value: Any) -> Any:
    """A value as ``config.json`` holds it (tuples as lists)."""
    return [_plain(item) for item in value] if isinstance(value, tuple | list) else value


def _read_json(path: str) -> dict:
    """The JSON object in ``path`` (``{}`` when there is no such file); a damaged file is one line."""
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8", errors="replace") as file:
        text = file.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserInputError(
            f"{path} is not valid JSON ({error.msg} at line {error.lineno} column {error.colno}): a half-written or "
            f"hand-edited file. Restore it, or delete it and rerun the command that wrote it (for a run's "
            f"{run_files.RESULTS_FILE}: the same attention-jax-sweep command); nothing was written.") from None
    if not isinstance(value, dict):
        raise UserInputError(f"{path} holds a JSON {type(value).__name__}, not an object: restore it, or delete it "
                             f"and rerun the command that writes it; nothing was written.")
    return value


DIVERGED_STATUS = "diverged"
"""A run the trainer stopped on a non-finite loss: it failed, and its row's verdict is ``unstable``."""
_DIVERGED_LOG_LINE = "non-finite training loss at step"  # The trainer's NonFiniteLossError, in ROOT/<row>/log.txt.


def _row_status(row_dir: str, results: dict) -> str:
    if results:
        return "done"
    launch = _read_json(os.path.join(row_dir, run_files.LAUNCH_FILE))
    if launch.get("returncode") not in (None, 0, run_files.STOPPED_EXIT_STATUS):  # Stopped on a signal: incomplete.
        return DIVERGED_STATUS if _log_says_diverged(os.path.join(row_dir, run_files.LOG_FILE)) else "failed"
    if os.path.isfile(os.path.join(row_dir, run_files.CONFIG_FILE)):
        return "incomplete"
    if launch.get("job_id"):
        return "submitted"
    return "not run"


def _log_says_diverged(path: str) -> bool:
    """Whether the last 64 KiB of a run's ``log.txt`` hold the trainer's non-finite-loss line."""
    try:
        with open(path, "rb") as file:
            file.seek(max(0, os.path.getsize(path) - 65536))
            return _DIVERGED_LOG_LINE.encode() in file.read()
    except OSError:
        return False


def _read_metric_records(run_dir: str) -> list[dict]:
    """Every record of a run's ``metrics.jsonl``, in the order logged."""
    path = os.path.join(run_dir, run_files.METRICS_FILE)
    if not os.path.isfile(path):
        return []
    records = []
    with open(path, encoding="utf-8") as file:
        for line in file:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def read_metric_curve(run_dir: str, key: str) -> tuple[list[int], list[float]]:
    """One metric of a run at each step it was recorded, in step order.

    Parameters
    ----------
    run_dir : str
        The run's work directory.
    key : str
        The metric's name in ``metrics.jsonl``, e.g. ``"eval/perplexity"`` or ``"train/perplexity"``.

    Returns
    -------
    tuple[list[int], list[float]]
        Steps and values; empty without ``metrics.jsonl``.
    """
    by_step = {int(record["step"]): float(record[key]) for record in _read_metric_records(run_dir)
               if key in record and "step" in record and math.isfinite(record[key])}
    steps = sorted(by_step)
    return steps, [by_step[step] for step in steps]


def _seeds_on_disk(row_dir: str) -> list[int]:
    if not os.path.isdir(row_dir):
        return []
    found = (SEED_DIR_PATTERN.match(name) for name in os.listdir(row_dir))
    return sorted(int(match.group(1)) for match in found
                  if match and os.path.isdir(os.path.join(row_dir, match.group(0))))


def _read_run(run_dir: str, seed: int | None) -> SeedRun:
    results = _read_json(os.path.join(run_dir, run_files.RESULTS_FILE))
    config_path = os.path.join(run_dir, run_files.CONFIG_FILE)
    config = _read_json(config_path)
    if config:  # As the run behaved, checked: a hand-edited config.json is one line, not a wrong table.
        config = schema.with_old_run_defaults(config)
        schema.check_config(config, config_path, complete=False)
    accuracy_at_best = None
    if results.get("best_step") is not None:
        accuracy = dict(zip(*read_metric_curve(run_dir, EVAL_ACCURACY_KEY)))
        accuracy_at_best = accuracy.get(int(results["best_step"]))
    return SeedRun(seed, _row_status(run_dir, results), config, results, accuracy_at_best)


def _combined_status(runs: Sequence[SeedRun]) -> str:
    statuses = {run.status for run in runs}
    if statuses == {"done"}:
        return "done"
    if "done" in statuses:
        return "partial"
    return statuses.pop() if len(statuses) == 1 else "pending"


def _row_report(root: str, name: str, record: dict, group_of: Callable[[str], str]) -> RowReport:
    row_dir = os.path.join(root, name)
    recorded_seeds = record.get("seeds")
    seeds = sorted(set(recorded_seeds or []) | set(_seeds_on_disk(row_dir)))
    runs: tuple[SeedRun, ...]
    if recorded_seeds is None and not seeds:
        runs = (_read_run(row_dir, None),)
    else:
        runs = tuple(_read_run(os.path.join(row_dir, f"seed_{seed}"), seed) for seed in seeds)
    configs = [run.config for run in runs if run.config]
    config = configs[0] if configs else record.get("row_configs", {}).get(name, {})
    finished = [run.results for run in runs if run.status == "done"]
    status = _combined_status(runs) if runs else "not run"
    paper_figures = None  # A root recorded before get_paper_figures(): the rows' config.paper.
    if "paper_figures" in record:
        paper_figures = dict((record["paper_figures"] or {}).get(name) or {})
    return RowReport(name, group_of(name), status, config, finished[0] if finished else {}, runs, paper_figures)


def _no_group(row: str) -> str:
    return ""


def corpus_roots(root: str) -> dict[str, str]:
    """The sweep roots of a sweep over corpora (``launch.sweep --corpora``): ``ROOT/<corpus>/sweep.json``.

    Parameters
    ----------
    root : str
        A directory (a corpus is named by its directory here; a run's ``config.json`` names it as ``corpus``).

    Returns
    -------
    dict[str, str]
        Corpus -> its root, in name order; empty for a root without corpora.
    """
    if not os.path.isdir(root):
        return {}
    names = sorted(name for name in os.listdir(root) if os.path.isfile(os.path.join(root, name, run_files.SWEEP_FILE)))
    return {name: os.path.join(root, name) for name in names}


def _is_row_directory(path: str) -> bool:
    """Return whether ``path`` is a row of a sweep root: it holds ``config.json`` or ``seed_<k>/config.json``."""
    return os.path.isfile(os.path.join(path, run_files.CONFIG_FILE)) or any(
        os.path.isfile(os.path.join(path, f"seed_{seed}", run_files.CONFIG_FILE)) for seed in _seeds_on_disk(path))


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
    """
    if os.path.exists(root) and not os.path.isdir(root):
        raise UserInputError(f"sweep root {root} is a file, not a directory: pass the --root directory of a "
                             f"attention-jax-sweep run (it holds {run_files.SWEEP_FILE} and one directory per row).")
    if not os.path.isdir(root):
        raise FileNotFoundError(f"sweep root {root} does not exist.")
    record = _read_json(os.path.join(root, run_files.SWEEP_FILE))
    if record:
        names = record["all_rows"] if all_rows else record["rows"]
    else:
        names = sorted(name for name in os.listdir(root) if _is_row_directory(os.path.join(root, name)))
        if not names and corpus_roots(root):
            raise FileNotFoundError(f"{root} is a sweep over corpora: read each corpus's root, "
                                    f"{', '.join(corpus_roots(root).values())}.")
        if not names:
            raise FileNotFoundError(
                f"{root} holds no {run_files.SWEEP_FILE} and no <row>/config.json: not a sweep root "
                f"(launch one with attention-jax-sweep --root={root} ...)."
            )
    try:
        group_of = declared_report(record).get("group_of", _no_group)
    except UserInputError:  # A sweep file that fails: one line where its get_report() is asked for (the command).
        group_of = _no_group
    return record, [_row_report(root, name, record, group_of) for name in names]


def _plot_panels(rows: Sequence[RowReport], reference: str) -> list[tuple[str, list[RowReport]]]:
    """Group rows for plotting: one panel per Table 2 group, each led by the reference row."""
    leading = [row for row in rows if row.row == reference]
    groups: dict[str, list[RowReport]] = {}
    for row in rows:
        if row.row != reference:
            groups.setdefault(row.group or "rows", []).append(row)
    if not groups:
        return [(reference, leading)] if leading else []
    return [(name, leading + members) for name, members in groups.items()]


@dataclasses.dataclass(frozen=True)
class ReportContext:
    """What an extra report a sweep file declares is given (:func:`declared_report`).

    Attributes
    ----------
    root : str
        The sweep root (only read).
    record : dict
        Its ``sweep.json``.
    rows : list[RowReport]
        Its rows.
    out_dir : str
        Where the files go.
    reference : str
        The reference row.
    sustained_tflops : float or None
        ``report --sustained_tflops``: our sustained TFLOP/s per device.
    """

    root: str
    record: dict
    rows: list[RowReport]
    out_dir: str
    reference: str
    sustained_tflops: float | None = None


_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.cache
def _sweep_file_report(path: str) -> dict[str, Any]:
    module = python_files.import_python_file(path, "_report_of_", _REPOSITORY)
    hook: Callable[[], Mapping[str, Any]] | None = getattr(module, "get_report", None)
    try:
        return dict(hook()) if hook else {}
    except Exception as error:  # The file's own mistake: one line naming it, as an import failure is.
        raise UserInputError(f"{path}'s get_report() raised {type(error).__name__}: {error}") from None


def declared_report(record: Mapping) -> dict[str, Any]:
    """Return what the sweep file's ``get_report()`` adds to the generic report.

    Parameters
    ----------
    record : Mapping
        The sweep record; its ``config_file`` is read relative to the working directory, else to the repository root.

    Returns
    -------
    dict
        ``extras``: callables ``(ReportContext) -> list[str]`` that write more files and return their paths;
        ``headline_measures``: :class:`~attention_jax.reports.comparison.Metric` s the transfer table adds;
        ``group_of``: ``(row name) -> group`` (:attr:`RowReport.group`).
    """
    config_file = record.get("config_file")
    if not config_file:
        return {}
    for path in (config_file, os.path.join(_REPOSITORY, config_file)):
        if os.path.isfile(path):
            return _sweep_file_report(os.path.abspath(path))
    return {}
