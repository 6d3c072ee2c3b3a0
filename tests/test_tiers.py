"""The suite's tiers (tests/support/tiers.py): which tier a test lands in, and the fast tier's guard."""

from __future__ import annotations

import multiprocessing
import os
import pathlib
import re
import subprocess
import types

import pytest

from attention_jax.training import train
from tests.conftest import QUICKSTART_TEST_FILE
from tests.support import REPO_ROOT, tiers


class _Item:
    """What :func:`tiers.tier_of` reads of a collected test: its node id and its markers."""

    def __init__(self, nodeid: str, *markers: str) -> None:
        self.nodeid = nodeid
        self._markers = set(markers)

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name in self._markers else None


@pytest.mark.parametrize(("nodeid", "markers", "tier"), [
    ("tests/models/test_attention.py::test_softmax", (), "fast"),
    ("tests/launch/test_sweep.py::test_resume", ("slow",), "integration"),
    ("tests/training/test_train.py::test_kill", ("end_to_end",), "integration"),
    ("tests/end_to_end/test_quickstart.py::test_bleu", ("slow", "end_to_end"), "e2e"),
    ("tests/end_to_end/test_notebooks.py::test_notebook[01]", (), "e2e"),
])
def test_a_test_is_in_the_tier_its_file_and_markers_say(nodeid: str, markers: tuple[str, ...], tier: str) -> None:
    assert tiers.tier_of(_Item(nodeid, *markers)) == tier  # type: ignore[arg-type]


def test_every_end_to_end_file_exists() -> None:
    files = {path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / tiers.END_TO_END_DIR).glob("test_*.py")}
    assert QUICKSTART_TEST_FILE in files and "tests/end_to_end/test_notebooks.py" in files, sorted(files)


def test_every_collected_test_has_exactly_one_tier(request: pytest.FixtureRequest) -> None:
    own = [marker.name for marker in request.node.iter_markers() if marker.name in tiers.TIERS]
    assert own == ["fast"]


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(["true"], check=False),
    lambda: subprocess.check_output(["echo", "hi"]),
    lambda: os.system("true"),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
], ids=["subprocess.run", "check_output", "os.system", "multiprocessing"])
def test_the_guard_stops_a_process_before_it_starts(start, tmp_path: pathlib.Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    audit = tmp_path / "audit.tsv"
    monkeypatch.setenv(tiers.AUDIT_FILE_VARIABLE, str(audit))
    with tiers.fast_tier_guard("tests/test_x.py::test_y"):
        with pytest.raises(tiers.FastTierViolation, match=r"test_y is in the fast tier but .*@pytest.mark.slow"):
            start()
    nodeid, reason = audit.read_text().rstrip("\n").split("\t")
    assert nodeid == "tests/test_x.py::test_y" and ("process" in reason or "shell" in reason)


def test_the_guard_refuses_a_long_training_run_and_passes_a_short_one() -> None:
    calls: list[int] = []

    def recorded_training(experiment: types.SimpleNamespace, workdir: str) -> dict[str, bool]:
        del workdir
        calls.append(experiment.run.num_train_steps)
        return {"finished": True}

    short = types.SimpleNamespace(run=types.SimpleNamespace(num_train_steps=tiers.FAST_TIER_MAX_TRAIN_STEPS))
    long = types.SimpleNamespace(run=types.SimpleNamespace(num_train_steps=tiers.FAST_TIER_MAX_TRAIN_STEPS + 1))
    # Put back by hand, not by monkeypatch: its teardown runs after this test's own guard has put back
    # the real trainer, and would then leave the guard's wrapper in place for the tests after this one.
    current = train.train_and_evaluate
    train.train_and_evaluate = recorded_training  # type: ignore[assignment]
    try:
        with tiers.fast_tier_guard("tests/test_x.py::test_y"):
            assert train.train_and_evaluate(short, "workdir")["finished"]
            with pytest.raises(tiers.FastTierViolation, match=f"trains {tiers.FAST_TIER_MAX_TRAIN_STEPS + 1} steps"):
                train.train_and_evaluate(long, "workdir")
    finally:
        train.train_and_evaluate = current  # type: ignore[assignment]
    assert calls == [tiers.FAST_TIER_MAX_TRAIN_STEPS]


def test_the_guard_puts_everything_back() -> None:
    before = (subprocess.Popen._execute_child, os.system, os.fork, train.train_and_evaluate)  # type: ignore[attr-defined]
    with tiers.fast_tier_guard("tests/test_x.py::test_y"):
        assert subprocess.Popen._execute_child is not before[0]  # type: ignore[attr-defined]
    after = (subprocess.Popen._execute_child, os.system, os.fork, train.train_and_evaluate)  # type: ignore[attr-defined]
    assert after == before


def test_ci_runs_the_readme_test_command_tier_by_tier() -> None:
    readme_command = re.search(r"^python3 -m venv .venv && .venv/bin/pip install -e \"\.\[dev\]\".*$",
                               (REPO_ROOT / "README.md").read_text(), re.MULTILINE)
    assert readme_command is not None
    tests = readme_command.group(0).split("&& ", 2)[2]
    assert tests == '.venv/bin/python -m pytest -m fast && .venv/bin/python -m pytest -m "not fast"'
    ci_script = " ".join((REPO_ROOT / ".ci" / "run").read_text().replace("\\\n", " ").split())
    assert ci_script.endswith(tests), ci_script[-200:]
