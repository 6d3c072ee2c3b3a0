"""Positional encodings as an ablation axis (issue 62): relative (Shaw et al.), rotary (Su et al.), ALiBi.

Each encoding's self-attention against the NumPy oracle (``reference.positional_attention``, written from
the papers' equations), outputs and gradients; scores that depend only on the offset ``j - i``; cached
decoding equal to the teacher-forced pass, packed rows equal to each pair alone, for the encoder-decoder
and the decoder-only model; parameter counts; the combinations that are refused, in one line; a learned
table asked for a position beyond its size.
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
from attention_jax.models import (
    attention,
    attention_positions,
    attention_registry,
    language_model,
    masks,
    model,
    positional_encodings,
)
from attention_jax.models.attention_positions import AttentionPositions
from attention_jax.models.positional_encodings import PositionTarget, RelativeSettings
from tests.support import packed_pairs, reference
from tests.support.decoding_helpers import (assert_lm_cached_steps_and_packed_documents, full_logits,
                                            incremental_logits, random_batch)
from tests.support.reference import random_normal

IN_ATTENTION = ("relative", "rotary", "alibi")
SMALL = TransformerConfig(vocab_size=40, num_layers=1, d_model=16, d_ff=24, num_heads=2, key_dim=4, value_dim=6,
                          dropout_rate=0.0, max_len=32)
RELATIVE_K = 3  # The relative encoding's k in the models below (positional_encoding_settings.relative).
BATCH, LENGTH, HEADS, KEY_DIM, VALUE_DIM, D_MODEL = 2, 6, 3, 4, 6, 12  # 3 heads: ALiBi's non-power-of-two rule.


def _with_encoding(config: TransformerConfig, positional_encoding: str, *, max_distance: int = RELATIVE_K,
                   add_to_values: bool = True, **changes: object) -> TransformerConfig:
    """``config`` with ``positional_encoding``; the relative encoding with k = ``max_distance`` (its settings)."""
    settings = (RelativeSettings(max_distance=max_distance, add_to_values=add_to_values)
                if positional_encoding == "relative" else None)
    return config.replace(positional_encoding=positional_encoding, positional_encoding_settings=settings, **changes)


def _attention_layer(encoding: str, function: str = "scaled_dot_product", *, values: bool = True,
                     implementation: str = "einsum") -> attention.MultiHeadAttention:
    settings = AttentionPositions(encoding, RelativeSettings(max_distance=2, add_to_values=values)
                                  if encoding == "relative" else None)
    return attention.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, value_dim=VALUE_DIM, out_dim=D_MODEL,
                                        attention_function=function, implementation=implementation,
                                        positional_encoding=settings)


def _init_layer(layer: attention.MultiHeadAttention, x: jax.Array) -> dict:
    params = nn.meta.unbox(layer.init(jax.random.key(0), x, x)["params"])
    for name in ("relative_key_embedding", "relative_value_embedding"):  # Larger than at init: visible terms.
        if name in params:
            params[name] = jnp.asarray(random_normal(params[name].shape, 9))
    return params


# --- The registry ------------------------------------------------------------------------------------

def test_every_encoding_is_registered_with_where_it_acts() -> None:
    registry = positional_encodings.POSITIONAL_ENCODINGS
    assert tuple(registry) == ("sinusoidal", "learned", "none", "relative", "rotary", "alibi")
    assert {name: registry[name].target for name in IN_ATTENTION} == {
        "relative": PositionTarget.ATTENTION_SCORES, "rotary": PositionTarget.QUERIES_AND_KEYS,
        "alibi": PositionTarget.ATTENTION_SCORES}
    assert [name for name, scheme in registry.items() if scheme.has_parameters] == ["learned", "relative"]
    assert positional_encodings._self_attention_positions(SMALL) is None  # Sinusoidal: added to the embeddings.
    assert positional_encodings._self_attention_positions(_with_encoding(SMALL, "relative")) == (
        AttentionPositions("relative", RelativeSettings(max_distance=3, add_to_values=True)))


def test_an_entry_without_its_hook_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"'score_bias_only' is added to each attention's scores \(relative "
                                         r"encodings, ALiBi\): give its score_bias.$") as raised:
        positional_encodings.PositionalEncodingScheme(name="score_bias_only", summary="a bias",
                                                      target=PositionTarget.ATTENTION_SCORES)
    assert "\n" not in str(raised.value)


@pytest.mark.reference
def test_alibi_slopes_are_the_papers() -> None:
    assert attention_positions._alibi_slopes(8) == tuple(2.0 ** -h for h in range(1, 9))  # 1/2 ... 1/256.
    for num_heads in range(1, 13):
        np.testing.assert_allclose(attention_positions._alibi_slopes(num_heads), reference.alibi_slopes(num_heads),
                                   rtol=1e-12)
    assert attention_positions._alibi_slopes(6) == (2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3)


# --- One self-attention against the oracle ----------------------------------------------------------

ORACLE_CASES = [("relative", "scaled_dot_product", True), ("relative", "scaled_dot_product", False),
                ("relative", "dot_product", True), ("rotary", "scaled_dot_product", True),
                ("rotary", "dot_product", True), ("alibi", "scaled_dot_product", True), ("alibi", "additive", True)]


@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("encoding,function,values", ORACLE_CASES)
@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "causal"])
def test_self_attention_outputs_weights_and_gradients_match_the_oracle(encoding: str, function: str, values: bool,
                                                                        causal: bool) -> None:
    x = random_normal((BATCH, LENGTH, D_MODEL), 0)
    positions = np.array([[3, 4, 5, 6, 7, 8], [0, 1, 2, 3, 4, 5]])  # Not from 0: only offsets should count.
    valid = np.arange(LENGTH)[None] < np.array([[LENGTH], [4]])
    mask = np.asarray(masks.make_padding_mask(jnp.asarray(valid), jnp.asarray(valid)))
    if causal:
        mask = mask & np.tril(np.ones((LENGTH, LENGTH), bool))
    layer = _attention_layer(encoding, function, values=values)
    params = _init_layer(layer, jnp.asarray(x))
    assert ("relative_value_embedding" in params) == (encoding == "relative" and values)

    def apply(params: dict, x: jax.Array) -> tuple[jax.Array, dict]:
        return layer.apply({"params": params}, x, x, mask, positions=positions, sow_weights=True,
                           mutable=["intermediates"])

    output, state = apply(params, jnp.asarray(x))
    weights = state["intermediates"]["attention_weights"][0]

    def oracle(params: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        numpy_params = jax.tree.map(lambda leaf: np.asarray(leaf, np.float64), params)
        return reference.positional_self_attention(numpy_params, x.astype(np.float64), mask, encoding=encoding,
                                                   positions=positions, causal=causal, attention_function=function)

    expected_output, expected_weights = oracle(params, x)
    np.testing.assert_allclose(output, expected_output, atol=2e-5)
    np.testing.assert_allclose(weights, expected_weights, atol=2e-6)

    # Gradients: a random direction through every parameter and the inputs, against the oracle's
    # central difference of the same loss.
    cotangent = random_normal(output.shape, 1)
    direction = jax.tree.map(lambda leaf: random_normal(leaf.shape, leaf.size % 97), params)
    x_direction = random_normal(x.shape, 2)
    gradients = jax.grad(lambda p, x: jnp.sum(apply(p, x)[0] * cotangent), argnums=(0, 1))(params, jnp.asarray(x))
    ours = sum(float(jnp.vdot(g, d)) for g, d in zip(jax.tree.leaves(gradients[0]), jax.tree.leaves(direction)))
    ours += float(jnp.vdot(gradients[1], x_direction))
    step = 1e-4

    def loss_along(sign: float) -> float:
        moved = jax.tree.map(lambda p, d: np.asarray(p, np.float64) + sign * step * d, params, direction)
        return float(np.sum(oracle(moved, x + sign * step * x_direction)[0] * cotangent))

    np.testing.assert_allclose(ours, (loss_along(1.0) - loss_along(-1.0)) / (2 * step), rtol=2e-4)
    if encoding == "relative":
        assert float(jnp.abs(gradients[0]["relative_key_embedding"]).sum()) > 0


@pytest.mark.integration
def test_rotary_runs_on_the_kernels_and_the_blockwise_window_with_the_einsum_result() -> None:
    x = jnp.asarray(random_normal((BATCH, LENGTH, D_MODEL), 3))
    positions = jnp.array([[5, 6, 7, 8, 9, 10], [0, 1, 2, 3, 4, 5]])
    einsum = _attention_layer("rotary")
    params = _init_layer(einsum, x)
    expected = einsum.apply({"params": params}, x, x, None, positions=positions)
    kernel = _attention_layer("rotary", implementation="xla").apply({"params": params}, x, x, None,
                                                                    positions=positions)
    np.testing.assert_allclose(kernel, expected, atol=1e-5)
    window = masks.LocalMask(window=2)
    blockwise = einsum.apply({"params": params}, x, x, window, positions=positions)
    dense = einsum.apply({"params": params}, x, x, window.to_dense(LENGTH), positions=positions)
    np.testing.assert_allclose(blockwise, dense, atol=1e-5)


class _Scores(nn.Module):
    """The scores one self-attention forms from projected queries and keys, its positions applied."""

    settings: AttentionPositions
    value_dim: int = VALUE_DIM

    @property
    def positional_encoding(self) -> AttentionPositions:
        return self.settings

    @nn.compact
    def __call__(self, query: jax.Array, key: jax.Array, query_positions: jax.Array,
                 key_positions: jax.Array) -> jax.Array:
        scheme = positional_encodings._attention_scheme(self.settings)
        entry = attention_registry.attention_function("scaled_dot_product")
        if scheme.rotate is not None:
            query, key = scheme.rotate(query, query_positions), scheme.rotate(key, key_positions)
            return jnp.einsum("bthk,bshk->bhts", query, key) / np.sqrt(query.shape[-1])
        return attention._position_scores(self, entry, scheme, query, key, query_positions, key_positions)


@pytest.mark.parametrize("encoding", IN_ATTENTION)
def test_scores_depend_only_on_the_offset(encoding: str) -> None:
    query = jnp.asarray(random_normal((1, 5, HEADS, KEY_DIM), 4))
    key = jnp.asarray(random_normal((1, 7, HEADS, KEY_DIM), 5))
    query_positions, key_positions = jnp.array([[0, 1, 2, 3, 4]]), jnp.array([[0, 2, 3, 5, 6, 8, 9]])
    scores_module = _Scores(AttentionPositions(encoding, RelativeSettings(max_distance=3)
                                               if encoding == "relative" else None))
    variables = scores_module.init(jax.random.key(0), query, key, query_positions, key_positions)
    variables = jax.tree.map(lambda leaf: jnp.asarray(random_normal(leaf.shape, 6)), nn.meta.unbox(variables))

    def scores(shift: int, keys_only: bool = False) -> np.ndarray:
        return np.asarray(scores_module.apply(variables, query, key, query_positions + (0 if keys_only else shift),
                                              key_positions + shift))

    for shift in (1, 7, 100):  # Shift both positions: the same scores.
        np.testing.assert_allclose(scores(shift), scores(0), atol=1e-4)
    assert not np.allclose(scores(2, keys_only=True), scores(0), atol=1e-3)  # The offset does count.


# --- The models --------------------------------------------------------------------------------------

DECODE_VARIANTS = [{"positional_encoding": "relative"}, {"positional_encoding": "relative", "add_to_values": False},
                   {"positional_encoding": "rotary"}, {"positional_encoding": "alibi"},
                   {"positional_encoding": "none"},
                   {"positional_encoding": "alibi", "attention_window": 2, "layer_norm_position": "pre"},
                   {"positional_encoding": "rotary", "attention_window": 2}]


@pytest.mark.slow
@pytest.mark.parametrize("variant", DECODE_VARIANTS, ids=lambda v: "-".join(f"{k}={v[k]}" for k in v))
def test_cached_decoding_equals_the_teacher_forced_pass(variant: dict) -> None:
    """The decode step loop over the key/value cache (query at the cache index, keys at their slots)."""
    config = _with_encoding(SMALL, **variant)
    params = nn.meta.unbox(model.Transformer(config).init(jax.random.key(1), jnp.ones((1, 4), jnp.int32),
                                                          jnp.ones((1, 4), jnp.int32))["params"])
    inputs, targets, _ = random_batch(0, batch=2, source_len=6, target_len=8)
    full = full_logits(params, inputs, targets, model_config=config)
    np.testing.assert_allclose(incremental_logits(params, inputs, targets, model_config=config), full,
                               atol=2e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("encoding", IN_ATTENTION)
def test_decoder_only_cached_decoding_and_packed_documents(encoding: str) -> None:
    config = _with_encoding(SMALL, encoding, num_layers=2)
    assert_lm_cached_steps_and_packed_documents(config)


@pytest.mark.slow
@pytest.mark.parametrize("encoding", IN_ATTENTION)
def test_cached_beam_search_with_a_growing_cache_equals_the_uncached_search(encoding: str) -> None:
    """Beam search reorders the cache and grows it at step 16 (``cache_stages``); positions follow the step."""
    config = _with_encoding(SMALL, encoding)
    params = nn.meta.unbox(model.Transformer(config).init(jax.random.key(3), jnp.ones((1, 4), jnp.int32),
                                                          jnp.ones((1, 4), jnp.int32))["params"])
    inputs, _, _ = random_batch(2, batch=2, source_len=5, target_len=1)
    max_lengths = jnp.array([20, 30], jnp.int32)
    results = [jax.tree.map(np.asarray, decode.decode_batch(params, inputs, max_lengths, model_config=config,
                                                            beam_size=2, max_decode_len=32, use_cache=use_cache,
                                                            cache_stages=2))
               for use_cache in (True, False)]
    np.testing.assert_array_equal(results[0].tokens, results[1].tokens)
    np.testing.assert_allclose(results[0].scores, results[1].scores, atol=1e-4)
    assert results[0].lengths.max() > 16  # Decoded past the first stage's cache.


@pytest.mark.slow
@pytest.mark.parametrize("encoding", IN_ATTENTION)
def test_greedy_generation_follows_the_teacher_forced_argmax(encoding: str) -> None:
    config = _with_encoding(SMALL, encoding)
    lm = language_model.LanguageModel(config)
    params = nn.meta.unbox(lm.init(jax.random.key(4), jnp.ones((1, 4), jnp.int32))["params"])
    prompt = [5, 9, 12]
    settings = generation.SamplingSettings(temperature=0.0, max_new_tokens=12)
    generated = generation.Generator(config, params, tokenizer=None).generate_ids([prompt], settings)[0]
    sequence = [model.BOS_ID, *prompt, *generated]
    logits = np.asarray(lm.apply({"params": params}, jnp.asarray([sequence[1:]])))  # Reads sequence[:-1].
    np.testing.assert_array_equal(logits[0, len(prompt):].argmax(-1), generated)


@pytest.mark.slow
@pytest.mark.parametrize("encoding", IN_ATTENTION)
def test_packed_pairs_equal_each_pair_alone(encoding: str) -> None:
    """Positions restart per pair (``inputs_position``/``targets_position``), so each pair's scores are its own."""
    config = _with_encoding(packed_pairs.SMALL, encoding, max_distance=2)
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


