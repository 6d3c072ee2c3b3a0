"""Fine-tuning on new data (issue 36 item 2): ``--config.fine_tune_from=RUN`` starts a new work directory
from RUN's parameters and tokenizer.model, with a fresh optimizer at step 0, recording its source; RUN is
only read; another model is one line and exit 2 before anything is written; a run never resumes with
another ``fine_tune_from`` (nor on other data without one).

In-process runs train a one-layer model on :class:`tests.support.fake_data.FakeData`; the command-line
test fine-tunes a run of the synthetic corpus on a small TSV corpus, as a user would.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from attention_jax.checkpointing import checkpoints, params_checkpoints, resume_checks
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.training import fine_tuning, train
from tests.support import fake_data, sweep_cli, train_support
from tests.support.sweep_cli import REPO_ROOT, tiny_flags

pytestmark = [pytest.mark.end_to_end, pytest.mark.usefixtures("cache_dir")]  # tests/conftest.py

tiny_data_dir = sweep_cli.tiny_data_dir  # The session's prepared synthetic corpus (a fixture).
SOURCE = dict(num_train_steps=4, eval_every_steps=2, checkpoint_every_steps=2)
SOURCE_TOKENIZER = b"the source run's SentencePiece model"  # FakeData's tokenizer.model in these runs.


def _data() -> fake_data.FakeData:
    return fake_data.FakeData(tokenizer_model=SOURCE_TOKENIZER)


@pytest.fixture(scope="module")
def source_run(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A finished 4-step run on FakeData; its tokenizer.model holds ``SOURCE_TOKENIZER``."""
    workdir = tmp_path_factory.mktemp("source") / "run"
    train.train_and_evaluate(fake_data.tiny_experiment(**SOURCE), str(workdir), data=_data())
    assert (workdir / run_files.TOKENIZER_FILE).read_bytes() == SOURCE_TOKENIZER  # Written by the run.
    return workdir


def _hashes(directory: pathlib.Path) -> dict[str, str]:
    return {str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def _params(directory: pathlib.Path, step: int) -> dict:
    abstract = params_checkpoints.abstract_inference_params(fake_data.tiny_experiment())
    return params_checkpoints.restore_params(str(directory), step, abstract)


@pytest.mark.slow
def test_fine_tuning_starts_from_the_sources_parameters_with_a_fresh_optimizer(
        source_run: pathlib.Path, tmp_path: pathlib.Path) -> None:
    before = _hashes(source_run)
    workdir = tmp_path / "fine_tuned"
    config = fake_data.tiny_experiment(num_train_steps=2, eval_every_steps=2, checkpoint_every_steps=2,
                                       dropout_rate=0.3, fine_tune_from=str(source_run))
    source = fine_tuning.resolve_source(config, str(workdir))
    assert not workdir.exists()  # Checking writes nothing.
    assert (source.step, source.checkpoint) == (4, "latest")
    data = fine_tuning.start_from_source(config, str(workdir), source, data=_data())

    started = _params(workdir / run_files.CHECKPOINT_DIR, 0)  # The new run's step 0: the source's last step.
    expected = _params(source_run / run_files.CHECKPOINT_DIR, 4)
    jax.tree.map(np.testing.assert_array_equal, started, expected)
    progress = checkpoints.latest_progress(str(workdir))
    assert progress[0] == 0 and progress[1]["fine_tuned_from"]["step"] == 4

    results = train.train_and_evaluate(config, str(workdir), data=data)
    assert results["finished"] and results["step"] == 2  # Steps counted from 0: a fresh schedule.
    record = run_files.read_fine_tuned_from(str(workdir))
    assert record == json.loads((workdir / run_files.FINE_TUNED_FROM_FILE).read_text())
    assert record["workdir"] == str(source_run) and record["step"] == 4 and record["checkpoint"] == "latest"
    assert record["tokenizer_sha256"] == hashlib.sha256(SOURCE_TOKENIZER).hexdigest()
    assert results["fine_tuned_from"] == record  # results.json names the source too.
    assert json.loads((workdir / run_files.RESULTS_FILE).read_text())["fine_tuned_from"] == record
    assert checkpoints.read_config(str(workdir)).run.fine_tune_from == str(source_run)
    assert _hashes(source_run) == before  # The source is only read.
    trained = _params(workdir / run_files.CHECKPOINT_DIR, 2)
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(trained), jax.tree.leaves(expected)))

    # A rerun resumes its own checkpoints: the source is not read again, nothing is re-seeded.
    assert fine_tuning.resolve_source(config, str(workdir)) is None
    # Resuming without the flag, or from another source, is refused: its token ids are the source's.
    with pytest.raises(UserInputError, match="fine_tune_from"):
        resume_checks.check_resume_compatible(str(workdir),
                                            fake_data.tiny_experiment(num_train_steps=4, dropout_rate=0.3))


