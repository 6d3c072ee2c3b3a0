"""Runs you can watch (issue 36): the ETA counts the evaluations still to come, the logged learning rate is
the optimizer's own, and a finished run ends its log with one summary line.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from attention_jax.foundation import run_files
from attention_jax.training import progress, train, train_state
from tests.support import fake_data


def test_remaining_evaluations_count_the_periodic_ones_and_the_final_one() -> None:
    assert progress._remaining_evaluations(10, 100, 25) == 4  # Steps 25, 50, 75 and the final one at 100.
    assert progress._remaining_evaluations(50, 100, 25) == 2  # 75 and 100.
    assert progress._remaining_evaluations(99, 100, 0) == 1  # Only the final one.
    assert progress._remaining_evaluations(100, 100, 25) == 0


def test_summary_line_names_steps_time_best_dev_bleu_and_results() -> None:
    results = {"step": 40, "stop_reason": "early_stopping", "wall_s": 192.5, "best_eval_ppl": 8.1, "best_step": 30,
               "dev_bleu": 21.349, "test_bleu": 22.1}
    assert progress._summary_line(results, "runs/tiny") == (
        "Done: step 40 (early_stopping), 3m12s; best dev perplexity 8.100 at step 30; dev BLEU 21.35, "
        "test BLEU 22.10; results in runs/tiny/results.json")


@pytest.mark.end_to_end
def test_logged_learning_rate_is_the_optimizers_schedule(tmp_path: pathlib.Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_state, "_make_schedule", lambda config: (lambda count: 1e-3 * (count + 1)))
    train.train_and_evaluate(fake_data.tiny_experiment(num_train_steps=2, log_every_steps=1, eval_every_steps=0,
                                                   checkpoint_every_steps=0), str(tmp_path),
                             data=fake_data.FakeData(shapes=((8, 12, 12),)))
    records = [json.loads(line) for line in (tmp_path / run_files.METRICS_FILE).read_text().splitlines()]
    rates = [record["train/learning_rate"] for record in records if "train/learning_rate" in record]
    assert rates == pytest.approx([1e-3, 2e-3])  # Update 1 used count 0, update 2 count 1.
