"""launch.local_executor: rows side by side each on their own share of the CPUs; progress with an ETA."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

from launch import local_executor
from launch.sweep_spec import RowJob


def test_cpu_slots_split_the_cpus_into_disjoint_nearly_equal_sets() -> None:
    cpus = frozenset({0, 1, 2, 3, 4, 6, 7})  # CPU 5 not ours: sets follow the CPUs we have, in order.
    assert local_executor.cpu_slots(3, cpus) == [frozenset({0, 1, 2}), frozenset({3, 4}), frozenset({6, 7})]
    assert local_executor.cpu_slots(2, frozenset({0, 1})) == [frozenset({0}), frozenset({1})]
    assert local_executor.cpu_slots(1, cpus) is None  # One row: it may use everything.
    assert local_executor.cpu_slots(3, frozenset({0, 1})) is None  # Fewer CPUs than rows: no pinning.


def _affinity_job(tmp_path: pathlib.Path, index: int) -> RowJob:
    record_dir = tmp_path / f"row{index}"
    script = ("import json, os, sys, time; time.sleep(0.5); "
              f"json.dump(sorted(os.sched_getaffinity(0)), open({str(record_dir / 'cpus.json')!r}, 'w')); "
              f"open({str(record_dir / 'results.json')!r}, 'w').write('{{}}')")
    return RowJob(row=f"row{index}", index=index + 1, total=4, workdir=str(record_dir), record_dir=str(record_dir),
                  argv=(sys.executable, "-c", script))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs at least 2 CPUs to pin two rows apart")
def test_parallel_rows_run_on_disjoint_cpus_only_when_pinned(tmp_path: pathlib.Path) -> None:
    ours = sorted(os.sched_getaffinity(0))
    jobs = [_affinity_job(tmp_path / "pinned", index) for index in range(4)]
    outcomes = local_executor.run_local(jobs, repo_dir=str(tmp_path), parallel=2, pin_cpus=True, say=lambda _: None)
    assert [outcome.status for outcome in outcomes] == ["done"] * 4
    seen = [json.loads((pathlib.Path(job.record_dir) / "cpus.json").read_text()) for job in jobs]
    slots = [sorted(slot) for slot in local_executor.cpu_slots(2)]
    assert all(cpus in slots for cpus in seen)  # Every row ran on one half of our CPUs...
    assert sorted({tuple(cpus) for cpus in seen}) == sorted(tuple(slot) for slot in slots)  # ...both halves used.
    unpinned = [_affinity_job(tmp_path / "unpinned", index) for index in range(2)]
    local_executor.run_local(unpinned, repo_dir=str(tmp_path), parallel=2, pin_cpus=False, say=lambda _: None)
    assert all(json.loads((pathlib.Path(job.record_dir) / "cpus.json").read_text()) == ours for job in unpinned)


def _seed_job(root: pathlib.Path, row: str, seed: int, *, wall_s: float | None = None,
              stopped_at_step: int | None = None) -> RowJob:
    """A run of ``row`` at ``seed`` under ``root``: finished after ``wall_s``, stopped part-way, or new."""
    record_dir = root / row / f"seed_{seed}"
    record_dir.mkdir(parents=True)
    if wall_s is not None:
        (record_dir / "results.json").write_text(json.dumps({"wall_s": wall_s}))
    if stopped_at_step is not None:
        (record_dir / "config.json").write_text(json.dumps({"num_train_steps": 3000}))
        lines = [json.dumps({"step": step, "train/loss": 5.0}) for step in range(100, stopped_at_step + 1, 100)]
        (record_dir / "metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 16')  # Cut short by a kill.
    return RowJob(row=row, index=1, total=1, workdir=str(record_dir), record_dir=str(record_dir),
                  argv=(sys.executable, "-c", "pass"), seed=seed)


def test_sweep_clock_costs_each_run_as_its_rows_finished_runs(tmp_path: pathlib.Path) -> None:
    jobs = [_seed_job(tmp_path, "fast", 0, wall_s=600.0), _seed_job(tmp_path, "slow", 0, wall_s=3600.0),
            _seed_job(tmp_path, "fast", 1), _seed_job(tmp_path, "slow", 1), _seed_job(tmp_path, "new", 0),
            _seed_job(tmp_path, "slow", 2, stopped_at_step=1500)]
    forced = local_executor.SweepClock(jobs, parallel=2, force=True)  # Finished runs again, at their cost.
    assert forced.eta(now=0.0) == pytest.approx((600 + 3600 + 600 + 3600 + 2100 + 1800) / 2)
    clock = local_executor.SweepClock(jobs, parallel=2)
    assert clock.fraction_left == {"fast/seed_1": 1.0, "slow/seed_1": 1.0, "new/seed_0": 1.0, "slow/seed_2": 0.5}
    # Before anything ran: fast 600 + slow 3,600 + new (the mean of the rows' means, 2,100) + half of slow.
    assert clock.eta(now=0.0) == pytest.approx((600 + 3600 + 2100 + 1800) / 2)
    clock.started(jobs[2], now=0.0)
    clock.started(jobs[3], now=0.0)
    (tmp_path / "fast" / "seed_1" / "results.json").write_text(json.dumps({"wall_s": 800.0}))
    line = clock.finished(jobs[2], 850.0, now=850.0)
    # fast now costs 700 (600 and 800), so new costs (700 + 3,600) / 2 = 2,150; slow/seed_1 has run 850 s.
    left = [3600 - 850, 2150, 1800]
    assert clock.eta(now=850.0) == pytest.approx(sum(left) / 2)
    assert line == "1 of 4 runs ended, 3 to go: ETA 55m50s (from each row's finished runs, 2 at a time)"
    # slow/seed_1 overran its estimate (0 left); new's 2,150 s is more than the shared (2,150 + 1,800) / 2.
    assert clock.eta(now=10_000.0) == pytest.approx(2150.0)
    for job, now in ((jobs[3], 3700.0), (jobs[4], 5000.0)):
        clock.finished(job, 1000.0, now)
    assert clock.eta(now=5000.0) == pytest.approx(1800.0)  # Half of slow's cost, one run: no sharing.
    assert clock.finished(jobs[5], 1800.0, now=6800.0).startswith("4 of 4 runs ended, 0 to go: ETA 0m00s")


def test_sweep_clock_without_any_finished_run_waits_then_uses_this_launchs_runs(tmp_path: pathlib.Path) -> None:
    jobs = [_seed_job(tmp_path, row, 0) for row in ("a", "b", "c")]
    clock = local_executor.SweepClock(jobs, parallel=1)
    assert clock.eta(now=0.0) is None
    clock.started(jobs[0], now=0.0)
    # "a" ended without a results.json (it failed): the mean wall of this launch's ended runs stands in.
    assert clock.finished(jobs[0], 300.0, now=300.0) == (
        "1 of 3 runs ended, 2 to go: ETA 10m00s (from each row's finished runs, 1 at a time)")
    forced = local_executor.SweepClock(jobs, parallel=1, force=True)
    assert forced.to_run.keys() == {"a/seed_0", "b/seed_0", "c/seed_0"}


@pytest.mark.slow
def test_run_local_prints_the_eta_after_each_run_and_skips_finished_ones_in_the_count(tmp_path: pathlib.Path) -> None:
    jobs = [_affinity_job(tmp_path, index) for index in range(3)]
    (tmp_path / "row0").mkdir()
    (tmp_path / "row0" / "results.json").write_text("{}")  # Finished in an earlier sweep: not counted.
    lines: list[str] = []
    local_executor.run_local(jobs, repo_dir=str(tmp_path), parallel=1, say=lines.append)
    progress = [line.strip() for line in lines if "runs ended" in line]
    assert [line.split(":")[0] for line in progress] == ["1 of 2 runs ended, 1 to go", "2 of 2 runs ended, 0 to go"]
