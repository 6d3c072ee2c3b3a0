"""docs/extending.md's worked examples, run as the page writes them.

Each ``# NAME.py`` code block of the page is written to a scratch directory and each ``bash`` block is
run (with a tiny model and two training steps, so the suite stays quick): a Table 2 row, a sweep of one's
own, an attention function, a positional encoding and a corpus.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from attention_jax.commands import config_errors
from attention_jax.data import data_sources
from attention_jax.experiment import sections
from configs import table2
from tests.support.sweep_cli import REPO_ROOT, tiny_data_dir, tiny_flags  # noqa: F401

PAGE = REPO_ROOT / "docs" / "extending.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), flags=re.S)


def _file_blocks() -> dict[str, str]:
    files = {}
    for block in _blocks("python"):
        first = block.splitlines()[0]
        if re.fullmatch(r"# \w+\.py", first):
            files[first[2:]] = block
    return files


def _commands() -> list[list[str]]:
    return [shlex.split(block.replace("\\\n", " ")) for block in _blocks("bash")]


def _command(module: str, contains: str) -> list[str]:
    found = [argv for argv in _commands() if argv[:3] == ["python", "-m", module] and any(contains in a for a in argv)]
    assert len(found) == 1, f"docs/extending.md has no single `python -m {module}` command with {contains}"
    return found[0][3:]


def _write_files(directory: pathlib.Path) -> None:
    for name, text in _file_blocks().items():
        (directory / name).write_text(text)


def _run(argv: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.pathsep.join([str(cwd), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_page_has_every_worked_example() -> None:
    assert set(_file_blocks()) == {"my_sweep.py", "my_attention.py", "my_positions.py", "my_corpus_config.py"}
    headings = re.findall(r"^## (.+)$", PAGE.read_text(), flags=re.M)
    assert headings == ["A config field", "A Table 2 row", "A sweep of your own", "An attention function",
                        "A positional encoding", "A corpus"]


def test_a_table2_row_is_one_tuple(monkeypatch: pytest.MonkeyPatch) -> None:
    row_text = next(block for block in _blocks("python") if block.lstrip().startswith('("A5"'))
    row = eval(row_text.strip().rstrip(","), {"__builtins__": {}, "dict": dict})  # Our own page's tuple.
    monkeypatch.setattr(table2, "ROWS", [*table2.ROWS, row])
    config = table2.get_config("A5")
    experiment = sections.build_experiment(config, "configs/table2.py:A5")
    assert (experiment.name, experiment.model.num_heads, experiment.model.key_dim) == ("A5", 2, 256)
    assert "A5" in table2.get_sweep()


@pytest.mark.end_to_end
def test_a_sweep_of_your_own_dry_runs_and_writes_nothing(tmp_path: pathlib.Path) -> None:
    _write_files(tmp_path)
    argv = ["attention_jax.sweep", *_command("attention_jax.sweep", "my_sweep.py")]
    argv = [f"--root={tmp_path / 'root'}" if a.startswith("--root=") else a for a in argv]
    result = _run(argv, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    for row in ("heads2", "heads8"):
        for seed in (0, 1):
            assert f"{row}/seed_{seed}" in result.stdout
    assert not (tmp_path / "root").exists()


@pytest.mark.end_to_end
@pytest.mark.slow
@pytest.mark.parametrize("module, field, value, settings", [
    ("my_attention", "attention_function", "temperature_dot_product",
     {"temperature_dot_product": {"temperature": 3.0}}),
    ("my_positions", "positional_encoding", "scaled_sinusoidal", {}),
])
def test_a_registered_variant_trains_from_the_command_line(module: str, field: str, value: str, settings: dict,
                                                           tmp_path: pathlib.Path, tiny_data_dir: pathlib.Path) -> None:
    _write_files(tmp_path)
    workdir = tmp_path / "run"
    argv = [f"--workdir={workdir}" if a.startswith("--workdir=") else a for a in _command("attention_jax.main", module)]
    argv = ["attention_jax.main", *argv, *tiny_flags(tiny_data_dir, steps=2)]
    argv = [f"--config={REPO_ROOT / 'configs/tiny.py'}" if a == "--config=configs/tiny.py" else a for a in argv]
    result = _run(argv, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = json.loads((workdir / "config.json").read_text())
    assert saved[field] == value and saved["user_modules"] == [module]
    assert saved[f"{field}_settings"] == settings  # The entry's own settings, as the page's flag set them.
    assert json.loads((workdir / "results.json").read_text())["step"] == 2
    # A reader of the run imports the module itself (config.user_modules) before checking the config.
    code = ("from attention_jax.checkpointing import checkpoints; "
            f"experiment = checkpoints.read_config({str(workdir)!r}); print(experiment.fields[{field!r}]); "
            f"print(experiment.model.{field}_settings)")
    reread = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])})
    expected_settings = "TemperatureSettings(temperature=3.0)" if settings else "None"
    assert reread.stdout.split() == [value, expected_settings], reread.stderr[-2000:]


def test_a_corpus_is_a_directory_of_tsv_files(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_files(tmp_path)
    corpus = tmp_path / "my_corpus"
    corpus.mkdir()
    for split, count in (("train", 30), ("dev", 5), ("test", 4)):
        (corpus / f"{split}.tsv").write_text("".join(f"file {i} saved\tDatei {i} gespeichert\n" for i in range(count)))
    monkeypatch.chdir(tmp_path)  # The page's dataset is relative to where you run.
    assert _command("attention_jax.main", "my_corpus_config.py")[0] == "--config=my_corpus_config.py"
    config = config_errors._load_config_file("my_corpus_config.py")
    experiment = sections.build_experiment(config, "my_corpus_config.py")
    assert experiment.data.dataset == "tsv:my_corpus"
    source = data_sources._open_translation_source(experiment.data)
    assert [source.num_examples(split) for split in ("train", "validation", "test")] == [30, 5, 4]

