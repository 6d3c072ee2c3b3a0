"""Restricted self-attention (Table 1, fourth row): the blockwise kernel and its wiring in the model."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import attention, masks, model

BATCH, HEADS, KEY_DIM, VALUE_DIM = 2, 3, 5, 7

# Jitted once per shape: far faster on CPU than op-by-op dispatch.
local_attention = jax.jit(attention._local_dot_product_attention, static_argnames=("window", "causal"))
dense_attention = jax.jit(attention.scaled_dot_product_attention)


def _random_qkv(length: int, seed: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(BATCH, length, HEADS, KEY_DIM)).astype(np.float32)
    key = rng.normal(size=(BATCH, length, HEADS, KEY_DIM)).astype(np.float32)
    value = rng.normal(size=(BATCH, length, HEADS, VALUE_DIM)).astype(np.float32)
    return jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)


def _valid(length: int) -> jax.Array:
    """First sequence full, second with its last third padded."""
    lengths = np.array([length, max(1, length - length // 3)])
    return jnp.asarray(np.arange(length)[None, :] < lengths[:, None])


def _numpy_local_attention(query, key, value, window, valid, causal):
    """Loop over queries: softmax over the allowed keys only (independent of the library's masking)."""
    query, key, value, valid = map(np.asarray, (query, key, value, valid))
    batch, length, heads, key_dim = query.shape
    output = np.zeros(value.shape[:2] + (heads, value.shape[-1]), np.float64)
    for b in range(batch):
        for i in range(length):
            if not valid[b, i]:
                continue  # Padded query: zero output.
            keys = [j for j in range(length)
                    if abs(i - j) <= window and valid[b, j] and (not causal or j <= i)]
            for h in range(heads):
                scores = np.array([query[b, i, h] @ key[b, j, h] for j in keys]) / np.sqrt(key_dim)
                weights = np.exp(scores - scores.max())
                weights /= weights.sum()
                output[b, i, h] = weights @ value[b, keys, h]
    return output


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length,window", [(16, 4), (17, 4), (23, 5), (7, 1), (6, 10)])
def test_local_attention_equals_dense_masked_attention(length, window, causal):
    query, key, value = _random_qkv(length, seed=length * 10 + window)
    valid = _valid(length)
    local = local_attention(query, key, value, window, valid=valid, causal=causal)
    dense_mask = masks.LocalMask(window=window, valid=valid, causal=causal).to_dense(length)
    dense = dense_attention(query, key, value, dense_mask)
    assert local.shape == (BATCH, length, HEADS, VALUE_DIM)
    np.testing.assert_allclose(local, dense, atol=1e-5)


@pytest.mark.reference
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length,window", [(11, 3)])
def test_local_attention_matches_numpy_loop(length, window, causal):
    query, key, value = _random_qkv(length, seed=7)
    valid = _valid(length)
    local = local_attention(query, key, value, window, valid=valid, causal=causal)
    expected = _numpy_local_attention(query, key, value, window, valid, causal)
    np.testing.assert_allclose(local, expected, atol=1e-5)


def test_local_attention_without_padding_equals_window_mask():
    length, window = 21, 4
    query, key, value = _random_qkv(length, seed=3)
    positions = jnp.arange(length)
    mask = masks._make_local_mask(positions, positions, window)
    dense = dense_attention(query, key, value, mask)
    local = local_attention(query, key, value, window)
    np.testing.assert_allclose(local, dense, atol=1e-5)


def test_local_mask_to_dense_is_band_of_valid_pairs():
    valid = jnp.array([[True, True, True, True, False]])
    dense = np.asarray(masks.LocalMask(window=1, valid=valid, causal=True).to_dense(5))[0, 0]
    expected = np.zeros((5, 5), bool)
    for i in range(4):
        for j in range(max(0, i - 1), i + 1):
            expected[i, j] = True
    np.testing.assert_array_equal(dense, expected)


def test_local_attention_rejects_bad_window_and_cross_attention():
    query, key, value = _random_qkv(6, seed=0)
    with pytest.raises(ValueError, match="window must be a positive integer"):
        attention._local_dot_product_attention(query, key, value, 0)
    with pytest.raises(ValueError, match="self-attention"):
        attention._local_dot_product_attention(query, key[:, :4], value[:, :4], 2)


def _attention_layer(implementation: str, decode: bool = False) -> attention.MultiHeadAttention:
    return attention.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, value_dim=VALUE_DIM, out_dim=8,
                                        implementation=implementation, decode=decode)


