"""config.cpu_kernels: off builds the plain Flax/JAX model; on and off agree; the train step honours it."""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax import cpu_kernels
from attention_jax.checkpointing import resume_checks
from attention_jax.cpu_kernels import dropout, projection
from attention_jax.experiment import schema, sections
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import language_model, metrics, model
from attention_jax.training import sharding, train_state
from tests.support import fake_data

ON_CPU = jax.default_backend() == "cpu"
SMALL = TransformerConfig(vocab_size=64, num_layers=1, d_model=32, d_ff=64, num_heads=2, key_dim=16,
                          value_dim=16, max_len=16, dropout_rate=0.2, attention_dropout_rate=0.1,
                          share_embeddings=False)


def _batch() -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(0)
    return jnp.asarray(rng.integers(4, 64, (3, 9)), jnp.int32), jnp.asarray(rng.integers(4, 64, (3, 7)), jnp.int32)


def _forward(config: TransformerConfig, model_kind: str) -> tuple[Callable[[dict], jax.Array], dict]:
    """The model's logits with dropout on, as a function of its parameters, and its parameters."""
    inputs, targets = _batch()
    module = language_model.build_model(config, model_kind)
    model_inputs = (targets,) if model_kind == "decoder_only" else (inputs, targets)
    params = module.init(jax.random.key(0), *model_inputs)["params"]

    def apply(candidate: dict) -> jax.Array:
        return module.apply({"params": candidate}, *model_inputs, deterministic=False,
                            rngs={"dropout": jax.random.key(5)})

    return apply, params


def _gradient_jaxpr(config: TransformerConfig, model_kind: str) -> str:
    apply, params = _forward(config, model_kind)
    return str(jax.make_jaxpr(jax.grad(lambda p: jnp.sum(apply(p))))(params))


@pytest.mark.integration
@pytest.mark.parametrize("model_kind", ["encoder_decoder", "decoder_only"])
def test_switch_off_builds_the_plain_flax_model(model_kind: str) -> None:
    """Off: no custom VJP from projection.py, and dropout masks from jax.random (Flax's own draw)."""
    plain = _gradient_jaxpr(SMALL.replace(cpu_kernels=False), model_kind)
    assert "custom_vjp_call" not in plain
    assert "random_bits" in plain  # flax.linen.Dropout -> jax.random.bernoulli -> random_bits.
    kernels = _gradient_jaxpr(SMALL, model_kind)
    assert ("custom_vjp_call" in kernels) == ON_CPU  # The Dense layers' 2-D backward pass.
    assert ("random_bits" not in kernels) == ON_CPU  # Threefry written out by cpu_kernels.dropout.


def test_the_switch_selects_each_kernel() -> None:
    assert cpu_kernels.dense_dot_general(False) is None
    assert cpu_kernels.dropout_class(False) is nn.Dropout
    assert cpu_kernels.cpu_kernels_enabled(True) == ON_CPU
    expected = (projection.dot_general, dropout.Dropout) if ON_CPU else (None, nn.Dropout)
    assert (cpu_kernels.dense_dot_general(True), cpu_kernels.dropout_class(True)) == expected


