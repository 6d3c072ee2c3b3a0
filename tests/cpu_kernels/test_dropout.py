"""attention_jax.cpu_kernels.dropout against JAX's and Flax's own implementations: the same bits, masks and models."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.cpu_kernels import dropout
from attention_jax.models import model
from attention_jax.models.transformer_config import TransformerConfig

SHAPES = [(), (1,), (5,), (3, 4), (2, 3, 7), (64, 33)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey], ids=["typed", "raw"])
def test_threefry_random_bits_equal_jax_random_bits(shape: tuple[int, ...], make_key) -> None:
    for seed in (0, 7, 2**31 + 5):
        key = jax.random.fold_in(make_key(seed), 3)
        expected = jax.random.bits(key, shape, jnp.uint32)
        ours = jax.jit(dropout._threefry_random_bits, static_argnums=1)(key, shape)
        assert ours.dtype == jnp.uint32 and ours.shape == shape
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(expected))


def test_threefry2x32_matches_the_published_known_answer() -> None:
    # Random123's known-answer vector for Threefry-2x32 with 20 rounds: key and counter all ones.
    ones = np.uint32(0xFFFFFFFF)
    left, right = dropout._threefry2x32((jnp.uint32(ones), jnp.uint32(ones)), jnp.uint32(ones), jnp.uint32(ones))
    assert (int(left), int(right)) == (0x1CB996FC, 0xBB002BE7)
    left, right = dropout._threefry2x32((jnp.uint32(0), jnp.uint32(0)), jnp.uint32(0), jnp.uint32(0))
    assert (int(left), int(right)) == (0x6B200159, 0x99BA4EFE)
    left, right = dropout._threefry2x32((jnp.uint32(0x13198A2E), jnp.uint32(0x03707344)),
                                       jnp.uint32(0x243F6A88), jnp.uint32(0x85A308D3))
    assert (int(left), int(right)) == (0xC4923A9C, 0x483DF7A0)


@pytest.mark.parametrize("keep_prob", [0.9, 0.5, 0.75, 0.7, 0.01, 1.0 - 1e-7])
def test_bernoulli_mask_equals_jax_bernoulli(keep_prob: float) -> None:
    key = jax.random.key(11)
    shape = (48, 50)
    ours = jax.jit(dropout._bernoulli_mask, static_argnums=(1, 2))(key, keep_prob, shape)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(jax.random.bernoulli(key, keep_prob, shape)))


def test_other_generators_go_to_jax_itself() -> None:
    key = jax.random.key(4, impl="rbg")
    np.testing.assert_array_equal(np.asarray(dropout._threefry_random_bits(key, (6, 5))),
                                  np.asarray(jax.random.bits(key, (6, 5), jnp.uint32)))
    np.testing.assert_array_equal(np.asarray(dropout._bernoulli_mask(key, 0.9, (6, 5))),
                                  np.asarray(jax.random.bernoulli(key, 0.9, (6, 5))))


def test_the_mask_compiles_without_a_loop() -> None:
    """The point of the module: on the CPU JAX's own draw is a ``while`` loop, ours a single fusion."""
    compiled = jax.jit(dropout._bernoulli_mask, static_argnums=(1, 2)).lower(
        jax.random.key(0), 0.9, (128, 64)).compile().as_text()
    assert " while(" not in compiled and "while" not in compiled.split("ENTRY")[-1]


class _Pair(nn.Module):
    """Applies a dropout module class twice (two auto-named instances, so two keys from make_rng)."""

    dropout_class: type
    rate: float
    broadcast_dims: tuple[int, ...] = ()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        first = self.dropout_class(self.rate, broadcast_dims=self.broadcast_dims)(x, deterministic=False)
        return self.dropout_class(self.rate, broadcast_dims=self.broadcast_dims)(jnp.tanh(first),
                                                                                 deterministic=False)


@pytest.mark.integration
@pytest.mark.parametrize("rate, broadcast_dims, dtype", [
    (0.1, (), jnp.float32), (0.3, (), jnp.bfloat16), (0.1, (-2,), jnp.float32), (0.0, (), jnp.float32),
    (1.0, (), jnp.float32),
])
def test_dropout_module_equals_flax_dropout_values_and_gradients(rate, broadcast_dims, dtype) -> None:
    x = jax.random.normal(jax.random.key(1), (4, 9, 16)).astype(dtype)
    rngs = {"dropout": jax.random.key(2)}

    def output_and_gradient(dropout_class: type) -> tuple[np.ndarray, np.ndarray]:
        module = _Pair(dropout_class, rate, broadcast_dims)
        apply = lambda inputs: module.apply({}, inputs, rngs=rngs)  # noqa: E731
        gradient = jax.grad(lambda inputs: jnp.sum(apply(inputs).astype(jnp.float32) ** 2))(x)
        return np.asarray(apply(x).astype(jnp.float32)), np.asarray(gradient.astype(jnp.float32))

    ours, flax_ones = output_and_gradient(dropout.Dropout), output_and_gradient(nn.Dropout)
    np.testing.assert_array_equal(ours[0], flax_ones[0])
    np.testing.assert_array_equal(ours[1], flax_ones[1])
    if 0.0 < rate < 1.0:
        dropped = np.mean(ours[0] == 0.0)
        assert 0.0 < dropped < 1.0
    deterministic = dropout.Dropout(rate).apply({}, x, deterministic=True)
    assert deterministic is x


@pytest.mark.integration
def test_transformer_training_loss_and_gradients_unchanged_by_the_dropout_class(monkeypatch) -> None:
    """The whole model with flax.linen.Dropout swapped in gives the same loss and gradient bits, op by op.

    Not jitted: a jitted step with either class is a different compiled program, whose losses agree to
    float rounding only (``tests/cpu_kernels/test_switch.py``).
    """
    config = TransformerConfig(vocab_size=50, num_layers=2, d_model=32, d_ff=64, num_heads=4, key_dim=8,
                               value_dim=8, max_len=16, dropout_rate=0.2)
    rng = np.random.default_rng(0)
    inputs = jnp.asarray(rng.integers(4, 50, (3, 9)), jnp.int32)
    targets = jnp.asarray(rng.integers(4, 50, (3, 7)), jnp.int32)
    params = model.Transformer(config).init(jax.random.key(0), inputs, targets)["params"]

    def loss_and_gradient() -> tuple[np.ndarray, list[np.ndarray]]:
        transformer = model.Transformer(config)

        def loss(candidate):
            logits = transformer.apply({"params": candidate}, inputs, targets, deterministic=False,
                                       rngs={"dropout": jax.random.key(5)})
            return jnp.mean(jax.nn.log_softmax(logits)[..., 4])

        value, gradient = jax.value_and_grad(loss)(params)
        return np.asarray(value), [np.asarray(leaf) for leaf in jax.tree.leaves(gradient)]

    ours = loss_and_gradient()
    monkeypatch.setattr(dropout, "Dropout", nn.Dropout)  # What cpu_kernels.dropout_class hands the model.
    reference = loss_and_gradient()
    np.testing.assert_array_equal(ours[0], reference[0])
    for leaf, reference_leaf in zip(ours[1], reference[1]):
        np.testing.assert_array_equal(leaf, reference_leaf)
    deterministic = model.Transformer(config).apply({"params": params}, inputs, targets, deterministic=True)
    assert not np.allclose(np.asarray(deterministic), np.asarray(
        model.Transformer(config).apply({"params": params}, inputs, targets, deterministic=False,
                                        rngs={"dropout": jax.random.key(5)})))
