"""configs/sweeps/normalization.py (issues 76, 87): ten rows on the small-corpus recipe, each checked by the schema."""

from __future__ import annotations

import pytest

from attention_jax.experiment import sections
from configs import small_corpus
from configs.sweeps import normalization as sweep


def _experiment(row: str) -> sections.Experiment:
    return sections.build_experiment(sweep.get_config(row), f"configs/sweeps/normalization.py:{row}")


def test_the_rows_are_the_issues_ten_with_three_seeds_and_base_first() -> None:
    rows = sweep.get_sweep()
    assert list(rows) == ["base", "pre_layer_norm", "pre_rms_norm", "post_batch_norm", "no_normalization",
                          "no_residual", "post_no_warmup", "pre_no_warmup", "post_warmup_1_17x_peak",
                          "pre_warmup_1_17x_peak"]
    assert sweep.get_seeds() == (0, 1, 2)


def test_each_row_changes_only_what_it_names_from_the_recipe() -> None:
    recipe = small_corpus.get_config()
    base = _experiment("base")
    assert (base.model.normalization, base.model.layer_norm_position, base.model.residual_connections) == (
        "layer_norm", "post", True)
    assert base.optimizer.warmup_steps == recipe.warmup_steps
    for row, changes in sweep.get_sweep().items():
        config = sweep.get_config(row)
        for field in ("num_train_steps", "tokens_per_batch", "d_model", "num_layers", "learning_rate_scale",
                      "dropout_rate", "seed"):
            assert config[field] == recipe[field], (row, field)  # The same steps and recipe for every row.
        assert config.eval_every_steps == sweep.EVAL_EVERY_STEPS and config.name == row
        for field, value in changes.items():
            assert config[field] == value
        _experiment(row)  # The schema and the model's checks accept it.
    for position in ("post", "pre"):  # Without warm-up: the recipe's peak and decay, no ramp.
        no_warmup = _experiment(f"{position}_no_warmup")
        assert (no_warmup.optimizer.warmup_steps, no_warmup.optimizer.lr_schedule) == (
            recipe.warmup_steps, "constant_then_inverse_sqrt")
        too_high = _experiment(f"{position}_warmup_1_17x_peak")  # The paper's schedule at warmup 1.
        assert (too_high.optimizer.warmup_steps, too_high.optimizer.lr_schedule) == (1, "paper")
        assert no_warmup.model.layer_norm_position == too_high.model.layer_norm_position == position
    assert base.optimizer.lr_schedule == "paper"
    assert _experiment("post_batch_norm").model.normalization == "batch_norm"
    assert _experiment("no_residual").model.residual_connections is False


def test_an_unknown_row_is_refused_naming_the_rows() -> None:
    with pytest.raises(ValueError, match="unknown row 'batch'; choose one of base, pre_layer_norm"):
        sweep.get_config("batch")