@pytest.mark.slow
@pytest.mark.parametrize("model_kind", ["encoder_decoder", "decoder_only"])
def test_switch_on_and_off_agree_to_float_rounding(model_kind: str) -> None:
    """Same parameters, same dropout masks: outputs and gradients equal to float rounding (jitted).

    Dropout (rate 0.2, and 0.1 on attention weights) is on, so different masks would fail this.
    """
    results = []
    for switch in (True, False):
        apply, params = _forward(SMALL.replace(cpu_kernels=switch), model_kind)

        def loss(candidate: dict, apply=apply) -> tuple[jax.Array, jax.Array]:
            logits = apply(candidate)
            return jnp.sum(jnp.sin(logits)), logits

        (_, output), gradient = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
        results.append((output, gradient))
    (on_output, on_gradient), (off_output, off_gradient) = results
    np.testing.assert_allclose(np.asarray(on_output), np.asarray(off_output), rtol=1e-5, atol=1e-5)
    for leaf, plain_leaf in zip(jax.tree.leaves(on_gradient), jax.tree.leaves(off_gradient)):
        np.testing.assert_allclose(np.asarray(leaf), np.asarray(plain_leaf), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("num_classes", [64, 8000, 4099])
def test_first_argmax_on_and_off_equal_exactly(num_classes: int) -> None:
    """Blocks, one block and the top_k fallback (4,099 is prime) give jnp.argmax's index, ties included."""
    logits = np.random.default_rng(num_classes).normal(size=(6, 5, num_classes)).astype(np.float32)
    logits[0, 0, [3, num_classes - 1]] = 7.0
    logits[1, 1, :] = 0.5
    on = jax.jit(lambda x: metrics.first_argmax(x, cpu_kernels=True))(jnp.asarray(logits))
    off = jax.jit(lambda x: metrics.first_argmax(x, cpu_kernels=False))(jnp.asarray(logits))
    np.testing.assert_array_equal(np.asarray(on), np.asarray(off))
    np.testing.assert_array_equal(np.asarray(off), logits.argmax(-1))
    plain = str(jax.make_jaxpr(lambda x: metrics.first_argmax(x, cpu_kernels=False))(logits))
    assert "argmax" in plain and "top_k" not in plain and "reduce_max" not in plain  # jnp.argmax alone.


def test_the_config_field_defaults_to_on_and_is_validated() -> None:
    config = fake_data.tiny_config()
    assert config.cpu_kernels is True and sections.build_experiment(config, "test").model.cpu_kernels is True
    older_run = {key: value for key, value in config.to_dict().items()
                 if key != "cpu_kernels"}  # A config.json from before the switch.
    assert sections.build_experiment(schema.with_old_run_defaults(older_run), "config.json").model.cpu_kernels is True
    assert fake_data.tiny_experiment(cpu_kernels=False).model.cpu_kernels is False
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match=r"^cpu_kernels must be True or False; got .*\.$"):
            SMALL.replace(cpu_kernels=bad)
    hand_edited = dict(config.to_dict(), cpu_kernels="false")
    with pytest.raises(ValueError, match="cpu_kernels must be True or False; got 'false'"):
        sections.build_experiment(hand_edited, "config")  # What `python -m attention_jax.main` prints as one line.


def test_a_run_may_resume_with_the_switch_flipped() -> None:
    assert resume_checks.model_config_differences(fake_data.tiny_experiment(),
                                                fake_data.tiny_experiment(cpu_kernels=False)) == {}


@pytest.mark.slow
def test_the_train_step_honours_the_switch() -> None:
    """Two jitted train steps from one state: the switch decides the program, not the numbers."""
    outcomes = {}
    for switch in (True, False):
        config = fake_data.tiny_experiment(cpu_kernels=switch)
        transformer = model.Transformer(config.model)
        mesh = sharding.create_mesh((1,), ("data",), devices=jax.devices()[:1])
        optimizer = train_state.make_optimizer(config.optimizer)
        state, shardings = train_state.sharded_initial_state(config.seed, transformer, optimizer, mesh,
                                                               sharding.logical_axis_rules("replicated", mesh))
        steps = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                          label_smoothing=config.optimizer.label_smoothing)
        batch = sharding.global_batch(fake_data.make_batch(0, 0, (8, 10, 10), config.model.vocab_size),
                                      steps.batch_sharding)
        program = str(jax.make_jaxpr(steps.train)(state, batch))
        assert ("custom_vjp_call" in program) == (switch and ON_CPU)
        assert ("random_bits" in program) == (not (switch and ON_CPU))
        new_state, sums = steps.train(state, batch)
        outcomes[switch] = (jax.device_get(sums), jax.device_get(new_state.params))
    (on_sums, on_params), (off_sums, off_params) = outcomes[True], outcomes[False]
    assert float(on_sums["tokens"]) == float(off_sums["tokens"]) > 0
    np.testing.assert_allclose(float(on_sums["loss_sum"]), float(off_sums["loss_sum"]), rtol=1e-5)
    # Adam's first step is about lr * sign(gradient): a gradient that is zero in exact arithmetic (the key
    # projection's bias, tests/training/test_train.py) moves by +-lr either way, so it is left out.
    on_leaves = jax.tree_util.tree_flatten_with_path(on_params)[0]
    compared = 0
    for (path, leaf), plain_leaf in zip(on_leaves, jax.tree.leaves(off_params)):
        if not jax.tree_util.keystr(path).endswith("['key']['bias']"):
            np.testing.assert_allclose(leaf, plain_leaf, rtol=1e-4, atol=1e-5, err_msg=jax.tree_util.keystr(path))
            compared += 1
    assert compared > 10
