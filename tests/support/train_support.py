"""Helpers for the training tests: subprocess runs and a compilation cache shared by them.

XLA's CPU compiler takes several seconds per train step (1-layer model included), so the training
tests share a persistent compilation cache: a computation compiled by one run (in this process or in
a subprocess) is loaded by the next. Subprocesses get the suite's ``XLA_FLAGS`` (``tests/conftest.py``
adds ``--xla_backend_optimization_level=0``: faster to compile, same numerics contract; a caller's
``--xla_cpu_max_isa`` is kept) plus ``extra_xla_flags`` such as the host device count.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Any, Iterator

import jax
import numpy as np
from jax.experimental.compilation_cache import compilation_cache

from tests.support import REPO_ROOT


@contextlib.contextmanager
def shared_compilation_cache(directory: str) -> Iterator[None]:
    """Use ``directory`` as JAX's persistent compilation cache inside the block, then restore."""
    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")
    previous = {name: getattr(jax.config, name) for name in names}
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.set_cache_dir(directory)
    compilation_cache.reset_cache()  # Re-read the settings even if JAX compiled something already.
    try:
        yield
    finally:
        for name, value in previous.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()


HOST_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def child_xla_flags(extra_xla_flags: str = "") -> str:
    """The suite's ``XLA_FLAGS`` for a child process, without a host device count, plus ``extra_xla_flags``.

    Parameters
    ----------
    extra_xla_flags
        Flags the child needs on top, such as ``--xla_force_host_platform_device_count=8``.

    Returns
    -------
    str
        The value for the child's ``XLA_FLAGS``.

    Notes
    -----
    The suite's flags are this process's (``tests/conftest.py`` sets them before JAX starts): the
    fast-compile level unless ``ATTENTION_JAX_TEST_XLA_OPTIMIZE=1``, and the caller's other flags such
    as ``--xla_cpu_max_isa=AVX2``, so a portability run reaches the children too. A device count is
    the child's own choice: without one it sees one CPU device.
    """
    inherited = [flag for flag in os.environ.get("XLA_FLAGS", "").split()
                 if not flag.startswith(HOST_DEVICE_COUNT_FLAG)]
    return " ".join([*inherited, *extra_xla_flags.split()])


def subprocess_env(cache_dir: str, extra_xla_flags: str = "", **extra: str) -> dict[str, str]:
    """Environment for a child Python: repo on the path, the shared cache, the suite's XLA flags."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env["JAX_COMPILATION_CACHE_DIR"] = cache_dir
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = child_xla_flags(extra_xla_flags)
    env.update(extra)
    return env


def run_python(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``python *args`` from the repo root; the output is kept for assertion messages."""
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def result_line(completed: subprocess.CompletedProcess) -> Any:
    """The JSON after ``RESULT `` in a child's stdout (fails the test with its output otherwise)."""
    for line in completed.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError(f"no RESULT line (exit {completed.returncode}).\nstdout:\n"
                         f"{completed.stdout[-3000:]}\nstderr:\n{completed.stderr[-5000:]}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a coordinator)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def snapshot(directory: pathlib.Path) -> dict[str, tuple[int, str]]:
    """Every file under ``directory``: its modification time and hash (what a rerun must leave alone)."""
    return {str(path.relative_to(directory)): (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(directory.rglob("*")) if path.is_file()}


def save_checkpoint(workdir: pathlib.Path, step: int = 1) -> None:
    """Save a stand-in training checkpoint at ``step`` (a two-weight model) in ``workdir``."""
    from attention_jax.checkpointing import checkpoints
    from attention_jax.training import train_state

    manager = checkpoints.TrainingCheckpoints(str(workdir), keep=1)
    manager.save(train_state.TrainState(step=np.int32(step), params={"w": np.zeros(2, np.float32)},
                                        opt_state=(np.zeros(3, np.float32),), rng=np.zeros(2, np.uint32)),
                 data_state={}, progress={})
    manager.close()
