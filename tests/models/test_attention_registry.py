"""The registries of attention functions and positional encodings (issue 61): names, support flags, FLOPs,
and the worked examples of adding an entry (a temperature attention function, a scaled positional encoding).

Adding an attention function is one :class:`attention_registry.AttentionFunction` entry, registered with
:func:`attention_registry.register_attention_function`; adding a positional encoding is one
:class:`positional_encodings.PositionalEncodingScheme`, registered with
:func:`positional_encodings.register_positional_encoding`. Both return a registration that undoes itself
at the end of a ``with`` block, which keeps these tests from leaking entries into others.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pydantic
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import attention, attention_registry, flops, language_model, model, positional_encodings
from attention_jax.models.attention_registry import AttentionFunction
from attention_jax.models.positional_encodings import PositionalEncodingScheme, PositionTarget
from tests.support.decoding_helpers import TINY, full_logits, incremental_logits, init_params, random_batch

# --- The registries ----------------------------------------------------------------------------------


def test_validation_accepts_exactly_the_registered_attention_functions() -> None:
    names = tuple(attention_registry.ATTENTION_FUNCTIONS)
    assert names == ("scaled_dot_product", "dot_product", "additive", "linear")
    for name in names:
        assert TINY.replace(attention_function=name).attention_function == name
    with pytest.raises(ValueError) as raised:
        TINY.replace(attention_function="cosine")
    assert str(raised.value) == f"attention_function must be one of {names}; got 'cosine'."


def test_validation_accepts_exactly_the_registered_positional_encodings() -> None:
    names = tuple(positional_encodings.POSITIONAL_ENCODINGS)
    assert names == ("sinusoidal", "learned", "none", "relative", "rotary", "alibi")
    for name in names:
        assert TINY.replace(positional_encoding=name).positional_encoding == name
    with pytest.raises(ValueError, match=r"positional_encoding must be one of \('sinusoidal', 'learned', 'none', "
                                         r"'relative', 'rotary', 'alibi'\)"):
        TINY.replace(positional_encoding="absolute")


@pytest.mark.parametrize("field,typo,suggestion", [
    ("attention_function", "scaled_dotproduct", "scaled_dot_product"),
    ("attention_function", "Linear", "linear"),
    ("positional_encoding", "sinusoid", "sinusoidal"),
    ("positional_encoding", "learnt", "learned"),
])
def test_an_unknown_name_is_a_one_line_error_with_a_did_you_mean(field: str, typo: str, suggestion: str) -> None:
    with pytest.raises(ValueError, match=f"got '{typo}'. Did you mean '{suggestion}'\\?$") as raised:
        TINY.replace(**{field: typo})
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("name", list(attention_registry.ATTENTION_FUNCTIONS))
def test_validation_follows_each_entrys_support_flags(name: str) -> None:
    entry = attention_registry.attention_function(name)
    for implementation in attention.ATTENTION_IMPLEMENTATIONS:
        accepted = _accepts(attention_function=name, attention_implementation=implementation)
        assert accepted == (implementation in entry.implementations), implementation
    assert _accepts(attention_function=name, attention_window=2) == entry.supports_window
    assert _accepts(attention_function=name, attention_dropout_rate=0.1) == entry.supports_attention_dropout
    assert entry.supports_decode_cache and entry.supports_packing  # Every built-in decodes and packs.
    if not entry.supports_weights:
        with pytest.raises(ValueError, match="forms no normalised attention weight matrix"):
            attention_registry.require_weights(name)


def _accepts(**changes: object) -> bool:
    try:
        TINY.replace(**changes)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("name", list(attention_registry.ATTENTION_FUNCTIONS))
def test_every_entry_counts_its_flops(name: str) -> None:
    # A count for every entry, self- and cross-attention, causal or not (test_flops.py checks each against
    # XLA's): per head, at least the q.k-sized term every function pays, 2 T K (one product per query).
    shape = dict(query_len=12, key_len=12, num_heads=2, key_dim=4, value_dim=3)
    for causal in (False, True):
        counted = flops.attention_function_flops(name, **shape, causal=causal)
        assert counted >= 2 * 2 * 12 * 4
    cross = flops.attention_function_flops(name, **{**shape, "key_len": 5})
    assert 0 < cross < flops.attention_function_flops(name, **{**shape, "key_len": 50})


def test_inconsistent_entries_and_duplicate_names_are_refused() -> None:
    def scores(module, query, key):
        return jnp.zeros(())

    with pytest.raises(ValueError, match="give score or attend, not both"):
        AttentionFunction(name="both", summary="", flops=attention_registry.dot_product_flops, score=scores,
                          attend=scores)
    with pytest.raises(ValueError, match="einsum path only"):
        AttentionFunction(name="kernels", summary="", flops=attention_registry.dot_product_flops, score=scores,
                          implementations=("einsum", "xla"))
    with pytest.raises(ValueError, match="'linear' is registered already"):
        attention_registry.register_attention_function(attention_registry.attention_function("linear"))
    registration = attention_registry.register_attention_function(
        AttentionFunction(name="zero_scores", summary="uniform weights", flops=attention_registry.dot_product_flops,
                          score=scores))
    assert "zero_scores" in attention_registry.ATTENTION_FUNCTIONS
    registration.undo()
    assert "zero_scores" not in attention_registry.ATTENTION_FUNCTIONS


# --- Worked example: an attention function with a temperature ---------------------------------------

@pydantic.dataclasses.dataclass(frozen=True, config=pydantic.ConfigDict(strict=True))
class TemperatureSettings:
    """The entry's own setting: ``attention_function_settings.temperature_dot_product.temperature``."""

    temperature: float = pydantic.Field(2.0, description="tau: the scores are divided by tau sqrt(d_k).", gt=0)


