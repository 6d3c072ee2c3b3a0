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


def test_sweep_clock_eta_is_the_mean_run_time_per_round_of_parallel_runs() -> None:
    clock = local_executor.SweepClock(to_run=7, parallel=2)
    assert clock.finished(600.0) == "1 of 7 runs ended, 6 to go: ETA 30m00s (10m00s a run, 2 at a time)"
    # Mean of 600 and 840 s is 720 s; 5 runs left take 3 rounds of 2: 2,160 s.
    assert clock.finished(840.0) == "2 of 7 runs ended, 5 to go: ETA 36m00s (12m00s a run, 2 at a time)"
    for _ in range(5):
        line = clock.finished(720.0)
    assert line == "7 of 7 runs ended, 0 to go: ETA 0m00s (12m00s a run, 2 at a time)"
    assert local_executor.SweepClock(40, 1).finished(600.0).endswith("ETA 6h30m (10m00s a run, 1 at a time)")


def test_run_local_prints_the_eta_after_each_run_and_skips_finished_ones_in_the_count(tmp_path: pathlib.Path) -> None:
    jobs = [_affinity_job(tmp_path, index) for index in range(3)]
    (tmp_path / "row0").mkdir()
    (tmp_path / "row0" / "results.json").write_text("{}")  # Finished in an earlier sweep: not counted.
    lines: list[str] = []
    local_executor.run_local(jobs, repo_dir=str(tmp_path), parallel=1, say=lines.append)
    progress = [line.strip() for line in lines if "runs ended" in line]
    assert [line.split(":")[0] for line in progress] == ["1 of 2 runs ended, 1 to go", "2 of 2 runs ended, 0 to go"]
