"""Fast checks written for mutants of ``attention_jax/models/`` that survived the fast tier (docs/testing.md,
"Mutation score of models/"): each compares with the NumPy oracle (``tests/support/reference.py``) or a formula.
"""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import attention, attention_functions, language_model, model
from attention_jax.training import sharding
from tests.support import reference
from tests.support.decoding_helpers import assert_logits_match, full_logits, incremental_logits, random_batch
from tests.support.reference import random_normal

SMALL = TransformerConfig(vocab_size=12, num_layers=2, d_model=8, d_ff=16, num_heads=2, key_dim=4, value_dim=4,
                          dropout_rate=0.0, max_len=8)
SEGMENTS = np.array([[1, 1, 2, 2, 2, 0], [1, 2, 2, 3, 3, 3]])
"""Two packed rows: pair ids per position, 0 = padding."""


def _packed_dense_mask(causal: bool) -> np.ndarray:
    """``[B, 1, T, T]``: same nonzero segment (and ``s <= t`` when causal), written without the library."""
    same = (SEGMENTS[:, :, None] == SEGMENTS[:, None, :]) & (SEGMENTS[:, :, None] != 0)
    if causal:
        same &= np.tril(np.ones((SEGMENTS.shape[1],) * 2, bool))
    return same[:, None]


@pytest.mark.reference
@pytest.mark.parametrize("causal", [False, True], ids=["packed", "packed_causal"])
def test_linear_attention_on_packed_segments_equals_the_oracle(causal: bool) -> None:
    """Packed linear attention equals the oracle (the integration tier's all-function test also checks it).

    Chunks of 4 make the causal sums cross a chunk boundary.

    Parameters
    ----------
    causal : bool
        The causal form (chunked running sums) or the non-causal one (segment sums).
    """
    length, heads = SEGMENTS.shape[1], 2
    query, key = random_normal((2, length, heads, 4), 0), random_normal((2, length, heads, 4), 1)
    value = random_normal((2, length, heads, 3), 2)
    segments = jnp.asarray(SEGMENTS)
    mask = attention_functions.StructuredMask(query_valid=segments != 0, key_valid=segments != 0,
                                              query_segments=segments, key_segments=segments, causal=causal)
    ours = jax.jit(lambda q, k, v, m: attention_functions.linear_attention(q, k, v, m, chunk_size=4))(
        query, key, value, mask)
    expected = reference.linear_attention(*(np.float64(a) for a in (query, key, value)), _packed_dense_mask(causal))
    np.testing.assert_allclose(ours, expected, atol=2e-5)


def test_every_attention_sows_its_weights_for_the_maps() -> None:
    """Each sublayer sows a distribution over the keys its mask allows (evaluation/attention_maps.py)."""
    inputs, targets = jnp.array([[5, 6, 7, 3, 0, 0], [8, 9, 3, 0, 0, 0]]), jnp.array([[4, 5, 3], [6, 3, 0]])
    transformer = model.Transformer(SMALL)
    params = flax.linen.meta.unbox(jax.jit(transformer.init)(jax.random.key(0), inputs, targets)["params"])
    _, state = jax.jit(lambda p: transformer.apply({"params": p}, inputs, targets, sow_weights=True,
                                                   mutable=["intermediates"]))(params)
    source, target = np.asarray(inputs) != 0, np.asarray(targets) != 0
    causal = np.tril(np.ones((3, 3), bool))
    allowed = {"self_attention": (source[:, :, None] & source[:, None, :], "encoder"),
               "decoder_self": (target[:, :, None] & target[:, None, :] & causal, "decoder"),
               "cross_attention": (target[:, :, None] & source[:, None, :], "decoder")}
    for layer in range(SMALL.num_layers):
        for name, (mask, stack) in allowed.items():
            sublayer = "self_attention" if name == "decoder_self" else name
            weights = np.asarray(state["intermediates"][f"{stack}_{layer}"][sublayer]["attention_weights"][0])
            mask = np.broadcast_to(mask[:, None], weights.shape)  # [B, H, T, S]
            assert np.all(weights[~mask] == 0), (stack, layer, name)
            rows = mask.any(-1)
            np.testing.assert_allclose(weights.sum(-1)[rows], 1.0, atol=1e-5)


@pytest.mark.reference
def test_attention_dropout_acts_in_training_only() -> None:
    """Section 5.4 drops out during training: at evaluation a layer with attention dropout is the oracle's."""
    module = attention.MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3, out_dim=8, attention_dropout_rate=0.5)
    inputs = jnp.asarray(random_normal((2, 5, 8), 3))
    params = flax.linen.meta.unbox(jax.jit(module.init)(jax.random.key(0), inputs, inputs)["params"])
    apply = jax.jit(lambda p, deterministic: module.apply({"params": p}, inputs, inputs, deterministic=deterministic,
                                                          rngs={"dropout": jax.random.key(1)}), static_argnums=1)
    expected = reference.multi_head_attention(jax.tree.map(np.float64, params), np.float64(inputs),
                                              np.float64(inputs), None)
    np.testing.assert_allclose(apply(params, True), expected, atol=2e-5)
    assert not np.allclose(apply(params, False), expected, atol=1e-2)


@pytest.mark.parametrize("changes", [{"positional_encoding": "relative"}, {"attention_function": "additive"}],
                         ids=["relative", "additive"])
def test_cached_decoding_through_the_score_paths_equals_the_full_pass(changes: dict) -> None:
    """The key/value cache of the paths that add to or replace ``q k^T``: one layer, four steps.

    The slow tier checks every encoding and beam search.

    Parameters
    ----------
    changes : dict
        The model's score path: relative positions or additive attention.
    """
    config = SMALL.replace(vocab_size=40, num_layers=1, **changes)
    inputs, targets, _ = random_batch(0, batch=2, source_len=5, target_len=4)
    init = jax.jit(model.Transformer(config).init)
    params = flax.linen.meta.unbox(init(jax.random.key(1), inputs, targets)["params"])
    assert_logits_match(incremental_logits(params, inputs, targets, model_config=config),
                        full_logits(params, inputs, targets, model_config=config))


@pytest.mark.parametrize("kind", language_model.MODEL_KINDS)
def test_every_parameter_names_logical_axes_the_sharding_rules_know(kind: str) -> None:
    """An axis the rules do not name is replicated without a word: tensor parallelism would miss it.

    Parameters
    ----------
    kind : str
        The encoder-decoder or the language model.
    """
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), (sharding.DATA_AXIS, sharding.MODEL_AXIS))
    known = {name for name, _ in sharding.logical_axis_rules("fsdp", mesh)}
    config = SMALL.replace(positional_encoding="relative")
    specs = flax.linen.get_partition_spec(language_model.abstract_params(config, kind))
    for path, spec in flax.traverse_util.flatten_dict(flax.core.unfreeze(specs)).items():
        assert {axis for axis in spec if axis is not None} <= known, ("/".join(path), spec)