TEMPERATURE = 3.0  # The value the worked example sets (not the default), so the setting is seen to reach the model.


def temperature_scores(module: nn.Module, query: jax.Array, key: jax.Array) -> jax.Array:
    """``q k^T / (tau sqrt(d_k))``, float32 ``[B, H, T, S]``: scaled dot products at temperature ``tau``."""
    tau = module.attention_settings.temperature  # The entry's setting, as the config chose it.
    scores = jnp.einsum("bthk,bshk->bhts", query, key, preferred_element_type=jnp.float32)
    return scores / (tau * jnp.sqrt(jnp.float32(query.shape[-1])))


TEMPERATURE_ATTENTION = AttentionFunction(
    name="temperature_dot_product",
    summary="softmax(q k^T / (tau sqrt(d_k))) v, scaled dot products at temperature tau",
    flops=attention_registry.dot_product_flops,  # The same products as Equation (1).
    score=temperature_scores,  # The softmax, masks, dropout, weights and key/value cache come with it.
    settings=TemperatureSettings,
)


def _query_scaled(params: dict, factor: float) -> dict:
    """``params`` with every attention's ``W^Q`` and query bias times ``factor`` (so ``q -> factor q``)."""
    def scale(path: tuple, leaf: jax.Array) -> jax.Array:
        return leaf * factor if "query" in jax.tree_util.keystr(path) else leaf
    return jax.tree_util.tree_map_with_path(scale, params)


@pytest.mark.integration
def test_a_registered_attention_function_trains_decodes_and_is_counted() -> None:
    inputs, targets, _ = random_batch(0, batch=2, source_len=6, target_len=5)
    paper = TINY.replace(dropout_rate=0.0)
    with attention_registry.register_attention_function(TEMPERATURE_ATTENTION):
        config = paper.replace(attention_function="temperature_dot_product",
                               attention_function_settings=TemperatureSettings(temperature=TEMPERATURE))
        params = nn.meta.unbox(init_params(config, seed=3))
        assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
            nn.meta.unbox(init_params(paper, seed=3)))  # No parameters of its own.

        def loss(params: dict) -> jax.Array:
            logits = model.Transformer(config).apply({"params": params}, inputs, targets)
            log_probs = jax.nn.log_softmax(logits)
            return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))

        # Compiled (jax.jit): run op by op, each operation of the gradient compiled on its own.
        value, gradients = jax.jit(jax.value_and_grad(loss))(params)
        logits = full_logits(params, inputs, targets, model_config=config)  # Compiled (tests/decoding/test_decode.py).
        # Independent check: temperature tau is the paper's attention on queries divided by tau.
        paper_logits = full_logits(_query_scaled(params, 1 / TEMPERATURE), inputs, targets, model_config=paper)
        np.testing.assert_allclose(logits, paper_logits, atol=2e-5)
        assert np.isfinite(float(value))
        gradient_norms = [float(jnp.abs(leaf).sum()) for leaf in jax.tree_util.tree_leaves(gradients)]
        assert all(np.isfinite(gradient_norms)) and sum(gradient_norms) > 0
        # The score path brings the key/value cache: incremental decoding equals the forward pass.
        cached = incremental_logits(params, inputs, targets, model_config=config)
        np.testing.assert_allclose(cached, logits, atol=2e-5, rtol=1e-5)
        # Weights for attention maps, and the same FLOPs as the paper's function.
        _, state = model.Transformer(config).apply({"params": params}, inputs, targets, sow_weights=True,
                                                   mutable=["intermediates"])
        weights = state["intermediates"]["encoder_0"]["self_attention"]["attention_weights"][0]
        np.testing.assert_allclose(np.asarray(weights).sum(-1)[0], 1.0, atol=1e-5)
        shape = dict(query_len=9, key_len=7, num_heads=2, key_dim=4, value_dim=3)
        assert flops.attention_function_flops("temperature_dot_product", **shape) == (
            flops.attention_function_flops("scaled_dot_product", **shape))
        with pytest.raises(ValueError, match="needs attention_implementation='einsum'"):
            config.replace(attention_implementation="xla")
    with pytest.raises(ValueError, match="got 'temperature_dot_product'"):  # Gone after the block.
        paper.replace(attention_function="temperature_dot_product")


