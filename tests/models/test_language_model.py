"""The decoder-only language model: reuse of the encoder-decoder's layers, causality, packing, cache."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import language_model, masks, model
from tests.support import reference

SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4,
                          value_dim=6, dropout_rate=0.0, max_len=32)


def _ids(shape: tuple[int, int], seed: int) -> jnp.ndarray:
    return jnp.asarray(np.random.default_rng(seed).integers(4, SMALL.vocab_size, size=shape), jnp.int32)


def _init(cfg: TransformerConfig, targets: jnp.ndarray) -> dict:
    return nn.meta.unbox(language_model.LanguageModel(cfg).init(jax.random.key(0), targets)["params"])


@pytest.mark.integration
def test_layers_are_the_encoder_decoder_layers_with_the_same_outputs() -> None:
    """Give the LM's layer the encoder-decoder's layer parameters: its output equals that layer's."""
    targets = _ids((2, 6), 0)
    seq2seq = nn.meta.unbox(model.Transformer(SMALL).init(jax.random.key(1), targets, targets)["params"])
    params = _init(SMALL, targets)
    assert jax.tree.structure(params["layer_0"]) == jax.tree.structure(seq2seq["encoder_0"])
    params["layer_0"] = seq2seq["encoder_0"]
    lm = language_model.LanguageModel(SMALL)
    _, state = lm.apply({"params": params}, targets, capture_intermediates=True, mutable=["intermediates"])
    lm_layer_output = state["intermediates"]["layer_0"]["__call__"][0]
    embedded = lm.apply({"params": params}, model._shift_right(targets), method=lambda m, ids: model._embed_tokens(
        SMALL, m.embedding, m.position, m.embedding_dropout, ids, deterministic=True))
    causal = masks.combine_masks(masks.make_padding_mask(targets != 0, targets != 0),
                                     masks.make_causal_mask(targets.shape[1]))
    expected = model.EncoderLayer(SMALL).apply({"params": seq2seq["encoder_0"]}, embedded, causal,
                                               deterministic=True)
    np.testing.assert_allclose(lm_layer_output, expected, atol=1e-6)
    assert not any("cross_attention" in jax.tree_util.keystr(path)
                   for path, _ in jax.tree_util.tree_flatten_with_path(params)[0])


@pytest.mark.integration
@pytest.mark.reference
def test_logits_are_scaled_shared_embedding_projection_of_last_layer() -> None:
    targets = _ids((2, 5), 1)
    params = _init(SMALL, targets)
    table = np.asarray(params["shared_embedding"]["embedding"])
    lm = language_model.LanguageModel(SMALL)
    logits, state = lm.apply({"params": params}, targets, capture_intermediates=True, mutable=["intermediates"])
    last = np.asarray(state["intermediates"]["layer_1"]["__call__"][0])
    np.testing.assert_allclose(logits, last @ table.T, atol=1e-4)
    embedded = lm.apply({"params": params}, targets, method=lambda m, ids: model._embed_tokens(
        SMALL, m.embedding, m.position, m.embedding_dropout, ids, deterministic=True))
    expected = table[np.asarray(targets)] * np.sqrt(SMALL.d_model) + reference.sinusoidal_encoding(5, 16)
    np.testing.assert_allclose(embedded, expected, atol=1e-5)


@pytest.mark.integration
def test_logits_never_depend_on_later_tokens() -> None:
    targets = _ids((1, 8), 2)
    params = _init(SMALL, targets)
    lm = language_model.LanguageModel(SMALL)
    changed = targets.at[0, 5].set(7 if int(targets[0, 5]) != 7 else 8)
    before, after = lm.apply({"params": params}, targets), lm.apply({"params": params}, changed)
    np.testing.assert_allclose(before[:, :6], after[:, :6], atol=1e-6)  # Input t reads targets[:t].
    assert not np.allclose(before[:, 6:], after[:, 6:], atol=1e-4)


@pytest.mark.parametrize("layer_norm_position", ["post", "pre"])
def test_packed_documents_never_attend_to_each_other(layer_norm_position: str) -> None:
    cfg = SMALL.replace(layer_norm_position=layer_norm_position)
    first, second = _ids((1, 4), 3), _ids((1, 5), 4)
    packed = jnp.concatenate([first, second, jnp.zeros((1, 2), jnp.int32)], axis=1)  # [1, 11]
    segmentation = jnp.array([[1] * 4 + [2] * 5 + [0] * 2])
    positions = jnp.array([[0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 0]])
    params = _init(cfg, packed)
    lm = language_model.LanguageModel(cfg)
    together = lm.apply({"params": params}, packed, targets_segmentation=segmentation,
                        targets_position=positions)
    np.testing.assert_allclose(together[:, :4], lm.apply({"params": params}, first), atol=1e-5)
    np.testing.assert_allclose(together[:, 4:9], lm.apply({"params": params}, second), atol=1e-5)


@pytest.mark.integration
@pytest.mark.parametrize("variant", [{}, {"layer_norm_position": "pre"}, {"positional_encoding": "learned"},
                                     {"share_embeddings": False}])
def test_cached_decoding_equals_the_uncached_forward_pass(variant: dict) -> None:
    cfg = SMALL.replace(**variant)
    targets = _ids((2, 7), 5)
    params = _init(cfg, targets)
    full = language_model.LanguageModel(cfg).apply({"params": params}, targets)  # [2, 7, N]
    decoder = language_model.LanguageModel(cfg.replace(decode=True))
    inputs = model._shift_right(targets)
    cache = decoder.init(jax.random.key(0), targets)["cache"]
    cache = jax.tree.map(jnp.zeros_like, cache)
    for position in range(targets.shape[1]):
        step_logits, updated = decoder.apply({"params": params, "cache": cache}, inputs[:, position, None],
                                             method=language_model.LanguageModel.logits, mutable=["cache"])
        cache = updated["cache"]
        np.testing.assert_allclose(step_logits[:, 0], full[:, position], atol=2e-5)


@pytest.mark.integration
def test_build_model_and_init_arguments_follow_the_model_kind() -> None:
    assert isinstance(language_model.build_model(SMALL, "decoder_only"), language_model.LanguageModel)
    assert isinstance(language_model.build_model(SMALL, "encoder_decoder"), model.Transformer)
    with pytest.raises(ValueError, match="model_kind must be one of"):
        language_model.build_model(SMALL, "encoder_only")
    shapes = language_model.abstract_params(SMALL, "decoder_only")
    assert model.count_params(shapes) == model.count_params(_init(SMALL, _ids((1, 3), 0)))