def test_another_model_or_source_is_one_line_before_anything_is_written(source_run: pathlib.Path,
                                                                        tmp_path: pathlib.Path) -> None:
    workdir = tmp_path / "fine_tuned"
    cases = {
        "d_model: 32 there, 64 here": dict(d_model=64, key_dim=32, value_dim=32),
        "vocab_size: 64 there, 128 here": dict(vocab_size=128),
        "no checkpoint for step 3": dict(fine_tune_checkpoint="3"),
        "which must be 'latest', 'averaged', 'best' or a step number": dict(fine_tune_checkpoint="newest"),
        "no best checkpoint": dict(fine_tune_checkpoint="best"),
    }
    for message, overrides in cases.items():
        config = fake_data.tiny_experiment(fine_tune_from=str(source_run), **overrides)
        with pytest.raises(UserInputError, match=message) as raised:
            fine_tuning.resolve_source(config, str(workdir))
        assert "\n" not in str(raised.value) and str(raised.value).startswith(f"config.fine_tune_from={source_run}")
    with pytest.raises(UserInputError, match="is the run's own --workdir"):
        fine_tuning.resolve_source(fake_data.tiny_experiment(fine_tune_from=str(source_run)), str(source_run))
    with pytest.raises(UserInputError, match="config.json not found"):
        fine_tuning.resolve_source(fake_data.tiny_experiment(fine_tune_from=str(tmp_path)), str(workdir))
    assert not workdir.exists()
    # Without the step-0 checkpoint, training refuses rather than start from random parameters.
    with pytest.raises(UserInputError, match="holds no checkpoint to fine-tune"):
        train.train_and_evaluate(fake_data.tiny_experiment(fine_tune_from=str(source_run)), str(workdir),
                                 data=_data())


def test_the_refusal_of_other_data_names_the_fine_tuning_flag(tmp_path: pathlib.Path) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(dataset="tsv:/data/a"))
    (tmp_path / run_files.CHECKPOINT_DIR / "4" / "_CHECKPOINT_METADATA").parent.mkdir(parents=True)
    (tmp_path / run_files.CHECKPOINT_DIR / "4" / "_CHECKPOINT_METADATA").write_text("{}")
    with pytest.raises(UserInputError, match=rf"fine-tune it on the new data in a new --workdir with "
                                             rf"--config.fine_tune_from={tmp_path}"):
        resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(dataset="tsv:/data/b"))
    # A run from before the field existed resumes as before: absent and "" are the same source (none).
    saved = json.loads((tmp_path / run_files.CONFIG_FILE).read_text())
    del saved["fine_tune_from"]
    (tmp_path / run_files.CONFIG_FILE).write_text(json.dumps(saved))
    resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(dataset="tsv:/data/a"))


@pytest.mark.slow
def test_the_command_fine_tunes_on_a_new_corpus_with_the_runs_own_tokenizer(
        tmp_path: pathlib.Path, tiny_data_dir: pathlib.Path, cache_dir: str) -> None:
    env = train_support.subprocess_env(cache_dir, PYTHONUNBUFFERED="1")
    source, fine_tuned, other = tmp_path / "source", tmp_path / "fine_tuned", tmp_path / "other_model"

    def train_command(workdir: pathlib.Path, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py",
                               f"--workdir={workdir}", *tiny_flags(tiny_data_dir, 4), *extra],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)

    completed = train_command(source)
    assert completed.returncode == 0, completed.stderr[-3000:]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "dev", "test"):
        lines = [f"the house {index}\tdas haus {index}" for index in range(30)]
        (corpus / f"{split}.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    new_data = [f"--config.dataset=tsv:{corpus}", f"--config.fine_tune_from={source}"]

    mismatch = train_command(other, *new_data, "--config.d_ff=128")
    assert mismatch.returncode == 2, mismatch.stderr[-3000:]
    assert mismatch.stderr.strip().splitlines()[-1].startswith(
        f"attention_jax.main: error: config.fine_tune_from={source} holds another model (d_ff: 64 there, 128 here)")
    assert "Traceback" not in mismatch.stderr and not other.exists()

    completed = train_command(fine_tuned, *new_data)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Fine-tuning from" in completed.stderr and "Resumed from the checkpoint of step 0" in completed.stderr
    assert (fine_tuned / run_files.TOKENIZER_FILE).read_bytes() == (source / run_files.TOKENIZER_FILE).read_bytes()
    results = json.loads((fine_tuned / run_files.RESULTS_FILE).read_text())
    assert results["finished"] and results["step"] == 4
    assert json.loads((fine_tuned / run_files.FINE_TUNED_FROM_FILE).read_text())["step"] == 4
    assert not os.path.exists(source / run_files.FINE_TUNED_FROM_FILE)
