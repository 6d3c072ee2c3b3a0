"""Per-module gradient norms in the training log (issue 76: Xiong et al.'s argument needs them per layer)."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import metrics, model
from attention_jax.training import train_state
from tests.support.decoding_helpers import random_batch

SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4, value_dim=6,
                          dropout_rate=0.0, max_len=40, layer_norm_position="pre")


@pytest.mark.integration
def test_the_train_step_reports_each_modules_gradient_norm() -> None:
    transformer = model.Transformer(SMALL)
    inputs, targets, _ = random_batch(1, batch=2, source_len=6, target_len=5)
    # Compiled as training runs them (train.py jits the step): op by op, each operation of the init, the
    # step's gradient and the loss's gradient below compiled on its own, which took half a minute.
    params = nn.meta.unbox(jax.jit(transformer.init)(jax.random.key(0), inputs, targets)["params"])
    optimizer = optax.adam(1e-3)
    state = train_state.TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=optimizer.init(params),
                                   rng=jax.random.key_data(jax.random.key(1)))
    step = jax.jit(functools.partial(train_state.train_step, transformer=transformer, optimizer=optimizer,
                                     label_smoothing=0.1))
    _, sums = step(state, {"inputs": inputs, "targets": targets})
    layers = {key[len(train_state.LAYER_GRAD_NORM_PREFIX):]: float(value) for key, value in sums.items()
              if key.startswith(train_state.LAYER_GRAD_NORM_PREFIX)}
    assert set(layers) == set(params)  # shared_embedding, encoder_0, encoder_1, decoder_0, ..., the final norms.
    np.testing.assert_allclose(np.sqrt(sum(norm ** 2 for norm in layers.values())), float(sums["grad_norm"]),
                               rtol=1e-5)

    def loss(p: dict) -> jax.Array:  # The per-token mean loss, as the step's gradient is.
        logits = transformer.apply({"params": p}, inputs, targets)
        loss_sums = metrics.token_loss_sums(logits, targets, 0.1)
        return loss_sums["loss_sum"] / loss_sums["tokens"]

    gradient = jax.jit(jax.grad(loss))(params)["encoder_1"]
    flat = np.concatenate([np.ravel(leaf) for leaf in jax.tree_util.tree_leaves(gradient)])
    np.testing.assert_allclose(layers["encoder_1"], np.linalg.norm(flat), rtol=1e-4)


def test_the_log_records_the_first_steps_norms_as_those_at_initialisation() -> None:
    def sums(scale: float) -> dict:
        return {"grad_norm": 5.0 * scale, "grad_norm/encoder_0": 3.0 * scale, "grad_norm/decoder_0": 4.0 * scale,
                "loss_sum": 1.0}

    first_interval = train_state._logged_gradient_norms([(1, sums(1.0)), (2, sums(2.0))])
    assert first_interval == {"grad_norm": 10.0, "grad_norm/encoder_0": 6.0, "grad_norm/decoder_0": 8.0,
                              "init/grad_norm": 5.0, "init/grad_norm/encoder_0": 3.0, "init/grad_norm/decoder_0": 4.0}
    assert train_state._logged_gradient_norms([(51, sums(1.0)), (52, sums(3.0))]) == {
        "grad_norm": 15.0, "grad_norm/encoder_0": 9.0, "grad_norm/decoder_0": 12.0}
