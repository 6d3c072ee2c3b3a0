"""Run a sweep's rows on a Cloud TPU VM slice, one row at a time, over ``gcloud ... ssh --worker=all``.

Each row starts the same command on every host of the slice; JAX finds the other hosts itself and the
entry point joins them (``jax.distributed``). The repository and its environment must already be on
every host (``--repo_dir``, ``--setup``), and the rows' work directories should be on storage every
host reaches (``--remote_root=gs://bucket/sweep``). gcloud's output (all hosts) is appended to the local
``ROOT/<row>/log.txt``; a row whose command succeeded is recorded in ``ROOT/<row>/launch.json`` and
skipped when the sweep is launched again. Copy the results back for the report with
``gcloud storage rsync -r gs://bucket/sweep ROOT``. With seeds each seed of a row is run, recorded and
skipped on its own (``ROOT/<row>/seed_<k>/``, ``<remote_root>/<row>/seed_<k>`` on the hosts).
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
from typing import Callable, Sequence

from launch import sweep_record
from launch.sweep_spec import RowJob, RowOutcome


@dataclasses.dataclass(frozen=True)
class TpuTarget:
    """Which TPU VM slice runs the rows, and how to start a row on its hosts.

    Attributes
    ----------
    tpu_name : str
        Name of the TPU VM (``gcloud compute tpus tpu-vm list``).
    zone : str
        Its zone, e.g. ``us-central2-b``.
    project : str
        Google Cloud project (empty: gcloud's default).
    repo_dir : str
        The repository on each host, relative to the login directory or absolute.
    setup : tuple[str, ...]
        Shell commands run first on each host, e.g. ``("source ~/venv/bin/activate",)``.
    """

    tpu_name: str
    zone: str
    project: str = ""
    repo_dir: str = "attention_jax"
    setup: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        named = (("--tpu_name", self.tpu_name), ("--zone", self.zone))
        missing = [flag for flag, value in named if not value]
        if missing:
            raise ValueError(f"--executor=tpu needs {' and '.join(missing)} (the TPU VM and its zone).")


def _shell_path(path: str) -> str:
    """Quote a path for the remote shell, keeping a leading ``~/`` expandable."""
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


def gcloud_argv(job: RowJob, target: TpuTarget) -> list[str]:
    """The ``gcloud compute tpus tpu-vm ssh`` command that runs one row on every host.

    Parameters
    ----------
    job : RowJob
        The row.
    target : TpuTarget
        The slice.

    Returns
    -------
    list[str]
        gcloud's argument vector; the remote command is ``cd <repo> && <setup> && <training>``.
    """
    remote = " && ".join([f"cd {_shell_path(target.repo_dir)}", *target.setup, shlex.join(job.argv)])
    argv = ["gcloud", "compute", "tpus", "tpu-vm", "ssh", target.tpu_name, f"--zone={target.zone}"]
    if target.project:
        argv.append(f"--project={target.project}")
    return argv + ["--worker=all", f"--command={remote}"]


def require_gcloud() -> str:
    """Path of ``gcloud``, or a ``FileNotFoundError`` saying how to install it.

    Returns
    -------
    str
        The executable's path.
    """
    path = shutil.which("gcloud")
    if path is None:
        raise FileNotFoundError(
            "`gcloud` not found on PATH: install the Google Cloud CLI "
            "(https://cloud.google.com/sdk/docs/install) and run `gcloud auth login`."
        )
    return path


def _already_done(job: RowJob) -> bool:
    if sweep_record.results_exist(job.record_dir):
        return True
    launch = sweep_record.read_launch(job.record_dir)
    return launch.get("executor") == "tpu" and launch.get("returncode") == 0


def run_tpu(jobs: Sequence[RowJob], target: TpuTarget, *, force: bool = False,
            say: Callable[[str], None] = print) -> list[RowOutcome]:
    """Run the rows one after another on the slice.

    Parameters
    ----------
    jobs : Sequence[RowJob]
        The rows (``workdir`` as seen on the TPU hosts).
    target : TpuTarget
        The slice.
    force : bool
        Rerun rows recorded as finished (the entry point resumes them).
    say : Callable[[str], None]
        Where progress lines go.

    Returns
    -------
    list[RowOutcome]
        ``done``, ``skipped`` or ``failed`` (with the log's last lines printed) per row.
    """
    require_gcloud()
    outcomes = []
    for job in jobs:
        if not force and _already_done(job):
            outcomes.append(RowOutcome(job.name, "skipped", "finished earlier"))
            say(sweep_record.progress_line(job, "skipped", "finished earlier"))
            continue
        argv = gcloud_argv(job, target)
        returncode, wall_s, log_path = sweep_record.run_logged(job, argv, executor="tpu", say=say)
        if returncode == 0:
            outcome = RowOutcome(job.name, "done", f"{wall_s:.1f} s")
            say(sweep_record.progress_line(job, "done", outcome.detail))
        else:
            outcome = RowOutcome(job.name, "failed", f"exit {returncode}, {wall_s:.1f} s, log: {log_path}")
            say(sweep_record.progress_line(job, "failed", outcome.detail) + "\n"
                + sweep_record.log_tail(log_path))
        outcomes.append(outcome)
    return outcomes


def describe_tpu(jobs: Sequence[RowJob], target: TpuTarget) -> str:
    """The gcloud commands :func:`run_tpu` would run (for ``--dry_run``).

    Parameters
    ----------
    jobs : Sequence[RowJob]
        The rows.
    target : TpuTarget
        The slice.

    Returns
    -------
    str
        One shell-quoted command per row.
    """
    return "\n".join(shlex.join(gcloud_argv(job, target)) for job in jobs)