@pytest.mark.reference
def test_attention_weights_for_maps_have_the_positions_applied() -> None:
    config = SMALL.replace(positional_encoding="alibi")
    inputs = jnp.array([[5, 6, 7, 8, 3, 0]])
    transformer = model.Transformer(config)
    params = nn.meta.unbox(transformer.init(jax.random.key(2), inputs, inputs[:, :3])["params"])
    _, state = transformer.apply({"params": params}, inputs, inputs[:, :3], sow_weights=True,
                                 mutable=["intermediates"])
    weights = np.asarray(state["intermediates"]["encoder_0"]["self_attention"]["attention_weights"][0])
    x = np.asarray(params["shared_embedding"]["embedding"], np.float64)[np.asarray(inputs)] * np.sqrt(16)
    valid = np.asarray(inputs) != 0
    mask = valid[:, None, :, None] & valid[:, None, None, :]
    numpy_params = jax.tree.map(lambda leaf: np.asarray(leaf, np.float64), params["encoder_0"]["self_attention"])
    _, expected = reference.positional_self_attention(numpy_params, x, mask, encoding="alibi",
                                                      positions=np.arange(6)[None])
    np.testing.assert_allclose(weights, expected, atol=1e-5)  # No positions in x: ALiBi biases the scores.


@pytest.mark.parametrize("encoding", ["sinusoidal", "learned", "none", "relative", "rotary", "alibi"])
@pytest.mark.parametrize("values", [True, False])
def test_parameter_counts(encoding: str, values: bool) -> None:
    config = _with_encoding(SMALL, encoding, add_to_values=values, num_layers=2)
    paper = reference.transformer_param_count(40, 2, 16, 24, 2, 4, 6,
                                              learned_positions=config.max_len if encoding == "learned" else 0)
    table_rows = 2 * RELATIVE_K + 1  # (2k + 1) x d_k (and x d_v) per self-attention layer.
    relative = table_rows * (4 + (6 if values else 0)) if encoding == "relative" else 0
    assert model.count_params(model.abstract_params(config)) == paper + 2 * 2 * relative  # Encoder + decoder.
    lm_params = language_model.abstract_params(config, "decoder_only")
    lm_without = language_model.abstract_params(config.replace(positional_encoding="none"), "decoder_only")
    learned = config.max_len * 16 if encoding == "learned" else 0
    assert model.count_params(lm_params) == model.count_params(lm_without) + 2 * relative + learned


