"""The slurm executor against a real SLURM cluster (started on localhost when possible).

If ``sbatch`` already reaches a working cluster it is used; otherwise, as root with apt-get (or SLURM
already installed), ``launch/slurm_local.sh start`` brings up a one-machine cluster for this module
and ``stop`` shuts it down afterwards. Elsewhere the tests skip, saying why.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest

from launch import slurm_executor
from tests.support import train_support
from tests.support.sweep_cli import (REPO_ROOT, fake_main_env, needs_entry_point, run_sweep,  # noqa: F401
                       tiny_data_dir, tiny_flags)
from tests.support.waiting import wait_for_pattern

pytestmark = [pytest.mark.slow, pytest.mark.end_to_end]
SCRIPT = str(REPO_ROOT / "launch" / "slurm_local.sh")


def _cluster_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    ready = ("idle", "mix", "alloc")
    return states.returncode == 0 and any(state.strip(" *") in ready for state in states.stdout.split())


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    """A SLURM cluster that ``sbatch`` reaches, started here (and stopped after) if needed."""
    if shutil.which("sbatch") and _cluster_answers():
        yield
        return
    if os.geteuid() != 0:
        pytest.skip("no working SLURM cluster, and not root: cannot start one on localhost")
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        pytest.skip("no working SLURM cluster, SLURM not installed and no apt-get to install it")
    started = subprocess.run(["bash", SCRIPT, "start"], capture_output=True, text=True, timeout=900)
    if started.returncode != 0:
        pytest.skip(f"could not start a local SLURM cluster: {started.stderr.strip()[-500:]}")
    yield
    subprocess.run(["bash", SCRIPT, "stop"], capture_output=True, text=True, timeout=120)


def test_two_tiny_rows_train_through_sbatch(slurm_cluster: None, tmp_path: pathlib.Path,
                                           request: pytest.FixtureRequest) -> None:
    needs_entry_point()
    data_dir = request.getfixturevalue("tiny_data_dir")
    root = tmp_path / "t2"
    args = ("--config=configs/table2.py", "--rows=base,A1", "--executor=slurm", f"--root={root}", "--wait",
            "--poll_s=0.5", *tiny_flags(data_dir, 20))
    result = run_sweep(*args)
    logs = "".join((root / row / "log.txt").read_text()[-2000:] for row in ("base", "A1")
                   if (root / row / "log.txt").exists())
    assert result.returncode == 0, result.stdout + result.stderr + logs
    job_ids = [json.loads((root / row / "launch.json").read_text())["job_id"] for row in ("base", "A1")]
    assert all(job_id.isdigit() for job_id in job_ids) and job_ids[0] != job_ids[1]
    for row, job_id in zip(("base", "A1"), job_ids):
        assert re.search(rf"\] {row} +submitted +job {job_id}", result.stdout)
        assert (root / row / "job.sbatch").read_text().startswith("#!/bin/bash")
        assert f"job {job_id} on" in (root / row / "log.txt").read_text()  # Output went to the row's log.
        assert json.loads((root / row / "results.json").read_text())["step"] == 20
    assert "Summary: 2 done" in result.stdout
    table = (root / "table2.md").read_text()
    assert re.search(r"^\| base \| done \| 1 of 1 \|", table, re.M), table
    assert re.search(r"^\| A1 \| done \| 1 of 1 \|", table, re.M), table

    again = run_sweep(*args)
    assert again.returncode == 0 and "Summary: 2 skipped" in again.stdout


def test_failed_job_is_reported_with_its_log(slurm_cluster: None, tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    result = run_sweep("--config=configs/table2.py", "--rows=C1,C2", "--executor=slurm", f"--root={root}",
                       "--main=fake_main", "--wait", "--poll_s=0.5", "--report=false",
                       env=fake_main_env(FAKE_MAIN_FAIL_ROWS="C1"))
    assert result.returncode == 1
    assert "FakeTrainingError: row C1 diverged" in result.stdout
    assert re.search(r"failed C1: failed, log: .*/C1/log.txt", result.stdout)
    assert "Summary: 1 failed, 1 done" in result.stdout


def test_row_on_two_tasks_joins_them_with_jax_distributed(slurm_cluster: None, tmp_path: pathlib.Path,
                                                          request: pytest.FixtureRequest) -> None:
    """What a multi-node row does, on one node: srun starts 2 processes that find each other."""
    needs_entry_point()
    data_dir = request.getfixturevalue("tiny_data_dir")
    root = tmp_path / "t2"
    env = dict(os.environ, XLA_FLAGS=train_support.child_xla_flags())  # One CPU device each.
    result = run_sweep("--config=configs/table2.py", "--rows=base", "--executor=slurm", "--tasks_per_node=2",
                       f"--root={root}", "--wait", "--poll_s=0.5", "--report=false",
                       *tiny_flags(data_dir, 10), env=dict(env, JAX_PLATFORMS="cpu"))
    log = (root / "base" / "log.txt").read_text()
    assert result.returncode == 0, result.stdout + result.stderr + log[-3000:]
    assert "#SBATCH --ntasks-per-node=2" in (root / "base" / "job.sbatch").read_text()
    assert "Process 0 of 2" in log and "Process 1 of 2" in log  # Both processes joined.
    results = json.loads((root / "base" / "results.json").read_text())
    assert (results["step"], results["devices"], results["mesh"]) == (10, 2, {"data": 2})


def _resume_after_requeue(job_id: str, log_path: pathlib.Path, resumed: str, timeout_s: float = 180) -> None:
    """Wait for ``resumed`` in the log; a requeued job waits two minutes to be eligible: start it sooner.

    Not at once: a job started again within a second of its requeue can find its node still revoking
    the old run's credential, and SLURM then fails it ("Job credential revoked").
    """
    deadline = time.monotonic() + timeout_s
    pending_since = None
    while time.monotonic() < deadline:
        if re.search(resumed, log_path.read_text(errors="replace")):
            return
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T %r"], capture_output=True,
                               text=True).stdout.split()
        if state == ["PENDING", "BeginTime"]:
            pending_since = pending_since or time.monotonic()
            if time.monotonic() - pending_since > 5:
                subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], capture_output=True)
        time.sleep(0.5)
    wait_for_pattern(log_path, resumed, 0)  # Fails with the log's tail.


def test_requeued_row_resumes_from_the_checkpoint_it_wrote_on_sigterm(
        slurm_cluster: None, tmp_path: pathlib.Path, request: pytest.FixtureRequest) -> None:
    """scontrol requeue (SLURM stops the job), then SIGTERM to the steps as the pre-timeout --signal
    sends it (the script requeues itself): each time training checkpoints, the job requeues and resumes."""
    needs_entry_point()
    data_dir = request.getfixturevalue("tiny_data_dir")
    root, steps = tmp_path / "t2", 500  # Both stops come before step ~250.
    submitted = run_sweep("--config=configs/table2.py", "--rows=base", "--executor=slurm", f"--root={root}",
                          "--report=false", *tiny_flags(data_dir, steps, checkpoint_every_steps=0,
                                                        eval_every_steps=0, log_every_steps=20))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    assert "#SBATCH --requeue" in (root / "base" / "job.sbatch").read_text()
    job_id = json.loads((root / "base" / "launch.json").read_text())["job_id"]
    log_path = root / "base" / "log.txt"

    wait_for_pattern(log_path, rf"step 100/{steps}", 180)
    subprocess.run(["scontrol", "requeue", job_id], check=True, capture_output=True)
    first_stop = int(wait_for_pattern(log_path, r"Stopped at step (\d+) on request", 60).group(1))
    _resume_after_requeue(job_id, log_path, rf"Resumed from the checkpoint of step {first_stop} ")

    wait_for_pattern(log_path, rf"step {first_stop // 20 * 20 + 100}/{steps}", 180)
    subprocess.run(["scancel", "--signal=TERM", job_id], check=True, capture_output=True)
    stops = wait_for_pattern(log_path, r"(?s)Stopped at step.*Stopped at step (\d+) on request", 60)
    second_stop = int(stops.group(1))
    wait_for_pattern(log_path, rf"job {job_id} checkpointed and stopped; requeueing", 60)
    _resume_after_requeue(job_id, log_path, rf"Resumed from the checkpoint of step {second_stop} ")

    deadline = time.monotonic() + 240
    while not (root / "base" / "results.json").exists() and time.monotonic() < deadline:
        time.sleep(1)
    log = log_path.read_text()
    assert json.loads((root / "base" / "results.json").read_text())["step"] == steps, log[-3000:]
    assert len(re.findall(rf"=== .* job {job_id} on", log)) == 3  # Three runs of the same job, one at a time.
    assert "in use by another trainer" not in log
    records = [json.loads(line) for line in (root / "base" / "metrics.jsonl").read_text().splitlines()]
    logged = [record["step"] for record in records if "train/loss" in record]
    assert logged == sorted(set(logged)) and logged[-1] == steps
    assert first_stop in logged and second_stop in logged  # Each stop logged its step, then resumed after it.
    for _ in range(60):
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T", "--states=all"], capture_output=True,
                               text=True).stdout.strip()
        if state in slurm_executor.FINAL_STATES:
            break
        time.sleep(0.5)
    assert state == "COMPLETED"
