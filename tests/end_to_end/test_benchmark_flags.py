"""Every benchmark reads absl flags, each with help text, and ``--help`` lists them with the harness's shared
ones (issue 36: one flag style).

Each flag a README, docs page or benchmark docstring passes to a benchmark is one the benchmark defines, so
the documented commands keep working.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
HELPERS = {"harness"}  # Modules the benchmarks share; no command line of their own.
ABSL_HELP_FLAGS = {"help", "helpshort", "helpfull"}
SHARED_FLAGS = {"quick", "smoke", "note", "out"}  # benchmarks/harness.py defines them for every benchmark.
# `python benchmarks/NAME.py ...` or `python -m benchmarks.NAME ...` up to the end of the command.
_COMMAND = re.compile(r"(?:python[0-9.]*|/bin/python)\s+(?:-m\s+benchmarks\.(\w+)|benchmarks/(\w+)\.py)"
                      r"((?:\s+[^\s|;&>`#]+)*)")


def _is_command(path: pathlib.Path) -> bool:
    """Whether ``path`` has a module-level ``if __name__ == "__main__":``."""
    return any(isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
               and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
               for node in ast.parse(path.read_text()).body)


BENCHMARK_NAMES = sorted(path.stem for path in BENCHMARKS.glob("*.py") if _is_command(path))


def _defined_flags(path: pathlib.Path) -> set[str]:
    """Names of the flags ``path`` defines with a literal name (``flags.DEFINE_*("name", ...)``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith("DEFINE_") and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return names


def _documented_flags() -> dict[str, set[str]]:
    """Per benchmark, the flags the README, the docs and the benchmarks' docstrings pass to it."""
    sources = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md")), *sorted(BENCHMARKS.glob("*.py"))]
    documented: dict[str, set[str]] = {}
    for path in sources:
        for match in _COMMAND.finditer(path.read_text().replace("\\\n", " ")):
            name = match.group(1) or match.group(2)
            given = re.findall(r"(?<!\S)--([a-zA-Z_]+)(?=[=\s]|$)", match.group(3))  # --config.x passes through.
            documented.setdefault(name, set()).update(set(given) - ABSL_HELP_FLAGS)
    return documented


def test_every_module_is_a_benchmark_or_a_shared_helper() -> None:
    modules = {path.stem for path in BENCHMARKS.glob("*.py")}
    assert modules - set(BENCHMARK_NAMES) == HELPERS
    for name in BENCHMARK_NAMES:
        assert "argparse" not in (BENCHMARKS / f"{name}.py").read_text(), f"{name}.py still uses argparse"


@pytest.mark.parametrize("name", BENCHMARK_NAMES)
def test_help_lists_every_flag_with_its_text(name: str) -> None:
    completed = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--help"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=300)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-3000:]
    assert "Traceback" not in output
    assert f"benchmarks/{name}.py:" in completed.stdout  # The module's own flags, listed under its path.
    expected = _defined_flags(BENCHMARKS / f"{name}.py") | _documented_flags().get(name, set()) | SHARED_FLAGS
    assert expected, f"{name}.py defines no flags"
    for flag in sorted(expected):
        described = re.search(rf"^  --(?:\[no\])?{flag}: (\S.*)$", completed.stdout, re.MULTILINE)
        assert described, f"benchmarks.{name} --help does not list --{flag}:\n{completed.stdout[-3000:]}"


def test_a_mistake_on_a_benchmark_command_line_is_one_line() -> None:
    completed = subprocess.run([sys.executable, "benchmarks/peer_flax.py", "--no_such_flag=1"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        "peer_flax.py: error: Unknown command line flag 'no_such_flag'"]


def test_a_config_override_the_default_config_lacks_is_one_line() -> None:
    completed = subprocess.run([sys.executable, "benchmarks/train_step.py", "--config.num_layerz=1"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 2 and completed.stdout == ""
    [line] = completed.stderr.strip().splitlines()
    assert line.startswith("train_step.py: error: a --config.FIELD override: 'num_layerz'") and "num_layers" in line
