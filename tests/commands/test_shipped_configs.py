"""Sweeps and configs from any directory (issue 72): the shipped configs in one line, the sweep launcher
as ``attention_jax.sweep`` / ``attention-jax-sweep``, a shipped config's name beside a same-named folder,
and one line saying what to do where the checkout is missing."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import matplotlib.image
import pytest

import attention_jax.configs
from attention_jax.commands import shipped_configs
from attention_jax.foundation.user_errors import UserInputError
from tests.support.sweep_cli import REPO_ROOT, tiny_data_dir, tiny_flags  # noqa: F401 (a fixture)

PAGE_SWEEP_FILE = (REPO_ROOT / "docs" / "extending.md").read_text().split("# my_sweep.py\n", 1)[1].split("```")[0]


def test_a_shipped_config_is_one_import_from_anywhere(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    from attention_jax.configs import tiny

    assert os.path.realpath(tiny.__file__) == os.path.realpath(REPO_ROOT / "configs" / "tiny.py")
    assert tiny.get_config().num_layers >= 1
    with pytest.raises(AttributeError, match=r"no shipped config 'tinny' \(did you mean tiny\?\)"):
        attention_jax.configs.tinny  # noqa: B018


def test_a_same_named_folder_does_not_hide_a_shipped_config(tmp_path: pathlib.Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").mkdir()  # E.g. a run's work directory named after its config.
    resolved = shipped_configs.resolve("tiny")
    assert os.path.realpath(resolved) == os.path.realpath(REPO_ROOT / "configs" / "tiny.py")
    (tmp_path / "tiny.py").write_text("")  # A file of one's own is still taken as it is.
    assert shipped_configs.resolve("tiny.py") == "tiny.py"


def test_without_a_checkout_it_is_one_line_saying_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shipped_configs, "_configs_dir", lambda: None)  # As after a wheel install.
    with pytest.raises(UserInputError, match=r"attention-jax-sweep needs the repository's configs/ and launch/ "
                                             r"folders.*pip install -e it, as the README says"):
        shipped_configs.use_checkout("attention-jax-sweep")


def test_a_missing_configs_or_launch_module_says_what_to_do() -> None:
    hint = shipped_configs.import_hint(ModuleNotFoundError("No module named 'configs'", name="configs"))
    assert "from attention_jax.configs import tiny" in hint and "pip install -e" in hint
    assert "attention-jax-sweep" in shipped_configs.import_hint(ModuleNotFoundError("x", name="launch.sweep"))
    assert shipped_configs.import_hint(ModuleNotFoundError("x", name="numpyy")) == ""
    assert shipped_configs.import_hint(ValueError("configs")) == ""


def test_every_command_puts_the_checkout_last_on_the_path(tmp_path: pathlib.Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from attention_jax.commands import entry_points

    monkeypatch.chdir(tmp_path)  # Outside the checkout.
    checkout = os.path.realpath(REPO_ROOT)
    monkeypatch.setattr(sys, "path", [path for path in sys.path if os.path.realpath(path or ".") != checkout])
    added = entry_points._add_config_import_paths(["prog"])
    assert os.path.realpath(sys.path[-1]) == checkout and os.path.realpath(added[-1]) == checkout


@pytest.mark.slow
def test_the_pages_sweep_runs_outside_the_repository(tmp_path: pathlib.Path) -> None:
    # Only the package is importable, as after `pip install -e .`: a folder holding a link to attention_jax/,
    # no configs/ or launch/ on the path, and the current directory outside the checkout.
    site = tmp_path / "site"
    site.mkdir()
    (site / "attention_jax").symlink_to(REPO_ROOT / "attention_jax", target_is_directory=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "my_sweep.py").write_text(PAGE_SWEEP_FILE)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-m", "attention_jax.sweep", "--config=my_sweep.py", "--executor=local",
                             "--root=runs/my_sweep", "--seeds=2", "--dry_run"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for row in ("heads2", "heads8"):
        assert f"--workdir={work / 'runs' / 'my_sweep' / row / 'seed_1'}" in result.stdout
    assert not (work / "runs").exists()  # A dry run writes nothing.


@pytest.mark.slow
def test_the_pages_sweep_trains_and_reports_outside_the_repository(tmp_path: pathlib.Path,
                                                                   tiny_data_dir: pathlib.Path) -> None:  # noqa: F811
    # docs/extending.md's example, done: its sweep file in a directory outside the checkout, trained (two
    # rows x two seeds, two steps each) by the launcher run from there, then reported against each row.
    site = tmp_path / "site"
    site.mkdir()
    (site / "attention_jax").symlink_to(REPO_ROOT / "attention_jax", target_is_directory=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "my_sweep.py").write_text(PAGE_SWEEP_FILE)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(site)}

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", *argv], cwd=work, env=env, capture_output=True, text=True,
                              timeout=900)

    trained = run("attention_jax.sweep", "--config=my_sweep.py", "--executor=local", "--root=runs/my_sweep",
                  "--seeds=2", *tiny_flags(tiny_data_dir, 2))
    assert trained.returncode == 0, trained.stderr[-3000:]
    report = (work / "runs" / "my_sweep" / "my_sweep.md").read_text(encoding="utf-8")  # Written by the launcher.
    assert "against **heads2** (the first row of get_sweep()" in report
    heads8 = next(line for line in report.splitlines() if line.startswith("| heads8 | 2 |"))  # dev PPL first.
    assert re.search(r"\| [+-]\d+\.\d% ± \d+\.\d% \| 2 \| ", heads8), heads8  # A paired change with its SE.
    for table2_text in ("paper", "newstest2013", "4.92", "no base row"):
        assert table2_text not in report, table2_text
    switched = run("attention_jax.report", "runs/my_sweep", "--reference=heads8", f"--out={tmp_path / 'out'}")
    assert switched.returncode == 0, switched.stderr[-3000:]
    assert "against **heads8** (--reference" in (tmp_path / "out" / "my_sweep.md").read_text(encoding="utf-8")
    image = matplotlib.image.imread(tmp_path / "out" / "my_sweep.png")
    assert image.std() > 0.01  # Points and error bars, not an empty figure.


def test_the_pages_report_is_the_generated_one() -> None:
    # docs/extending.md shows its example's report as the report command wrote it (docs/extending/), not
    # typed: the page's Markdown block is a part of the committed file, and the file compares heads8 with
    # heads2 over two paired seeds.
    page = (REPO_ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    shown = page.split("<!-- generated: docs/extending/my_sweep.md -->\n", 1)[1].split("<!-- end generated -->", 1)[0]
    committed = (REPO_ROOT / "docs" / "extending" / "my_sweep.md").read_text(encoding="utf-8")
    assert shown.strip() and shown.strip() in committed
    heads8 = next(line for line in shown.splitlines() if line.startswith("| heads8 | 2 |"))
    assert re.search(r"\| [+-]\d+\.\d% ± \d+\.\d% \| 2 \| ", heads8), heads8
    assert (REPO_ROOT / "docs" / "extending" / "my_sweep.png").is_file()
