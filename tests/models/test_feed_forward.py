"""The feed-forward axis (issue 86): every variant against the NumPy oracle, counts, decoding, export, the sweep.

Each entry of ``models/feed_forward_registry.py`` against ``tests/support/reference.feed_forward`` (from
Eq. 2 and Shazeer, 2020), with and without biases; parameter counts (a matched gated variant within 1% of
Eq. 2's at the paper's base size and the small recipe) and the FLOP count against independent counts;
cached decoding equal to the full pass, beam search and generation with a gated variant in both model
kinds; the safetensors and ``jax.export`` paths; an old run's relu parameter tree unchanged; refusals; a
registered entry; ``configs/sweeps/feed_forward.py``.
"""

from __future__ import annotations

import json
import pathlib

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.checkpointing import safetensors_params
from attention_jax.decoding import decode, exported_functions, generation
from attention_jax.experiment import schema, sections
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import feed_forward, feed_forward_registry, flops, language_model, model, size_limits
from tests.support import REPO_ROOT, reference
from tests.support.decoding_helpers import assert_logits_match, full_logits, incremental_logits, random_batch
from tests.support.fake_data import tiny_config
from tests.support.flop_counts import kernel_scalars, xla_flops

VARIANTS = tuple(feed_forward_registry.FEED_FORWARDS)
SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4, value_dim=4,
                          dropout_rate=0.0, max_len=40)
GATED = "swiglu"  # The gated variant the decoding and export paths run.


def _random_params(module: nn.Module, x: jax.Array, seed: int) -> dict:
    """``module``'s parameter tree with every leaf (biases too) drawn from N(0, 0.5^2), as NumPy float64."""
    shapes = nn.meta.unbox(jax.eval_shape(lambda: module.init(jax.random.key(0), x))["params"])
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda leaf: rng.normal(0.0, 0.5, leaf.shape), shapes)


# --- Each variant against the oracle -----------------------------------------------------------------

@pytest.mark.reference
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_equals_the_oracle(variant: str, bias: bool) -> None:
    config = SMALL.replace(feed_forward=variant, feed_forward_bias=bias)
    module = feed_forward.FeedForward(config)
    x = np.random.default_rng(1).normal(0.0, 1.5, (2, 3, config.d_model))
    params = _random_params(module, jnp.asarray(x, jnp.float32), seed=2)
    gated = variant in reference.GATED_FEED_FORWARDS
    assert set(params) == ({"gate", "inner", "outer"} if gated else {"inner", "outer"})
    assert all(("bias" in layer) == bias for layer in params.values())
    ours = module.apply({"params": jax.tree.map(jnp.float32, params)}, jnp.asarray(x, jnp.float32))
    expected = reference.feed_forward(params, x, variant)
    np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=1e-5)
    others = [other for other in VARIANTS if (other in reference.GATED_FEED_FORWARDS) == gated and other != variant]
    for other in others:  # Each variant computes something of its own at these inputs.
        assert not np.allclose(ours, reference.feed_forward(params, x, other), atol=1e-2), other


def test_gelu_is_the_exact_erf_form_not_the_tanh_approximation() -> None:
    h = np.linspace(-4.0, 4.0, 81)
    np.testing.assert_allclose(feed_forward._gelu(jnp.asarray(h, jnp.float32)), reference.gelu_exact(h), atol=1e-6)
    tanh_form = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    assert np.max(np.abs(tanh_form - reference.gelu_exact(h))) > 1e-4  # The two forms are told apart here.


def test_every_matrix_and_bias_of_a_gated_variant_gets_a_gradient() -> None:
    module = feed_forward.FeedForward(SMALL.replace(feed_forward=GATED))
    x = jnp.asarray(np.random.default_rng(5).normal(size=(2, 3, 16)), jnp.float32)
    params = jax.tree.map(jnp.float32, _random_params(module, x, seed=6))
    gradient = jax.grad(lambda p: jnp.sum(module.apply({"params": p}, x) ** 2))(params)
    for name in ("gate", "inner", "outer"):
        for part in ("kernel", "bias"):
            assert np.abs(np.asarray(gradient[name][part])).max() > 0, (name, part)


# --- Counts -------------------------------------------------------------------------------------------

