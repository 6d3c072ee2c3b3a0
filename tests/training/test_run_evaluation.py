"""Evaluations inside a training run that fail, are stopped or are finished by a rerun (issue 64).

An evaluation step is checkpointed before it is evaluated: a crash in the evaluation loses no step and
the rerun evaluates that step first; SIGTERM during the sampled BLEU stops before the next decoding
batch; a rerun that finishes a run's final BLEU, or rewrites its lost ``results.json``, reports the
best evaluation among all of them; a diverging loss stops with one line and no traceback.

Runs train a one-layer model on :class:`tests.support.fake_data.FakeData` in this process, sharing one
compilation cache.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal

import pytest

from attention_jax.checkpointing import checkpoints
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from tests.support import fake_data
from tests.support.fake_data import SigtermDuringFinalBleu, train_tiny

pytestmark = [pytest.mark.end_to_end, pytest.mark.usefixtures("cache_dir")]  # tests/conftest.py

# Sampled BLEU of 2 dev pairs at step 2, greedy; step 4 is the last. No checkpoint is due before step 4.
SAMPLED = dict(num_train_steps=4, eval_every_steps=2, checkpoint_every_steps=0, num_bleu_examples=2, beam_size=1)


def _evaluations(workdir: pathlib.Path) -> dict[int, dict]:
    records = [json.loads(line) for line in (workdir / run_files.METRICS_FILE).read_text().splitlines()]
    return {record["step"]: record for record in records if "eval/loss" in record}


class _OnSampledBleu(fake_data.FakeData):
    """Crashes (``action="raise"``) or SIGTERMs itself (``"sigterm"``) when the sampled BLEU first asks for pairs."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action, self.calls = action, 0

    def text_pairs(self, split: str, max_pairs: int = 0) -> list[tuple[str, str]]:
        if max_pairs > 0 and self.calls == 0:
            self.calls += 1
            if self.action == "raise":
                raise RuntimeError("the decoder crashed")
            os.kill(os.getpid(), signal.SIGTERM)
        return super().text_pairs(split, max_pairs)


@pytest.mark.slow
def test_a_crash_in_an_evaluation_loses_no_step_and_the_rerun_evaluates_it_first(tmp_path: pathlib.Path) -> None:
    with pytest.raises(RuntimeError, match="the decoder crashed"):
        train_tiny(tmp_path, data=_OnSampledBleu("raise"), **SAMPLED)
    assert checkpoints.finished_steps(str(tmp_path / run_files.CHECKPOINT_DIR)) == [2]  # Written before it.
    assert _evaluations(tmp_path) == {}
    results = train_tiny(tmp_path, **SAMPLED)
    assert results["finished"] and results["step"] == 4
    assert sorted(_evaluations(tmp_path)) == [2, 4]  # Step 2 evaluated on resuming, before training on.
    assert _evaluations(tmp_path)[2]["eval/bleu_sentences"] == 2


@pytest.mark.slow
def test_sigterm_during_the_sampled_bleu_stops_before_decoding_and_the_rerun_evaluates_first(
        tmp_path: pathlib.Path) -> None:
    stopped = train_tiny(tmp_path, data=_OnSampledBleu("sigterm"), **SAMPLED)
    assert stopped["finished"] is False and stopped["step"] == 2  # Not a step later, after a whole decode.
    assert stopped["steps_after_stop_request"] == 0
    assert checkpoints.finished_steps(str(tmp_path / run_files.CHECKPOINT_DIR)) == [2]
    assert _evaluations(tmp_path) == {}  # The stopped evaluation left no figures (nor an early-stopping count).
    results = train_tiny(tmp_path, **SAMPLED)
    assert results["finished"] and results["step"] == 4
    assert sorted(_evaluations(tmp_path)) == [2, 4]


@pytest.mark.slow
def test_finishing_the_final_bleu_or_a_lost_results_file_reports_the_best_of_every_evaluation(
        tmp_path: pathlib.Path) -> None:
    settings = dict(num_train_steps=4, eval_every_steps=2, checkpoint_every_steps=2, early_stopping_patience=5,
                    average_last_checkpoints=1, final_bleu=True, final_bleu_splits=("dev",), beam_size=1)
    stopped = train_tiny(tmp_path, data=SigtermDuringFinalBleu(), **settings)
    assert stopped["finished"] is False and not (tmp_path / run_files.RESULTS_FILE).exists()
    perplexities = {step: record["eval/perplexity"] for step, record in _evaluations(tmp_path).items()}
    best_step = min(perplexities, key=perplexities.__getitem__)
    assert sorted(perplexities) == [2, 4] and best_step == 4  # The final evaluation is the best one.
    for rerun in ("finish the final BLEU", "rewrite a corrupt results.json"):
        train_tiny(tmp_path, **settings)
        results = json.loads((tmp_path / run_files.RESULTS_FILE).read_text())
        assert results["eval_ppl"] == pytest.approx(perplexities[4]), rerun
        assert results["best_step"] == best_step and results["evaluations_since_best"] == 0, rerun
        assert results["best_eval_ppl"] == pytest.approx(perplexities[best_step]), rerun
        assert results["final_checkpoint"] == f"best (step {best_step})", rerun
        assert sorted(_evaluations(tmp_path)) == [2, 4], rerun  # No evaluation twice.
        (tmp_path / run_files.RESULTS_FILE).write_text('{"step": 4, "finis')


@pytest.mark.slow
def test_a_diverging_loss_is_a_one_line_error_naming_the_checkpoint(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UserInputError, match=r"non-finite training loss at step \d+ .*No checkpoint was saved"):
        train_tiny(tmp_path, num_train_steps=4, log_every_steps=1, learning_rate_scale=1e30, eval_every_steps=0)
