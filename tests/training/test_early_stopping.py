"""Early stopping: the best-evaluation tracker, and a run that stops, keeps its best and stays stopped."""

from __future__ import annotations

import json
import math
import pathlib

import jax
import numpy as np
import pytest

from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.commands import average_checkpoints
from attention_jax.experiment import sections
from attention_jax.foundation import run_files
from attention_jax.training import early_stopping, train
from tests.support import fake_data


def test_tracker_counts_evaluations_since_the_best_and_stops_after_patience() -> None:
    tracker = early_stopping._EarlyStopping(patience=2)
    perplexities = [5.0, 4.0, 4.5, 3.9, 4.0, 3.9, 6.0]  # 3.9 again is no improvement.
    improved, stopped_at = [], None
    for index, perplexity in enumerate(perplexities):
        improved.append(tracker.update(step=100 * (index + 1), perplexity=perplexity))
        if tracker.should_stop and stopped_at is None:
            stopped_at = index
    assert improved == [True, True, False, True, False, False, False]
    assert stopped_at == 5 and tracker.best_step == 400 and tracker.best_perplexity == 3.9
    restored = early_stopping._EarlyStopping._from_progress(2, json.loads(json.dumps(tracker.to_progress())))
    assert restored == tracker


def test_tracker_without_patience_never_stops_and_nan_never_improves() -> None:
    tracker = early_stopping._EarlyStopping(patience=0)
    assert tracker.to_progress()["best_eval_ppl"] is None  # JSON has no inf.
    assert not tracker.update(1, math.nan)
    for step in range(2, 50):
        tracker.update(step, 10.0 + step)
    assert not tracker.should_stop and tracker.best_step == 2
    with pytest.raises(ValueError, match="early_stopping_patience must be >= 0"):
        early_stopping._EarlyStopping(patience=-1)


def _stop_index_by_hand(perplexities: list[float], patience: int, min_improvement: float) -> int | None:
    """Where a run stops, written out from the rule: reset on a relative decrease of at least min_improvement."""
    best, since = math.inf, 0
    for index, perplexity in enumerate(perplexities):
        improved = perplexity < best and (best == math.inf or (best - perplexity) / best >= min_improvement)
        since = 0 if improved else since + 1
        best = min(best, perplexity)
        if since >= patience:
            return index
    return None


def test_minimum_improvement_keeps_the_best_but_counts_small_gains_toward_patience() -> None:
    # A plateau creeping down by 0.5% per evaluation after a fast start (the shape of a small-corpus run).
    perplexities = [100.0, 60.0, 40.0, 35.0, 34.8, 34.6, 34.4, 34.3, 34.2, 34.1]
    for min_improvement in (0.0, 0.01, 0.2):
        tracker = early_stopping._EarlyStopping.from_config(fake_data.tiny_experiment(
            early_stopping_patience=3, early_stopping_min_improvement=min_improvement).run)
        stopped_at = None
        for index, perplexity in enumerate(perplexities):
            assert tracker.update(100 * (index + 1), perplexity)  # Every evaluation is a new best...
            if tracker.should_stop and stopped_at is None:
                stopped_at = index
        assert stopped_at == _stop_index_by_hand(perplexities, 3, min_improvement)
        assert tracker.best_perplexity == 34.1 and tracker.best_step == 1000  # ...and kept as the best.
    assert [_stop_index_by_hand(perplexities, 3, delta) for delta in (0.0, 0.01, 0.2)] == [None, 6, 5]
    # 34.1 is the best, but the last decrease of 20% was 60 -> 40 at step 300: 7 evaluations since.
    assert tracker.stop_description() == ("7 evaluations without lowering dev perplexity by 20.0% "
                                          "(best 34.100 at step 1000)")


def test_evaluations_before_min_steps_never_count_toward_patience() -> None:
    # The dev curve of a deep post-LN stack (C3, N = 8, seed 1 of table2_small): a plateau near 220
    # until the learning rate peaks at step 800, then learning. With patience 2 and a 1% minimum
    # improvement it stopped at step 800 on the plateau; from step 1,500 on nothing early counts.
    steps = list(range(100, 2100, 100))
    perplexities = [536.5, 337.1, 296.3, 257.1, 238.5, 220.2, 229.2, 219.3, 218.0, 217.5, 150.0, 90.0, 60.0,
                    50.0, 45.0, 44.8, 44.9, 44.7, 45.0, 45.2]
    stopped = {}
    for min_steps in (0, 1500):
        tracker = early_stopping._EarlyStopping.from_config(fake_data.tiny_experiment(
            early_stopping_patience=2, early_stopping_min_improvement=0.01, early_stopping_min_steps=min_steps).run)
        for step, perplexity in zip(steps, perplexities):
            tracker.update(step, perplexity)
            if tracker.should_stop:
                stopped[min_steps] = (step, tracker.best_step, tracker.best_perplexity)
                break
    assert stopped[0] == (800, 800, 219.3)  # 229.2 (none) and 219.3 (0.4% better): patience runs out.
    # 1,600: 44.8 is under 1% better (counts, 1), 1,700: worse (2). The best is 44.8 at 1,600.
    assert stopped[1500] == (1700, 1600, 44.8)
    with pytest.raises(ValueError, match="early_stopping_min_steps must be >= 0"):
        early_stopping._EarlyStopping(patience=2, min_steps=-1)
    restored = early_stopping._EarlyStopping._from_progress(2, tracker.to_progress(), 0.01, min_steps=1500)
    assert restored == tracker


