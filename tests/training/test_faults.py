"""Cluster faults, each reproduced and shown handled: kill -9 at several steps, SIGTERM honoured within a
step (counted in steps, not seconds), two trainers on one workdir, a sweep killed mid-row, a finished
run rerun, a stale averaged checkpoint, and the smaller mistakes (config typos, a read-only workdir,
NaN without a checkpoint, empty or over-long training pairs, the resume warning).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from attention_jax.checkpointing import checkpoints, params_checkpoints, resume_checks
from attention_jax.foundation import quiet_libraries, run_files
from attention_jax.training import train_state, workdir_lock
from tests.support import fake_data, train_support
from tests.support.sweep_cli import (REPO_ROOT, sweep_in_process, tiny_data_dir, tiny_flags,  # noqa: F401
                                     train_tiny_in_process)
from tests.support.train_support import snapshot
from tests.support.waiting import wait_for_pattern, wait_until

pytestmark = [pytest.mark.end_to_end]

KILL_CONFIG = dict(num_train_steps=10, log_every_steps=2, eval_every_steps=5, checkpoint_every_steps=2,
                   keep_checkpoints=10)
KILL_DATA = dict(shapes=[[8, 12, 12], [16, 6, 6]])


def _train_script(cache_dir: str, workdir: pathlib.Path, config: dict, data: dict) -> subprocess.CompletedProcess:
    return train_support.run_python(
        ["tests/support/train_script.py", str(workdir), json.dumps(config), json.dumps(data)],
        train_support.subprocess_env(cache_dir))


def _train_steps_logged(workdir: pathlib.Path) -> list[int]:
    records = [json.loads(line) for line in (workdir / run_files.METRICS_FILE).read_text().splitlines()]
    return [record["step"] for record in records if "train/loss" in record]


def _main_command(workdir: pathlib.Path, data_dir: pathlib.Path, steps: int, **extra: object) -> list[str]:
    return [sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py", f"--workdir={workdir}",
            *tiny_flags(data_dir, steps, **extra)]


def _cli_env(cache_dir: str) -> dict[str, str]:
    return train_support.subprocess_env(cache_dir, PYTHONUNBUFFERED="1")


# --- kill -9 at several steps -----------------------------------------------------------------------

@pytest.mark.slow
def test_kill_9_at_several_steps_then_resume_equals_uninterrupted(cache_dir: str, tmp_path: pathlib.Path) -> None:
    reference = _train_script(cache_dir, tmp_path / "reference", KILL_CONFIG, KILL_DATA)
    assert train_support.result_line(reference)["finished"]
    workdir = tmp_path / "killed"
    for kill_at in (3, 6, 8):  # Batch indices: during steps 4, 7 and 9 (saves of steps 2, 4, ... may be cut).
        killed = _train_script(cache_dir, workdir, KILL_CONFIG, dict(KILL_DATA, sigkill_at=kill_at))
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = _train_script(cache_dir, workdir, KILL_CONFIG, KILL_DATA)
    results = train_support.result_line(resumed)
    assert results["finished"] and results["step"] == 10
    assert "Taking over the lock of host" in resumed.stderr  # The killed holder never released it.
    assert re.search(r"Resumed from the checkpoint of step [2-8]\b", resumed.stderr)
    expected, _ = params_checkpoints.load_for_inference(str(tmp_path / "reference"), "latest")
    got, _ = params_checkpoints.load_for_inference(str(workdir), "latest")
    for want, have in zip(jax.tree.leaves(expected), jax.tree.leaves(got)):
        np.testing.assert_array_equal(np.asarray(have), np.asarray(want))
    assert _train_steps_logged(workdir) == [2, 4, 6, 8, 10]  # Records after a resumed step are not kept twice.
    assert (workdir / run_files.LOCK_FILE).read_text() == ""  # Released at the clean exit.


# --- two trainers, and SIGTERM within a step ----------------------------------------------------------

@pytest.mark.slow
def test_second_trainer_is_refused_and_sigterm_stops_within_a_step(
        cache_dir: str, tmp_path: pathlib.Path, tiny_data_dir: pathlib.Path,  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    workdir, log_path = tmp_path / "run", tmp_path / "first.log"
    command = _main_command(workdir, tiny_data_dir, 100_000)
    with open(log_path, "w") as log:
        first = subprocess.Popen(command, cwd=REPO_ROOT, env=_cli_env(cache_dir), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_pattern(log_path, r"step 20/100000", 240)
        holder = json.loads((workdir / run_files.LOCK_FILE).read_text())
        assert holder["pid"] == first.pid and holder["host"]
        second = subprocess.run(command, cwd=REPO_ROOT, env=_cli_env(cache_dir), capture_output=True, text=True,
                                timeout=300)
        assert second.returncode == 3, second.stderr[-3000:]
        assert f"in use by another trainer (host {holder['host']}, pid {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr and "Resumed" not in second.stderr
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=120) == run_files.STOPPED_EXIT_STATUS
    finally:
        if first.poll() is None:
            first.kill()
    log = log_path.read_text()
    stopped = re.search(r"Stopped at step (\d+) on request \((\d+) step\(s\) after the last one finished", log)
    assert stopped, log[-3000:]
    step, late_by = int(stopped.group(1)), int(stopped.group(2))
    # The step the device was running when the signal came, and at most one queued behind it.
    assert 1 <= late_by <= 2
    assert checkpoints.finished_steps(str(workdir / run_files.CHECKPOINT_DIR))[-1] == step
    assert (workdir / run_files.LOCK_FILE).read_text() == ""

    caplog.set_level(logging.INFO)  # The resumed run trains in this process: its check is the run's files.
    assert train_tiny_in_process(workdir, tiny_data_dir, step + 10)["finished"]
    assert f"Resumed from the checkpoint of step {step} " in caplog.text
    logged = _train_steps_logged(workdir)
    assert logged == sorted(set(logged)) and logged[-1] == step + 10


# --- a finished run's command, and a stale average -----------------------------------------------------

@pytest.mark.slow
def test_finished_rerun_changes_nothing_and_a_stale_average_is_refused(
        cache_dir: str, tmp_path: pathlib.Path, tiny_data_dir: pathlib.Path) -> None:  # noqa: F811
    workdir = tmp_path / "run"
    extra = dict(checkpoint_every_steps=5, keep_checkpoints=5)
    # The finished rerun is the command as a user runs it (its stdout line is under test); the two
    # trainings around it run in this process, where the shared cache compiles the step once.
    assert train_tiny_in_process(workdir, tiny_data_dir, 10, **extra)["finished"]
    before = snapshot(workdir)
    again = subprocess.run(_main_command(workdir, tiny_data_dir, 10, **extra), cwd=REPO_ROOT, env=_cli_env(cache_dir),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already finished at step 10: nothing to do, no file changed" in again.stdout
    assert snapshot(workdir) == before  # results.json keeps train_loss; no eval record added.
    assert json.loads((workdir / run_files.RESULTS_FILE).read_text())["train_loss"] is not None

    assert params_checkpoints.write_average(str(workdir), 2) == [5, 10]
    longer = train_tiny_in_process(workdir, tiny_data_dir, 20, **extra)  # A larger num_train_steps trains on.
    assert longer["finished"] and longer["step"] == 20
    with pytest.raises(params_checkpoints.StaleAverageError, match=r"averages steps \[5, 10\].*newer steps \[15, 20\]"):
        params_checkpoints.load_for_inference(str(workdir), "averaged")
    assert params_checkpoints.reaverage(str(workdir)) == [15, 20]
    params, _ = params_checkpoints.load_for_inference(str(workdir), "averaged")
    assert jax.tree.leaves(params)


def test_evaluation_reports_are_named_by_checkpoint(tmp_path: pathlib.Path) -> None:
    paths = {run_files.eval_report_path(str(tmp_path), "test", run_files.checkpoint_label(which, last))
             for which, last in (("latest", 0), ("averaged", 0), ("1200", 0), ("latest", 5))}
    assert {os.path.basename(path) for path in paths} == {
        "eval_test.latest.json", "eval_test.averaged.json", "eval_test.step1200.json", "eval_test.average_last5.json"}
    # Part of a split never takes the whole split's name; a parallel text never takes a split's.
    assert os.path.basename(run_files.eval_report_path(str(tmp_path), "validation", "latest", first=100)) == \
        "eval_validation_first100.latest.json"
    assert run_files.parallel_text_name("/data/newstest2014.en") == "file_newstest2014"
    assert run_files.parallel_text_name("test.en") == "file_test"
    assert run_files.parallel_text_name("my news.v2.src") == "file_my_news_v2"


def test_a_parallel_text_with_another_files_stem_gets_its_own_report_name(tmp_path: pathlib.Path) -> None:
    workdir = str(tmp_path)
    first, second = str(tmp_path / "wmt14" / "test.en"), str(tmp_path / "wmt16" / "test.en")
    assert run_files.parallel_text_name(first, workdir) == "file_test"  # No report yet.
    report = run_files.eval_report_path(workdir, "file_test", "latest")
    pathlib.Path(report).write_text(json.dumps({"source_file": first}))
    pathlib.Path(run_files.translations_path(report)).write_text("{}\n")
    assert run_files.parallel_text_name(first, workdir) == "file_test"  # The same file again: the same report.
    second_name = run_files.parallel_text_name(second, workdir)
    assert second_name == "file_test_" + hashlib.sha256(second.encode()).hexdigest()[:8]
    assert run_files.parallel_text_name(second, workdir) == second_name  # Stable, whatever else is filed.
    pathlib.Path(run_files.eval_report_path(workdir, second_name, "step100")).write_text(
        json.dumps({"source_file": second}))
    assert run_files.parallel_text_name(first, workdir) == "file_test"
    assert run_files.parallel_text_name(str(tmp_path / "test_b.en"), workdir) == "file_test_b"  # Other stem.
    assert os.path.basename(run_files.translations_path(str(tmp_path / "eval_test.latest.json"))) == \
        "eval_test.latest.translations.jsonl"


# --- a sweep killed mid-row ----------------------------------------------------------------------------

def _trainers_on(workdir: pathlib.Path) -> list[int]:
    """Pids of live processes whose command line names ``workdir``."""
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"--workdir={workdir}".encode() in (entry / "cmdline").read_bytes():
                if not (entry / "stat").read_text().split(") ")[1].startswith("Z"):
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
def test_killed_sweep_leaves_no_trainer_and_a_rerun_resumes_once(
        cache_dir: str, tmp_path: pathlib.Path, tiny_data_dir: pathlib.Path) -> None:  # noqa: F811
    root = tmp_path / "sweep"
    row = root / "base"
    steps = 400
    args = ["-m", "launch.sweep", "--config=configs/table2.py", "--rows=base", "--executor=local", f"--root={root}",
            "--report=false", *tiny_flags(tiny_data_dir, steps, checkpoint_every_steps=0, eval_every_steps=0)]
    env = _cli_env(cache_dir)

    def log_text() -> str:
        return (row / run_files.LOG_FILE).read_text(errors="replace") if (row / run_files.LOG_FILE).exists() else ""

    def start_sweep_until_training() -> subprocess.Popen:
        starts_before = log_text().count("=== ")
        sweep = subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)

        def training_again() -> bool:
            log = log_text()
            newest = log.rpartition("=== ")[2]
            return log.count("=== ") > starts_before and len(re.findall(rf"\d I step \d+/{steps}", newest)) >= 2

        wait_until(training_again, 240, "the row to train", poll_s=0.2)
        return sweep

    sweep = start_sweep_until_training()  # SIGTERM: passed on to the row, which checkpoints; the sweep waits.
    sweep.send_signal(signal.SIGTERM)
    output, _ = sweep.communicate(timeout=120)
    assert sweep.returncode == 1 and "Summary: 1 stopped" in output, output
    assert _trainers_on(row) == []
    sweep = start_sweep_until_training()  # kill -9: the sweep cannot pass anything on; the kernel does.
    sweep.kill()
    sweep.communicate(timeout=30)
    wait_until(lambda: not _trainers_on(row), 60, "the orphaned trainer to checkpoint and exit", poll_s=0.2)
    log = (row / run_files.LOG_FILE).read_text()
    assert len(re.findall(r"Stopped at step \d+ on request", log)) == 2

    final = sweep_in_process(*args[2:], env=env)  # The rerun's logic; the two starts above were the command's.
    assert final.returncode == 0 and "Summary: 1 done" in final.stdout, final.stdout + final.stderr
    log = (row / run_files.LOG_FILE).read_text()
    assert len(re.findall(r"Resumed from the checkpoint of step", log)) == 2  # Once per rerun.
    assert "in use by another trainer" not in log
    logged = _train_steps_logged(row)
    assert logged == sorted(set(logged)) and logged[-1] == steps


# --- smaller mistakes ------------------------------------------------------------------------------------

def test_unknown_config_field_is_one_line_naming_the_closest(tmp_path: pathlib.Path) -> None:
    completed = subprocess.run([sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py",
                                f"--workdir={tmp_path / 'run'}", "--config.num_layerz=2"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "attention_jax.main: error: --config.num_layerz: configs/tiny.py has no field num_layerz (did you mean num_layers?)"]
    assert not (tmp_path / "run").exists()


def test_unwritable_workdir_is_one_line(tmp_path: pathlib.Path) -> None:
    unwritable = pathlib.Path("/sys/attention_jax_test/run")  # Not even root may create directories in /sys.
    if not pathlib.Path("/sys").is_dir():
        pytest.skip("no /sys to stand for an unwritable directory")
    completed = subprocess.run([sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py",
                                f"--workdir={unwritable}"], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=300, env=train_support.subprocess_env(str(tmp_path / "cache")))
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "error: cannot write to the work directory" in completed.stderr and "Traceback" not in completed.stderr


def test_an_overlong_workdir_name_is_one_line_and_creates_nothing(tmp_path: pathlib.Path) -> None:
    workdir = tmp_path / "new" / ("w" * 300)  # ENAMETOOLONG: file systems allow 255 bytes per name.
    with pytest.raises(ValueError, match="is 300 bytes long"):
        workdir_lock.WorkdirLock(str(workdir)).acquire()
    completed = subprocess.run([sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py",
                                f"--workdir={workdir}"], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=300, env=train_support.subprocess_env(str(tmp_path / "cache")))
    errors = [line for line in completed.stderr.splitlines() if not quiet_libraries.SHORT_PREFIX.match(line)]
    assert completed.returncode == 2 and len(errors) == 1, completed.stderr[-3000:]
    assert "is 300 bytes long" in errors[0] and "choose shorter names" in errors[0]
    assert not (tmp_path / "new").exists()


def test_lock_refuses_a_live_holder_and_takes_over_a_dead_one(tmp_path: pathlib.Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from attention_jax.training import workdir_lock; "
        f"workdir_lock.WorkdirLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(60)")],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(workdir_lock.WorkdirLockedError, match=rf"pid {holder.pid}, started \d{{4}}-"):
            workdir_lock.WorkdirLock(str(tmp_path)).acquire()
    finally:
        holder.kill()
        holder.wait()
    with caplog.at_level(logging.WARNING):
        lock = workdir_lock.WorkdirLock(str(tmp_path)).acquire()
    assert "Taking over the lock of host" in caplog.text and f"pid {holder.pid}" in caplog.text
    assert json.loads((tmp_path / run_files.LOCK_FILE).read_text())["pid"] == os.getpid()
    lock.release()
    assert (tmp_path / run_files.LOCK_FILE).read_text() == ""


def test_remote_lock_refuses_a_fresh_record_and_takes_over_a_stale_one(tmp_path: pathlib.Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    lock = workdir_lock.WorkdirLock(str(tmp_path))
    monkeypatch.setattr(lock, "remote", True)  # The object-store path, on a local directory.
    (tmp_path / run_files.LOCK_FILE).write_text(json.dumps(
        {"host": "other", "pid": 7, "started": "then", "refreshed_at": time.time() - 60}))
    with pytest.raises(workdir_lock.WorkdirLockedError, match="host other, pid 7"):
        lock.acquire()
    (tmp_path / run_files.LOCK_FILE).write_text(json.dumps(
        {"host": "other", "pid": 7, "refreshed_at": time.time() - workdir_lock.REMOTE_STALE_AFTER_S - 1}))
    lock.acquire()
    assert json.loads((tmp_path / run_files.LOCK_FILE).read_text())["pid"] == os.getpid()
    lock.release()


def test_resume_warning_names_only_changed_leaves(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    config = fake_data.tiny_experiment()
    checkpoints.write_config(str(tmp_path), config)
    changed = fake_data.tiny_experiment(num_train_steps=99)
    caplog.set_level(logging.INFO)
    resume_checks.check_resume_compatible(str(tmp_path), changed)  # No checkpoint: nothing is resumed.
    assert "Resuming" not in caplog.text
    (tmp_path / run_files.CHECKPOINT_DIR).mkdir()
    resume_checks.check_resume_compatible(str(tmp_path), changed)  # An empty checkpoints/ resumes nothing.
    assert "Resuming" not in caplog.text
    state = {"w": np.zeros(2, np.float32)}
    manager = checkpoints.TrainingCheckpoints(str(tmp_path), keep=1)
    manager.save(train_state.TrainState(step=np.int32(1), params=state, opt_state=(np.zeros(3, np.float32),),
                                           rng=np.zeros(2, np.uint32)),
                 data_state={}, progress={})
    manager.close()
    resume_checks.check_resume_compatible(str(tmp_path), changed)
    assert re.search(r"changed non-model settings: num_train_steps$", caplog.text, flags=re.M), caplog.text


@pytest.mark.slow
def test_nan_before_any_checkpoint_says_there_is_none(cache_dir: str, tmp_path: pathlib.Path) -> None:
    completed = _train_script(cache_dir, tmp_path, dict(num_train_steps=4, checkpoint_every_steps=0,
                                                        eval_every_steps=0), dict(bad_token_at=0))
    message = train_support.result_line(completed)["error"]
    assert "non-finite training loss at step" in message and "No checkpoint was saved" in message
    assert "None" not in message


def test_empty_and_overlong_training_pairs_are_left_out_and_counted(tmp_path: pathlib.Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    from attention_jax.data import input_pipeline

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    words = ["cat", "dog", "house", "tree", "red", "big", "small", "sees"]
    lines = [f"{words[i % 8]} {words[(i * 3) % 8]}\t{words[(i * 5) % 8]} {words[(i + 1) % 8]}" for i in range(60)]
    lines += ["the cat\t"] * 3 + [" ".join(words * 4) + "\t" + " ".join(words * 4)] * 2
    (corpus / "train.tsv").write_text("\n".join(lines) + "\n")
    for name in ("dev.tsv", "test.tsv"):
        (corpus / name).write_text("\n".join(lines[:8]) + "\n")
    config = fake_data.tiny_experiment(dataset=f"tsv:{corpus}", data_dir=str(tmp_path / "tfds"), vocab_size=40,
                                       max_len=12, tokens_per_batch=96)
    caplog.set_level(logging.INFO)
    data = input_pipeline.get_datasets(config.data)
    assert data.stats["dropped_empty"]["train"] == 3 and data.stats["dropped_too_long"]["train"] == 2
    assert "3 of 65 training pairs (4.62%) have an empty source or target: left out." in caplog.text
    assert "2 of 65 training pairs (3.08%) are longer than config.max_len=12 tokens" in caplog.text
