"""Issue 73, the fourth fault review: each numbered case refused in one line, or recorded as it happened.

The cases call a command's functions in process where the command line itself is not under test; the few
that need a command line of their own (a flag's parsing, a pipe, a signal) start one and are marked slow.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from launch import sweep_file_checks, sweep_spec
from tests.support.sweep_cli import REPO_ROOT


def _sweep_file(tmp_path: pathlib.Path, sweep_body: str, *, takes_row: bool = False) -> str:
    path = tmp_path / "my_sweep.py"
    get_config = ("def get_config(row):\n    return tiny.get_config()\n" if takes_row else
                  "def get_config():\n    return tiny.get_config()\n")
    path.write_text(f"from configs import tiny\ndef get_sweep():\n    return {sweep_body}\n{get_config}")
    return str(path)


# --- Cases 3, 4, 9: what get_sweep() returns ----------------------------------------------------------


@pytest.mark.parametrize("body, message", [
    ("[{'num_heads': 1}]", r"get_sweep\(\) returned a list, not a dict; get_sweep\(\) returns \{row name"),
    ("{'a': 5}", r"row a's overrides are a int \(5\), not a dict of fields"),
    ("{1: {'num_heads': 1}, '1': {'num_heads': 2}}", r"two rows named '1' \(1 and '1'\)"),
    ("{'a': {3: 1}}", r"row a has override keys \[3\] that are not field names"),
])
def test_a_sweep_file_returning_the_wrong_shape_is_one_line(tmp_path: pathlib.Path, body: str,
                                                             message: str) -> None:
    config_file = _sweep_file(tmp_path, body)
    with pytest.raises(ValueError, match=message) as refused:
        sweep_spec.load_sweep(config_file)
    assert "\n" not in str(refused.value) and str(refused.value).startswith(config_file)


def test_get_seeds_that_is_not_a_list_is_one_line(tmp_path: pathlib.Path) -> None:
    config_file = _sweep_file(tmp_path, "{'a': {}}")
    with open(config_file, "a") as file:
        file.write("def get_seeds():\n    return 3\n")
    with pytest.raises(ValueError, match=r"get_seeds\(\) returned a int \(3\); return a list of seeds"):
        sweep_spec.load_sweep(config_file)


# --- Case 10: the dry run's check and the command it writes agree -----------------------------------


def test_a_tuple_of_strings_is_written_as_a_flag_that_reads_back_as_the_tuple(tmp_path: pathlib.Path) -> None:
    config_file = _sweep_file(tmp_path, "{'r': {'final_bleu_splits': ('test',), 'mesh_axes': ('data', 'model')}}")
    sweep = sweep_spec.load_sweep(config_file)
    argv = sweep_spec.row_argv(sweep, "r", "w", [], python="python", main_module="attention_jax.main")
    assert "--config.final_bleu_splits=('test',)" in argv
    assert "--config.mesh_axes=('data','model')" in argv


@pytest.mark.parametrize("field, value", [("dataset", "'two\\nlines'"), ("dataset", "b'tsv:x'"),
                                          ("dataset", "object()"), ("dataset", "None")])
def test_a_row_value_no_flag_can_carry_is_refused(tmp_path: pathlib.Path, field: str, value: str) -> None:
    config_file = _sweep_file(tmp_path, f"{{'r': {{'{field}': {value}}}}}")
    with pytest.raises(ValueError, match=rf"row r: {field}=.* cannot be passed to the trainer as a flag"):
        sweep_spec.load_sweep(config_file)


def test_flag_text_quotes_strings_only_inside_tuples() -> None:
    assert sweep_file_checks.flag_text("tsv:data/x") == "tsv:data/x"
    assert sweep_file_checks.flag_text((1, -1)) == "(1,-1)"
    assert sweep_file_checks.flag_text(["dev"]) == "('dev',)"
    assert sweep_file_checks.flag_text(()) == "()"


@pytest.mark.slow  # Starts the trainer: its flags parser is the one under test.
def test_the_trainer_reads_the_generated_tuple_back_as_the_dry_run_checked(tmp_path: pathlib.Path) -> None:
    config_file = _sweep_file(tmp_path, "{'r': {'final_bleu_splits': ('test',), 'mesh_axes': ('data', 'model')}}")
    sweep = sweep_spec.load_sweep(config_file)
    workdir = tmp_path / "r"
    # mesh_shape=(3,) on one CPU is refused after the whole config passed its check, before anything is
    # written: the refusal names the mesh, not final_bleu_splits or mesh_axes, only if both read back.
    argv = sweep_spec.row_argv(sweep, "r", str(workdir), ["mesh_shape=(3,1)"], python=sys.executable,
                               main_module="attention_jax.main")
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{tmp_path}"})
    assert result.returncode == 2, result.stderr
    assert "config.mesh_shape=(3, 1) needs 3 devices" in result.stderr, result.stderr
    assert not workdir.exists()