# --- Worked example: a positional encoding with a learned scale -------------------------------------

def _scaled_sinusoidal(module: nn.Module, positions: jax.Array, config: TransformerConfig) -> jax.Array:
    """``a PE``: the paper's sinusoids times one learned scalar ``a`` (``position_scale``, initialised to 1)."""
    scale = module.param("position_scale", nn.initializers.ones_init(), ())
    return scale * positional_encodings.sinusoidal_positional_encoding(positions, config.d_model)


SCALED_SINUSOIDAL = PositionalEncodingScheme(
    name="scaled_sinusoidal", summary="the paper's sinusoids times a learned scalar",
    encoding=_scaled_sinusoidal, has_parameters=True)


@pytest.mark.integration
@pytest.mark.parametrize("model_kind", ["encoder_decoder", "decoder_only"])
def test_a_registered_positional_encoding_is_added_and_trained(model_kind: str) -> None:
    inputs, targets, _ = random_batch(1, batch=2, source_len=6, target_len=5)
    paper = TINY.replace(dropout_rate=0.0)
    with positional_encodings.register_positional_encoding(SCALED_SINUSOIDAL):
        config = paper.replace(positional_encoding="scaled_sinusoidal")
        module = language_model.build_model(config, model_kind)
        arguments = language_model.init_arguments(module, length=4)
        params = nn.meta.unbox(module.init(jax.random.key(0), *arguments)["params"])
        position_layers = [name for name in params if "position" in name]
        assert position_layers and all(params[name]["position_scale"] == 1.0 for name in position_layers)
        batch = {"inputs": inputs, "targets": targets}

        def loss(params: dict) -> jax.Array:
            return jnp.sum(language_model.apply_to_batch(module, params, batch) ** 2)

        # At a = 1 it is the paper's encoding: the same logits as the sinusoidal model's parameters.
        sinusoidal = {name: layer for name, layer in params.items() if name not in position_layers}
        expected = language_model.apply_to_batch(language_model.build_model(paper, model_kind), sinusoidal, batch)
        np.testing.assert_allclose(language_model.apply_to_batch(module, params, batch), expected, atol=1e-5)
        gradients = jax.jit(jax.grad(loss))(params)
        assert all(abs(float(gradients[name]["position_scale"])) > 0 for name in position_layers)
    with pytest.raises(ValueError, match="got 'scaled_sinusoidal'"):
        paper.replace(positional_encoding="scaled_sinusoidal")


@pytest.mark.integration
def test_a_registered_score_bias_is_applied_in_self_attention_and_refused_where_undefined() -> None:
    """An entry acting on the scores (tests/models/test_positional_encodings.py tests the built-in ones)."""
    def constant_bias(module, settings, query, query_positions, key_positions) -> jax.Array:
        return jnp.zeros((1, 1, query.shape[1], key_positions.shape[1]))

    zero_bias = PositionalEncodingScheme(name="zero_bias", summary="a zero bias on the scores",
                                         target=PositionTarget.ATTENTION_SCORES, score_bias=constant_bias)
    inputs, targets, _ = random_batch(1, batch=2, source_len=6, target_len=5)
    with positional_encodings.register_positional_encoding(zero_bias):
        config = TINY.replace(positional_encoding="zero_bias", dropout_rate=0.0)
        params = init_params(config)
        none = full_logits(params, inputs, targets, model_config=TINY.replace(positional_encoding="none",
                                                                              dropout_rate=0.0))
        np.testing.assert_allclose(full_logits(params, inputs, targets, model_config=config), none, atol=1e-5)
        with pytest.raises(ValueError, match="'zero_bias' adds to each attention's scores") as raised:
            config.replace(attention_function="linear")
        assert "\n" not in str(raised.value)
