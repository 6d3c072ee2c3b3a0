"""The suite's pytest-xdist work units (tests/conftest.py): one per file, the quickstart's file first.

The quickstart's run (``tiny_workdir``) takes about ten minutes to train; it is trained once per worker
that asks for it, so every test that reads it must live in ``tests/end_to_end/test_quickstart.py``.
"""

from __future__ import annotations

import ast
import os
import tomllib

import pytest
from xdist.scheduler import LoadFileScheduling

from tests.conftest import (CALLER_XLA_FLAGS, COMPILES_FAST, FAST_COMPILE_XLA_FLAG, LONGEST_TEST_FILES,
                            QUICKSTART_TEST_FILE, REPO_ROOT, add_fast_compile_flag, caller_environment,
                            queue_position)
from tests.support import train_support

QUICKSTART_FIXTURE = "tiny_workdir"


def _files_reading_the_quickstart() -> set[str]:
    """Test files that take ``tiny_workdir`` as an argument or ask for it by name (conftest.py defines it)."""
    readers = set()
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        if path.name == "conftest.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            takes_it = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                argument.arg == QUICKSTART_FIXTURE for argument in node.args.args + node.args.kwonlyargs)
            looks_it_up = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                           and node.func.attr in ("getfixturevalue", "usefixtures")
                           and any(isinstance(argument, ast.Constant) and argument.value == QUICKSTART_FIXTURE
                                   for argument in node.args))
            if takes_it or looks_it_up:
                readers.add(path.relative_to(REPO_ROOT).as_posix())
    return readers


def test_every_reader_of_the_quickstart_run_is_in_one_work_unit() -> None:
    readers = _files_reading_the_quickstart()
    assert readers == {QUICKSTART_TEST_FILE}, (
        f"{sorted(readers - {QUICKSTART_TEST_FILE})} read the quickstart's run; move those tests into "
        f"{QUICKSTART_TEST_FILE} so that pytest-xdist trains it on one worker only")
    pytest_options = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = pytest_options["addopts"]
    assert "--dist=loadfile" in addopts.split(), addopts


def test_loadfile_puts_each_file_in_its_own_unit_and_the_quickstart_first(request: pytest.FixtureRequest) -> None:
    node_ids = [item.nodeid for item in request.session.items]
    units = [LoadFileScheduling._split_scope(None, node_id) for node_id in node_ids]  # What xdist groups by.
    assert units == [node_id.split("::")[0] for node_id in node_ids]
    if QUICKSTART_TEST_FILE in units:  # Collected in this session: its tests come before every other file's.
        first_other = next((index for index, unit in enumerate(units) if unit != QUICKSTART_TEST_FILE), len(units))
        assert QUICKSTART_TEST_FILE not in units[first_other:], units
        assert set(units[:first_other]) == {QUICKSTART_TEST_FILE}, units[:first_other]


def test_the_longest_files_follow_the_quickstart_longest_first_then_the_rest_in_collection_order(
        request: pytest.FixtureRequest) -> None:
    assert len(set(LONGEST_TEST_FILES)) == len(LONGEST_TEST_FILES) and QUICKSTART_TEST_FILE not in LONGEST_TEST_FILES
    assert [path for path in LONGEST_TEST_FILES if not (REPO_ROOT / path).is_file()] == []  # Renamed: update the list.
    positions = [queue_position(f"{path}::test") for path in (QUICKSTART_TEST_FILE, *LONGEST_TEST_FILES)]
    assert positions == sorted(positions) == list(range(len(positions)))
    assert queue_position("tests/test_unlisted.py::test") == len(positions)
    keys = [queue_position(item.nodeid) for item in request.session.items]
    assert keys == sorted(keys)  # The order this session's items were queued in.


def test_the_fast_compile_flag_joins_the_callers_flags_once() -> None:
    assert add_fast_compile_flag(None) == FAST_COMPILE_XLA_FLAG
    assert add_fast_compile_flag("--xla_cpu_max_isa=AVX2") == f"--xla_cpu_max_isa=AVX2 {FAST_COMPILE_XLA_FLAG}"
    # A level the caller chose stays, and the flag is not added twice.
    assert add_fast_compile_flag("--xla_backend_optimization_level=2") == "--xla_backend_optimization_level=2"
    assert add_fast_compile_flag(add_fast_compile_flag("")).split().count(FAST_COMPILE_XLA_FLAG) == 1


def test_the_suite_compiles_fast_and_the_quickstart_commands_get_the_callers_flags() -> None:
    expected = add_fast_compile_flag(CALLER_XLA_FLAGS) if COMPILES_FAST else CALLER_XLA_FLAGS
    assert os.environ.get("XLA_FLAGS") == expected
    assert caller_environment().get("XLA_FLAGS") == CALLER_XLA_FLAGS


def test_child_processes_get_the_suite_flags_and_choose_their_own_device_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_FLAGS", f"--xla_cpu_max_isa=AVX2 --xla_force_host_platform_device_count=8 "
                                    f"{FAST_COMPILE_XLA_FLAG}")
    assert train_support.child_xla_flags() == f"--xla_cpu_max_isa=AVX2 {FAST_COMPILE_XLA_FLAG}"
    assert train_support.child_xla_flags("--xla_force_host_platform_device_count=2").split() == [
        "--xla_cpu_max_isa=AVX2", FAST_COMPILE_XLA_FLAG, "--xla_force_host_platform_device_count=2"]
    assert train_support.subprocess_env("cache")["XLA_FLAGS"] == train_support.child_xla_flags()
