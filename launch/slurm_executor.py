"""Submit a sweep's rows to SLURM: one ``sbatch`` script per row in ``ROOT/<row>/job.sbatch``.

With seeds (``launch.sweep --seeds=K``) each seed of a row is its own job, with its script, log and
launch record in ``ROOT/<row>/seed_<k>/``; "row" below means one such run.

A row on several nodes starts one process per node with ``srun`` (``--ntasks-per-node=1``, each
process driving all of its node's accelerators), or ``tasks_per_node`` processes per node (e.g. one per
GPU); with ``SLURM_NTASKS > 1`` the training entry point joins the processes with
``jax.distributed``, which reads the coordinator, process ids and local devices from SLURM's
environment. When training stops on SIGTERM (the pre-timeout ``--signal``, preemption, ``scontrol
requeue``) it checkpoints within a step; a script whose training exited with status 75 requeues its job
(``scontrol requeue``), and the requeued job resumes from the checkpoint. The job's output is appended to
``ROOT/<row>/log.txt``; ``ROOT/<row>/launch.json`` records the job id.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import time
from typing import Callable, Sequence

from attention_jax.foundation import run_files
from launch import sweep_record
from launch.sweep_spec import RowJob, RowOutcome

SCRIPT_FILE = "job.sbatch"
PRE_TIMEOUT_SIGNAL_S = 120  # With a time limit, SIGTERM reaches training this many seconds before it.
# squeue states after which a job does no more work.
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                          "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
INSTALL_HINT = ("run on a SLURM login node, or install SLURM (Debian/Ubuntu: apt-get install slurm-wlm "
                "munge); `bash launch/slurm_local.sh start` sets up a one-machine cluster as root")


@dataclasses.dataclass(frozen=True)
class SlurmResources:
    """What each row's job asks SLURM for.

    Attributes
    ----------
    nodes : int
        Nodes per row.
    tasks_per_node : int
        Training processes per node (1: one process drives all of the node's devices).
    gpus_per_node : int
        GPUs per node (0: none requested).
    time : str
        Time limit (``HH:MM:SS`` or ``D-HH:MM:SS``; empty: the partition's default). With a limit, SLURM
        sends SIGTERM 120 s before it (``--signal``): training checkpoints and exits with status 75,
        and the job script requeues the job, which resumes from that checkpoint. Jobs are always
        submitted with ``--requeue`` so that preemption requeues them too.
    partition, account : str
        Empty: the cluster's defaults.
    cpus_per_task : int
        CPUs for each process (0: SLURM's default).
    mem : str
        Memory per node, e.g. ``64G`` (empty: SLURM's default).
    extra_options : tuple[str, ...]
        More ``#SBATCH`` options, e.g. ``("--qos=high", "--exclusive")``.
    setup : tuple[str, ...]
        Shell lines run before training, e.g. ``("source ~/venv/bin/activate",)``.
    """

    nodes: int = 1
    tasks_per_node: int = 1
    gpus_per_node: int = 0
    time: str = ""
    partition: str = ""
    account: str = ""
    cpus_per_task: int = 0
    mem: str = ""
    extra_options: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.tasks_per_node < 1:
            raise ValueError(f"--nodes={self.nodes}, --tasks_per_node={self.tasks_per_node}: "
                             "both must be >= 1.")
        if self.gpus_per_node < 0 or self.cpus_per_task < 0:
            raise ValueError("--gpus_per_node and --cpus_per_task must be >= 0.")

    def directives(self) -> list[str]:
        """The ``#SBATCH`` options for these resources (without job name and output).

        Returns
        -------
        list[str]
            Options such as ``--nodes=2``.
        """
        options = [f"--nodes={self.nodes}", f"--ntasks-per-node={self.tasks_per_node}"]
        optional = [("--gpus-per-node", self.gpus_per_node), ("--cpus-per-task", self.cpus_per_task),
                    ("--mem", self.mem), ("--time", self.time), ("--partition", self.partition),
                    ("--account", self.account)]
        options += [f"{name}={value}" for name, value in optional if value]
        # Preemption and requeueing: SLURM may requeue the job (--requeue); with a time limit the
        # training processes get SIGTERM 120 s before it, checkpoint and exit, and the script requeues.
        options.append("--requeue")
        if self.time:
            options.append(f"--signal=TERM@{PRE_TIMEOUT_SIGNAL_S}")
        return options + list(self.extra_options)


def job_name(name_prefix: str, job: RowJob) -> str:
    """The SLURM job name of a run: ``<prefix>-<row>``, or ``<prefix>-<row>-seed_<k>`` with seeds.

    Parameters
    ----------
    name_prefix : str
        The sweep's report name (e.g. ``table2``).
    job : RowJob
        The run.

    Returns
    -------
    str
        The name given to ``--job-name``.
    """
    return f"{name_prefix}-{job.name.replace('/', '-')}"


def job_script(job: RowJob, resources: SlurmResources, *, repo_dir: str, job_name: str) -> str:
    """The ``sbatch`` script of one row.

    Parameters
    ----------
    job : RowJob
        The row.
    resources : SlurmResources
        What to ask for.
    repo_dir : str
        The repository root on the cluster's shared filesystem.
    job_name : str
        SLURM job name.

    Returns
    -------
    str
        A bash script with ``#SBATCH`` lines; training runs under ``srun``.
    """
    log_path = os.path.join(job.record_dir, run_files.LOG_FILE)
    options = [f"--job-name={job_name}", f"--output={log_path}", "--open-mode=append"]
    options += resources.directives()
    lines = ["#!/bin/bash", f"# Row {job.name}, written by launch.sweep; submit with: sbatch {SCRIPT_FILE}"]
    lines += [f"#SBATCH {option}" for option in options]
    lines += ["set -uo pipefail", f"cd {shlex.quote(repo_dir)}", *resources.setup,
              'echo "=== $(date "+%Y-%m-%d %H:%M:%S") job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
              "# srun starts --ntasks-per-node processes on each node; with SLURM_NTASKS > 1 the entry point",
              "# joins them (jax.distributed reads SLURM's environment).",
              "srun --kill-on-bad-exit=1 " + shlex.join(job.argv), "status=$?",
              f"# {run_files.STOPPED_EXIT_STATUS}: training checkpointed on SIGTERM (e.g. the pre-timeout signal) "
              "and stopped; requeue the job",
              "# so that it resumes from that checkpoint (the work directory's lock keeps one trainer at a time).",
              f"if [[ $status -eq {run_files.STOPPED_EXIT_STATUS} ]]; then",
              '  echo "=== $(date "+%Y-%m-%d %H:%M:%S") job $SLURM_JOB_ID checkpointed and stopped; requeueing"',
              '  scontrol requeue "$SLURM_JOB_ID" && sleep 600  # SLURM ends this run when it requeues the job.',
              "fi",
              'exit "$status"', ""]
    return "\n".join(lines)


def require_binary(name: str) -> str:
    """Path of a SLURM command, or a ``FileNotFoundError`` saying how to get it.

    Parameters
    ----------
    name : str
        ``sbatch`` or ``squeue``.

    Returns
    -------
    str
        The executable's path.
    """
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"`{name}` not found on PATH: {INSTALL_HINT}.")
    return path


def job_states(job_ids: Sequence[str]) -> dict[str, str]:
    """Current states of SLURM jobs, from ``squeue``.

    Parameters
    ----------
    job_ids : Sequence[str]
        Job ids.

    Returns
    -------
    dict[str, str]
        Job id -> state (``PENDING``, ``RUNNING``, ``COMPLETED``, ...); jobs SLURM no longer lists
        are absent.

    Notes
    -----
    Raises ``RuntimeError`` with squeue's message when it fails.
    """
    if not job_ids:
        return {}
    command = [require_binary("squeue"), "-h", "-o", "%i|%T", "--states=all", "-j", ",".join(job_ids)]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0 and "Invalid job id" not in completed.stderr:
        raise RuntimeError(f"{shlex.join(command)} failed: {completed.stderr.strip()}")
    states = {}
    for line in completed.stdout.splitlines():
        job_id, _, state = line.strip().partition("|")
        states[job_id] = state
    return states


def _active_job(job: RowJob) -> str | None:
    job_id = sweep_record.read_launch(job.record_dir).get("job_id")
    if job_id is None:
        return None
    state = job_states([job_id]).get(job_id)
    return job_id if state is not None and state not in FINAL_STATES else None


def _submit(job: RowJob, script: str) -> RowOutcome:
    script_path = os.path.join(job.record_dir, SCRIPT_FILE)
    os.makedirs(job.record_dir, exist_ok=True)
    with open(script_path, "w", encoding="utf-8") as file:
        file.write(script)
    command = [require_binary("sbatch"), "--parsable", script_path]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        return RowOutcome(job.name, "failed", f"sbatch {script_path}: {completed.stderr.strip()}")
    job_id = completed.stdout.strip().split(";")[0]
    sweep_record.write_launch(job.record_dir, executor="slurm", argv=list(job.argv), job_id=job_id,
                              script=script_path)
    return RowOutcome(job.name, "submitted", f"job {job_id}")


def submit_slurm(jobs: Sequence[RowJob], resources: SlurmResources, *, repo_dir: str, name_prefix: str,
                 force: bool = False, say: Callable[[str], None] = print) -> list[RowOutcome]:
    """Write and submit one ``sbatch`` script per row.

    Parameters
    ----------
    jobs : Sequence[RowJob]
        The rows.
    resources : SlurmResources
        What each job asks for.
    repo_dir : str
        Repository root on the cluster.
    name_prefix : str
        Job names are ``<name_prefix>-<row>`` (``-seed_<k>`` added with seeds, :func:`job_name`).
    force : bool
        Submit rows that already have ``results.json`` (the entry point resumes them).
    say : Callable[[str], None]
        Where progress lines go.

    Returns
    -------
    list[RowOutcome]
        ``submitted`` (detail ``job <id>``), ``skipped`` (finished), ``queued`` (its job is still
        pending or running) or ``failed`` (sbatch refused it).
    """
    require_binary("sbatch")
    outcomes = []
    for job in jobs:
        active = _active_job(job)
        if not force and sweep_record.results_exist(job.record_dir):
            outcome = RowOutcome(job.name, "skipped", "results.json exists")
        elif active is not None:
            outcome = RowOutcome(job.name, "queued", f"job {active} is still pending or running")
        else:
            script = job_script(job, resources, repo_dir=repo_dir, job_name=job_name(name_prefix, job))
            outcome = _submit(job, script)
        say(sweep_record.progress_line(job, outcome.status, outcome.detail))
        outcomes.append(outcome)
    return outcomes


def wait_for_jobs(jobs: Sequence[RowJob], outcomes: Sequence[RowOutcome], *, poll_s: float = 30.0,
                  say: Callable[[str], None] = print) -> list[RowOutcome]:
    """Poll ``squeue`` until the submitted or queued rows' jobs end, then check their results.

    Parameters
    ----------
    jobs : Sequence[RowJob]
        The rows.
    outcomes : Sequence[RowOutcome]
        :func:`submit_slurm`'s outcomes, in the same order.
    poll_s : float
        Seconds between polls.
    say : Callable[[str], None]
        Where progress lines go (one per state change).

    Returns
    -------
    list[RowOutcome]
        ``done`` for rows that wrote ``results.json``; ``failed`` (with the log's last lines) for the
        others; earlier outcomes (skipped, failed submissions) unchanged.
    """
    waiting = {job.name: sweep_record.read_launch(job.record_dir)["job_id"]
               for job, outcome in zip(jobs, outcomes) if outcome.status in ("submitted", "queued")}
    job_ids = dict(waiting)
    by_row = {job.name: job for job in jobs}
    last_state: dict[str, str] = {}
    while waiting:
        states = job_states(list(waiting.values()))
        for row, job_id in list(waiting.items()):
            state = states.get(job_id, "GONE")
            if state != last_state.get(row):
                say(sweep_record.progress_line(by_row[row], state.lower(), f"job {job_id}"))
                last_state[row] = state
            if state in FINAL_STATES or state == "GONE":
                del waiting[row]
        if waiting:
            time.sleep(poll_s)
    final = []
    for job, outcome in zip(jobs, outcomes):
        if job.name not in last_state:
            final.append(outcome)
        elif sweep_record.results_exist(job.record_dir):
            final.append(RowOutcome(job.name, "done", f"job {job_ids[job.name]}"))
        else:
            log_path = os.path.join(job.record_dir, run_files.LOG_FILE)
            say(f"{job.name}: job ended ({last_state[job.name].lower()}) without results.json; "
                f"log {log_path}:\n{sweep_record.log_tail(log_path)}")
            final.append(RowOutcome(job.name, "failed", f"{last_state[job.name].lower()}, log: {log_path}"))
    return final


def describe_slurm(jobs: Sequence[RowJob], resources: SlurmResources, *, repo_dir: str,
                   name_prefix: str) -> str:
    """The scripts that :func:`submit_slurm` would write (for ``--dry_run``).

    Parameters
    ----------
    jobs : Sequence[RowJob]
        The rows.
    resources : SlurmResources
        What each job asks for.
    repo_dir : str
        Repository root on the cluster.
    name_prefix : str
        Job name prefix.

    Returns
    -------
    str
        Each script under a ``# ---- ROOT/<row>/job.sbatch`` header.
    """
    parts = []
    for job in jobs:
        script = job_script(job, resources, repo_dir=repo_dir, job_name=job_name(name_prefix, job))
        parts.append(f"# ---- {os.path.join(job.record_dir, SCRIPT_FILE)}\n{script}")
    return "\n".join(parts)
