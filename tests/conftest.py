"""Shared pytest fixtures (the real corpus in ../shared, skipped when absent; a quickstart run) and the
grouping that lets pytest-xdist run the suite on several processes.

Notes
-----
``pyproject.toml`` runs the suite on two pytest-xdist workers (``-n 2 --dist=loadfile``): each test file
is one work unit, so a module-scoped fixture (a trained model, a SLURM cluster) is built on one worker
only. Every test that reads the quickstart's run (``tiny_workdir``, which trains ``configs/tiny.py``)
lives in ``tests/end_to_end/test_quickstart.py``, so the run is trained once; that file is queued first
because it is the longest unit, and the next longest follow it (``LONGEST_TEST_FILES``). ``-n 0`` runs
everything in one process.

The suite compiles with ``--xla_backend_optimization_level=0`` (added to ``XLA_FLAGS`` before JAX
starts; child processes and notebook kernels inherit it): most of its time is XLA compiling small
programs that then run a few steps, and the unoptimised LLVM backend compiles them faster (a quarter
less CPU time for the attention-function and beam-search files) with the same numerics contract. The
quickstart's training runs the README's command with the caller's own ``XLA_FLAGS``, so the optimised
code path is trained and scored end to end. ``ATTENTION_JAX_TEST_XLA_OPTIMIZE=1`` runs the whole suite
at XLA's default level.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Iterator

import jax
import pytest

from tests.support import REPO_ROOT, tiers


# The caller's XLA_FLAGS, before the suite adds its own: the quickstart's run gets these back. Kept in
# the environment so that a later import of this file, after XLA_FLAGS has changed, still reads them.
_CALLER_XLA_FLAGS_VARIABLE = "ATTENTION_JAX_CALLER_XLA_FLAGS"
os.environ.setdefault(_CALLER_XLA_FLAGS_VARIABLE, os.environ.get("XLA_FLAGS", ""))
CALLER_XLA_FLAGS = os.environ[_CALLER_XLA_FLAGS_VARIABLE] or None
FAST_COMPILE_XLA_FLAG = "--xla_backend_optimization_level=0"
# False with ATTENTION_JAX_TEST_XLA_OPTIMIZE=1: the whole suite at XLA's default level.
COMPILES_FAST = os.environ.get("ATTENTION_JAX_TEST_XLA_OPTIMIZE", "") in ("", "0")


def add_fast_compile_flag(xla_flags: str | None) -> str:
    """``xla_flags`` with XLA's backend optimisation level set to 0, unless it already sets a level.

    Parameters
    ----------
    xla_flags
        The current value of ``XLA_FLAGS`` (``None`` when unset).

    Returns
    -------
    str
        The flags to run the suite's JAX processes with.

    Notes
    -----
    A level the caller chose (``--xla_backend_optimization_level=N`` in ``XLA_FLAGS``) is kept, and so
    is every other flag (``--xla_cpu_max_isa=AVX2`` for the portability runs, a host device count).
    """
    flags = (xla_flags or "").split()
    if any(flag.startswith("--xla_backend_optimization_level") for flag in flags):
        return " ".join(flags)
    return " ".join([*flags, FAST_COMPILE_XLA_FLAG])


def caller_environment() -> dict[str, str]:
    """This process's environment with the caller's own ``XLA_FLAGS`` (XLA's default optimisation).

    Returns
    -------
    dict[str, str]
        ``os.environ`` without the suite's fast-compile flag: for the quickstart's commands, which the
        tests run as a user does.
    """
    environment = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    if CALLER_XLA_FLAGS is not None:
        environment["XLA_FLAGS"] = CALLER_XLA_FLAGS
    return environment


if COMPILES_FAST:
    # Before the first backend starts (below): XLA reads its flags once, when the CPU client is made.
    os.environ["XLA_FLAGS"] = add_fast_compile_flag(CALLER_XLA_FLAGS)

if jax.default_backend() == "gpu":
    # GPUs multiply float32 matrices in TF32 by default (a 10-bit mantissa); the numerics tests compare
    # float32 against float64 NumPy at ~1e-5, so they ask for full float32 products. CPUs always use them.
    jax.config.update("jax_default_matmul_precision", "highest")


QUICKSTART_TEST_FILE = "tests/end_to_end/test_quickstart.py"
# The not-fast tier's longest files after the quickstart's, longest first (an estimate from CI's 25
# slowest tests and per-file runs, 2026-12-07), queued next: while one worker trains the quickstart the
# other takes these, and the run ends on short files, so neither worker waits long on the other's last
# file. Other files run after them in collection order; a stale list costs time, never a test.
LONGEST_TEST_FILES = (
    "tests/end_to_end/test_notebooks.py",
    "tests/training/test_faults.py",
    "tests/end_to_end/test_slurm.py",
    "tests/training/test_fine_tuning.py",
    "tests/training/test_run_evaluation.py",
    "tests/training/test_reruns.py",
    "tests/models/test_attention_functions.py",
    "tests/decoding/test_decode.py",
    "tests/end_to_end/test_benchmark_quick_modes.py",
    "tests/training/test_train.py",
    "tests/training/test_faults_round_five.py",
    "tests/launch/test_sweep.py",
    "tests/docs/test_python_api.py",
    "tests/end_to_end/test_gpu_benchmark.py",
    "tests/end_to_end/test_multihost.py",
    "tests/commands/test_shipped_configs.py",
    "tests/foundation/test_full_disk.py",
    "tests/cpu_kernels/test_dropout.py",
    "tests/data/test_corpora.py",
    "tests/training/test_early_stopping.py",
    "tests/decoding/test_beam_search.py",
    "tests/commands/test_generate.py",
    "tests/data/test_first_use.py",
)


def queue_position(nodeid: str) -> int:
    """Return where a test's file is queued: the quickstart's first, then :data:`LONGEST_TEST_FILES`, then the rest.

    Parameters
    ----------
    nodeid : str
        The test's id (``path::name``).

    Returns
    -------
    int
        The sort key (a stable sort keeps the collection order within a position).
    """
    path = nodeid.split("::")[0]
    if path == QUICKSTART_TEST_FILE:
        return 0
    return 1 + LONGEST_TEST_FILES.index(path) if path in LONGEST_TEST_FILES else 1 + len(LONGEST_TEST_FILES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its tier (tests/support/tiers.py), then queue the files (:func:`queue_position`).

    Parameters
    ----------
    config
        The pytest configuration (unused; part of the hook's signature).
    items
        The collected tests, marked and reordered in place (a stable sort: the other files keep their
        order). The quickstart's file is the suite's longest pytest-xdist work unit; the longest of the
        others follow it, longest first.

    Notes
    -----
    The markers are added here, before pytest applies ``-m``, so ``pytest -m fast`` selects the fast tier.
    """
    del config
    tiers.mark_tiers(items)
    items.sort(key=lambda item: queue_position(item.nodeid))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """Set a fast test up (its module fixtures included) under :func:`tiers.fast_tier_guard`."""
    if tiers.tier_of(item) != "fast":
        return (yield)
    with tiers.fast_tier_guard(item.nodeid):
        return (yield)


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Record refused fast tests and each phase's time where asked (tests/support/tiers.py's variables)."""
    tiers.record_if_refused(item.nodeid, call.when, call.excinfo)
    tiers.record_duration(item.nodeid, call.when, call.duration)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Run a fast test under :func:`tiers.fast_tier_guard`: no process, no training beyond a few steps."""
    if tiers.tier_of(item) != "fast":
        return (yield)
    with tiers.fast_tier_guard(item.nodeid):
        return (yield)


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
def gnome_help_en_de() -> pathlib.Path:
    """Directory of the second real EN-DE corpus (GNOME help pages); skips the test when it is absent."""
    path = shared_dir() / "data" / "gnome_help_en_de"
    if not (path / "train.tsv").is_file():
        pytest.skip(f"real corpus not found at {path} (needs ../shared beside the repository)")
    return path


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    """The repository root (configs/ and the package live there)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def _worker_jax_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The directory of :func:`cache_dir`: one per pytest-xdist worker, so every file it runs shares it."""
    return str(tmp_path_factory.mktemp("jax_cache"))


