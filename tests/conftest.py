"""Shared pytest fixtures (the real corpus in ../shared, skipped when absent; a quickstart run) and the
grouping that lets pytest-xdist run the suite on several processes.

Notes
-----
``pyproject.toml`` runs the suite on two pytest-xdist workers (``-n 2 --dist=loadfile``): each test file
is one work unit, so a module-scoped fixture (a trained model, a SLURM cluster) is built on one worker
only. Every test that reads the quickstart's run (``tiny_workdir``, which trains ``configs/tiny.py``)
lives in ``tests/test_quickstart.py``, so the run is trained once; that file is queued first because it
is the longest unit. ``-n 0`` runs everything in one process.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import jax
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

if jax.default_backend() == "gpu":
    # GPUs multiply float32 matrices in TF32 by default (a 10-bit mantissa); the numerics tests compare
    # float32 against float64 NumPy at ~1e-5, so they ask for full float32 products. CPUs always use them.
    jax.config.update("jax_default_matmul_precision", "highest")


QUICKSTART_TEST_FILE = "tests/test_quickstart.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Queue the quickstart's file first: it is the suite's longest pytest-xdist work unit.

    Parameters
    ----------
    config
        The pytest configuration (unused; part of the hook's signature).
    items
        The collected tests, reordered in place (a stable sort: the other files keep their order).
    """
    del config
    items.sort(key=lambda item: item.nodeid.split("::")[0] != QUICKSTART_TEST_FILE)


def shared_dir() -> pathlib.Path:
    """The ``shared/`` folder beside the repository (or ``$ATTENTION_JAX_SHARED``)."""
    return pathlib.Path(os.environ.get("ATTENTION_JAX_SHARED", REPO_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def messages_en_de() -> pathlib.Path:
    """Directory of the real EN-DE corpus (train/dev/test.tsv); skips the test when it is absent."""
    path = shared_dir() / "data" / "messages_en_de"
    if not (path / "train.tsv").is_file():
        pytest.skip(f"real corpus not found at {path} (needs ../shared beside the repository)")
    return path


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    """The repository root (configs/ and the package live there)."""
    return REPO_ROOT


QUICKSTART_TRAIN_ARGS = ("-m", "attention_jax.main", "--config=configs/tiny.py")


@pytest.fixture(scope="session")
def tiny_workdir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A finished run of the README's quickstart training (``configs/tiny.py``), made once per session.

    ``$ATTENTION_JAX_TINY_WORKDIR`` names an existing finished run to reuse instead (saves ~5 minutes
    when iterating locally). The run's stdout/stderr go to ``train.log`` beside the workdir.
    """
    reuse = os.environ.get("ATTENTION_JAX_TINY_WORKDIR")
    if reuse:
        workdir = pathlib.Path(reuse)
        if not (workdir / "results.json").is_file():
            raise FileNotFoundError(f"ATTENTION_JAX_TINY_WORKDIR={reuse} holds no finished run "
                                    "(results.json missing); unset it to train one.")
        return workdir
    workdir = tmp_path_factory.mktemp("quickstart") / "tiny"
    log_path = workdir.parent / "train.log"
    with open(log_path, "w") as log:
        # Relative, like the README's --workdir=runs/tiny (orbax needs absolute paths internally).
        relative_workdir = os.path.relpath(workdir, REPO_ROOT)
        completed = subprocess.run([sys.executable, *QUICKSTART_TRAIN_ARGS, f"--workdir={relative_workdir}"],
                                   cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=1800)
    if completed.returncode != 0:
        tail = "".join(log_path.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise RuntimeError(f"quickstart training failed (exit {completed.returncode}); log tail:\n{tail}")
    return workdir