@pytest.mark.reference
@pytest.mark.parametrize("d_model,d_ff", [(512, 2048), (128, 512)], ids=["base", "small_recipe"])
def test_matched_gated_variants_keep_the_parameters_within_one_percent(d_model: int, d_ff: int) -> None:
    paper = reference.feed_forward_param_count("relu", d_model, d_ff)
    x = jax.ShapeDtypeStruct((1, 1, d_model), jnp.float32)
    for variant in VARIANTS:
        for match_params in (True, False):
            for bias in (True, False):
                config = SMALL.replace(d_model=d_model, d_ff=d_ff, feed_forward=variant,
                                       feed_forward_match_params=match_params, feed_forward_bias=bias)
                shapes = jax.eval_shape(feed_forward.FeedForward(config).init, jax.random.key(0), x)
                counted = model.count_params(shapes["params"])
                expected = reference.feed_forward_param_count(variant, d_model, d_ff, match_params, bias)
                assert counted == expected == feed_forward_registry._feed_forward_params(
                    variant, d_model=d_model, d_ff=d_ff, match_params=match_params, bias=bias), variant
        matched = reference.feed_forward_param_count(variant, d_model, d_ff)
        assert abs(matched / paper - 1) < 0.01, variant
        if variant in reference.GATED_FEED_FORWARDS:  # Unmatched: three matrices of d_ff, half as many again.
            assert reference.feed_forward_param_count(variant, d_model, d_ff, False) == pytest.approx(1.5 * paper,
                                                                                                      rel=0.01)


@pytest.mark.parametrize("model_kind", language_model.MODEL_KINDS)
def test_whole_model_counts_and_the_size_estimate_follow_the_variant(model_kind: str) -> None:
    layers = 2 if model_kind == "decoder_only" else 4  # Feed-forward sublayers of a 2-layer model.
    fields = dict(schema.default_config().items(), d_model=16, d_ff=24, num_heads=2, key_dim=4, value_dim=4,
                  num_layers=2, vocab_size=40, model_kind=model_kind)
    paper_count = model.count_params(language_model.abstract_params(SMALL, model_kind))
    paper_estimate = size_limits.estimated_parameters(fields)
    for variant in ("geglu", "bilinear", "gelu"):
        config = SMALL.replace(feed_forward=variant)
        count = model.count_params(language_model.abstract_params(config, model_kind))
        ffn_change = (reference.feed_forward_param_count(variant, 16, 24)
                      - reference.feed_forward_param_count("relu", 16, 24))
        assert count - paper_count == layers * ffn_change, variant
        if model_kind == "encoder_decoder":
            assert count == reference.transformer_param_count(40, 2, 16, 24, 2, 4, 4, feed_forward=variant)
        unbiased = (reference.feed_forward_param_count(variant, 16, 24, bias=False)
                    - reference.feed_forward_param_count("relu", 16, 24, bias=False))
        estimate = size_limits.estimated_parameters({**fields, "feed_forward": variant})
        assert estimate - paper_estimate == layers * unbiased, variant  # The estimate leaves biases out.


@pytest.mark.parametrize("model_kind", language_model.MODEL_KINDS)
def test_training_flops_count_three_matrices_and_the_gate_product(model_kind: str) -> None:
    from tests.support.fake_data import tiny_experiment

    experiment = tiny_experiment(model_kind=model_kind, max_len=16, d_ff=48, vocab_size=50, feed_forward=GATED)
    config, length = experiment.model, experiment.data.max_len
    params = language_model.abstract_params(config, model_kind)
    ffn = nn.meta.unbox(params["layer_0" if model_kind == "decoder_only" else "encoder_0"]["ffn"])
    width = ffn["gate"]["kernel"].shape[-1]
    scores = 2 * length * config.num_heads * (config.key_dim + config.value_dim)
    logits = 2 * config.d_model * config.vocab_size
    if model_kind == "decoder_only":
        per_token = 2 * kernel_scalars(params, "layer_") + width + scores + logits
    else:  # One source token per target token: two feed-forwards' gate products, three attentions' scores.
        per_token = (2 * (kernel_scalars(params, "encoder_") + kernel_scalars(params, "decoder_")) + 2 * width
                     + 3 * scores + logits)
    assert flops.training_flops(config, model_kind, 1000, length) == pytest.approx(3 * per_token * 1000, rel=1e-9)


@pytest.mark.parametrize("variant", ["relu", "swiglu", "bilinear"])  # Not GELU: XLA counts erf's polynomial.
def test_feed_forward_flops_agree_with_xla_cost_analysis(variant: str) -> None:
    config = SMALL.replace(d_model=128, d_ff=384, feed_forward=variant, cpu_kernels=False)
    module = feed_forward.FeedForward(config)
    x = jnp.ones((1, 64, config.d_model))
    params = nn.meta.unbox(module.init(jax.random.key(0), x))
    measured = xla_flops(lambda p, h: module.apply(p, h), params, x)
    counted = flops._feed_forward_flops(variant, length=64, d_model=128, d_ff=384)
    # XLA also counts the bias adds and the activation's arithmetic, a few per hidden element against
    # the >= 4 D = 512 counted per hidden element; a missing matrix or gate product is far beyond 4%.
    assert counted <= measured <= 1.04 * counted


