"""Attention maps against the NumPy reference of the paper's equations, and their plot."""

from __future__ import annotations

import flax.linen as nn
import numpy as np
import pytest

from attention_jax.evaluation import attention_maps, attention_plots
from attention_jax.models.model import BOS_ID
from tests.support import reference
from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params

SOURCE, TARGET = "w5 w6 w7 w8", "w10 w11 w12"


@pytest.fixture(scope="module")
def params():
    return nn.meta.unbox(init_params(TINY, seed=11))


@pytest.fixture(scope="module")
def maps(params):
    return attention_maps.attention_maps(TINY, params, WordTokenizer(), SOURCE, TARGET, settings=SHORT)


def _weights(attention_params: dict, inputs_q: np.ndarray, inputs_kv: np.ndarray, mask: np.ndarray) -> np.ndarray:
    def project(x, name):
        return np.einsum("bld,dhk->blhk", x, np.asarray(attention_params[name]["kernel"], np.float64)) + \
            np.asarray(attention_params[name]["bias"], np.float64)

    query, key = project(inputs_q, "query"), project(inputs_kv, "key")
    _, weights = reference.attention(query, key, project(inputs_kv, "value"), mask)
    return weights[0]  # [H,T,S]


def _embed(params: dict, ids: list[int]) -> np.ndarray:
    table = np.asarray(params["shared_embedding"]["embedding"], np.float64)
    return (table[ids] * np.sqrt(TINY.d_model) + reference.sinusoidal_encoding(len(ids), TINY.d_model))[None]


@pytest.mark.integration
@pytest.mark.reference
def test_maps_equal_the_numpy_reference(params, maps):
    tokenizer = WordTokenizer()
    source_ids, target_ids = tokenizer.encode(SOURCE), tokenizer.encode(TARGET)
    decoder_ids = [BOS_ID] + target_ids[:-1]
    length_s, length_t = len(source_ids), len(target_ids)

    encoder_states = [_embed(params, source_ids)]
    full = np.ones((1, 1, length_s, length_s), bool)
    for layer in range(TINY.num_layers):
        layer_params = params[f"encoder_{layer}"]
        expected = _weights(layer_params["self_attention"], encoder_states[-1], encoder_states[-1], full)
        np.testing.assert_allclose(maps["encoder"][layer], expected, atol=2e-5)
        encoder_states.append(reference.encoder_layer(layer_params, encoder_states[-1], full, post_norm=True))
    encoded = encoder_states[-1]

    decoder_0 = params["decoder_0"]
    y = _embed(params, decoder_ids)
    causal = np.tril(np.ones((length_t, length_t), bool))[None, None]
    np.testing.assert_allclose(maps["decoder"][0], _weights(decoder_0["self_attention"], y, y, causal), atol=2e-5)
    y = reference.layer_norm(decoder_0["self_attention_block"]["layer_norm"],
                             y + reference.multi_head_attention(decoder_0["self_attention"], y, y, causal))
    cross_mask = np.ones((1, 1, length_t, length_s), bool)
    np.testing.assert_allclose(maps["cross"][0], _weights(decoder_0["cross_attention"], y, encoded, cross_mask),
                               atol=2e-5)


def test_maps_shapes_and_token_labels(maps):
    layers, heads = TINY.num_layers, TINY.num_heads
    assert maps["encoder"].shape == (layers, heads, 5, 5)
    assert maps["decoder"].shape == (layers, heads, 4, 4)
    assert maps["cross"].shape == (layers, heads, 4, 5)
    assert maps["source_tokens"] == ["w5", "w6", "w7", "w8", "</s>"]
    assert maps["target_tokens"] == ["w10", "w11", "w12", "</s>"]
    assert maps["decoder_input_tokens"] == ["<s>", "w10", "w11", "w12"]
    for kind in attention_maps.ATTENTION_KINDS:
        np.testing.assert_allclose(maps[kind].sum(-1), 1.0, atol=1e-5)
    assert not np.triu(maps["decoder"], k=1).any()  # Masked (causal) decoder self-attention.


@pytest.mark.integration
def test_maps_of_the_models_own_translation(params):
    maps = attention_maps.attention_maps(TINY, params, WordTokenizer(), SOURCE, settings=SHORT)
    from attention_jax.decoding import decode

    translator = decode.Translator(TINY, params, WordTokenizer(), settings=SHORT, batch_size=1)
    assert maps["target"] == translator.translate([SOURCE])[0]
    assert maps["target_tokens"][-1] == "</s>"
    assert maps["cross"].shape[2] == len(maps["target_tokens"])


def test_draw_attention_writes_a_png(maps, tmp_path):
    out = tmp_path / "cross.png"
    attention_plots.draw_attention(maps, "cross", -1, attention_plots.select_heads(TINY.num_heads, "all"), str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    attention_plots.draw_attention(maps, "decoder", 0, [1], str(tmp_path / "decoder.png"))
    with pytest.raises(ValueError, match="out of range"):
        attention_plots.draw_attention(maps, "encoder", 5, [0], str(tmp_path / "bad.png"))
    with pytest.raises(ValueError, match="'all' or an integer"):
        attention_plots.select_heads(4, "first")
    assert attention_plots.select_heads(4, "-1") == [3]


def test_attention_figure_leaves_the_backend_alone(maps):
    import matplotlib

    backend_before = matplotlib.get_backend()
    heads = attention_plots.select_heads(TINY.num_heads, "all")
    figure = attention_plots._attention_figure(maps, "cross", -1, heads)
    assert matplotlib.get_backend() == backend_before  # A notebook keeps its inline backend.
    images = [axis.images[0].get_array() for axis in figure.axes if axis.images]
    assert len(images) == len(heads)
    last_layer = maps["cross"][-1]
    for head, image in zip(heads, images):
        np.testing.assert_array_equal(np.asarray(image), last_layer[head])  # Panel h shows head h.
    first_axis = figure.axes[0]
    assert [tick.get_text() for tick in first_axis.get_xticklabels()] == list(maps["source_tokens"])
    assert [tick.get_text() for tick in first_axis.get_yticklabels()] == list(maps["target_tokens"])
