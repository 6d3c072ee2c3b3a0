"""Run a sweep's rows on this machine, one after another or ``parallel`` at a time.

Each row's stdout and stderr are appended to ``ROOT/<row>/log.txt``. Rows whose ``results.json`` exists are
skipped; a row that stopped part-way is rerun, and the entry point resumes it from its latest checkpoint. Rows
run in their own process groups; SIGINT/SIGTERM to the sweep reach them, they checkpoint and exit, and no new
row starts (:mod:`launch.row_processes`). A failing row does not stop the others. With seeds, "row" here is
one seed of a row, in ``ROOT/<row>/seed_<k>/``: each seed is skipped, resumed or rerun on its own. After each
run ends, a line gives the runs left and an ETA from what each row's finished runs cost (:class:`SweepClock`).

With ``pin_cpus`` (``launch.sweep --pin_cpus``, the default) and ``parallel > 1``, the sweep's CPUs are
split into ``parallel`` disjoint sets and each running row is kept to one of them. XLA sizes its thread
pools by the CPUs a process may use, so rows sharing a machine no longer run ``parallel`` times as many
compute threads as there are cores, switching between them (what pinning gains:
``docs/clusters.md``).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import shlex
import threading
import time
from typing import Callable, Sequence

from attention_jax.foundation import run_files
from attention_jax.reports import sweep_rows
from launch import row_processes, sweep_record
from launch.sweep_spec import RowJob, RowOutcome

TRAIN_LOSS_KEY = "train/loss"  # Logged at every training log step; its last step is how far a run got.


def cpu_slots(parallel: int, cpus: frozenset[int] | None = None) -> list[frozenset[int]] | None:
    """Split the CPUs into ``parallel`` disjoint sets of (nearly) equal size, one per running row.

    Parameters
    ----------
    parallel : int
        Rows running at the same time.
    cpus : frozenset[int], optional
        The CPUs to split (default: those this process may use, ``os.sched_getaffinity(0)``).

    Returns
    -------
    list[frozenset[int]] or None
        ``parallel`` sets in CPU order, the first ``len(cpus) % parallel`` one CPU larger; None when
        there is nothing to split (``parallel`` is 1, fewer CPUs than rows, or no affinity support).
    """
    if cpus is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        cpus = frozenset(os.sched_getaffinity(0))
    if parallel <= 1 or len(cpus) < parallel:
        return None
    ordered = sorted(cpus)
    size, extra = divmod(len(ordered), parallel)
    slots, start = [], 0
    for index in range(parallel):
        end = start + size + (1 if index < extra else 0)
        slots.append(frozenset(ordered[start:end]))
        start = end
    return slots


def _run_row(job: RowJob, repo_dir: str, say: Callable[[str], None],
             cpus: frozenset[int] | None = None) -> RowOutcome:
    try:
        returncode, wall_s, log_path = sweep_record.run_logged(
            job, job.argv, executor="local", say=say, cwd=repo_dir, env=dict(os.environ, PYTHONUNBUFFERED="1"),
            cpus=cpus)
    except row_processes.StopRequested:
        return RowOutcome(job.name, "stopped", "not started: the sweep was stopped (rerun to run it)")
    if returncode == 0 and sweep_record.results_exist(job.record_dir):
        outcome = RowOutcome(job.name, "done", f"{wall_s:.1f} s")
        say(sweep_record.progress_line(job, outcome.status, outcome.detail))
        return outcome
    if returncode == row_processes.STOPPED_EXIT:
        outcome = RowOutcome(job.name, "stopped", f"checkpointed and stopped after {wall_s:.1f} s (rerun to resume)")
        say(sweep_record.progress_line(job, outcome.status, outcome.detail))
        return outcome
    status = "failed" if returncode != 0 else "incomplete"
    why = f"exit {returncode}" if returncode != 0 else "exit 0 but no results.json (rerun to resume)"
    outcome = RowOutcome(job.name, status, f"{why}, {wall_s:.1f} s, log: {log_path}")
    say(sweep_record.progress_line(job, status, outcome.detail) + "\n" + sweep_record.log_tail(log_path))
    return outcome


class SweepClock:
    """How far a local sweep has got, and when it should end, from what each row's runs cost.

    Parameters
    ----------
    jobs : Sequence[RowJob]
        Every run of the sweep, finished ones included (their ``results.json`` gives their row's cost).
    parallel : int
        Runs at a time.
    force : bool
        Whether finished runs run again (then every job is to run).

    Notes
    -----
    A run's cost is its row's (on its corpus, in a sweep over corpora): the mean ``wall_s`` in the
    ``results.json`` of the row's finished runs (the training run's own clock, summed over its resumes), from
    this launch or an earlier one. Seeds of a row cost about the same; rows differ several-fold (a Table 2
    sweep's N = 2 row against its big row), so one mean over all runs misleads, and a resumed run's short wall
    misleads more. A row with no finished run yet costs the mean of the rows that have one (or, before any
    has, the mean wall of the runs ended in this launch). A run stopped part-way costs the fraction of its
    steps still to train (the last step in its ``metrics.jsonl`` against the config's ``num_train_steps``),
    and a running one what is left after the time it has run. The ETA is the work left shared over
    ``parallel`` slots, and at least the longest run left.
    """

    def __init__(self, jobs: Sequence[RowJob], parallel: int, force: bool = False) -> None:
        self.parallel = parallel
        self.to_run = {job.name: job for job in jobs if force or not sweep_record.results_exist(job.record_dir)}
        self.row_walls: dict[str, list[float]] = {}
        for job in jobs:  # With force, finished runs run again; their last results still say their cost.
            self._record_cost(job)
        self.fraction_left = {name: _fraction_left(job.record_dir) for name, job in self.to_run.items()}
        self.started_at: dict[str, float] = {}
        self.ended: list[float] = []

    def _record_cost(self, job: RowJob) -> None:
        wall_s = _recorded_wall(job.record_dir)
        if wall_s is not None:
            self.row_walls.setdefault(job.row_key, []).append(wall_s)

    def started(self, job: RowJob, now: float) -> None:
        """Record that ``job`` began at ``now`` (``time.monotonic()``).

        Parameters
        ----------
        job : RowJob
            The run.
        now : float
            Its start on the monotonic clock.
        """
        self.started_at[job.name] = now

    def finished(self, job: RowJob, wall_s: float, now: float) -> str:
        """Record that ``job`` ended after ``wall_s`` seconds; return the progress line to print.

        Parameters
        ----------
        job : RowJob
            The run (done, failed or incomplete; a stopped run is not recorded).
        wall_s : float
            Its wall time in this launch.
        now : float
            The time it ended on the monotonic clock.

        Returns
        -------
        str
            E.g. ``"3 of 60 runs ended, 57 to go: ETA 14h45m (from each row's finished runs, 2 at a time)"``.
        """
        self.ended.append(wall_s)
        self.to_run.pop(job.name, None)
        self.started_at.pop(job.name, None)
        self._record_cost(job)
        left = len(self.to_run)
        total = len(self.ended) + left
        eta = self.eta(now)
        eta_text = "unknown" if eta is None else _clock(eta)
        return (f"{len(self.ended)} of {total} runs ended, {left} to go: ETA {eta_text} "
                f"(from each row's finished runs, {self.parallel} at a time)")

    def _row_cost(self, row: str) -> float | None:
        means = {name: sum(walls) / len(walls) for name, walls in self.row_walls.items() if walls}
        if row in means:
            return means[row]
        if means:
            return sum(means.values()) / len(means)
        return sum(self.ended) / len(self.ended) if self.ended else None

    def eta(self, now: float) -> float | None:
        """Seconds until the runs left should have ended; None before any cost is known.

        Parameters
        ----------
        now : float
            The current time on the monotonic clock.

        Returns
        -------
        float or None
            The work left over ``parallel`` slots, at least the longest run left; 0 when none is left.
        """
        remaining = []
        for name, job in self.to_run.items():
            cost = self._row_cost(job.row_key)
            if cost is None:
                return None
            left = cost * self.fraction_left[name]
            if name in self.started_at:
                left -= now - self.started_at[name]
            remaining.append(max(left, 0.0))
        if not remaining:
            return 0.0
        return max(sum(remaining) / self.parallel, max(remaining))


def _recorded_wall(record_dir: str) -> float | None:
    """The ``wall_s`` of the run's ``results.json`` (None when absent or unreadable)."""
    try:
        with open(os.path.join(record_dir, run_files.RESULTS_FILE)) as file:
            wall_s = json.load(file).get("wall_s")
    except (OSError, ValueError, AttributeError):
        return None
    return float(wall_s) if isinstance(wall_s, (int, float)) and wall_s > 0 else None


def _fraction_left(record_dir: str) -> float:
    """The share of a run's steps still to train: 1 for a new run, less for one stopped part-way.

    Parameters
    ----------
    record_dir : str
        The run's directory (its ``config.json`` and ``metrics.jsonl``, when it has started before).

    Returns
    -------
    float
        ``1 - last logged training step / num_train_steps``, in [0, 1]; 1 when the config is missing or
        unreadable or no training step was logged.
    """
    try:
        with open(os.path.join(record_dir, run_files.CONFIG_FILE)) as file:
            planned = int(json.load(file)["num_train_steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return 1.0
    steps, _ = sweep_rows.read_metric_curve(record_dir, TRAIN_LOSS_KEY)  # Skips a line cut by a kill.
    if planned <= 0 or not steps:
        return 1.0
    return min(max(1.0 - steps[-1] / planned, 0.0), 1.0)


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def run_local(jobs: Sequence[RowJob], *, repo_dir: str, parallel: int = 1, force: bool = False,
              pin_cpus: bool = False, say: Callable[[str], None] = print) -> list[RowOutcome]:
    """Run the rows' commands on this machine.

    Parameters
    ----------
    jobs : Sequence[RowJob]
        The rows (from ``sweep_spec.row_jobs``).
    repo_dir : str
        Directory to run the commands from (the repository root).
    parallel : int
        How many rows run at the same time.
    force : bool
        Rerun rows that already have ``results.json`` (the entry point resumes them).
    pin_cpus : bool
        Keep each running row to its own share of the CPUs (:func:`cpu_slots`); ignored where there is
        nothing to split.
    say : Callable[[str], None]
        Where progress lines go.

    Returns
    -------
    list[RowOutcome]
        One per row, in the order of ``jobs``.
    """
    if parallel < 1:
        raise ValueError(f"--parallel={parallel}: must be at least 1.")
    lock = threading.Lock()

    def locked_say(text: str) -> None:
        with lock:
            say(text)

    free_slots: queue.Queue = queue.Queue()
    slots: Sequence[frozenset[int] | None] = (cpu_slots(parallel) if pin_cpus else None) or [None] * parallel
    for slot in slots:
        free_slots.put(slot)

    clock = SweepClock(jobs, parallel, force)

    def run_one(job: RowJob) -> RowOutcome:
        if not force and sweep_record.results_exist(job.record_dir):
            locked_say(sweep_record.progress_line(job, "skipped", "results.json exists"))
            return RowOutcome(job.name, "skipped", "results.json exists")
        slot = free_slots.get()  # One is free: at most `parallel` rows run at once.
        start = time.monotonic()
        with lock:
            clock.started(job, start)
        try:
            outcome = _run_row(job, repo_dir, locked_say, slot)
        finally:
            free_slots.put(slot)
        if outcome.status != "stopped":
            with lock:
                now = time.monotonic()
                line = clock.finished(job, now - start, now)
            locked_say(" " * 8 + line)
        return outcome

    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
        return list(pool.map(run_one, jobs))


def describe_local(jobs: Sequence[RowJob], *, repo_dir: str) -> str:
    """The commands a local run would execute (for ``--dry_run``).

    Parameters
    ----------
    jobs : Sequence[RowJob]
        The rows.
    repo_dir : str
        Directory the commands run from.

    Returns
    -------
    str
        One ``cd <repo> && <command> >> <log> 2>&1`` line per row.
    """
    lines = []
    for job in jobs:
        log_path = os.path.join(job.record_dir, run_files.LOG_FILE)
        lines.append(f"cd {shlex.quote(repo_dir)} && {shlex.join(job.argv)} >> {shlex.quote(log_path)} 2>&1")
    return "\n".join(lines)
