"""launch.sweep: dry runs of the three executors, local runs (resume, skip, failures), bad input.

Local runs use ``tests/support/fake_main.py`` (``--main=fake_main``): same flags as the entry point, instant
fake training, and a failure switch; the real entry point runs in
``test_tiny_table2_rows_train_to_the_report_and_rerun_does_no_work``, the one test that starts
``python -m launch.sweep`` as a user does. The others run the sweep's flag parser and ``main`` in this
process (``sweep_in_process``): what they check is the sweep's logic, not the interpreter's start; the
rows they run are still processes, started by the local, SLURM or TPU executor as in a real sweep.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import pathlib
import re
import shlex
import sys

import pytest

from configs import table2
from tests.support.sweep_cli import (REPO_ROOT, dry_run_commands, fake_main_env, needs_entry_point,  # noqa: F401
                                     run_module, run_sweep, sweep_in_process, tiny_data_dir, tiny_flags)

ROWS = list(table2.ROW_NAMES)


@pytest.mark.slow
def test_local_dry_run_lists_every_row_command(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    result = sweep_in_process("--config=configs/table2.py", "--rows=all", "--executor=local", f"--root={root}",
                       "--dry_run", "--config.num_train_steps=20", "--config.dataset=synthetic_en_de")
    assert result.returncode == 0, result.stderr
    commands = dry_run_commands(result.stdout)
    assert len(commands) == len(ROWS) == 20
    for row, command in zip(ROWS, commands):
        assert command[:3] == ["cd", str(REPO_ROOT), "&&"]
        assert command[3:6] == [sys.executable, "-m", "attention_jax.main"]
        assert command[6:10] == [f"--config=configs/table2.py:{row}", f"--workdir={root}/{row}",
                                 "--config.num_train_steps=20", "--config.dataset=synthetic_en_de"]
        assert command[10:] == [">>", f"{root}/{row}/log.txt", "2>&1"]
    assert not root.exists(), "a dry run must write nothing"
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: a common override replaces row setting big num_train_steps=300000 -> 20"]


@pytest.mark.slow
def test_overrides_that_replace_row_settings_are_named(tmp_path: pathlib.Path) -> None:
    result = sweep_in_process("--config=configs/table2.py", "--rows=base,C1,C4", f"--root={tmp_path}", "--dry_run",
                       "--config.num_layers=1", "--config.d_model=256")
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: a common override replaces row setting C1 num_layers=2 -> 1"]  # C4 keeps 256.


def _scripts(stdout: str) -> dict[str, str]:
    parts = re.split(r"^# ---- (.*)$", stdout, flags=re.M)
    return {pathlib.Path(path).parent.name: body for path, body in zip(parts[1::2], parts[2::2])}


@pytest.mark.slow
def test_slurm_dry_run_writes_one_script_per_row(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    result = sweep_in_process("--config=configs/table2.py", "--executor=slurm", f"--root={root}", "--dry_run",
                       "--nodes=2", "--gpus_per_node=8", "--time=24:00:00", "--partition=gpu",
                       "--account=nlp", "--cpus_per_task=16", "--mem=200G", "--sbatch_option=--qos=high",
                       "--setup=source ~/venv/bin/activate", "--config.num_train_steps=1000")
    assert result.returncode == 0, result.stderr
    scripts = _scripts(result.stdout)
    assert list(scripts) == ROWS
    for row, script in scripts.items():
        directives = re.findall(r"^#SBATCH (\S+)$", script, flags=re.M)
        assert directives == [
            f"--job-name=table2-{row}", f"--output={root}/{row}/log.txt", "--open-mode=append",
            "--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=8", "--cpus-per-task=16", "--mem=200G",
            "--time=24:00:00", "--partition=gpu", "--account=nlp", "--requeue", "--signal=TERM@120",
            "--qos=high"]
        body = [line for line in script.splitlines() if line and not line.startswith("#")]
        assert body[:3] == ["set -uo pipefail", f"cd {REPO_ROOT}", "source ~/venv/bin/activate"]
        srun = next(line for line in body if line.startswith("srun "))
        assert shlex.split(srun) == [
            "srun", "--kill-on-bad-exit=1", sys.executable, "-m", "attention_jax.main",
            f"--config=configs/table2.py:{row}", f"--workdir={root}/{row}", "--config.num_train_steps=1000"]
        # Training that checkpointed on SIGTERM exits 75: the job requeues itself and resumes.
        assert body[body.index(srun) + 1:] == [
            "status=$?", "if [[ $status -eq 75 ]]; then", body[body.index(srun) + 3],
            '  scontrol requeue "$SLURM_JOB_ID" && sleep 600  # SLURM ends this run when it requeues the job.',
            "fi", 'exit "$status"']
    assert not root.exists()


@pytest.mark.slow
def test_tpu_dry_run_starts_each_row_on_every_host(tmp_path: pathlib.Path) -> None:
    result = sweep_in_process("--config=configs/table2.py", "--executor=tpu", f"--root={tmp_path / 't2'}",
                       "--dry_run", "--tpu_name=v4-32", "--zone=us-central2-b", "--project=proj",
                       "--remote_root=gs://bucket/t2", "--repo_dir=~/attention_jax",
                       "--setup=source ~/venv/bin/activate", "--config.dtype=bfloat16")
    assert result.returncode == 0, result.stderr
    commands = dry_run_commands(result.stdout)
    assert len(commands) == 20
    for row, command in zip(ROWS, commands):
        assert command[:-1] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "v4-32", "--zone=us-central2-b",
                                "--project=proj", "--worker=all"]
        remote = command[-1].removeprefix("--command=")
        assert remote == ("cd ~/attention_jax && source ~/venv/bin/activate && python3 -m attention_jax.main "
                          f"--config=configs/table2.py:{row} --workdir=gs://bucket/t2/{row} "
                          "--config.dtype=bfloat16")


@pytest.mark.slow
def test_sweep_file_without_row_argument_passes_row_overrides_as_flags(tmp_path: pathlib.Path) -> None:
    sweep_file = tmp_path / "my_sweep.py"
    sweep_file.write_text(
        "from configs import tiny\n"
        "def get_sweep():\n"
        "    return {'wide': dict(d_model=64, positional_encoding='learned'),\n"
        "            'mesh': dict(mesh_shape=(1, -1), mesh_axes=('data', 'model'))}\n"
        "def get_config():\n"
        "    return tiny.get_config()\n")
    root = tmp_path / "runs"
    result = sweep_in_process(f"--config={sweep_file}", f"--root={root}", "--main=fake_main",
                       "--config.num_train_steps=7", env=fake_main_env())
    assert result.returncode == 0, result.stdout + result.stderr
    wide = json.loads((root / "wide" / "config.json").read_text())
    assert (wide["name"], wide["d_model"], wide["positional_encoding"]) == ("wide", 64, "learned")
    assert wide["num_train_steps"] == 7
    mesh = json.loads((root / "mesh" / "config.json").read_text())
    assert (mesh["name"], mesh["mesh_shape"], mesh["d_model"]) == ("mesh", [1, -1], 128)


def _invocations(root: pathlib.Path, row: str) -> int:
    path = root / row / "invocations.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.slow
def test_local_sweep_reports_failures_and_rerun_skips_finished_rows(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    args = ("--config=configs/table2.py", "--rows=base,A1,C1", f"--root={root}", "--main=fake_main",
            "--config.num_train_steps=20")
    first = sweep_in_process(*args, env=fake_main_env(FAKE_MAIN_FAIL_ROWS="A1"))
    assert first.returncode == 1
    assert re.search(r"\[2/3\] A1 +failed +exit 3", first.stdout)
    assert f"log: {root}/A1/log.txt" in first.stdout
    assert "FakeTrainingError: row A1 diverged" in first.stdout  # The log's last lines are shown.
    assert "Summary: 2 done, 1 failed" in first.stdout
    assert re.search(r"\[3/3\] C1 +done", first.stdout), "a failing row must not stop the others"
    assert (root / "table2.md").exists()

    second = sweep_in_process(*args, env=fake_main_env())
    assert second.returncode == 0, second.stdout + second.stderr
    assert re.search(r"\[1/3\] base +skipped", second.stdout)
    assert "Summary: 2 skipped, 1 done" in second.stdout
    assert [_invocations(root, row) for row in ("base", "A1", "C1")] == [1, 2, 1]
    assert (root / "A1" / "log.txt").read_text().count("=== ") == 2  # Appended, not replaced.
    record = json.loads((root / "sweep.json").read_text())
    assert record["rows"] == ["base", "A1", "C1"] and record["overrides"] == ["num_train_steps=20"]
    assert [launch["rows"] for launch in record["launches"]] == [["base", "A1", "C1"]] * 2


@pytest.mark.slow
def test_parallel_local_sweep_runs_every_row(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "impl"
    result = sweep_in_process("--config=configs/sweeps/attention_impl.py", f"--root={root}", "--main=fake_main",
                       "--parallel=2", "--report=false", env=fake_main_env())
    assert result.returncode == 0, result.stdout + result.stderr
    rows = ["einsum_seed0", "einsum_seed1", "fused_seed0", "fused_seed1"]
    for row in rows:
        config = json.loads((root / row / "config.json").read_text())
        assert config["name"] == row
        assert (config["attention_implementation"], config["seed"]) == (row.split("_")[0], int(row[-1]))
        assert json.loads((root / row / "launch.json").read_text())["returncode"] == 0
    assert "Summary: 4 done" in result.stdout
    assert not (root / "attention_impl.md").exists()


@pytest.mark.slow
def test_root_holding_a_different_sweep_is_refused_unless_forced(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    env = fake_main_env()
    common = ("--config=configs/table2.py", "--rows=base", f"--root={root}", "--main=fake_main",
              "--report=false")
    assert sweep_in_process(*common, "--config.num_train_steps=20", env=env).returncode == 0
    refused = sweep_in_process(*common, "--config.num_train_steps=40", env=env)
    assert refused.returncode == 2
    assert ("override --config.num_train_steps=20 -> --config.num_train_steps=40" in refused.stderr
            and "--force" in refused.stderr and "new --root" in refused.stderr)
    other_file = sweep_in_process("--config=configs/sweeps/attention_impl.py", f"--root={root}", "--main=fake_main",
                           "--config.num_train_steps=20", env=env)
    assert other_file.returncode == 2
    assert "config file configs/table2.py -> configs/sweeps/attention_impl.py" in other_file.stderr
    forced = sweep_in_process(*common, "--config.num_train_steps=40", "--force", env=env)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert _invocations(root, "base") == 2  # --force reruns finished rows.
    assert json.loads((root / "sweep.json").read_text())["overrides"] == ["num_train_steps=40"]
    # More rows of the same sweep into the same root are fine.
    more = sweep_in_process(*common[:1], "--rows=A1", *common[2:], "--config.num_train_steps=40", env=env)
    assert more.returncode == 0, more.stderr
    assert json.loads((root / "sweep.json").read_text())["rows"] == ["base", "A1"]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (("--rows=A1,Z9",), "unknown row(s) Z9 in configs/table2.py; valid rows: base, A1, A2"),
    (("--executor=cloud",), "unknown --executor=cloud; choose one of local, slurm, tpu"),
    (("--config.d_modle=64",), "unknown config field 'd_modle' (did you mean d_model?)"),
    (("--config.d_model=wide",), "--config.d_model=wide: d_model='wide' is not a int value"),
    (("--config.d_model", "64"), "write overrides as --config.key=value"),
    (("--executor=tpu", "--dry_run"), "--executor=tpu needs --tpu_name and --zone"),
    (("--parallel=0",), "--parallel=0: 0 is not a positive integer"),
])
def test_bad_input_is_named(tmp_path: pathlib.Path, args: tuple[str, ...], message: str) -> None:
    result = sweep_in_process("--config=configs/table2.py", f"--root={tmp_path / 'r'}", "--main=fake_main", *args,
                       env=fake_main_env())
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.slow
def test_missing_sweep_file_and_non_sweep_file(tmp_path: pathlib.Path) -> None:
    missing = sweep_in_process("--config=configs/nope.py", f"--root={tmp_path}")
    assert missing.returncode == 2 and "sweep config file configs/nope.py not found" in missing.stderr
    assert missing.stderr.startswith("launch.sweep: error: ") and missing.stderr.count("\n") == 1
    not_sweep = sweep_in_process("--config=configs/tiny.py", f"--root={tmp_path}")
    assert not_sweep.returncode == 2 and "configs/tiny.py defines no get_sweep()" in not_sweep.stderr


@pytest.mark.slow
@pytest.mark.parametrize("executor, binary, hint", [
    ("slurm", "sbatch", "apt-get install slurm-wlm munge"),
    ("tpu", "gcloud", "install the Google Cloud CLI"),
])
def test_missing_cluster_tool_says_what_to_install(tmp_path: pathlib.Path, executor: str, binary: str,
                                                   hint: str) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    result = sweep_in_process("--config=configs/table2.py", "--rows=base", f"--executor={executor}",
                       f"--root={tmp_path / 'r'}", "--tpu_name=v4", "--zone=z",
                       env=dict(os.environ, PATH=str(empty_bin)))
    assert result.returncode == 2
    assert f"`{binary}` not found on PATH" in result.stderr and hint in result.stderr
    assert not (tmp_path / "r").exists(), "nothing is recorded before the tools are found"


@pytest.mark.slow
def test_report_cli_reads_the_local_sweep(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    assert sweep_in_process("--config=configs/table2.py", "--rows=base,B1", f"--root={root}", "--main=fake_main",
                     "--report=false", env=fake_main_env()).returncode == 0
    result = run_module("attention_jax.report", str(root))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(root / name) for name in ("table2.md", "table2.csv", "table2.png",
                                                                    "table2_runs.md", "table2_runs.csv")]


FAKE_GCLOUD = """#!/bin/bash
# Stands in for gcloud: logs its arguments, then runs --command locally (one TPU host).
echo "$@" >> "$FAKE_GCLOUD_LOG"
for argument in "$@"; do
  case $argument in --command=*) command=${argument#--command=} ;; esac
done
cd "$HOME" && bash -c "$command"
"""


@pytest.mark.slow
def test_tpu_executor_runs_rows_through_gcloud(tmp_path: pathlib.Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(FAKE_GCLOUD)
    (bin_dir / "gcloud").chmod(0o755)
    env = fake_main_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", HOME=str(tmp_path),
                        FAKE_GCLOUD_LOG=str(tmp_path / "gcloud.log"), FAKE_MAIN_FAIL_ROWS="B1")
    root, remote_root = tmp_path / "local", tmp_path / "remote"
    args = ("--config=configs/table2.py", "--rows=base,B1", "--executor=tpu", f"--root={root}",
            f"--remote_root={remote_root}", "--tpu_name=v4-8", "--zone=z", f"--repo_dir={REPO_ROOT}",
            f"--python={sys.executable}", "--main=fake_main", "--report=false")
    first = sweep_in_process(*args, env=env)
    assert first.returncode == 1
    assert (remote_root / "base" / "results.json").exists() and not (root / "base" / "results.json").exists()
    assert "fake training of base" in (root / "base" / "log.txt").read_text()  # gcloud's output, local.
    assert "FakeTrainingError: row B1 diverged" in first.stdout
    assert "Summary: 1 done, 1 failed" in first.stdout
    calls = (tmp_path / "gcloud.log").read_text().splitlines()
    assert len(calls) == 2
    assert calls[0].startswith("compute tpus tpu-vm ssh v4-8 --zone=z --worker=all --command=")

    second = sweep_in_process(*args, env=dict(env, FAKE_MAIN_FAIL_ROWS=""))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Summary: 1 skipped, 1 done" in second.stdout  # base is recorded as finished.
    assert len((tmp_path / "gcloud.log").read_text().splitlines()) == 3


@pytest.mark.slow
def test_tiny_table2_rows_train_to_the_report_and_rerun_does_no_work(
        tmp_path: pathlib.Path, request: pytest.FixtureRequest) -> None:
    needs_entry_point()
    data_dir = request.getfixturevalue("tiny_data_dir")
    root = tmp_path / "t2"
    args = ("--config=configs/table2.py", "--rows=base,A1", f"--root={root}", *tiny_flags(data_dir, 20))
    first = run_sweep(*args)
    base_log = root / "base" / "log.txt"
    assert first.returncode == 0, first.stdout + first.stderr + base_log.read_text()[-3000:]
    results = {row: json.loads((root / row / "results.json").read_text()) for row in ("base", "A1")}
    assert [results[row]["step"] for row in results] == [20, 20]
    configs = {row: json.loads((root / row / "config.json").read_text()) for row in ("base", "A1")}
    assert [(configs[row]["num_heads"], configs[row]["key_dim"]) for row in configs] == [(8, 64), (1, 512)]
    assert all(config["d_model"] == 32 for config in configs.values())  # The common overrides applied.
    table = (root / "table2.md").read_text()
    for row in ("base", "A1"):  # The status table, then the dev perplexity table's line of the row.
        assert re.search(rf"^\| {row} \| done \| 1 of 1 \|", table, re.M), table
        assert re.search(rf"^\| {row} \| 1 \| {results[row]['eval_ppl']:.2f} \|", table, re.M), table

    logs = {row: (root / row / "log.txt").read_text() for row in ("base", "A1")}
    second = run_sweep(*args)
    assert second.returncode == 0 and "Summary: 2 skipped" in second.stdout
    assert {row: (root / row / "log.txt").read_text() for row in ("base", "A1")} == logs  # Nothing ran.


# --- Seeds: every row once per seed, in ROOT/<row>/seed_<k>, with --config.seed=<k> -------------------

SEED_ROWS = ["base", "A1"]


def _seed_runs(rows: list[str], seeds: range) -> list[tuple[str, int]]:
    """(row, seed) in the launcher's order: every row at the first seed, then every row at the next."""
    return [(row, seed) for seed in seeds for row in rows]


@pytest.mark.slow
def test_seeds_dry_run_lists_every_row_for_every_seed(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    result = sweep_in_process("--config=configs/table2.py", "--rows=base,A1", f"--root={root}", "--seeds=3",
                       "--dry_run", "--config.num_train_steps=20")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("# configs/table2.py: 2 row(s) base, A1 x seeds 0, 1, 2")
    commands = dry_run_commands(result.stdout)
    assert len(commands) == 6
    for (row, seed), command in zip(_seed_runs(SEED_ROWS, range(3)), commands):
        assert command[6:] == [f"--config=configs/table2.py:{row}", f"--workdir={root}/{row}/seed_{seed}",
                               "--config.num_train_steps=20", f"--config.seed={seed}", ">>",
                               f"{root}/{row}/seed_{seed}/log.txt", "2>&1"]
    assert not root.exists()


@pytest.mark.slow
def test_seeds_slurm_dry_run_writes_one_script_per_seed(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    result = sweep_in_process("--config=configs/table2.py", "--rows=base,A1", "--executor=slurm", f"--root={root}",
                       "--seeds=2", "--dry_run", "--time=1:00:00")
    assert result.returncode == 0, result.stderr
    parts = re.split(r"^# ---- (.*)$", result.stdout, flags=re.M)
    paths, scripts = parts[1::2], parts[2::2]
    expected = _seed_runs(SEED_ROWS, range(2))
    assert paths == [f"{root}/{row}/seed_{seed}/job.sbatch" for row, seed in expected]
    for (row, seed), script in zip(expected, scripts):
        directives = re.findall(r"^#SBATCH (\S+)$", script, flags=re.M)
        assert directives[:2] == [f"--job-name=table2-{row}-seed_{seed}",
                                  f"--output={root}/{row}/seed_{seed}/log.txt"]
        command = shlex.split([line for line in script.splitlines() if line.startswith("srun")][0])
        assert command[-2:] == [f"--workdir={root}/{row}/seed_{seed}", f"--config.seed={seed}"]


@pytest.mark.slow
def test_seeds_tpu_dry_run_puts_each_seed_in_its_remote_directory(tmp_path: pathlib.Path) -> None:
    result = sweep_in_process("--config=configs/table2.py", "--rows=base,A1", "--executor=tpu",
                       f"--root={tmp_path / 't2'}", "--seeds=2", "--dry_run", "--tpu_name=v4-32", "--zone=z",
                       "--remote_root=gs://bucket/t2", "--config.dtype=bfloat16")
    assert result.returncode == 0, result.stderr
    commands = dry_run_commands(result.stdout)
    assert len(commands) == 4
    for (row, seed), command in zip(_seed_runs(SEED_ROWS, range(2)), commands):
        remote = command[-1].removeprefix("--command=")
        assert remote == (f"cd attention_jax && python3 -m attention_jax.main --config=configs/table2.py:{row} "
                          f"--workdir=gs://bucket/t2/{row}/seed_{seed} --config.dtype=bfloat16 "
                          f"--config.seed={seed}")


def _seed_invocations(root: pathlib.Path, row: str, seed: int) -> int:
    path = root / row / f"seed_{seed}" / "invocations.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.slow
def test_local_seeds_run_skip_and_resume_per_seed(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    args = ("--config=configs/table2.py", "--rows=base,A1", f"--root={root}", "--main=fake_main",
            "--config.num_train_steps=20")
    first = sweep_in_process(*args, "--seeds=2", env=fake_main_env(FAKE_MAIN_FAIL_ROWS="A1/seed_1"))
    assert first.returncode == 1
    assert re.search(r"\[4/4\] A1/seed_1 +failed +exit 3", first.stdout)
    assert "Summary: 3 done, 1 failed\n  failed A1/seed_1: exit 3" in first.stdout
    for row, seed in _seed_runs(SEED_ROWS, range(2)):
        config = json.loads((root / row / f"seed_{seed}" / "config.json").read_text())
        assert (config["name"], config["seed"], config["num_train_steps"]) == (row, seed, 20)
    assert not (root / "A1" / "seed_1" / "results.json").exists()
    assert not (root / "base" / "results.json").exists()  # Nothing in the row's own directory.
    record = json.loads((root / "sweep.json").read_text())
    assert record["seeds"] == [0, 1] and record["launches"][0]["seeds"] == [0, 1]
    markdown = (root / "table2.md").read_text()
    assert re.search(r"^\| A1 \| partial \| 1 of 2 \|", markdown, re.M), markdown
    assert re.search(r"^\| base \| done \| 2 of 2 \|", markdown, re.M) and "1 of 2 rows finished." in markdown

    second = sweep_in_process(*args, "--seeds=2", env=fake_main_env())  # Skips finished seeds, reruns A1/seed_1.
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Summary: 3 skipped, 1 done" in second.stdout
    assert re.search(r"\[1/4\] base/seed_0 +skipped", second.stdout)
    assert [_seed_invocations(root, row, seed) for row, seed in _seed_runs(SEED_ROWS, range(2))] == [1, 1, 1, 2]
    assert (root / "A1" / "seed_1" / "log.txt").read_text().count("=== ") == 2

    third = sweep_in_process(*args, "--seeds=3", env=fake_main_env())  # More seeds into the same root.
    assert third.returncode == 0, third.stdout + third.stderr
    assert "Summary: 4 skipped, 2 done" in third.stdout
    assert [_seed_invocations(root, row, 2) for row in SEED_ROWS] == [1, 1]
    record = json.loads((root / "sweep.json").read_text())
    assert record["seeds"] == [0, 1, 2]
    assert [launch["seeds"] for launch in record["launches"]] == [[0, 1], [0, 1], [0, 1, 2]]
    with open(root / "table2.csv", newline="") as file:
        seeds = {line["row"]: (line["seeds"], line["seeds_pending"]) for line in csv.DictReader(file)}
    assert seeds == {"base": ("3", "0"), "A1": ("3", "0")}


@pytest.mark.slow
def test_seeds_and_no_seeds_do_not_share_a_root(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "t2"
    common = ("--config=configs/table2.py", "--rows=base", f"--root={root}", "--main=fake_main", "--report=false")
    assert sweep_in_process(*common, env=fake_main_env()).returncode == 0
    refused = sweep_in_process(*common, "--seeds=2", env=fake_main_env())
    assert refused.returncode == 2
    assert "no seeds (ROOT/<row>) -> seeds [0, 1] (ROOT/<row>/seed_<k>)" in refused.stderr


@pytest.mark.slow
def test_sweep_file_get_seeds_and_row_seed_settings(tmp_path: pathlib.Path) -> None:
    sweep_file = tmp_path / "seeded.py"
    sweep_file.write_text(
        "from configs import tiny\n"
        "def get_sweep():\n"
        "    return {'narrow': dict(d_model=32, seed=7), 'wide': dict(d_model=64)}\n"
        "def get_seeds():\n"
        "    return [3, 5]\n"
        "def get_config():\n"
        "    return tiny.get_config()\n")
    root = tmp_path / "runs"
    result = sweep_in_process(f"--config={sweep_file}", f"--root={root}", "--dry_run")
    assert result.returncode == 0, result.stderr
    assert [command[-1] for command in dry_run_commands(result.stdout)] == ["2>&1"] * 4
    workdirs = [next(arg for arg in command if arg.startswith("--workdir="))
                for command in dry_run_commands(result.stdout)]
    assert workdirs == [f"--workdir={root}/{row}/seed_{seed}" for seed in (3, 5) for row in ("narrow", "wide")]
    assert "note: the seeds replace row setting narrow seed=7" in result.stderr
    counted = sweep_in_process(f"--config={sweep_file}", f"--root={root}", "--dry_run", "--seeds=1")  # --seeds wins.
    assert [line.split("--workdir=")[1].split()[0] for line in counted.stdout.splitlines()[1:]] == [
        f"{root}/narrow/seed_0", f"{root}/wide/seed_0"]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (("--seeds=2", "--config.seed=3"), "--config.seed cannot be combined with seeds"),
    (("--seeds=-1",), "--seeds=-1: -1 is not a non-negative integer"),
])
def test_bad_seed_flags_are_named(tmp_path: pathlib.Path, args: tuple[str, ...], message: str) -> None:
    result = sweep_in_process("--config=configs/table2.py", f"--root={tmp_path / 'r'}", "--dry_run", *args)
    assert result.returncode == 2
    assert message in result.stderr


FAKE_SBATCH = """#!/bin/bash
# Stands in for sbatch --parsable: numbers the jobs, records the scripts, runs nothing.
count=$(( $(wc -l < "$FAKE_SLURM_LOG" 2>/dev/null || echo 0) + 1 ))
echo "$count $2" >> "$FAKE_SLURM_LOG"
echo "$count"
"""
FAKE_SQUEUE = r"""#!/bin/bash
# Stands in for squeue: every job it is asked about (-j ID,ID) has completed.
ids=$(echo "$@" | sed -n 's/.*-j \([^ ]*\).*/\1/p')
for id in ${ids//,/ }; do echo "$id|COMPLETED"; done
"""


@pytest.mark.slow
def test_slurm_seeds_are_separate_jobs_waited_for_one_by_one(tmp_path: pathlib.Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from launch import slurm_executor, sweep_spec

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("squeue", FAKE_SQUEUE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_LOG", str(tmp_path / "sbatch.log"))
    monkeypatch.chdir(REPO_ROOT)
    sweep = sweep_spec.load_sweep("configs/table2.py")
    root = str(tmp_path / "t2")
    jobs = sweep_spec.row_jobs(sweep, ["base"], [], root=root, run_root=root, python="python",
                               main_module="attention_jax.main", seeds=[0, 1])
    (tmp_path / "t2" / "base" / "seed_0").mkdir(parents=True)
    (tmp_path / "t2" / "base" / "seed_0" / "results.json").write_text("{}")  # Seed 0 finished earlier.
    lines: list[str] = []
    outcomes = slurm_executor.submit_slurm(jobs, slurm_executor.SlurmResources(), repo_dir=str(REPO_ROOT),
                                           name_prefix="table2", say=lines.append)
    assert [(o.row, o.status) for o in outcomes] == [("base/seed_0", "skipped"), ("base/seed_1", "submitted")]
    assert (tmp_path / "sbatch.log").read_text().split() == ["1", f"{root}/base/seed_1/job.sbatch"]
    (tmp_path / "t2" / "base" / "seed_1" / "results.json").write_text("{}")  # The job wrote its results.
    final = slurm_executor.wait_for_jobs(jobs, outcomes, poll_s=0.0, say=lines.append)
    assert "[2/2] base/seed_1 completed  job 1" in lines
    assert [(o.row, o.status, o.detail) for o in final] == [
        ("base/seed_0", "skipped", "results.json exists"), ("base/seed_1", "done", "job 1")]


@pytest.mark.integration
def test_config_seed_sets_initialisation_dropout_keys_and_data_order(tmp_path: pathlib.Path) -> None:
    """What --seeds varies: train._build_run hands config.seed to the state (parameters, and the key that
    dropout keys are folded from) and to the training batches' order."""
    import jax
    import numpy as np

    from attention_jax.training import train
    from tests.support import fake_data

    runs = {}
    for seed in (0, 1):
        data = fake_data.FakeData()
        run = train._build_run(fake_data.tiny_experiment(seed=seed), str(tmp_path / f"seed_{seed}"), data)
        runs[seed] = (run.loop.state, run.loop.train_iterator._seed)
    (state0, order0), (state1, order1) = runs[0], runs[1]
    assert (order0, order1) == (0, 1)  # The data order's seed.
    assert not np.array_equal(np.asarray(state0.rng), np.asarray(state1.rng))  # Dropout keys' source.
    leaves = [jax.tree_util.tree_leaves(state.params) for state in (state0, state1)]
    random = [(np.asarray(a), np.asarray(b)) for a, b in zip(*leaves) if np.unique(np.asarray(a)).size > 1]
    assert len(random) > 10  # The weight matrices; biases and layer-norm scales start constant.
    assert all(not np.array_equal(a, b) for a, b in random)  # Initialisation.


@pytest.mark.slow
def test_a_root_that_is_a_file_too_long_or_read_only_is_one_line_and_nothing_runs(tmp_path: pathlib.Path) -> None:
    from tests.support.read_only import read_only

    a_file = tmp_path / "a_file"
    a_file.write_text("not a root")
    overlong = tmp_path / "new" / ("r" * 300)
    read_only_root = tmp_path / "read_only"
    read_only_root.mkdir()
    results = {}
    for name, root, extra in (("file", a_file, ()), ("file_dry_run", a_file, ("--dry_run",)),
                              ("overlong", overlong, ()), ("read_only", read_only_root, ())):
        with read_only(read_only_root) if name == "read_only" else contextlib.nullcontext():
            results[name] = sweep_in_process("--config=configs/table2.py", "--rows=base", f"--root={root}",
                                      "--main=fake_main", *extra, env=fake_main_env())
    for name, expected in (("file", "is a file, not a directory"), ("file_dry_run", "is a file, not a directory"),
                           ("overlong", "is 300 bytes long"), ("read_only", "read-only file system")):
        result = results[name]
        assert result.returncode == 2 and result.stderr.count("\n") == 1, (name, result.stderr)
        assert expected in result.stderr or (name == "read_only" and "not writable" in result.stderr), result.stderr
    assert a_file.read_text() == "not a root" and not (tmp_path / "new").exists()
    assert list(read_only_root.iterdir()) == []
