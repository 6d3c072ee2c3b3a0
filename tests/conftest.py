"""Shared pytest fixtures (the real corpus in ../shared, skipped when absent; a quickstart run) and the
grouping that lets pytest-xdist run the suite on several processes.

Notes
-----
``pyproject.toml`` runs the suite on two pytest-xdist workers (``-n 2 --dist=loadgroup``). Each test file
is one work unit, so a module-scoped fixture (a trained model, a SLURM cluster) is built on one worker
only; every test that reads the quickstart's run (``tiny_workdir``) joins one unit, ``quickstart``, which
is queued first because it is the longest (it trains ``configs/tiny.py``). ``-n 0`` runs everything in
one process. Known gap: pytest-xdist 3.8 appends the group to ``item._nodeid``, which pytest 9.2 no
longer reads (node ids live in ``Node._id``), so the units are not applied yet and xdist sends tests one
by one; the marks and the order are in place for when they are.
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


QUICKSTART_GROUP = "quickstart"


def _work_unit(item: pytest.Item) -> str:
    """The pytest-xdist work unit of a test: ``quickstart`` for the quickstart's readers, else its file."""
    if "tiny_workdir" in getattr(item, "fixturenames", ()):
        return QUICKSTART_GROUP
    return item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)  # Before pytest-xdist turns the xdist_group marks into work units.
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its work unit unless it names one, and queue the quickstart's unit first.

    Parameters
    ----------
    config
        The pytest configuration (unused; part of the hook's signature).
    items
        The collected tests, reordered in place (a stable sort: files keep their order).
    """
    del config
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_work_unit(item)))
    items.sort(key=lambda item: next(item.iter_markers("xdist_group")).args[0] != QUICKSTART_GROUP)


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
