"""A user's mistake ends a command with one line and exit status 2, and both facts have one home:
``attention_jax.foundation.user_errors`` (issue 36, the duplicated exit status of ``commands/config_errors.py``)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

from attention_jax.foundation import user_errors

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "attention_jax"
HOME = PACKAGE / "foundation" / "user_errors.py"


def _exit_status_definitions_and_error_lines(path: pathlib.Path) -> list[str]:
    """Where ``path`` defines ``USAGE_ERROR``, exits with a literal 2, or formats an ``": error: "`` line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Assign) and any(isinstance(target, ast.Name) and target.id == "USAGE_ERROR"
                                                for target in node.targets):
            found.append(f"{path.name}:{node.lineno} defines USAGE_ERROR")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "exit"
              and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 2):
            found.append(f"{path.name}:{node.lineno} calls exit(2)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ": error: " in node.value:
            found.append(f"{path.name}:{node.lineno} formats an error line")
    return found


@pytest.mark.integration
def test_the_exit_status_and_the_error_line_are_defined_once() -> None:
    elsewhere = [finding for path in sorted(PACKAGE.rglob("*.py")) if path != HOME
                 for finding in _exit_status_definitions_and_error_lines(path)]
    assert not elsewhere, "use attention_jax.foundation.user_errors (USAGE_ERROR, exit_with_error):\n" + "\n".join(elsewhere)


def test_exit_with_error_prints_one_line_and_exits_with_the_status(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        user_errors.exit_with_error("average_checkpoints", "--last=-1 must be positive;\n  got -1.")
    assert exited.value.code == user_errors.USAGE_ERROR == 2
    assert capsys.readouterr().err == "average_checkpoints: error: --last=-1 must be positive; got -1.\n"
    with pytest.raises(SystemExit) as exited:
        user_errors.exit_with_error("attention_jax.main", "another trainer holds runs/x", status=3)
    assert exited.value.code == 3


# A command whose library leaves a thread that never ends (as a tensorboardX or orbax writer can when
# the disk fills): the error line, then the process must still end with its status.
STUCK_COMMAND = """
import threading, types
from attention_jax.foundation import user_errors
from attention_jax.commands import entry_points

user_errors.SHUTDOWN_GRACE_S = 1.0
command = types.ModuleType("attention_jax.commands.stuck", "A command whose writer thread never ends.")

def main(argv):
    threading.Thread(target=threading.Event().wait, name="stuck_writer").start()  # Not a daemon.
    user_errors.exit_with_error("attention_jax.stuck", "No space left on device writing runs/x.")

command.main = main
entry_points.run_command(command)
"""


@pytest.mark.slow
def test_a_command_ends_with_its_status_even_when_a_library_thread_blocks_shutdown() -> None:
    completed = subprocess.run([sys.executable, "-c", STUCK_COMMAND], capture_output=True, text=True, timeout=120)
    assert completed.returncode == user_errors.USAGE_ERROR, completed.stderr[-3000:]
    lines = completed.stderr.splitlines()
    assert lines[0] == "attention_jax.stuck: error: No space left on device writing runs/x.", lines
    assert "shutdown still waiting after 1 s on threads" in lines[1] and "stuck_writer" in lines[1], lines
    assert "leaving with status 2" in lines[1] and len(lines) == 2, lines


@pytest.mark.parametrize(("orig_argv", "argv", "expected"), [
    (["python", "-m", "attention_jax.main", "--config=tiny"], ["/repo/attention_jax/main.py", "--config=tiny"],
     "attention_jax.main"),
    (["python", "-X", "dev", "-m", "attention_jax.translate"], ["/repo/attention_jax/translate.py"],
     "attention_jax.translate"),
    (["python", "-mattention_jax.evaluate", "--split=test"], ["/repo/attention_jax/evaluate.py", "--split=test"],
     "attention_jax.evaluate"),
    (["python", "-m", "launch.sweep", "-m", "x"], ["/repo/launch/sweep.py", "-m", "x"], "launch.sweep"),
    (["/venv/bin/python", "/venv/bin/attention-jax-train", "--workdir=r"], ["/venv/bin/attention-jax-train",
                                                                           "--workdir=r"], "attention-jax-train"),
    (["python", "-m", "pytest", "-q"], ["/venv/lib/pytest/__main__.py", "-q"], "attention_jax.report"),  # In-process.
    (["python", "-c", "..."], ["-c"], "attention_jax.report"),
])
def test_an_error_line_names_the_command_as_the_user_typed_it(
        orig_argv: list[str], argv: list[str], expected: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(sys, "orig_argv", orig_argv, raising=False)
    monkeypatch.setattr(sys, "argv", argv)
    assert user_errors.program_name("attention_jax.report") == expected
    with pytest.raises(SystemExit):
        user_errors.exit_with_error("attention_jax.report", "no sweep.json under runs/")
    assert capsys.readouterr().err == f"{expected}: error: no sweep.json under runs/\n"
