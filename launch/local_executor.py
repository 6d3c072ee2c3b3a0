"""Run a sweep's rows on this machine, one after another or ``parallel`` at a time.

Each row's stdout and stderr are appended to ``ROOT/<row>/log.txt``. Rows whose ``results.json``
exists are skipped; a row that stopped part-way is rerun, and the entry point resumes it from its
latest checkpoint. Rows run in their own process groups; SIGINT/SIGTERM to the sweep reach them, they
checkpoint and exit, and no new row starts (:mod:`launch.row_processes`). A failing row does not stop the others. With seeds, "row" here is one seed of a
row, in ``ROOT/<row>/seed_<k>/``: each seed is skipped, resumed or rerun on its own. After each run
ends, a line gives the runs left and an ETA from the mean time of those ended (:class:`SweepClock`).

With ``pin_cpus`` (``launch.sweep --pin_cpus``, the default) and ``parallel > 1``, the sweep's CPUs are
split into ``parallel`` disjoint sets and each running row is kept to one of them. XLA sizes its thread
pools by the CPUs a process may use, so rows sharing a machine no longer run ``parallel`` times as many
compute threads as there are cores, switching between them. Measured on our 2-core machine, two rows
of ``configs/table2_small.py`` at a time (base and A1, ~0.8M parameters, 1,024-token batches): 2,000 to
2,700 target tokens/s per row unpinned, with a third of the CPU time spent in the kernel, against 3,700
to 4,100 pinned, with none: 1.6x the sweep's throughput.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import queue
import shlex
import threading
import time
from typing import Callable, Sequence

from attention_jax import run_files
from launch import row_processes, sweep_record
from launch.sweep_spec import RowJob, RowOutcome


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
    """How far a local sweep has got, and when it should end, from the runs finished so far.

    Parameters
    ----------
    to_run : int
        Runs this sweep has to run (skipped ones, finished earlier, not counted).
    parallel : int
        Runs at a time.
    """

    def __init__(self, to_run: int, parallel: int) -> None:
        self.to_run, self.parallel = to_run, parallel
        self.walls: list[float] = []

    def finished(self, wall_s: float) -> str:
        """Record a run that ended after ``wall_s`` seconds; return the progress line to print.

        Parameters
        ----------
        wall_s : float
            Its wall time.

        Returns
        -------
        str
            E.g. ``"3 of 60 runs ended, 57 to go: ETA 4h45m (10m00s a run, 2 at a time)"``.

        Notes
        -----
        The ETA assumes the runs left take the mean time of those ended, ``parallel`` at a time.
        """
        self.walls.append(wall_s)
        left = max(self.to_run - len(self.walls), 0)
        mean = sum(self.walls) / len(self.walls)
        eta = math.ceil(left / self.parallel) * mean if left else 0.0
        return (f"{len(self.walls)} of {self.to_run} runs ended, {left} to go: ETA {_clock(eta)} "
                f"({_clock(mean)} a run, {self.parallel} at a time)")


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
    for slot in (cpu_slots(parallel) if pin_cpus else None) or [None] * parallel:
        free_slots.put(slot)

    clock = SweepClock(sum(force or not sweep_record.results_exist(job.record_dir) for job in jobs), parallel)

    def run_one(job: RowJob) -> RowOutcome:
        if not force and sweep_record.results_exist(job.record_dir):
            locked_say(sweep_record.progress_line(job, "skipped", "results.json exists"))
            return RowOutcome(job.name, "skipped", "results.json exists")
        slot = free_slots.get()  # One is free: at most `parallel` rows run at once.
        start = time.monotonic()
        try:
            outcome = _run_row(job, repo_dir, locked_say, slot)
        finally:
            free_slots.put(slot)
        if outcome.status != "stopped":
            with lock:
                line = clock.finished(time.monotonic() - start)
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
