"""Issue 89, the fifth fault review: each numbered case refused in one line, or given the right result.

Cases are called in process where the command line itself is not under test; those that need a process
of their own (a kill, a flag's parsing) start one and are marked slow.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import pathlib

import pytest

from attention_jax import run_files
from attention_jax.checkpointing import checkpoints
from attention_jax.training import train
from tests.support import fake_data, train_support


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A compilation cache shared by this module's runs."""
    directory = str(tmp_path_factory.mktemp("jax_cache"))
    with train_support.shared_compilation_cache(directory):
        yield directory


def _train(workdir: pathlib.Path, data: fake_data.FakeData | None = None, **overrides: object) -> dict:
    settings = dict(num_train_steps=2, eval_every_steps=100, checkpoint_every_steps=1, log_every_steps=1)
    return train.train_and_evaluate(fake_data.tiny_experiment(**dict(settings, **overrides)), str(workdir),
                                    data=data or fake_data.FakeData())


# --- Case 1: an extended run resumes ----------------------------------------------------------------------


@pytest.mark.slow  # Trains 7 steps in three sessions.
def test_an_extension_stopped_after_it_rewrote_the_config_resumes_to_its_new_step_count(
        tmp_path: pathlib.Path, cache_dir: str) -> None:
    assert _train(tmp_path)["step"] == 2
    stopped = _train(tmp_path, data=fake_data.FakeData(sigterm_at=3), num_train_steps=5)  # SIGTERM (SLURM requeue).
    assert stopped["finished"] is False and checkpoints.latest_progress(str(tmp_path))[0] in (3, 4)
    assert not (tmp_path / run_files.RESULTS_FILE).exists()  # No finished record beside the longer config.
    resumed = _train(tmp_path, num_train_steps=5)
    assert not resumed.get("already_finished") and resumed["step"] == 5
    assert json.loads((tmp_path / run_files.RESULTS_FILE).read_text())["step"] == 5


@pytest.mark.slow
def test_a_finished_record_older_than_the_config_or_the_newest_checkpoint_does_not_stop_a_rerun(
        tmp_path: pathlib.Path, cache_dir: str) -> None:
    _train(tmp_path)
    # kill -9 right after an extension (a trainer from before this record was discarded) rewrote config.json.
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(num_train_steps=3))
    resumed = _train(tmp_path, num_train_steps=3)
    assert not resumed.get("already_finished") and resumed["step"] == 3


# --- Case 2: a command never writes over another run's files ------------------------------------------------


@pytest.fixture(scope="module")
def random_run(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    from tests.support import decoding_runs

    return decoding_runs.make_random_run(tmp_path_factory.mktemp("round_five"), steps=(1,))


@pytest.mark.integration
@pytest.mark.parametrize("name", ["tokenizer.model", "config.json", "results.json", "checkpoints/1/x"])
def test_an_output_file_that_is_another_runs_own_is_refused(random_run: pathlib.Path, tmp_path: pathlib.Path,
                                                              name: str) -> None:
    from attention_jax.commands import output_files
    from attention_jax.user_errors import UserInputError

    other = tmp_path / "runs" / "other"
    shutil.copytree(random_run, other, ignore=shutil.ignore_patterns("checkpoints"))
    (other / "checkpoints" / "1").mkdir(parents=True)
    for flag, check in (("--out", output_files.check_output_file), ("--output", output_files.refuse_run_files)):
        with pytest.raises(UserInputError, match=rf"{flag}=.*{name} is another run's own {name} in .*other"):
            check(str(other / name), flag, (str(random_run),))
    output_files.check_output_file(str(other / "new.safetensors"), "--out", (str(random_run),))
    user_dir = tmp_path / "mine"  # A user's own config.json alone does not make a run.
    user_dir.mkdir()
    (user_dir / "config.json").write_text("{}")
    output_files.check_output_file(str(user_dir / "config.json"), "--out", (str(random_run),))


# --- Case 6: a damaged or incomplete export is refused --------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("name", ["params.safetensors", "tokenizer.model", "config.json"])
def test_a_damaged_export_file_is_named_by_its_hash(random_run: pathlib.Path, tmp_path: pathlib.Path,
                                                    name: str) -> None:
    from attention_jax.checkpointing import exported_run
    from attention_jax.decoding import inference
    from attention_jax.user_errors import UserInputError

    out = tmp_path / "export"
    record = inference.export_run(inference.load_run(str(random_run)), str(out))
    assert record["sha256"][name] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    damaged = bytearray((out / name).read_bytes())
    damaged[-200:] = bytes(255 - byte for byte in damaged[-200:])  # Inverted bytes, as the issue's.
    (out / name).write_bytes(bytes(damaged))
    with pytest.raises(UserInputError, match=rf"{name} does not match the SHA-256 that export.json records"):
        inference.load_run(str(out))
    (out / name).unlink()
    expected = "is an export without its params.safetensors" if name == exported_run.PARAMS_FILE else "is missing"
    with pytest.raises(UserInputError, match=expected):
        inference.load_run(str(out))
