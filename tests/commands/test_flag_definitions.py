"""Modules the suite imports in-process can all live in one process: no two define the same absl flag.

absl keeps one global flag registry. A command module defines its flags when it is imported, so two command
modules that both define ``--out`` cannot be imported by the same pytest worker: the second raises
``DuplicateFlagError``, and only in the orderings where one worker happens to collect both files (the
full suite under xdist, never a file alone). This test makes that failure deterministic: it imports, in one
fresh interpreter, every project module that any test file imports, at module level or inside a function.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

PROJECT_PACKAGES = ("attention_jax", "launch", "configs", "benchmarks")


def _is_module(name: str) -> bool:
    """Whether ``name`` names a project module file or package (not an attribute of one)."""
    path = REPO_ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def modules_imported_by_tests() -> set[str]:
    """Every project module that a file under ``tests/`` imports, anywhere in the file.

    Returns
    -------
    set[str]
        Dotted module names, e.g. ``attention_jax.commands.text_io``.

    Notes
    -----
    ``from package import name`` counts ``package.name`` when that is a module, else ``package``.
    """
    found: set[str] = set()
    for path in (REPO_ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{alias.name}" if _is_module(f"{node.module}.{alias.name}") else node.module
                         for alias in node.names]
            else:
                continue
            found.update(name for name in names if name.split(".")[0] in PROJECT_PACKAGES and _is_module(name))
    return found


def test_the_module_scan_sees_function_level_imports() -> None:
    """The scan finds imports inside test functions too (where command modules are usually imported)."""
    modules = modules_imported_by_tests()
    assert "attention_jax.commands.text_io" in modules  # Imported inside a test in commands/test_translate.py.
    assert "attention_jax.data.gettext_corpus" in modules and "attention_jax.reports.all_reports" in modules
    assert all(importlib.util.find_spec(name) is not None for name in modules)


@pytest.mark.slow
def test_every_module_the_tests_import_loads_in_one_process() -> None:
    modules = sorted(modules_imported_by_tests())
    program = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    result = subprocess.run([sys.executable, "-c", program, *modules], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
