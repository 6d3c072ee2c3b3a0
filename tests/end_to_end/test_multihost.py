"""Multi-process training for real: 2 processes x 1 CPU device equal 1 process x 2 devices.

Both runs go through the entry point (``python -m attention_jax.main``) on the same tiny config and
data. The two-process run joins with ``jax.distributed`` on localhost (``JAX_COORDINATOR_ADDRESS``,
``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``; gloo collectives on CPU), each process reading only its rows
of every global batch; the one-process run sees two devices through
``--xla_force_host_platform_device_count=2``. Same global batches and the same all-reduced gradients
must give the same losses and the same parameters.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from tests.support import train_support
from tests.support.sweep_cli import REPO_ROOT, needs_entry_point, tiny_data_dir, tiny_flags  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.end_to_end]
STEPS = 4
# Variables of the launching environment that would make a child join some other multi-process job.
CLUSTER_VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "SLURM_NTASKS",
                     "SLURM_JOB_ID", "TPU_WORKER_HOSTNAMES", "OMPI_COMM_WORLD_SIZE")


def _env(device_count: int, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in CLUSTER_VARIABLES}
    device_flag = f"--xla_force_host_platform_device_count={device_count}"
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=train_support.child_xla_flags(device_flag), **extra)
    return env


def _start_main(workdir: pathlib.Path, data_dir: pathlib.Path, env: dict[str, str],
                log: pathlib.Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py", f"--workdir={workdir}",
            *tiny_flags(data_dir, STEPS, num_heads=2, key_dim=16, value_dim=16, log_every_steps=1)]
    with open(log, "w") as log_file:
        return subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)


def _wait(processes: list[subprocess.Popen], logs: list[pathlib.Path], timeout: float = 240) -> None:
    try:
        codes = [process.wait(timeout=timeout) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    if any(codes):
        tails = "\n".join(f"--- {log}\n" + "\n".join(log.read_text().splitlines()[-25:]) for log in logs)
        pytest.fail(f"training exited with {codes}:\n{tails}")


def _final_params(workdir: pathlib.Path) -> dict:
    from attention_jax.checkpointing import params_checkpoints

    params, _ = params_checkpoints.load_for_inference(str(workdir), "latest")
    return {jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(params)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory,
         request: pytest.FixtureRequest) -> tuple[pathlib.Path, pathlib.Path]:
    """Work directories of the one-process/two-device run and of the two-process run."""
    needs_entry_point()
    data_dir = request.getfixturevalue("tiny_data_dir")
    base = tmp_path_factory.mktemp("multihost")
    single, multi = base / "single", base / "multi"
    log = base / "single.log"
    _wait([_start_main(single, data_dir, _env(2), log)], [log])
    address = f"127.0.0.1:{train_support.free_port()}"
    logs = [base / f"process{index}.log" for index in range(2)]
    processes = [_start_main(multi, data_dir, _env(1, JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2",
                                                    JAX_PROCESS_ID=str(index)), logs[index])
                 for index in range(2)]
    _wait(processes, logs)
    return single, multi


def test_two_processes_match_one_process_with_two_devices(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    single, multi = runs
    results = [json.loads((workdir / "results.json").read_text()) for workdir in runs]
    assert [result["step"] for result in results] == [STEPS, STEPS]
    assert [result["devices"] for result in results] == [2, 2]
    for key in ("train_loss", "eval_loss"):
        assert results[1][key] == pytest.approx(results[0][key], rel=1e-5), key
    single_params, multi_params = _final_params(single), _final_params(multi)
    assert single_params.keys() == multi_params.keys()
    for name, value in single_params.items():
        np.testing.assert_allclose(multi_params[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert np.isfinite(results[0]["eval_loss"])


def test_every_step_logged_the_same_loss(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    def train_losses(workdir: pathlib.Path) -> dict[int, float]:
        lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
        return {line["step"]: line["train/loss"] for line in lines if "train/loss" in line}

    single, multi = (train_losses(workdir) for workdir in runs)
    assert sorted(single) == list(range(1, STEPS + 1))
    assert multi.keys() == single.keys()
    for step in single:
        assert multi[step] == pytest.approx(single[step], rel=1e-5), step
    assert min(single[step] for step in range(2, STEPS + 1)) < single[1]  # The steps updated the model.
