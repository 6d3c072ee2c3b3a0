"""Normalisation and residual connections as an ablation axis (issue 76); BatchNorm: test_normalization_batch_norm.py.

Each norm against the NumPy oracle (``tests/support/normalization_reference.py``, from the papers'
equations), outputs and gradients; an encoder layer of every defined combination of normalisation,
position and residual connections against the oracle's layer; parameter counts; the FLOP count; the
undefined combination refused in one line. The slow tests: cached decoding equal to the teacher-forced
pass, cached beam search equal to the uncached one, greedy generation, packed rows equal to each pair alone.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.decoding import decode, generation
from attention_jax.experiment import schema, sections
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import flops, language_model, masks, model, normalization_registry
from tests.support import normalization_reference as oracle
from tests.support import packed_pairs
from tests.support.decoding_helpers import (assert_lm_cached_steps_and_packed_documents, assert_logits_match,
                                            full_logits, incremental_logits, random_batch)
from tests.support.reference import random_normal

SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4, value_dim=6,
                          dropout_rate=0.0, max_len=40)
PER_TOKEN_NORMS = ("layer_norm", "rms_norm")
COMBINATIONS = [(norm, position, residual) for norm in PER_TOKEN_NORMS for position in ("post", "pre")
                for residual in (True, False)] + [("none", "post", True), ("none", "post", False)]
"""Every defined (normalization, layer_norm_position, residual_connections) of the per-token norms."""
COUNTED_COMBINATIONS = COMBINATIONS + [("batch_norm", "post", True), ("batch_norm", "pre", False)]


def _random(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return random_normal(shape, seed, dtype=np.float64)


def _combination_id(combination: tuple[str, str, bool]) -> str:
    norm, position, residual = combination
    return f"{norm}-{position}-{'residual' if residual else 'no_residual'}"


def _variant(norm: str, position: str, residual: bool) -> TransformerConfig:
    return SMALL.replace(normalization=norm, layer_norm_position=position, residual_connections=residual)


# --- Each norm against the oracle ------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("name", PER_TOKEN_NORMS)
def test_each_norm_equals_the_oracle_in_outputs_and_gradients(name: str) -> None:
    module = normalization_registry.normalization(name).build(SMALL, "norm")
    x = _random((2, 3, 5), 0) * 3 + 1  # Off-centre and wide: centring and scaling both show.
    params = nn.meta.unbox(module.init(jax.random.key(0), jnp.asarray(x, jnp.float32))["params"])
    params = {key: _random(value.shape, 1 + index) for index, (key, value) in enumerate(sorted(params.items()))}
    assert set(params) == ({"scale", "bias"} if name == "layer_norm" else {"scale"})
    weights = _random(x.shape, 7)  # A loss that weighs every output differently.

    def ours(x_in: jax.Array, p: dict) -> jax.Array:
        return jnp.sum(module.apply({"params": p}, x_in, None, deterministic=True) * weights)

    def theirs(x_in: np.ndarray, p: dict) -> float:
        return float(np.sum(oracle.normalize(name, p, x_in) * weights))

    as_float32 = {key: jnp.asarray(value, jnp.float32) for key, value in params.items()}
    output = module.apply({"params": as_float32}, jnp.asarray(x, jnp.float32), None, deterministic=True)
    np.testing.assert_allclose(output, oracle.normalize(name, params, x), atol=1e-5, rtol=1e-5)
    x_gradient, params_gradient = jax.grad(ours, argnums=(0, 1))(jnp.asarray(x, jnp.float32), as_float32)
    np.testing.assert_allclose(x_gradient, oracle.numerical_gradient(lambda v: theirs(v, params), x),
                               atol=2e-4, rtol=2e-4)
    for key in params:
        def of_param(value: np.ndarray, key: str = key) -> float:
            return theirs(x, {**params, key: value})

        np.testing.assert_allclose(params_gradient[key], oracle.numerical_gradient(of_param, params[key]),
                                   atol=2e-4, rtol=2e-4)


@pytest.mark.reference
@pytest.mark.parametrize("combination", COMBINATIONS, ids=_combination_id)
def test_encoder_layer_of_every_combination_equals_the_oracle(combination: tuple[str, str, bool]) -> None:
    norm, position, residual = combination
    config = _variant(norm, position, residual)
    layer = model.EncoderLayer(config)
    x = _random((2, 5, config.d_model), 4).astype(np.float32)
    valid = np.arange(5)[None, :] < np.array([[5], [3]])
    mask = np.asarray(masks.make_padding_mask(jnp.asarray(valid), jnp.asarray(valid)))
    params = nn.meta.unbox(layer.init(jax.random.key(1), x, mask, deterministic=True)["params"])
    numpy_params = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)
    for block in ("attention_block", "ffn_block"):  # Norm parameters away from their initial ones and zeros.
        for key, value in numpy_params.get(block, {}).get("layer_norm", {}).items():
            numpy_params[block]["layer_norm"][key] = value + 0.3 * _random(value.shape, len(key))
    ours = layer.apply({"params": jax.tree_util.tree_map(jnp.asarray, numpy_params)}, x, mask, deterministic=True)
    expected = oracle.encoder_layer(numpy_params, x.astype(np.float64), mask, normalization=norm,
                                    pre=position == "pre", residual=residual)
    np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=1e-4)
    other = oracle.encoder_layer(numpy_params, x.astype(np.float64), mask, normalization=norm,
                                 pre=position == "pre", residual=not residual)
    assert not np.allclose(ours, other, atol=1e-2)  # The residual connection really is there or not.
    assert ("layer_norm" in params.get("attention_block", {})) == (norm != "none")


# --- Counts -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("model_kind", language_model.MODEL_KINDS)
@pytest.mark.parametrize("combination", COUNTED_COMBINATIONS, ids=_combination_id)
def test_parameter_counts_change_by_the_norms_alone(combination: tuple[str, str, bool], model_kind: str) -> None:
    norm, position, residual = combination
    config = _variant(norm, position, residual)
    counted = model.count_params(language_model.abstract_params(config, model_kind))
    decoder_only = model_kind == "decoder_only"
    norms = oracle.norm_param_count(norm, d_model=16, num_layers=2, decoder_only=decoder_only, pre=position == "pre")
    assert normalization_registry._norm_params(norm, d_model=16, num_layers=2, model_kind=model_kind,
                                              position=position) == norms
    paper = language_model.abstract_params(SMALL, model_kind)  # Post-LN LayerNorm with residuals.
    paper_norms = oracle.norm_param_count("layer_norm", d_model=16, num_layers=2, decoder_only=decoder_only,
                                          pre=False)
    assert counted - norms == model.count_params(paper) - paper_norms
    if not decoder_only:
        from tests.support import reference

        assert model.count_params(paper) == reference.transformer_param_count(40, 2, 16, 24, 2, 4, 6)


def test_the_flop_count_leaves_norms_and_residual_sums_out() -> None:
    """Norms and residual additions are elementwise: outside the model-FLOP count (``models/flops.py``)."""
    for model_kind in language_model.MODEL_KINDS:
        counts = {flops.training_flops(_variant(*combination), model_kind, 1000.0, 16)
                  for combination in COUNTED_COMBINATIONS}
        assert counts == {flops.training_flops(SMALL, model_kind, 1000.0, 16)}


# --- Refusals ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, message", [
    ({"normalization": "none", "layer_norm_position": "pre"},
     "normalization='none' (no normalisation: the residual sum (or the sublayer's output) as it is) needs "
     "layer_norm_position='post'; got 'pre'."),
    ({"normalization": "rms_nrom"}, "normalization must be one of ('layer_norm', 'rms_norm', 'batch_norm', 'none'); "
                                    "got 'rms_nrom'. "
                               "Did you mean 'rms_norm'?"),
    ({"residual_connections": "no"}, "residual_connections must be True or False; got 'no' (str)."),
])
def test_undefined_combinations_are_refused_in_one_line(changes: dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        SMALL.replace(**changes)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_the_experiment_refuses_before_anything_is_written() -> None:
    config = schema.default_config()
    config.update(normalization="none", layer_norm_position="pre")
    with pytest.raises(schema.ConfigError, match=r"^--config=x.py: normalization='none'") as raised:
        sections.build_experiment(config, "--config=x.py")
    assert "\n" not in str(raised.value)
    config.update(normalization="rms_norm", residual_connections=False)
    experiment = sections.build_experiment(config, "--config=x.py")
    assert (experiment.model.normalization, experiment.model.residual_connections) == ("rms_norm", False)
    old_run = {key: value for key, value in config.items() if key not in ("normalization", "residual_connections")}
    old_model = sections.build_experiment(schema.with_old_run_defaults(old_run), "run").model
    assert (old_model.normalization, old_model.residual_connections) == ("layer_norm", True)


def test_a_registered_normalization_is_accepted_and_undone() -> None:
    entry = normalization_registry.Normalization(
        name="scaled_identity", summary="x as it is", build=lambda config, name: None,
        params_per_norm=lambda d_model: 0)
    with normalization_registry._register_normalization(entry):
        assert SMALL.replace(normalization="scaled_identity").normalization == "scaled_identity"
    with pytest.raises(ValueError, match="normalization must be one of"):
        SMALL.replace(normalization="scaled_identity")
    with pytest.raises(ValueError, match="positions must be a non-empty subset"):
        normalization_registry.Normalization(name="x", summary="x", build=lambda config, name: None,
                                             params_per_norm=lambda d_model: 0, positions=("middle",))


# --- Decoding, search, generation, packing (slow: jitted loops) --------------------------------------

DECODE_COMBINATIONS = [("rms_norm", "post", True), ("rms_norm", "pre", True), ("layer_norm", "pre", False),
                       ("none", "post", True), ("layer_norm", "post", False)]


def _transformer_params(config: TransformerConfig, seed: int) -> dict:
    ids = jnp.ones((1, 4), jnp.int32)
    return nn.meta.unbox(model.Transformer(config).init(jax.random.key(seed), ids, ids)["params"])


@pytest.mark.slow
@pytest.mark.parametrize("combination", DECODE_COMBINATIONS, ids=_combination_id)
def test_cached_decoding_equals_the_teacher_forced_pass(combination: tuple[str, str, bool]) -> None:
    config = _variant(*combination)
    params = _transformer_params(config, 1)
    inputs, targets, _ = random_batch(0, batch=2, source_len=6, target_len=8)
    full = full_logits(params, inputs, targets, model_config=config)
    assert_logits_match(incremental_logits(params, inputs, targets, model_config=config), full)


@pytest.mark.slow
@pytest.mark.parametrize("combination", DECODE_COMBINATIONS, ids=_combination_id)
def test_cached_beam_search_equals_the_uncached_search(combination: tuple[str, str, bool]) -> None:
    config = _variant(*combination)
    params = _transformer_params(config, 3)
    inputs, _, _ = random_batch(2, batch=2, source_len=5, target_len=1)
    max_lengths = jnp.array([10, 14], jnp.int32)
    results = [jax.tree.map(np.asarray, decode.decode_batch(params, inputs, max_lengths, model_config=config,
                                                            beam_size=2, max_decode_len=16, use_cache=use_cache))
               for use_cache in (True, False)]
    np.testing.assert_allclose(results[0].scores, results[1].scores, atol=1e-4)
    if config.residual_connections:
        np.testing.assert_array_equal(results[0].tokens, results[1].tokens)
    else:  # Lower hypotheses can tie to float rounding: the token moves, the score stays (measured 2e-6).
        np.testing.assert_array_equal(results[0].tokens[:, 0], results[1].tokens[:, 0])


@pytest.mark.slow
@pytest.mark.parametrize("combination", DECODE_COMBINATIONS, ids=_combination_id)
def test_language_model_decodes_generates_and_keeps_documents_apart(combination: tuple[str, str, bool]) -> None:
    config = _variant(*combination)
    lm, params = assert_lm_cached_steps_and_packed_documents(config)
    prompt = [5, 9, 12]
    settings = generation.SamplingSettings(temperature=0.0, max_new_tokens=8)
    generated = generation.Generator(config, params, tokenizer=None).generate_ids([prompt], settings)[0]
    sequence = [model.BOS_ID, *prompt, *generated]
    logits = np.array(lm.apply({"params": params}, jnp.asarray([sequence[1:]])))  # Reads sequence[:-1].
    logits[..., [model.PAD_ID, model.UNK_ID, model.BOS_ID]] = -np.inf  # Never generated.
    np.testing.assert_array_equal(logits[0, len(prompt):].argmax(-1), generated)


@pytest.mark.slow
@pytest.mark.parametrize("name", PER_TOKEN_NORMS)
def test_packed_pairs_equal_each_pair_alone(name: str) -> None:
    """A per-token norm reads one token's features: a packed pair's logits are those of the pair alone."""
    config = packed_pairs.SMALL.replace(normalization=name, layer_norm_position="pre")
    params = packed_pairs.init_transformer(config)
    packed, alone = packed_pairs.packed_and_alone(packed_pairs.random_pairs(5, seed=0, max_words=4),
                                                  packed_pairs.ROWS)
    packed_logits = packed_pairs.logits_of(config, params, packed)
    segments = np.asarray(packed["targets_segmentation"])
    for row, members in enumerate(packed_pairs.ROWS.tolist()):
        for segment, pair in enumerate((p for p in members if p >= 0), start=1):
            positions = np.flatnonzero(segments[row] == segment)
            expected = packed_pairs.logits_of(config, params, alone[pair])[0, :len(positions)]
            np.testing.assert_allclose(packed_logits[row, positions], expected, atol=2e-5, rtol=2e-5)
