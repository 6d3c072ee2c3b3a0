"""The Transformer against the paper: PE, post/pre-LN, shared embeddings, scaling, equivariance, cache."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import masks, model
from tests.support import reference

SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4,
                          value_dim=6, dropout_rate=0.0, max_len=32)


def _ids(shape: tuple[int, int], seed: int, pad_from: int | None = None) -> jnp.ndarray:
    ids = np.random.default_rng(seed).integers(4, SMALL.vocab_size, size=shape)
    if pad_from is not None:
        ids[-1, pad_from:] = model.PAD_ID
    return jnp.asarray(ids, jnp.int32)


def _init(cfg: TransformerConfig, inputs: jnp.ndarray, targets: jnp.ndarray) -> dict:
    return nn.meta.unbox(model.Transformer(cfg).init(jax.random.key(0), inputs, targets)["params"])


@pytest.mark.reference
def test_sinusoidal_encoding_equals_paper_formula() -> None:
    for d_model in (16, 7):
        ours = np.asarray(model.sinusoidal_positional_encoding(jnp.arange(50), d_model))
        np.testing.assert_allclose(ours, reference.sinusoidal_encoding(50, d_model), atol=2e-5)


@pytest.mark.integration
def test_learned_positional_encoding_is_trainable() -> None:
    cfg = SMALL.replace(positional_encoding="learned")
    inputs, targets = _ids((2, 5), 0), _ids((2, 4), 1)
    params = _init(cfg, inputs, targets)
    for name in ("encoder_position", "decoder_position"):
        assert params[name]["position_embedding"].shape == (cfg.max_len, cfg.d_model)
    sinusoidal = _init(SMALL, inputs, targets)
    assert "encoder_position" not in sinusoidal

    def loss(p: dict) -> jnp.ndarray:
        return model.Transformer(cfg).apply({"params": p}, inputs, targets).sum()

    grads = jax.jit(jax.grad(loss))(params)  # Compiled: op by op, each operation compiled on its own.
    assert np.abs(np.asarray(grads["encoder_position"]["position_embedding"])).sum() > 0


def _embed(cfg: TransformerConfig, params: dict, ids: jnp.ndarray) -> jnp.ndarray:
    return model.Transformer(cfg).apply(
        {"params": params}, ids,
        method=lambda m, ids: model._embed_tokens(cfg, m.source_embedding, m.encoder_position,
                                                 m.embedding_dropout, ids, deterministic=True))


@pytest.mark.reference
def test_embeddings_are_scaled_by_sqrt_d_model_and_shared() -> None:
    inputs, targets = _ids((2, 5), 2), _ids((2, 4), 3)
    params = _init(SMALL, inputs, targets)
    embedding_tables = [path for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]
                        if "embedding" in jax.tree_util.keystr(path)]
    assert len(embedding_tables) == 1  # One matrix for encoder input, decoder input, pre-softmax.
    table = np.asarray(params["shared_embedding"]["embedding"])
    embedded = np.asarray(_embed(SMALL, params, inputs))
    expected = table[np.asarray(inputs)] * np.sqrt(SMALL.d_model) + reference.sinusoidal_encoding(5, 16)
    np.testing.assert_allclose(embedded, expected, atol=1e-5)

    # Pre-softmax projection: logits = decoder output @ E^T.
    logits, state = model.Transformer(SMALL).apply(
        {"params": params}, inputs, targets, capture_intermediates=True, mutable=["intermediates"])
    decoder_output = np.asarray(state["intermediates"]["decoder_1"]["__call__"][0])
    np.testing.assert_allclose(logits, decoder_output @ table.T, atol=1e-4)


def test_unshared_embeddings_use_three_matrices() -> None:
    cfg = SMALL.replace(share_embeddings=False)
    params = _init(cfg, _ids((2, 5), 0), _ids((2, 4), 1))
    assert {"source_embedding", "target_embedding", "output_projection"} <= set(params)
    assert "shared_embedding" not in params


@pytest.mark.reference
@pytest.mark.parametrize("position", ["post", "pre"])
def test_encoder_layer_matches_numpy(position: str) -> None:
    cfg = SMALL.replace(layer_norm_position=position)
    layer = model.EncoderLayer(cfg)
    x = np.random.default_rng(4).normal(size=(2, 5, cfg.d_model)).astype(np.float32)
    valid = np.arange(5)[None, :] < np.array([[5], [3]])
    mask = np.asarray(masks.make_padding_mask(jnp.asarray(valid), jnp.asarray(valid)))
    params = nn.meta.unbox(layer.init(jax.random.key(1), x, mask, deterministic=True)["params"])
    ours = layer.apply({"params": params}, x, mask, deterministic=True)
    numpy_params = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)
    expected = reference.encoder_layer(numpy_params, x.astype(np.float64), mask,
                                       post_norm=position == "post")
    np.testing.assert_allclose(ours, expected, atol=1e-4)
    other = reference.encoder_layer(numpy_params, x.astype(np.float64), mask,
                                    post_norm=position != "post")
    assert not np.allclose(ours, other, atol=1e-3)  # The two placements really differ.


def test_pre_norm_adds_a_final_norm_per_stack() -> None:
    params = _init(SMALL.replace(layer_norm_position="pre"), _ids((2, 5), 0), _ids((2, 4), 1))
    assert {"encoder_norm", "decoder_norm"} <= set(params)
    assert "encoder_norm" not in _init(SMALL, _ids((2, 5), 0), _ids((2, 4), 1))


@pytest.mark.integration
def test_encoder_is_permutation_equivariant_only_without_positions() -> None:
    inputs = _ids((1, 6), 5)
    permutation = np.array([3, 0, 5, 1, 4, 2])
    for encoding, equivariant in (("none", True), ("sinusoidal", False)):
        cfg = SMALL.replace(positional_encoding=encoding)
        params = _init(cfg, inputs, _ids((1, 3), 6))
        transformer = model.Transformer(cfg)
        encoded = np.asarray(transformer.apply({"params": params}, inputs, method=model.Transformer.encode))
        permuted = np.asarray(transformer.apply({"params": params}, inputs[:, permutation],
                                                method=model.Transformer.encode))
        assert np.allclose(permuted, encoded[:, permutation], atol=1e-5) == equivariant


@pytest.mark.integration
def test_decoder_is_causal_and_ignores_source_padding() -> None:
    inputs, targets = _ids((2, 6), 7, pad_from=4), _ids((2, 5), 8)
    params = _init(SMALL, inputs, targets)
    transformer = model.Transformer(SMALL)
    logits = np.asarray(transformer.apply({"params": params}, inputs, targets))
    changed_targets = targets.at[:, 3].set(5)  # Target 3 is decoder input 4: positions <= 3 unchanged.
    changed = np.asarray(transformer.apply({"params": params}, inputs, changed_targets))
    np.testing.assert_allclose(changed[:, :4], logits[:, :4], atol=1e-5)
    # A padded source sentence gives the same logits as the unpadded one: padding is invisible.
    unpadded = transformer.apply({"params": params}, inputs[-1:, :4], targets[-1:])
    np.testing.assert_allclose(logits[-1:], unpadded, atol=1e-5)


@pytest.mark.integration
def test_dropout_is_active_only_in_training() -> None:
    cfg = SMALL.replace(dropout_rate=0.3)
    inputs, targets = _ids((2, 5), 9), _ids((2, 4), 10)
    params = _init(cfg, inputs, targets)
    transformer = model.Transformer(cfg)
    evaluation = [transformer.apply({"params": params}, inputs, targets) for _ in range(2)]
    np.testing.assert_array_equal(evaluation[0], evaluation[1])
    training = [transformer.apply({"params": params}, inputs, targets, deterministic=False,
                                  rngs={"dropout": jax.random.key(seed)}) for seed in range(2)]
    assert not np.allclose(training[0], training[1])


@pytest.mark.integration
def test_bfloat16_compute_keeps_float32_params() -> None:
    cfg = SMALL.replace(dtype="bfloat16")
    inputs, targets = _ids((2, 5), 13), _ids((2, 4), 14)
    params = _init(cfg, inputs, targets)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(params))
    logits = model.Transformer(cfg).apply({"params": params}, inputs, targets)
    reference_logits = model.Transformer(SMALL).apply({"params": params}, inputs, targets)
    assert logits.dtype == jnp.float32
    np.testing.assert_allclose(logits, reference_logits, atol=0.1)


@pytest.mark.parametrize("field,value,match", [
    ("d_model", 0, "d_model"),
    ("dropout_rate", -0.1, "dropout_rate"),
    ("dropout_rate", 1.0, "dropout_rate"),
    ("attention_implementation", "flash", "attention_implementation.*einsum"),
    ("positional_encoding", "absolute", "positional_encoding.*sinusoidal"),
    ("layer_norm_position", "sandwich", "layer_norm_position.*post"),
    ("dtype", "float16", "dtype"),
    ("attention_window", -1, "attention_window"),
    ("num_heads", 2.5, "num_heads"),
])
def test_bad_model_config_names_the_field(field: str, value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SMALL.replace(**{field: value})


def test_fused_attention_with_weight_dropout_is_rejected() -> None:
    with pytest.raises(ValueError, match="attention_dropout_rate.*einsum"):
        SMALL.replace(attention_dropout_rate=0.1, attention_implementation="fused")


def test_abstract_params_are_kept_under_the_compilation_cache_and_read_back_without_a_trace(tmp_path, monkeypatch):
    config = SMALL.replace(d_ff=28)  # A config of this test's own: nothing else traced it in this process.
    previous = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        traced = model.abstract_params(config)
        assert len(list((tmp_path / "param_shapes").iterdir())) == 1
        model._traced_abstract_params.cache_clear()
        monkeypatch.setattr(model, "Transformer", None)  # A trace now would fail.
        read = model.abstract_params(config)
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)
    assert jax.tree.structure(read) == jax.tree.structure(traced)
    assert jax.tree.leaves(read) == jax.tree.leaves(traced)