def test_minimum_improvement_outside_zero_to_one_is_a_config_error() -> None:
    for bad in (-0.1, 1.0):
        config = fake_data.tiny_config(early_stopping_patience=3, early_stopping_min_improvement=bad)
        with pytest.raises(ValueError, match=r"early_stopping_min_improvement must be a probability in \[0, 1\)"):
            sections.build_experiment(config, "config")


def test_patience_without_evaluations_is_a_config_error() -> None:
    config = fake_data.tiny_config(early_stopping_patience=3, eval_every_steps=0)
    with pytest.raises(ValueError, match="eval_every_steps > 0"):
        sections.build_experiment(config, "config")


@pytest.mark.slow
def test_run_stops_early_keeps_its_best_and_stays_stopped(tmp_path: pathlib.Path) -> None:
    # A zero learning rate leaves the parameters, hence the dev perplexity, exactly as initialised: the
    # first evaluation (step 2) is the best and the run stops after `patience` more (steps 4 and 6).
    config = fake_data.tiny_experiment(num_train_steps=40, learning_rate_scale=0.0, eval_every_steps=2,
                                       early_stopping_patience=2, checkpoint_every_steps=0,
                                       average_last_checkpoints=2, final_bleu=True, final_bleu_splits=("dev",))
    results = train.train_and_evaluate(config, str(tmp_path), data=fake_data.FakeData())
    # The whole dev split is decoded from the best parameters, the test split not (final_bleu_splits).
    # Every evaluation ties; the best 2 (average_last_checkpoints) are the earliest two.
    assert results["final_checkpoint"] == "best 2 (steps [2, 4])" and 0.0 <= results["dev_bleu"] <= 100.0
    assert "test_bleu" not in results and not list(tmp_path.glob("eval_test*"))
    assert results["finished"] and results["stop_reason"] == early_stopping.STOPPED_EARLY
    assert results["step"] == 6 and results["best_step"] == 2
    assert results["best_eval_ppl"] == pytest.approx(results["eval_ppl"])
    assert checkpoints.finished_steps(str(tmp_path / run_files.BEST_DIR)) == [2, 4]
    assert checkpoints.finished_steps(str(tmp_path / run_files.CHECKPOINT_DIR))[-1] == 6
    best_params, _ = params_checkpoints.load_for_inference(str(tmp_path), "best")
    step_2_params, _ = params_checkpoints.load_for_inference(str(tmp_path), "2", directory_name=run_files.BEST_DIR)
    assert jax.tree.all(jax.tree.map(np.array_equal, best_params, step_2_params))
    _, averaged_steps = average_checkpoints._write_averaged(str(tmp_path), 1, best=True)
    assert averaged_steps == [2]
    written = json.loads((tmp_path / run_files.RESULTS_FILE).read_text())
    assert written["stop_reason"] == "early_stopping" and written["best_step"] == 2

    again = train.train_and_evaluate(config, str(tmp_path), data=fake_data.FakeData())
    assert again["step"] == 6 and again["stop_reason"] == early_stopping.STOPPED_EARLY
    records = [json.loads(line) for line in (tmp_path / run_files.METRICS_FILE).read_text().splitlines()]
    assert max(record["step"] for record in records) == 6  # The rerun trained nothing more.


def test_final_bleu_splits_are_checked_before_training() -> None:
    assert run_files.final_bleu_splits(fake_data.tiny_experiment().run.final_bleu_splits) == ("dev", "test")
    for bad in ((), ("dev", "dev"), ("dev", "validation"), ("train",)):  # "validation" is dev's other name.
        with pytest.raises(ValueError, match=r"final_bleu_splits=.*some of \('dev', 'test'\).*final_bleu=False|final_bleu_splits must be one of dev, validation, test; got 'train'"):
            sections.build_experiment(fake_data.tiny_config(final_bleu_splits=bad), "config")


def test_dev_split_too_small_for_early_stopping_is_an_error() -> None:
    early_stopping._EarlyStopping(patience=0).check_dev_split(5)  # Without early stopping: fine.
    early_stopping._EarlyStopping(patience=3).check_dev_split(early_stopping.MIN_DEV_PAIRS)
    with pytest.raises(ValueError, match=r"at least 100 pairs.*has 24.*early_stopping_patience=0"):
        early_stopping._EarlyStopping(patience=3).check_dev_split(24)
