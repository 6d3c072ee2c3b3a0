"""Helpers for launcher tests: run ``python -m launch.sweep`` / ``attention_jax.report`` as a user would."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTS_DIR = pathlib.Path(__file__).resolve().parent


def fake_main_env(**extra: str) -> dict[str, str]:
    """Environment in which ``--main=fake_main`` resolves to ``tests/fake_main.py``."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH", "")]))
    return env


def run_module(module: str, *args: str, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m <module> <args>`` from the repository root and capture its output."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def run_sweep(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m launch.sweep <args>`` from the repository root."""
    return run_module("launch.sweep", *args, env=env, timeout=timeout)
