"""A training run built once (train._build_run): fixed for the session, its loop state apart; the data
interface the trainer reads with no fallback (tests' FakeData has all of it)."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from attention_jax.foundation import run_files
from attention_jax.training import run_context, train
from tests.support import fake_data


def _close(run: run_context.TrainingRun) -> None:
    run.checkpoints.close()
    run.writer.close()


def test_a_fresh_run_is_built_once_and_only_its_loop_state_changes(tmp_path: pathlib.Path) -> None:
    data = fake_data.FakeData()
    run = train._build_run(fake_data.tiny_experiment(num_train_steps=2), str(tmp_path), data)
    try:
        assert int(run.loop.state.step) == 0 and run.earlier == run_context._EarlierSessions()
        assert (run.loop.stop_reason, run.loop.evaluation_pending, run.loop.last_eval) == (None, False, {})
        assert run.data is data and run.lock is None and run.num_params > 0
        assert run.loop.last_save_time >= run.session_start
        with pytest.raises(dataclasses.FrozenInstanceError):
            run.loop = run.loop  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            run.data = data  # type: ignore[misc]
        assert run.eval_batches is run.eval_batches  # Padded once, on first use.
        assert len(run.eval_batches) == data.num_eval_batches
    finally:
        _close(run)


def test_a_resumed_run_carries_its_figures_and_the_fakes_interface_is_written(tmp_path: pathlib.Path) -> None:
    settings = dict(num_train_steps=4, eval_every_steps=2, checkpoint_every_steps=2)
    data = fake_data.FakeData(tokenizer_model=b"a stand-in SentencePiece model")
    results = train.train_and_evaluate(fake_data.tiny_experiment(**settings), str(tmp_path), data=data)
    assert results["finished"] and results["step"] == 4
    # The trainer reads the fake's tokenizer and dev splits as a corpus's: no branch for data without them.
    assert (tmp_path / run_files.TOKENIZER_FILE).read_bytes() == b"a stand-in SentencePiece model"
    assert json.loads((tmp_path / run_files.DATA_SPLITS_FILE).read_text()) == data.split_fingerprints()
    run = train._build_run(fake_data.tiny_experiment(**settings), str(tmp_path), data)
    try:
        assert int(run.loop.state.step) == 4 and run.loop.stop_reason is None  # Saved before training ended.
        assert not run.loop.evaluation_pending  # Step 4's evaluation finished after its checkpoint: it is logged.
        assert run.loop.early_stopping.best_step == results["best_step"] == 4  # The best dev perplexity so far.
        assert run.loop.last_eval["step"] == 4 and run.loop.last_eval["loss"] == pytest.approx(results["eval_loss"])
        assert run.loop.last_train["loss"] == pytest.approx(results["train_loss"])
        assert run.earlier.wall_s > 0 and run.earlier.train_target_tokens == results["train_target_tokens"]
        assert run.loop.throughput.total_tokens > 0 and run.loop.session_tokens == 0.0
        assert run.loop.train_iterator.get_state()["index"] == 4  # Where the checkpoint left the batches.
    finally:
        _close(run)