# --- Decoding, search, generation, export (a gated variant) -------------------------------------------

def _transformer_params(config: TransformerConfig, seed: int) -> dict:
    ids = jnp.ones((1, 4), jnp.int32)
    return nn.meta.unbox(model.Transformer(config).init(jax.random.key(seed), ids, ids)["params"])


@pytest.mark.integration  # Compiles a whole model's decoding for over 3 s: not the fast tier.
def test_cached_decoding_and_beam_search_of_a_gated_encoder_decoder() -> None:
    config = SMALL.replace(feed_forward=GATED, num_layers=1)
    params = _transformer_params(config, 1)
    inputs, targets, _ = random_batch(0, batch=2, source_len=6, target_len=8)
    full = full_logits(params, inputs, targets, model_config=config)
    assert_logits_match(incremental_logits(params, inputs, targets, model_config=config), full)
    max_lengths = jnp.array([10, 14], jnp.int32)
    results = [jax.tree.map(np.asarray, decode.decode_batch(params, inputs, max_lengths, model_config=config,
                                                            beam_size=2, max_decode_len=16, use_cache=use_cache))
               for use_cache in (True, False)]
    np.testing.assert_array_equal(results[0].tokens, results[1].tokens)
    np.testing.assert_allclose(results[0].scores, results[1].scores, atol=1e-4)


@pytest.mark.integration  # Compiles a whole model's decoding for over 3 s: not the fast tier.
def test_a_gated_language_model_decodes_and_generates() -> None:
    config = SMALL.replace(feed_forward=GATED, feed_forward_bias=False, num_layers=1)
    sequence = jnp.asarray(np.random.default_rng(0).integers(4, 40, (1, 6)), jnp.int32)
    lm = language_model.LanguageModel(config)
    params = nn.meta.unbox(lm.init(jax.random.key(0), sequence)["params"])
    assert "bias" not in params["layer_0"]["ffn"]["gate"]
    full = lm.apply({"params": params}, sequence)
    decoder = language_model.LanguageModel(config.replace(decode=True))
    cache = jax.tree.map(jnp.zeros_like, decoder.init(jax.random.key(0), sequence)["cache"])
    for position, token in enumerate(np.asarray(model._shift_right(sequence))[0]):
        step, updated = decoder.apply({"params": params, "cache": cache}, jnp.full((1, 1), token),
                                      method=language_model.LanguageModel.logits, mutable=["cache"])
        cache = updated["cache"]
        np.testing.assert_allclose(step[:, 0], full[:, position], atol=2e-5)
    prompt = [5, 9, 12]
    settings = generation.SamplingSettings(temperature=0.0, max_new_tokens=6)
    generated = generation.Generator(config, params, tokenizer=None).generate_ids([prompt], settings)[0]
    logits = np.array(lm.apply({"params": params}, jnp.asarray([[*prompt, *generated]])))
    logits[..., [model.PAD_ID, model.UNK_ID, model.BOS_ID]] = -np.inf  # Never generated.
    np.testing.assert_array_equal(logits[0, len(prompt):].argmax(-1), generated)  # Position t predicts token t.


@pytest.mark.integration  # Compiles a whole model's decoding for over 3 s: not the fast tier.
def test_a_gated_model_exports_to_safetensors_and_jax_export(tmp_path: pathlib.Path) -> None:
    experiment = sections.build_experiment(tiny_config(feed_forward="geglu", feed_forward_bias=False), "test")
    params = _transformer_params(experiment.model, 2)
    path = str(tmp_path / "params.safetensors")
    safetensors_params.save_safetensors(path, params, safetensors_params.run_metadata(experiment))
    loaded, metadata = safetensors_params.load_safetensors(path)
    assert safetensors_params.experiment_of(metadata).model == experiment.model
    assert "encoder_0/ffn/gate/kernel" in safetensors_params.tensor_names(params)
    jax.tree.map(np.testing.assert_array_equal, loaded, jax.tree.map(np.asarray, params))
    inputs, targets, _ = random_batch(3, batch=2, source_len=5, target_len=4)
    exported = exported_functions.export_function(experiment.model, loaded, "logits", batch_size=2, source_len=5,
                                                  target_len=4)
    np.testing.assert_allclose(exported.call(inputs, targets),
                               full_logits(params, inputs, targets, model_config=experiment.model), atol=1e-5)


# --- Old runs, refusals, a registered entry -----------------------------------------------------------