@pytest.mark.integration
def test_multi_head_attention_local_mask_paths_agree():
    length, window = 13, 3
    inputs = jax.random.normal(jax.random.key(0), (BATCH, length, 8))
    valid = _valid(length)
    local_mask = masks.LocalMask(window=window, valid=valid, causal=True)
    layer = _attention_layer("einsum")
    params = layer.init(jax.random.key(1), inputs, inputs)

    @functools.partial(jax.jit, static_argnames=("implementation", "sow_weights"))
    def attend(mask, implementation="einsum", sow_weights=False):
        return _attention_layer(implementation).apply(params, inputs, inputs, mask,
                                                      sow_weights=sow_weights, mutable=["intermediates"])

    blocked, _ = attend(local_mask)
    dense, _ = attend(local_mask.to_dense(length))
    fused, _ = attend(local_mask, implementation="xla")  # Made dense inside.
    sown, state = attend(local_mask, sow_weights=True)  # Made dense to return the weights.
    np.testing.assert_allclose(blocked, dense, atol=1e-5)
    np.testing.assert_allclose(fused, dense, atol=1e-5)
    np.testing.assert_allclose(sown, dense, atol=1e-5)
    weights = np.asarray(state["intermediates"]["attention_weights"][0])  # [B,H,T,S]
    outside = ~np.broadcast_to(np.asarray(local_mask.to_dense(length)), weights.shape)
    assert np.all(weights[outside] == 0.0)


def test_multi_head_attention_rejects_local_mask_in_decode_mode():
    inputs = jnp.ones((1, 4, 8))
    layer = _attention_layer("einsum", decode=True)
    with pytest.raises(ValueError, match="LocalMask"):
        layer.init(jax.random.key(0), inputs, inputs, masks.LocalMask(window=2))


class WindowedModel:
    """A tiny windowed Transformer (r = 2, N = 2), its parameters, a batch and jitted entry points."""

    def __init__(self) -> None:
        self.config = TransformerConfig(
            vocab_size=40, num_layers=2, d_model=16, d_ff=32, num_heads=2, key_dim=8, value_dim=4,
            dropout_rate=0.0, attention_window=2, max_len=64)
        self.inputs = _random_ids((2, 19), 0).at[1, 15:].set(model.PAD_ID)
        self.targets = _random_ids((2, 14), 1).at[0, 11:].set(model.PAD_ID)
        self.transformer = model.Transformer(self.config)
        self.params = jax.jit(self.transformer.init)(jax.random.key(2), self.inputs, self.targets)
        self.encode = jax.jit(functools.partial(self.transformer.apply, self.params,
                                                method=model.Transformer.encode))


def _random_ids(shape: tuple[int, int], seed: int) -> jax.Array:
    return jax.random.randint(jax.random.key(seed), shape, 4, 40)


@pytest.fixture(scope="module")
def windowed() -> WindowedModel:
    return WindowedModel()


@pytest.mark.integration
def test_windowed_transformer_blocked_equals_dense(windowed):
    blocked = jax.jit(windowed.transformer.apply)(windowed.params, windowed.inputs, windowed.targets)
    dense_model = model.Transformer(windowed.config.replace(attention_implementation="xla"))
    dense = jax.jit(dense_model.apply)(windowed.params, windowed.inputs, windowed.targets)
    assert blocked.shape == (2, 14, 40) and np.all(np.isfinite(blocked))
    np.testing.assert_allclose(blocked, dense, atol=1e-4)


def test_windowed_encoder_output_ignores_tokens_beyond_receptive_field(windowed):
    config = windowed.config
    reach = config.num_layers * config.attention_window  # 4 positions each side.
    inputs, position = windowed.inputs, 9
    baseline = np.asarray(windowed.encode(inputs)[0, position])
    far = np.abs(np.arange(inputs.shape[1]) - position) > reach
    changed = (inputs - 4 + 17) % 36 + 4  # Another non-pad token everywhere.
    replaced = jnp.where(jnp.asarray(far)[None], changed, inputs)
    assert np.any(np.asarray(replaced[0] != inputs[0]))
    np.testing.assert_allclose(windowed.encode(replaced)[0, position], baseline, atol=1e-6)
    edge = inputs.at[0, position + reach].set(changed[0, position + reach])
    assert not np.allclose(windowed.encode(edge)[0, position], baseline, atol=1e-6)  # Reach is N*r.