# --- Refusals ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("changes,message", [
    ({"positional_encoding": "alibi", "attention_function": "linear"},
     "positional_encoding='alibi' adds to each attention's scores, and attention_function='linear' forms no "
     "scores: set attention_function to one of ('scaled_dot_product', 'dot_product', 'additive'), or "
     "positional_encoding='sinusoidal'."),
    ({"positional_encoding": "relative", "attention_function": "linear"},
     "positional_encoding='relative' acts on the dot products q k^T, which attention_function='linear' does not "
     "form: set attention_function to one of ('scaled_dot_product', 'dot_product')."),
    ({"positional_encoding": "relative", "attention_function": "additive"}, "acts on the dot products q k^T"),
    ({"positional_encoding": "rotary", "attention_function": "additive"}, "acts on the dot products q k^T"),
    ({"positional_encoding": "rotary", "attention_function": "linear"}, "acts on the dot products q k^T"),
    ({"positional_encoding": "alibi", "attention_implementation": "xla"},
     "positional_encoding='alibi' adds to each attention's scores, which the xla kernels do not take: set "
     "attention_implementation='einsum' (or use positional_encoding='rotary', which runs on every implementation)."),
    ({"positional_encoding": "relative", "attention_implementation": "fused"}, "set attention_implementation='einsum'"),
    ({"positional_encoding": "rotary", "key_dim": 5},
     "positional_encoding='rotary' needs key_dim to be a multiple of 2 (it turns pairs of components); got "
     "key_dim=5: set an even key_dim."),
    ({"positional_encoding": "relative", "positional_encoding_settings": {"relative": {"max_distance": 0}}},
     "positional_encoding_settings.relative.max_distance must be >= 1; got 0."),
    ({"positional_encoding": "relative", "positional_encoding_settings": {"relative": {"add_to_values": "yes"}}},
     "positional_encoding_settings.relative.add_to_values must be True or False; got 'yes' (str)."),
    ({"positional_encoding": "rotary", "positional_encoding_settings": RelativeSettings()},
     "'rotary' takes no settings; got positional_encoding_settings=RelativeSettings(max_distance=16, "
     "add_to_values=True): leave it None."),
])
def test_undefined_combinations_are_refused_in_one_line(changes: dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        SMALL.replace(**changes)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_defined_combinations_are_accepted() -> None:
    for changes in ({"positional_encoding": "alibi", "attention_function": "additive"},
                    {"positional_encoding": "rotary", "attention_implementation": "cudnn"},
                    {"positional_encoding": "relative", "attention_function": "dot_product", "attention_window": 2},
                    {"positional_encoding": "sinusoidal", "attention_function": "linear"}):
        assert SMALL.replace(**changes).positional_encoding == changes["positional_encoding"]


def test_the_experiment_refuses_before_anything_is_written() -> None:
    config = schema.default_config()
    config.update(positional_encoding="alibi", attention_function="linear")
    with pytest.raises(schema.ConfigError, match=r"^--config=x.py: positional_encoding='alibi' adds") as raised:
        sections.build_experiment(config, "--config=x.py")
    assert "\n" not in str(raised.value)
    config.update(attention_function="scaled_dot_product",
                  positional_encoding_settings={"relative": {"max_distance": 0}})
    with pytest.raises(schema.ConfigError, match="positional_encoding_settings.relative.max_distance"):
        sections.build_experiment(config, "--config=x.py")
    config.update(positional_encoding="relative",
                  positional_encoding_settings={"relative": {"max_distance": 8, "add_to_values": False}})
    experiment = sections.build_experiment(config, "--config=x.py")
    assert experiment.model.positional_encoding_settings == RelativeSettings(max_distance=8, add_to_values=False)
    old_run = {key: value for key, value in config.items() if key != "positional_encoding_settings"}
    old_experiment = sections.build_experiment(schema.with_old_run_defaults(old_run), "run")
    assert old_experiment.model.positional_encoding_settings.max_distance == 16


def test_a_learned_table_gives_zeros_beyond_its_size_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    config = SMALL.replace(positional_encoding="learned", max_len=3)
    layer = model.PositionalEncoding(config, decode=True)
    x = jnp.asarray(random_normal((1, 1, 16), 7))
    variables = layer.init(jax.random.key(0), x)
    params, cache = variables["params"], jax.tree.map(jnp.zeros_like, variables["cache"])
    table = np.asarray(nn.meta.unbox(params)["position_embedding"])
    step = jax.jit(lambda cache: layer.apply({"params": params, "cache": cache}, x, mutable=["cache"]))
    with caplog.at_level("WARNING"):
        for position in range(6):
            encoded, updated = step(cache)
            cache = updated["cache"]
            expected = x[0, 0] + (table[position] if position < 3 else 0.0)  # Never wrapped nor clipped.
            np.testing.assert_allclose(encoded[0, 0], expected, atol=1e-6)
        jax.effects_barrier()
    logged = [record.getMessage() for record in caplog.records if "beyond its table" in record.getMessage()]
    assert logged == ["positional_encoding='learned' was asked for position 3, beyond its table of 3 positions "
                      "(max_len + max_decode_extra_len): such positions get a zero position vector; raise "
                      "max_decode_extra_len or decode shorter outputs."]