def test_an_old_runs_relu_parameter_tree_is_unchanged() -> None:
    saved = json.loads((REPO_ROOT / "docs" / "normalization" / "base" / "seed_0" / "config.json").read_text())
    assert not any(key.startswith("feed_forward") for key in saved)  # Written before the axis existed.
    config = sections.build_experiment(schema.with_old_run_defaults(saved), "old run").model
    assert (config.feed_forward, config.feed_forward_bias, config.feed_forward_match_params) == ("relu", True, True)
    params = jax.tree.map(lambda leaf: leaf.shape, nn.meta.unbox(model.abstract_params(config)))
    d_model, d_ff = config.d_model, config.d_ff
    paper_ffn = {"inner": {"kernel": (d_model, d_ff), "bias": (d_ff,)},
                 "outer": {"kernel": (d_ff, d_model), "bias": (d_model,)}}
    for layer in range(config.num_layers):
        assert params[f"encoder_{layer}"]["ffn"] == paper_ffn
        assert params[f"decoder_{layer}"]["ffn"] == paper_ffn
    assert model.count_params(model.abstract_params(config)) == reference.transformer_param_count(
        config.vocab_size, config.num_layers, d_model, d_ff, config.num_heads, config.key_dim, config.value_dim)


@pytest.mark.parametrize("changes, message", [
    ({"feed_forward": "swigul"}, "feed_forward must be one of ('relu', 'gelu', 'swish', 'glu', 'bilinear', 'reglu', "
                                 "'geglu', 'swiglu'); got 'swigul'. Did you mean 'swiglu'?"),
    ({"feed_forward_bias": "no"}, "feed_forward_bias must be True or False; got 'no' (str)."),
    ({"feed_forward_match_params": 1}, "feed_forward_match_params must be True or False; got 1 (int)."),
])
def test_a_mistake_is_refused_in_one_line(changes: dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        SMALL.replace(**changes)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_the_experiment_refuses_an_unknown_variant_before_anything_is_written() -> None:
    message = r"^--config=x.py: feed_forward must be one of relu, .*; got 'gelgu' \(did you mean gelu\?\)"
    with pytest.raises(schema.ConfigError, match=message) as refused:
        sections.build_experiment(tiny_config(feed_forward="gelgu"), "--config=x.py")
    assert "\n" not in str(refused.value)


def test_a_registered_variant_runs_and_is_undone() -> None:
    entry = feed_forward_registry.FeedForwardVariant("squared_relu", "max(0, x W1 + b1)^2 W2 + b2",
                                                     lambda h: jnp.square(jax.nn.relu(h)))
    with feed_forward_registry.register_feed_forward(entry):
        config = SMALL.replace(feed_forward="squared_relu")
        module = feed_forward.FeedForward(config)
        x = np.random.default_rng(3).normal(size=(1, 4, 16))
        params = _random_params(module, jnp.asarray(x, jnp.float32), seed=4)
        ours = module.apply({"params": jax.tree.map(jnp.float32, params)}, jnp.asarray(x, jnp.float32))
        hidden = np.maximum(0.0, x @ params["inner"]["kernel"] + params["inner"]["bias"]) ** 2
        np.testing.assert_allclose(ours, hidden @ params["outer"]["kernel"] + params["outer"]["bias"], atol=1e-4,
                                   rtol=1e-5)
    with pytest.raises(ValueError, match="feed_forward must be one of"):
        SMALL.replace(feed_forward="squared_relu")


# --- The sweep ----------------------------------------------------------------------------------------

def test_the_sweep_rows_are_the_issues_six_and_each_builds() -> None:
    from configs import small_corpus
    from configs.sweeps import feed_forward as sweep

    assert list(sweep.get_sweep()) == ["relu", "gelu", "reglu", "geglu", "swiglu", "modern_block"]
    assert sweep.get_seeds() == (0, 1, 2)
    recipe = small_corpus.get_config()
    for row, changes in sweep.get_sweep().items():
        config = sweep.get_config(row)
        experiment = sections.build_experiment(config, f"configs/sweeps/feed_forward.py:{row}")
        assert (config.dataset, config.eval_every_steps, tuple(config.final_bleu_splits), config.name) == (
            "tsv:../shared/data/messages_en_de", 100, ("dev",), row)
        for field in ("num_train_steps", "tokens_per_batch", "d_model", "d_ff", "num_layers", "seed"):
            assert config[field] == recipe[field], (row, field)
        assert {field: getattr(experiment.model, field) for field in changes} == changes
    modern = sections.build_experiment(sweep.get_config("modern_block"), "modern_block").model
    assert (modern.layer_norm_position, modern.normalization, modern.feed_forward, modern.positional_encoding) == (
        "pre", "rms_norm", "swiglu", "rotary")
    with pytest.raises(ValueError, match="unknown row 'glu'; choose one of relu, gelu"):
        sweep.get_config("glu")
