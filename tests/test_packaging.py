"""What `pip install` puts in site-packages: the library alone, and console scripts that run its commands."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
import setuptools

from tests.support import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
SCRIPTS = PYPROJECT["project"]["scripts"]
COMMANDS = ("main", "translate", "evaluate", "generate", "report", "average_checkpoints", "count_params",
            "plot_attention", "export", "sweep")


def _installed_script(name: str) -> str | None:
    """The console script beside this interpreter (a virtual environment's bin/) or on PATH, if any."""
    beside = pathlib.Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def test_only_the_library_is_installed() -> None:
    """configs/ and launch/ stay repository folders: no top-level `configs` or `launch` in site-packages."""
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = setuptools.find_packages(str(REPO_ROOT), include=include)
    assert "attention_jax" in packages and "attention_jax.cpu_kernels" in packages
    assert all(package.split(".")[0] == "attention_jax" for package in packages), packages
    assert (REPO_ROOT / "configs" / "__init__.py").is_file() and (REPO_ROOT / "launch" / "sweep.py").is_file()
    outside = re.compile(r"^\s*(from|import)\s+(configs|launch)\b", re.MULTILINE)
    for path in (REPO_ROOT / "attention_jax").rglob("*.py"):  # The library runs without configs/ and launch/.
        assert not outside.search(path.read_text()), path


def test_every_command_has_a_console_script() -> None:
    targets = {target.split(":")[0].removeprefix("attention_jax.") for target in SCRIPTS.values()}
    assert targets == set(COMMANDS)
    assert SCRIPTS["attention-jax-train"] == "attention_jax.main:run"
    assert all(name == f"attention-jax-{target.split(':')[0].split('.')[-1].replace('_', '-')}"
               for name, target in SCRIPTS.items() if name != "attention-jax-train")


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_each_console_script_target_resolves(script: str) -> None:
    """importlib + getattr, as the installed wrapper does; one process each (the commands share flag names)."""
    module_name, function_name = SCRIPTS[script].split(":")
    check = (f"import importlib; run = getattr(importlib.import_module({module_name!r}), {function_name!r}); "
             "assert callable(run); print(run.__doc__)")
    completed = subprocess.run([sys.executable, "-c", check], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert script in completed.stdout


def _help(argv: list[str], cwd: pathlib.Path) -> tuple[int, str]:
    """The status and the standard output of ``--help`` (absl exits with status 1 after printing it)."""
    completed = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert "Traceback" not in completed.stderr, completed.stderr[-3000:]
    return completed.returncode, completed.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command, flag", [("count_params", "--config"), ("translate", "--workdir")])
def test_run_prints_the_same_help_as_python_m(command: str, flag: str, tmp_path: pathlib.Path) -> None:
    """``run()``, what a console script calls, and ``python -m`` print the command's docstring and flags."""
    script = f"attention-jax-{command.replace('_', '-')}"
    status, by_module = _help([sys.executable, "-m", f"attention_jax.{command}", "--help"], REPO_ROOT)
    entry = f"import sys; sys.argv[0] = {script!r}; from attention_jax.{command} import run; run()"
    entry_status, by_entry_point = _help([sys.executable, "-c", entry, "--help"], tmp_path)
    assert entry_status == status
    first_line = importlib.util.find_spec(f"attention_jax.commands.{command}").loader.get_source(
        f"attention_jax.commands.{command}").split('"""')[1].splitlines()[0]
    for text in (by_module, by_entry_point):
        assert text.startswith(first_line) and f"  {flag}:" in text, text
    assert by_entry_point.replace(script, "PROGRAM") == by_module.replace(
        str(REPO_ROOT / "attention_jax" / f"{command}.py"), "PROGRAM")
    installed = _installed_script(script)
    if installed:  # After `pip install -e .`; the checks above hold without it.
        installed_status, by_installed = _help([installed, "--help"], tmp_path)
        assert (installed_status, by_installed.replace(installed, script)) == (status, by_entry_point)


@pytest.mark.slow
def test_a_config_path_works_from_any_directory(tmp_path: pathlib.Path) -> None:
    """Config files import `configs.base`; outside the repository their package's folder is put on sys.path."""
    library_only = _library_only(tmp_path)  # The library importable, the repository root not on sys.path.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    entry = "from attention_jax.count_params import run; run()"
    completed = subprocess.run([sys.executable, "-c", entry, f"--config={REPO_ROOT / 'configs' / 'table2.py'}:B1"],
                               cwd=elsewhere, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, PYTHONPATH=str(library_only)))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert '"row": "B1"' in completed.stdout


def _library_only(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder holding the library alone (as site-packages holds an install), not the repository root."""
    library_only = tmp_path / "site"
    library_only.mkdir()
    (library_only / "attention_jax").symlink_to(REPO_ROOT / "attention_jax")
    return library_only


@pytest.mark.slow
@pytest.mark.parametrize("command, argv, expected", [
    ("count_params", ["--config=table2:B1"], '"row": "B1"'),
    ("count_params", ["--config=tiny.py"], '"row": "tiny"'),
    ("main", ["--config=tiny", "--config.num_layerz=3", "--workdir=run"],
     "error: --config.num_layerz: {configs}/tiny.py has no field num_layerz (did you mean num_layers?)"),
], ids=["count_params_table2_row", "count_params_tiny_py", "train_tiny_bad_key"])
def test_a_shipped_config_name_works_from_any_directory(command: str, argv: list[str], expected: str,
                                                        tmp_path: pathlib.Path) -> None:
    """``--config=tiny`` is configs/tiny.py wherever the command runs (the schema refusing a key proves it loaded)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = "attention-jax-train" if command == "main" else f"attention-jax-{command.replace('_', '-')}"
    entry = f"import sys; sys.argv[0] = {script!r}; from attention_jax.{command} import run; run()"
    completed = subprocess.run([sys.executable, "-c", entry, *argv], cwd=elsewhere, capture_output=True, text=True,
                               timeout=300, env=dict(os.environ, PYTHONPATH=str(_library_only(tmp_path))))
    assert completed.returncode == (0 if command == "count_params" else 2), completed.stderr[-3000:]
    assert expected.format(configs=REPO_ROOT / "configs") in completed.stdout + completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr and not (elsewhere / "run").exists()


def test_a_config_path_that_exists_is_taken_as_it_is(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attention_jax.commands import shipped_configs

    monkeypatch.chdir(REPO_ROOT)
    assert shipped_configs.resolve("configs/tiny.py") == "configs/tiny.py"  # From the root, as always.
    assert shipped_configs.resolve("table2:B1") == f"{REPO_ROOT / 'configs' / 'table2.py'}:B1"
    assert shipped_configs.resolve("nonexistent") == "nonexistent"  # Left for the one-line error.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.py").write_text("# One's own tiny config.\n")
    assert shipped_configs.resolve("tiny.py") == "tiny.py" and shipped_configs.resolve("tiny") == str(
        REPO_ROOT / "configs" / "tiny.py")
    assert shipped_configs._resolve_argv(["prog", "--config=tiny.py:X", "--config.d_model=8", "--workdir=tiny"]) == [
        "prog", "--config=tiny.py:X", "--config.d_model=8", "--workdir=tiny"]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["main", "count_params"])
def test_a_missing_config_file_is_one_line(command: str, tmp_path: pathlib.Path) -> None:
    """Run from outside the repository, ``--config=configs/tiny.py`` names no file: one line, status 2."""
    argv = [sys.executable, "-m", f"attention_jax.{command}", "--config=configs/tiny.py"]
    if command == "main":
        argv.append(f"--workdir={tmp_path / 'run'}")
    completed = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert completed.returncode == 2, completed.stderr[-3000:]
    errors = [line for line in completed.stderr.splitlines() if "error:" in line]
    assert errors == [f"attention_jax.{command}: error: FileNotFoundError: --config=configs/tiny.py: config file "
                      f"configs/tiny.py not found in {tmp_path}; the shipped config is --config=tiny from any "
                      f"directory."], completed.stderr
    assert "Traceback" not in completed.stderr
