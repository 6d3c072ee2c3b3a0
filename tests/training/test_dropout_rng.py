"""``config.dropout_rng``: the rbg dropout masks are a different, equally valid draw at the same state."""

from __future__ import annotations

import numpy as np
import pytest

from attention_jax.experiment import sections
from attention_jax.models import model
from attention_jax.training import sharding, train_state
from tests.support import fake_data


def _one_step_loss(config, dropout_rng: str, step_fn_cache: dict) -> float:
    mesh = sharding.create_mesh((-1,), ("data",))
    transformer = model.Transformer(config.model)
    optimizer = train_state.make_optimizer(config.optimizer)
    state, shardings = train_state.sharded_initial_state(config.seed, transformer, optimizer, mesh,
                                                           sharding.logical_axis_rules("replicated", mesh))
    if dropout_rng not in step_fn_cache:
        step_fn_cache[dropout_rng] = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                                         label_smoothing=0.0, dropout_rng=dropout_rng)
    steps = step_fn_cache[dropout_rng]
    rng = np.random.default_rng(0)
    batch = {name: rng.integers(4, config.model.vocab_size, size=(4, 12), dtype=np.int32) for name in ("inputs", "targets")}
    _, sums = steps.train(state, sharding.global_batch(batch, steps.batch_sharding))
    return float(sums["loss_sum"] / sums["tokens"])


@pytest.mark.integration
def test_rbg_dropout_draws_other_masks_deterministically() -> None:
    cache: dict = {}
    dropped = fake_data.tiny_experiment(dropout_rate=0.5)
    threefry = _one_step_loss(dropped, "threefry", cache)
    rbg = _one_step_loss(dropped, "rbg", cache)
    assert np.isfinite(rbg) and rbg != threefry  # Different masks, so a different loss.
    assert _one_step_loss(dropped, "rbg", cache) == rbg  # The same state and step give the same masks.
    without_dropout = fake_data.tiny_experiment(dropout_rate=0.0)
    no_mask = {}
    assert _one_step_loss(without_dropout, "rbg", no_mask) == pytest.approx(
        _one_step_loss(without_dropout, "threefry", no_mask), rel=1e-6)  # Only the masks change.


def test_unknown_dropout_rng_is_named() -> None:
    with pytest.raises(ValueError, match="dropout_rng must be one of"):
        sections.build_experiment(fake_data.tiny_config(dropout_rng="philox"), "config")