@pytest.fixture(scope="module")
def cache_dir(_worker_jax_cache: str) -> Iterator[str]:
    """A JAX compilation cache for a test file's runs, in-process and in subprocesses.

    One directory per worker: the tiny runs of one file are the next file's too (the same model, the
    same train step), so a later file loads what an earlier one compiled. JAX keys each entry by the
    program, the flags and the backend, so a hit is the program a fresh compilation would give.
    """
    from tests.support import train_support  # Imported once the suite's XLA_FLAGS are set.

    with train_support.shared_compilation_cache(_worker_jax_cache):
        yield _worker_jax_cache


def _file_name(request: pytest.FixtureRequest) -> str:
    return request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> pathlib.Path:
    """A run of random parameters with a checkpoint at each of ``decoding_runs.STEPS``, made once per file.

    The run (tests/support/decoding_runs.py) follows the training contract, so the commands and
    ``load_run`` read it as a trained one.
    """
    from tests.support import decoding_runs

    return decoding_runs.make_random_run(tmp_path_factory.mktemp(_file_name(request)))


@pytest.fixture(scope="module")
def random_run(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> pathlib.Path:
    """A run of random parameters with one checkpoint (step 1), made once per file (tests/support/decoding_runs.py)."""
    from tests.support import decoding_runs

    return decoding_runs.make_random_run(tmp_path_factory.mktemp(_file_name(request)), steps=(1,))


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
    environment = caller_environment()  # The README's command as a user runs it.
    with open(log_path, "w") as log:
        # Relative, like the README's --workdir=runs/tiny (orbax needs absolute paths internally).
        relative_workdir = os.path.relpath(workdir, REPO_ROOT)
        completed = subprocess.run([sys.executable, *QUICKSTART_TRAIN_ARGS, f"--workdir={relative_workdir}"],
                                   cwd=REPO_ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT,
                                   timeout=1800)
    if completed.returncode != 0:
        tail = "".join(log_path.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise RuntimeError(f"quickstart training failed (exit {completed.returncode}); log tail:\n{tail}")
    return workdir
