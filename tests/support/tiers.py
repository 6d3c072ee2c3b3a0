"""The suite's three tiers, decided when the tests are collected and checked while the fast ones run.

Every collected test gets exactly one tier marker:

``e2e``
    Every file under ``tests/end_to_end/`` (:data:`END_TO_END_DIR`): the project run as a user does on a
    whole machine (the quickstart, the notebooks, a real SLURM cluster, several processes, the benchmarks'
    quick modes).
``integration``
    A test marked ``slow`` or ``end_to_end`` (it starts a process or trains beyond a few steps), or
    ``integration`` (in-process, but it compiles whole models for more than about 3 s on 2 cores).
``fast``
    Everything else: each module's logic, the NumPy-oracle checks, config and error paths in-process.

``pytest -m fast`` is the tier to run after every change (docs/testing.md). A fast test must not start a
process nor train more than :data:`FAST_TIER_MAX_TRAIN_STEPS` steps: while a fast test is set up and run
(module fixtures included), :func:`fast_tier_guard` makes either one fail the test at once with a line
saying what it did and which marker moves it to the integration tier, so a new slow test cannot land in
the fast tier unnoticed.

Notes
-----
The guard patches the few places a process starts from Python (``subprocess.Popen``'s child creation,
``os.system``, ``os.fork``, ``os.posix_spawn``, ``multiprocessing``'s ``Process.start``) and the trainer's
entry point, :func:`attention_jax.training.train.train_and_evaluate`, for the run's step count. With
``ATTENTION_JAX_TIER_AUDIT=FILE`` each violation is also appended to ``FILE`` as ``nodeid<TAB>reason``
(one line each): that is how the tiers were first drawn (docs/testing.md).
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import subprocess
from typing import Any, Callable, Iterator

import pytest

TIERS = ("fast", "integration", "e2e")
"""The tier markers, from the quickest to the whole-machine runs."""

INTEGRATION_MARKERS = ("slow", "end_to_end", "integration")
"""A test carrying one of these is in the integration tier (unless its file is end-to-end). ``integration``
by hand marks an in-process test that takes more than about 3 s on 2 cores (it compiles whole models):
the fast tier's time budget, drawn from a measured run (docs/testing.md)."""

END_TO_END_DIR = "tests/end_to_end/"
"""The end-to-end tier's folder, relative to the repository root (node ids start with it)."""

FAST_TIER_MAX_TRAIN_STEPS = 10
"""The most optimizer steps a fast test may train in-process."""

AUDIT_FILE_VARIABLE = "ATTENTION_JAX_TIER_AUDIT"
TIMES_FILE_VARIABLE = "ATTENTION_JAX_TEST_TIMES"


class FastTierViolation(Exception):
    """A fast-tier test started a process or trained beyond :data:`FAST_TIER_MAX_TRAIN_STEPS` steps."""


def tier_of(item: pytest.Item) -> str:
    """The tier a collected test belongs to.

    Parameters
    ----------
    item
        A collected test.

    Returns
    -------
    str
        ``"e2e"`` for a file under :data:`END_TO_END_DIR`, ``"integration"`` for a test marked with one of
        :data:`INTEGRATION_MARKERS`, else ``"fast"``.
    """
    if item.nodeid.startswith(END_TO_END_DIR):
        return "e2e"
    if any(item.get_closest_marker(name) is not None for name in INTEGRATION_MARKERS):
        return "integration"
    return "fast"


def mark_tiers(items: list[pytest.Item]) -> None:
    """Add the tier marker of :func:`tier_of` to every collected test (``-m fast`` then selects them)."""
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item)))


def _record(nodeid: str, reason: str) -> None:
    audit_file = os.environ.get(AUDIT_FILE_VARIABLE)
    if audit_file:
        with open(audit_file, "a") as audit:
            audit.write(f"{nodeid}\t{' '.join(reason.split())}\n")


def record_if_refused(nodeid: str, when: str, excinfo: pytest.ExceptionInfo[BaseException] | None) -> None:
    """Append ``nodeid`` to the audit file when its ``when`` phase failed on a :class:`FastTierViolation`.

    Parameters
    ----------
    nodeid
        The test's id.
    when
        ``"setup"``, ``"call"`` or ``"teardown"``.
    excinfo
        The phase's exception, if any. A module fixture refused once fails every later test of the
        module with the same cached error: each of them is recorded here, not only the first.
    """
    if excinfo is not None and excinfo.errisinstance(FastTierViolation):
        _record(nodeid, f"refused in {when}: {excinfo.value}")


def record_duration(nodeid: str, when: str, seconds: float) -> None:
    """With ``ATTENTION_JAX_TEST_TIMES=FILE``, append ``nodeid<TAB>phase<TAB>seconds`` to ``FILE``.

    Notes
    -----
    Written as each phase ends, so a run that is stopped or loses a worker still leaves every finished
    test's time (pytest's ``--durations`` table is printed only at the end of a whole run).
    """
    times_file = os.environ.get(TIMES_FILE_VARIABLE)
    if times_file:
        with open(times_file, "a") as times:
            times.write(f"{nodeid}\t{when}\t{seconds:.3f}\n")


def _violation(nodeid: str, what: str) -> FastTierViolation:
    _record(nodeid, what)
    return FastTierViolation(
        f"{nodeid} is in the fast tier but {what}: mark it @pytest.mark.slow (the integration tier), or test "
        "the function in-process on a few steps (docs/testing.md, 'Tiers')")


def _refusing(nodeid: str, what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        del kwargs
        command = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else args[:1]
        shown = " ".join(" ".join(str(part).split()) for part in command)[:120]
        raise _violation(nodeid, f"{what} ({shown})" if shown else what)
    return refuse


@contextlib.contextmanager
def fast_tier_guard(nodeid: str) -> Iterator[None]:
    """Inside the block, starting a process or training more than a few steps raises :class:`FastTierViolation`.

    Parameters
    ----------
    nodeid
        The test's id, named in the error and the audit file.

    Notes
    -----
    ``subprocess.Popen._execute_child`` is where every ``subprocess`` call (``run``, ``check_output``,
    ``Popen``, a Jupyter kernel's start) creates its child on POSIX, so patching it covers them all.
    The trainer is checked by its ``run.num_train_steps`` before anything is built.
    """
    from attention_jax.training import train  # The library's own trainer: imported where the tests run it.

    real_train_and_evaluate = train.train_and_evaluate

    def checked_train_and_evaluate(experiment: Any, *args: Any, **kwargs: Any) -> Any:
        steps = experiment.run.num_train_steps
        if steps > FAST_TIER_MAX_TRAIN_STEPS:
            raise _violation(nodeid, f"trains {steps} steps (more than {FAST_TIER_MAX_TRAIN_STEPS})")
        return real_train_and_evaluate(experiment, *args, **kwargs)

    patches: list[tuple[Any, str, Any]] = [
        (subprocess.Popen, "_execute_child", _refusing(nodeid, "starts a process")),
        (os, "system", _refusing(nodeid, "starts a shell")),
        (os, "fork", _refusing(nodeid, "forks")),
        (os, "posix_spawn", _refusing(nodeid, "starts a process")),
        (multiprocessing.process.BaseProcess, "start", _refusing(nodeid, "starts a multiprocessing process")),
        (train, "train_and_evaluate", checked_train_and_evaluate),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
