"""Sweeps and configs from any directory (issue 72): the shipped configs in one line, the sweep launcher
as ``attention_jax.sweep`` / ``attention-jax-sweep``, a shipped config's name beside a same-named folder,
and one line saying what to do where the checkout is missing."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import attention_jax.configs
from attention_jax.commands import shipped_configs
from attention_jax.user_errors import UserInputError
from tests.support.sweep_cli import REPO_ROOT

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
    monkeypatch.setattr(shipped_configs, "configs_dir", lambda: None)  # As after a wheel install.
    with pytest.raises(UserInputError, match=r"attention-jax-sweep needs the repository's configs/ and launch/ "
                                             r"folders.*pip install -e it, as the README says"):
        shipped_configs.use_checkout("attention-jax-sweep")


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
