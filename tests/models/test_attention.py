"""Attention against an independent NumPy implementation, masks, and the fused path."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.models import attention, masks
from tests.support import reference
from tests.support.reference import random_normal

BATCH, LEN_Q, LEN_K, HEADS, KEY_DIM, VALUE_DIM, D_MODEL = 2, 5, 7, 3, 4, 6, 12


def _padding_valid(lengths: list[int], total: int) -> np.ndarray:
    return np.arange(total)[None, :] < np.asarray(lengths)[:, None]


@pytest.mark.reference
def test_mask_helpers_match_definitions() -> None:
    query_valid = _padding_valid([2, 3], 3)
    key_valid = _padding_valid([4, 1], 4)
    padding = np.asarray(masks.make_padding_mask(jnp.asarray(query_valid), jnp.asarray(key_valid)))
    expected = query_valid[:, None, :, None] & key_valid[:, None, None, :]
    np.testing.assert_array_equal(padding, expected)
    causal = np.asarray(masks.make_causal_mask(4))[0, 0]
    np.testing.assert_array_equal(causal, np.tril(np.ones((4, 4), bool)))
    merged = np.asarray(masks.combine_masks(jnp.asarray(expected[:, :, :3, :3]),
                                                masks.make_causal_mask(3), None))
    np.testing.assert_array_equal(merged, expected[:, :, :3, :3] & np.tril(np.ones((3, 3), bool)))
    assert masks.combine_masks(None, None) is None
    local = np.asarray(masks._make_local_mask(jnp.arange(5), jnp.arange(5), 1))[0, 0]
    np.testing.assert_array_equal(local, np.abs(np.subtract.outer(np.arange(5), np.arange(5))) <= 1)


@pytest.mark.reference
@pytest.mark.parametrize("masked", ["none", "padding", "causal"])
def test_scaled_dot_product_attention_matches_numpy(masked: str) -> None:
    length_k = LEN_Q if masked == "causal" else LEN_K
    query = random_normal((BATCH, LEN_Q, HEADS, KEY_DIM), 0)
    key = random_normal((BATCH, length_k, HEADS, KEY_DIM), 1)
    value = random_normal((BATCH, length_k, HEADS, VALUE_DIM), 2)
    mask = None
    if masked == "padding":
        mask = np.asarray(masks.make_padding_mask(jnp.ones((BATCH, LEN_Q), bool),
                                                      jnp.asarray(_padding_valid([7, 3], LEN_K))))
    elif masked == "causal":
        mask = np.asarray(masks.make_causal_mask(LEN_Q))
    output, weights = attention.scaled_dot_product_attention(query, key, value, mask, return_weights=True)
    expected_output, expected_weights = reference.attention(query.astype(np.float64), key, value, mask)
    np.testing.assert_allclose(output, expected_output, atol=1e-5)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
    np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, atol=1e-6)


def test_fully_masked_rows_give_zeros_not_nan() -> None:
    query = random_normal((1, 3, 1, 4), 0)
    key = random_normal((1, 3, 1, 4), 1)
    value = random_normal((1, 3, 1, 2), 2)
    mask = np.array([True, False, True])[None, None, :, None] & np.ones((1, 1, 1, 3), bool)
    for implementation in ("einsum", "xla"):
        if implementation == "einsum":
            output, weights = attention.scaled_dot_product_attention(query, key, value, mask,
                                                                     return_weights=True)
            np.testing.assert_array_equal(np.asarray(weights)[0, 0, 1], 0.0)
        else:
            output = attention._fused_dot_product_attention(query, key, value, mask, implementation="xla")
        output = np.asarray(output)
        assert np.isfinite(output).all()
        np.testing.assert_array_equal(output[0, 1], 0.0)
        assert np.abs(output[0, 0]).sum() > 0


def _init_mha(key_dim: int = KEY_DIM, value_dim: int = VALUE_DIM, implementation: str = "einsum"):
    module = attention.MultiHeadAttention(num_heads=HEADS, key_dim=key_dim, value_dim=value_dim,
                                          out_dim=D_MODEL, implementation=implementation)
    inputs = jnp.asarray(random_normal((BATCH, LEN_Q, D_MODEL), 3))
    params = nn.meta.unbox(module.init(jax.random.key(0), inputs, inputs)["params"])
    return module, params


@pytest.mark.reference
@pytest.mark.parametrize("kind", ["self_padding", "self_causal", "cross_padding"])
def test_multi_head_attention_matches_numpy(kind: str) -> None:
    module, params = _init_mha()
    inputs_q = random_normal((BATCH, LEN_Q, D_MODEL), 4)
    if kind.startswith("self"):
        inputs_kv = inputs_q
        valid = _padding_valid([LEN_Q, 3], LEN_Q)
        mask = np.asarray(masks.make_padding_mask(jnp.asarray(valid), jnp.asarray(valid)))
        if kind == "self_causal":
            mask = mask & np.asarray(masks.make_causal_mask(LEN_Q))
    else:
        inputs_kv = random_normal((BATCH, LEN_K, D_MODEL), 5)
        mask = np.asarray(masks.make_padding_mask(jnp.asarray(_padding_valid([LEN_Q, 4], LEN_Q)),
                                                      jnp.asarray(_padding_valid([LEN_K, 2], LEN_K))))
    output = module.apply({"params": params}, inputs_q, inputs_kv, mask)
    numpy_params = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)
    expected = reference.multi_head_attention(numpy_params, inputs_q.astype(np.float64),
                                              inputs_kv.astype(np.float64), mask)
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_separate_key_and_value_sizes_shape_the_projections() -> None:
    _, params = _init_mha(key_dim=16, value_dim=5)
    assert params["query"]["kernel"].shape == (D_MODEL, HEADS, 16)
    assert params["key"]["kernel"].shape == (D_MODEL, HEADS, 16)
    assert params["value"]["kernel"].shape == (D_MODEL, HEADS, 5)
    assert params["out"]["kernel"].shape == (HEADS, 5, D_MODEL)


@pytest.mark.integration
@pytest.mark.parametrize("key_dim,value_dim", [(4, 4), (4, 6), (8, 2)])
def test_fused_implementation_equals_einsum(key_dim: int, value_dim: int) -> None:
    module, params = _init_mha(key_dim, value_dim)
    fused = attention.MultiHeadAttention(num_heads=HEADS, key_dim=key_dim, value_dim=value_dim,
                                         out_dim=D_MODEL, implementation="fused")
    inputs_q = jnp.asarray(random_normal((BATCH, LEN_Q, D_MODEL), 6))
    inputs_kv = jnp.asarray(random_normal((BATCH, LEN_K, D_MODEL), 7))
    query_valid = jnp.asarray(_padding_valid([LEN_Q, 2], LEN_Q))
    mask = masks.make_padding_mask(query_valid, jnp.asarray(_padding_valid([LEN_K, 3], LEN_K)))
    reference_output = module.apply({"params": params}, inputs_q, inputs_kv, mask)
    fused_output = fused.apply({"params": params}, inputs_q, inputs_kv, mask)
    np.testing.assert_allclose(fused_output, reference_output, atol=1e-5)


def test_masked_keys_do_not_influence_outputs() -> None:
    module, params = _init_mha()
    inputs_q = random_normal((BATCH, LEN_Q, D_MODEL), 8)
    inputs_kv = random_normal((BATCH, LEN_K, D_MODEL), 9)
    key_valid = _padding_valid([4, 4], LEN_K)
    mask = masks.make_padding_mask(jnp.ones((BATCH, LEN_Q), bool), jnp.asarray(key_valid))
    changed_kv = inputs_kv.copy()
    changed_kv[:, 4:] = random_normal((BATCH, LEN_K - 4, D_MODEL), 10) * 100.0
    before = module.apply({"params": params}, inputs_q, inputs_kv, mask)
    after = module.apply({"params": params}, inputs_q, changed_kv, mask)
    np.testing.assert_allclose(after, before, atol=1e-6)
    unmasked_change = inputs_kv.copy()
    unmasked_change[:, 0] += 1.0
    assert not np.allclose(module.apply({"params": params}, inputs_q, unmasked_change, mask), before)


def test_causal_self_attention_ignores_future_tokens() -> None:
    module, params = _init_mha()
    inputs = random_normal((BATCH, LEN_Q, D_MODEL), 11)
    mask = masks.make_causal_mask(LEN_Q)
    before = np.asarray(module.apply({"params": params}, inputs, inputs, mask))
    changed = inputs.copy()
    changed[:, 3] += 5.0
    after = np.asarray(module.apply({"params": params}, changed, changed, mask))
    np.testing.assert_allclose(after[:, :3], before[:, :3], atol=1e-6)
    assert not np.allclose(after[:, 3:], before[:, 3:])


def test_attention_weights_are_sown_and_dropout_needs_einsum() -> None:
    module, params = _init_mha()
    inputs = jnp.asarray(random_normal((BATCH, LEN_Q, D_MODEL), 12))
    _, state = module.apply({"params": params}, inputs, inputs, sow_weights=True, mutable=["intermediates"])
    (weights,) = state["intermediates"]["attention_weights"]
    assert weights.shape == (BATCH, HEADS, LEN_Q, LEN_Q)
    fused = attention.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, value_dim=VALUE_DIM,
                                         out_dim=D_MODEL, attention_dropout_rate=0.1, implementation="xla")
    with pytest.raises(ValueError, match="attention_dropout_rate"):
        fused.apply({"params": params}, inputs, inputs, deterministic=False,
                    rngs={"dropout": jax.random.key(1)})


def _single_query_case(seed: int):
    """One query per row over 7 keys, 2 heads, d_k 4, d_v 5; row 2 may attend to nothing."""
    rng = np.random.default_rng(seed)
    query = jnp.asarray(rng.normal(size=(3, 1, 2, 4)), jnp.float32)
    key = jnp.asarray(rng.normal(size=(3, 7, 2, 4)), jnp.float32)
    value = jnp.asarray(rng.normal(size=(3, 7, 2, 5)), jnp.float32)
    mask = jnp.asarray(rng.random((3, 1, 1, 7)) < 0.6).at[2].set(False)
    return query, key, value, mask


def test_single_query_decode_attention_equals_the_einsum_path():
    from attention_jax.models import decode_attention

    query, key, value, mask = _single_query_case(0)
    expected = attention.scaled_dot_product_attention(query, key, value, mask)
    found = decode_attention.single_query_attention(query, key, value, mask)
    np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-6)
    assert not np.asarray(found[2]).any()


def test_single_query_attention_over_a_heads_first_cache_equals_the_einsum_path():
    from attention_jax.models import decode_attention

    query, key, value, mask = _single_query_case(2)
    heads_first = functools.partial(jnp.swapaxes, axis1=1, axis2=2)  # [B,S,H,K] -> [B,H,S,K]
    for row_mask in (mask, None):
        expected = attention.scaled_dot_product_attention(query, key, value, row_mask)
        found = decode_attention.cached_single_query_attention(query, heads_first(key), heads_first(value), row_mask)
        assert found.shape == (3, 1, 2, 5)
        np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-6)
    assert not np.asarray(
        decode_attention.cached_single_query_attention(query, heads_first(key), heads_first(value), mask)[2]).any()


def test_single_query_attention_shares_a_key_row_among_its_group_of_query_rows():
    """Beam hypotheses sharing one sentence's keys equal each hypothesis attending to its own copy."""
    from attention_jax.models import decode_attention

    rng = np.random.default_rng(1)
    sentences, group = 3, 4
    query = jnp.asarray(rng.normal(size=(sentences * group, 1, 2, 4)), jnp.float32)
    key = jnp.asarray(rng.normal(size=(sentences, 7, 2, 4)), jnp.float32)
    value = jnp.asarray(rng.normal(size=(sentences, 7, 2, 5)), jnp.float32)
    mask = jnp.asarray(rng.random((sentences, 1, 1, 7)) < 0.6).at[1].set(False)  # Sentence 1 sees nothing.
    repeat = functools.partial(jnp.repeat, repeats=group, axis=0)
    expected = attention.scaled_dot_product_attention(query, repeat(key), repeat(value), repeat(mask))
    found = decode_attention.single_query_attention(query, key, value, mask)
    np.testing.assert_allclose(found, expected, rtol=1e-5, atol=1e-6)
    assert not np.asarray(found[group:2 * group]).any()
    with pytest.raises(ValueError, match="cannot share"):
        decode_attention.single_query_attention(query[:5], key, value, mask)
