"""The attention-function axis (issue 37): dot-product, additive and linear attention beside the paper's.

Each function against an independent NumPy implementation (``tests/support/reference.py``) with masks,
outputs and gradients; linear attention's O(n) forms against its quadratic form; every model path
(packing, cached and uncached decoding, beam and greedy search, generation, attention maps) with
each function; the config's one-line errors; the sweep file's dry run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import shlex
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.decoding import decode, decode_steps, generation, inference
from attention_jax.evaluation import attention_maps
from attention_jax.experiment import schema, sections
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import attention, attention_functions, language_model, masks, model
from attention_jax.training import train, train_state
from tests.support import packed_pairs, reference
from tests.support.decoding_helpers import (
    SHORT,
    TINY,
    WordTokenizer,
    full_logits,
    incremental_logits,
    init_params,
    random_batch,
)
from tests.support.reference import random_normal
from tests.support.sweep_cli import REPO_ROOT, TINY_TRAINING, run_sweep, tiny_data_dir  # noqa: F401

FUNCTIONS = ("dot_product", "additive", "linear")
BATCH, LEN_Q, LEN_K, HEADS, KEY_DIM, VALUE_DIM = 2, 5, 6, 2, 4, 3


def _inputs(length_q: int, length_k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (random_normal((BATCH, length_q, HEADS, KEY_DIM), seed),
            random_normal((BATCH, length_k, HEADS, KEY_DIM), seed + 1),
            random_normal((BATCH, length_k, HEADS, VALUE_DIM), seed + 2))


def _structured_mask(kind: str, length_q: int, length_k: int) -> attention_functions.StructuredMask:
    """Cross-attention with padding, causal self-attention with padding, or packed self-attention."""
    if kind == "padding":  # Second row: 3 real queries, 2 real keys.
        return attention_functions.StructuredMask(
            query_valid=jnp.arange(length_q)[None] < jnp.array([[length_q], [3]]),
            key_valid=jnp.arange(length_k)[None] < jnp.array([[length_k], [2]]))
    if kind == "causal":
        return attention_functions.StructuredMask(
            query_valid=jnp.arange(length_q)[None] < jnp.array([[length_q], [4]]),
            key_valid=jnp.arange(length_k)[None] < jnp.array([[length_k], [4]]), causal=True)
    segments = jnp.array([[1, 1, 2, 2, 2, 0], [1, 2, 2, 3, 3, 3]])[:, :length_q]  # Two rows of pairs.
    return attention_functions.StructuredMask(query_valid=segments != 0, key_valid=segments != 0,
                                              query_segments=segments, key_segments=segments,
                                              causal=kind == "packed_causal")


MASK_KINDS = {"padding": (LEN_Q, LEN_K), "causal": (LEN_K, LEN_K), "packed": (LEN_K, LEN_K),
              "packed_causal": (LEN_K, LEN_K)}


def _library(function: str, query, key, value, mask, score_vector=None):
    """The library's output (and weights, for the softmax functions) on dense or structured masks."""
    if function == "linear":  # Chunks of 4 positions: the causal sums cross chunk boundaries.
        return attention_functions.linear_attention(query, key, value, mask, chunk_size=4), None
    dense = mask.to_dense(query.shape[1], key.shape[1]) if mask is not None else None
    if function == "additive":
        return attention_functions.additive_attention(query, key, value, score_vector, dense, return_weights=True)
    return attention.scaled_dot_product_attention(attention_functions.unscaled_query(query), key, value, dense,
                                                  return_weights=True)


def _reference(function: str, query, key, value, mask, score_vector=None):
    query, key, value = (np.asarray(array, np.float64) for array in (query, key, value))
    if function == "linear":
        return reference.linear_attention(query, key, value, mask), None
    if function == "additive":
        return reference.additive_attention(query, key, value, np.asarray(score_vector, np.float64), mask)
    return reference.dot_product_attention(query, key, value, mask)


# --- Functions against NumPy -------------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("kind", list(MASK_KINDS))
@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_function_matches_numpy_with_masks(function: str, kind: str) -> None:
    length_q, length_k = MASK_KINDS[kind]
    query, key, value = _inputs(length_q, length_k)
    score_vector = random_normal((HEADS, KEY_DIM), 7, scale=0.5)
    mask = _structured_mask(kind, length_q, length_k)
    dense = np.asarray(mask.to_dense(length_q, length_k))
    output, weights = _library(function, query, key, value, mask, score_vector)
    expected_output, expected_weights = _reference(function, query, key, value, dense, score_vector)
    np.testing.assert_allclose(output, expected_output, atol=2e-5)
    if weights is not None:
        np.testing.assert_allclose(weights, expected_weights, atol=2e-6)
    has_key = np.broadcast_to(dense, (BATCH, HEADS, length_q, length_k)).any(-1)  # [B,H,T]
    assert np.all(np.asarray(output)[~np.swapaxes(has_key, 1, 2)] == 0.0)  # No allowed key: zeros.


@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("function", FUNCTIONS)
def test_gradients_match_finite_differences_of_numpy(function: str) -> None:
    """d(sum(output * cotangent)) against central differences of the float64 NumPy reference."""
    query, key, value = _inputs(LEN_K, LEN_K, seed=3)
    score_vector = random_normal((HEADS, KEY_DIM), 8, scale=0.5)
    cotangent = random_normal((BATCH, LEN_K, HEADS, VALUE_DIM), 9)
    mask = _structured_mask("packed_causal" if function == "linear" else "causal", LEN_K, LEN_K)
    dense = np.asarray(mask.to_dense(LEN_K, LEN_K))
    arrays = [query, key, value] + ([score_vector] if function == "additive" else [])

    def library_loss(*args):
        output, _ = _library(function, *args[:3], mask, *args[3:])
        return jnp.sum(output * cotangent)

    def reference_loss(*args):
        output, _ = _reference(function, *args[:3], dense, *args[3:])
        return float(np.sum(output * cotangent))

    gradients = jax.grad(library_loss, argnums=tuple(range(len(arrays))))(*arrays)
    step = 1e-5
    for index, (array, gradient) in enumerate(zip(arrays, gradients)):
        expected = np.zeros(array.shape)
        base = [np.asarray(a, np.float64) for a in arrays]
        for position in np.ndindex(array.shape):
            plus, minus = [a.copy() for a in base], [a.copy() for a in base]
            plus[index][position] += step
            minus[index][position] -= step
            expected[position] = (reference_loss(*plus) - reference_loss(*minus)) / (2 * step)
        np.testing.assert_allclose(gradient, expected, atol=1e-4, err_msg=f"argument {index}")


@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("kind", ["none", "causal", "packed_causal", "packed", "padding"])
def test_linear_forms_equal_the_quadratic_form(kind: str) -> None:
    """The O(n) forms (chunked causal sums, segment sums, row sums) equal the row-normalised phi(q) phi(k)^T.

    Chunks of 1, 4, 9 and 64 positions: segments that start, end and run through chunk boundaries, a
    segment of one position, padding at the end of a row.
    """
    length = 33
    query, key, value = _inputs(length, length, seed=5)
    if kind == "none":
        mask, dense = None, None
    elif kind == "padding":
        mask = attention_functions.StructuredMask(key_valid=jnp.arange(length)[None] < jnp.array([[33], [20]]))
        dense = mask.to_dense(length, length)
    else:
        segments = np.repeat(np.arange(1, 5), [9, 1, 15, 8])[None].repeat(BATCH, 0)
        segments[1, 28:] = 0  # Padding at the end of the second row.
        segments = jnp.asarray(segments)
        mask = attention_functions.StructuredMask(
            query_valid=segments != 0, key_valid=segments != 0, causal=kind != "packed",
            query_segments=segments if kind.startswith("packed") else None,
            key_segments=segments if kind.startswith("packed") else None)
        dense = mask.to_dense(length, length)
    quadratic = attention_functions._linear_attention_quadratic(query, key, value, dense)
    linear_form = jax.jit(attention_functions.linear_attention, static_argnames="chunk_size")
    for chunk_size in (1, 4, 9, 64):
        linear = linear_form(query, key, value, mask, chunk_size=chunk_size)
        np.testing.assert_allclose(linear, quadratic, atol=2e-5, err_msg=f"chunks of {chunk_size}")
    if kind == "causal":  # And directly from the definition (loops, float64).
        np.testing.assert_allclose(linear, reference.linear_attention(
            *(np.asarray(a, np.float64) for a in (query, key, value)), np.asarray(dense)), atol=2e-5)


@pytest.mark.integration
def test_linear_decode_steps_equal_the_causal_form() -> None:
    query, key, value = _inputs(LEN_K, LEN_K, seed=6)
    causal = attention_functions.linear_attention(query, key, value,
                                                  attention_functions.StructuredMask(causal=True))
    state = jnp.zeros((BATCH, HEADS, KEY_DIM, VALUE_DIM))
    normaliser = jnp.zeros((BATCH, HEADS, KEY_DIM))
    for position in range(LEN_K):
        output, state, normaliser = attention_functions.linear_attention_step(
            query[:, position], key[:, position], value[:, position], state, normaliser)
        np.testing.assert_allclose(output, causal[:, position], atol=2e-6)


def test_unscaled_dot_products_saturate_the_softmax_as_d_k_grows() -> None:
    """Footnote 4 on the library: unscaled weights are softmax(q.k), nearly one-hot at d_k = 1024."""
    largest = {}
    for key_dim in (4, 1024):
        query, key = random_normal((1, 1, 1, key_dim), 10), random_normal((1, 10, 1, key_dim), 11)
        scores = np.einsum("k,sk->s", query[0, 0, 0], key[0, :, 0])
        _, unscaled = attention.scaled_dot_product_attention(
            attention_functions.unscaled_query(query), key, key, return_weights=True)
        _, scaled = attention.scaled_dot_product_attention(query, key, key, return_weights=True)
        np.testing.assert_allclose(np.asarray(unscaled)[0, 0, 0], reference.softmax(scores), atol=1e-6)
        np.testing.assert_allclose(np.asarray(scaled)[0, 0, 0], reference.softmax(scores / np.sqrt(key_dim)),
                                   atol=1e-6)
        largest[key_dim] = (float(np.max(unscaled)), float(np.max(scaled)))
    assert largest[1024][0] > 0.99 and largest[1024][1] < 0.9


# --- Multi-head attention ----------------------------------------------------------------------------

def _multi_head(function: str, **changes) -> attention.MultiHeadAttention:
    return attention.MultiHeadAttention(num_heads=HEADS, key_dim=KEY_DIM, value_dim=VALUE_DIM, out_dim=8,
                                        attention_function=function, **changes)


@pytest.mark.reference
@pytest.mark.parametrize("function", FUNCTIONS)
def test_multi_head_attention_matches_numpy(function: str) -> None:
    inputs_q, inputs_kv = random_normal((BATCH, LEN_Q, 8), 12), random_normal((BATCH, LEN_K, 8), 13)
    structured = _structured_mask("padding", LEN_Q, LEN_K)
    dense = structured.to_dense(LEN_Q, LEN_K)
    layer = _multi_head(function)
    variables = layer.init(jax.random.key(0), inputs_q, inputs_kv, dense)
    params = nn.meta.unbox(variables["params"])
    expected = reference.multi_head_attention(params, np.asarray(inputs_q, np.float64), inputs_kv,
                                              np.asarray(dense), attention_function=function)
    for mask in (dense, structured) if function == "linear" else (dense,):
        output = layer.apply({"params": params}, inputs_q, inputs_kv, mask)
        np.testing.assert_allclose(output, expected, atol=3e-5)


@pytest.mark.integration
def test_dot_product_takes_every_implementation_and_window() -> None:
    inputs = random_normal((BATCH, 9, 8), 14)
    valid = jnp.arange(9)[None] < jnp.array([[9], [6]])
    local = masks.LocalMask(window=2, valid=valid, causal=True)
    layer = _multi_head("dot_product")
    params = layer.init(jax.random.key(1), inputs, inputs, local)["params"]
    blockwise = layer.apply({"params": params}, inputs, inputs, local)
    for implementation in ("einsum", "xla"):
        dense = _multi_head("dot_product", implementation=implementation).apply(
            {"params": params}, inputs, inputs, local.to_dense(9))
        np.testing.assert_allclose(dense, blockwise, atol=2e-5)


def test_additive_weights_are_sown_and_dropped_out_only_in_training() -> None:
    inputs = random_normal((BATCH, LEN_K, 8), 15)
    layer = _multi_head("additive", attention_dropout_rate=0.5)
    params = layer.init(jax.random.key(2), inputs, inputs)["params"]
    assert params["score_vector"].value.shape == (HEADS, KEY_DIM)  # Boxed with logical axis names.
    output, state = layer.apply({"params": params}, inputs, inputs, sow_weights=True, mutable=["intermediates"])
    weights = np.asarray(state["intermediates"]["attention_weights"][0])
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    dropped = layer.apply({"params": params}, inputs, inputs, deterministic=False,
                          rngs={"dropout": jax.random.key(3)})
    assert not np.allclose(dropped, output, atol=1e-4)
    np.testing.assert_array_equal(layer.apply({"params": params}, inputs, inputs), output)


@pytest.mark.parametrize("changes,message", [
    (dict(attention_function="cosine"), r"attention_function must be one of \('scaled_dot_product', "
                                        r"'dot_product', 'additive', 'linear'\); got 'cosine'\."),
    (dict(attention_function="additive", attention_implementation="fused"),
     r"attention_function='additive' needs attention_implementation='einsum'"),
    (dict(attention_function="linear", attention_implementation="xla"),
     r"attention_function='linear' needs attention_implementation='einsum'"),
    (dict(attention_function="linear", attention_window=4), r"'linear' has no restricted window"),
    (dict(attention_function="linear", attention_dropout_rate=0.1), r"'linear' forms no attention weights"),
])
def test_bad_settings_are_one_line_errors(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        TINY.replace(**changes)
    assert "\n" not in str(raised.value)


def test_configs_default_to_the_paper_and_older_runs_load() -> None:
    from configs import base  # Tests may import configs; the library may not.

    config = base.get_config()
    assert config.attention_function == "scaled_dot_product"
    assert sections.build_experiment(config, "test").model.attention_function == "scaled_dot_product"
    older = json.loads(config.to_json())  # A config.json from before the field.
    del older["attention_function"]
    older_run = sections.build_experiment(schema.with_old_run_defaults(older), "config.json")
    assert older_run.model.attention_function == "scaled_dot_product"
    config.attention_function = "additive"
    assert sections.build_experiment(config, "test").model.attention_function == "additive"
    TINY.replace(attention_function="dot_product", attention_implementation="fused", attention_window=3)


# --- The models: packing, cached decoding, search, generation, attention maps -------------------------

@pytest.mark.integration
@pytest.mark.parametrize("function", FUNCTIONS)
def test_packed_pairs_equal_each_pair_alone(function: str) -> None:
    cfg = packed_pairs.SMALL.replace(attention_function=function)
    params = packed_pairs.init_transformer(cfg)
    pairs = packed_pairs.random_pairs(5, seed=0, max_words=4)
    packed, alone = packed_pairs.packed_and_alone(pairs, packed_pairs.ROWS)
    logits = jax.jit(lambda params, batch: train_state._model_logits(model.Transformer(cfg), params, batch,
                                                                    deterministic=True))
    packed_logits = np.asarray(logits(params, packed))
    segments = np.asarray(packed["targets_segmentation"])
    for row, members in enumerate(packed_pairs.ROWS.tolist()):
        for segment, pair in enumerate((p for p in members if p >= 0), start=1):
            positions = np.flatnonzero(segments[row] == segment)
            expected = np.asarray(logits(params, alone[pair]))[0, :len(positions)]
            np.testing.assert_allclose(packed_logits[row, positions], expected, atol=3e-5, rtol=3e-5)


DECODE_VARIANTS = {  # Without a window, dot-product and additive decoding are also checked by the searches.
    "dot_product_window2": {"attention_function": "dot_product", "attention_window": 2},
    "additive_window2_pre_ln": {"attention_function": "additive", "attention_window": 2,
                                "layer_norm_position": "pre"},
    "linear": {"attention_function": "linear"},
    "linear_kd6_vd10_unshared": {"attention_function": "linear", "key_dim": 6, "value_dim": 10,
                                 "share_embeddings": False},
}


@pytest.mark.integration
@pytest.mark.parametrize("variant", list(DECODE_VARIANTS))
def test_cached_decoding_equals_the_full_forward_pass(variant: str) -> None:
    model_config = TINY.replace(**DECODE_VARIANTS[variant])
    params = init_params(model_config, seed=1)
    inputs, targets, _ = random_batch(0, batch=3, source_len=7, target_len=9)
    full = full_logits(params, inputs, targets, model_config=model_config)
    cached = incremental_logits(params, inputs, targets, model_config=model_config)
    np.testing.assert_allclose(cached, full, atol=3e-5, rtol=1e-5)


def test_linear_decoding_keeps_a_running_state_instead_of_a_cache() -> None:
    short, long = (decode_steps._init_cache(TINY.replace(attention_function="linear"), 3, length)
                   for length in (8, 64))
    leaves = jax.tree_util.tree_leaves_with_path(short["decoder_0"]["self_attention"])
    assert {jax.tree_util.keystr(path) for path, _ in leaves} == {"['linear_normaliser']", "['linear_state']"}
    assert short["decoder_0"]["self_attention"]["linear_state"].shape == (3, 4, 8, 8)  # [N,H,K,V]
    assert jax.tree.map(jnp.shape, short) == jax.tree.map(jnp.shape, long)  # O(1) in the length.


@pytest.mark.integration
@pytest.mark.parametrize("function", FUNCTIONS)
def test_cached_and_uncached_beam_and_greedy_searches_agree(function: str) -> None:
    model_config = TINY.replace(attention_function=function)
    params = nn.meta.unbox(init_params(model_config, seed=3))
    inputs, _, lengths = random_batch(2, batch=3, source_len=8, target_len=1)
    max_lengths = jnp.asarray(np.minimum(lengths + 6, 14), jnp.int32)
    for method in ("beam", "greedy") if function == "linear" else ("beam",):  # Beam: rows shared.
        results = [jax.tree.map(np.asarray, decode.decode_batch(
            params, inputs, max_lengths, model_config=model_config, max_decode_len=16, method=method,
            use_cache=use_cache)) for use_cache in (True, False)]
        np.testing.assert_array_equal(results[0].tokens, results[1].tokens)
        np.testing.assert_allclose(results[0].scores, results[1].scores, atol=1e-4)


@pytest.mark.integration
@pytest.mark.parametrize("function", FUNCTIONS)
def test_language_model_decodes_generates_and_keeps_documents_apart(function: str) -> None:
    cfg = TransformerConfig(vocab_size=30, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4,
                            value_dim=6, dropout_rate=0.0, max_len=24, attention_function=function)
    lm = language_model.LanguageModel(cfg)
    targets = jnp.asarray(np.random.default_rng(4).integers(4, 30, (2, 7)), jnp.int32)
    # Compiled (jax.jit), init and forward passes alike: op by op, each operation compiled on its own.
    params = nn.meta.unbox(jax.jit(lm.init)(jax.random.key(0), targets)["params"])
    apply = jax.jit(lm.apply)
    full = apply({"params": params}, targets)
    decoder = language_model.LanguageModel(cfg.replace(decode=True))
    cache = jax.tree.map(jnp.zeros_like, jax.jit(decoder.init)(jax.random.key(0), targets)["cache"])
    decode_step = jax.jit(lambda cache, ids: decoder.apply({"params": params, "cache": cache}, ids,
                                                           method=language_model.LanguageModel.logits,
                                                           mutable=["cache"]))
    inputs = model._shift_right(targets)
    for position in range(targets.shape[1]):  # Cached decoding, one position at a time.
        step, updated = decode_step(cache, inputs[:, position, None])
        cache = updated["cache"]
        np.testing.assert_allclose(step[:, 0], full[:, position], atol=3e-5)
    packed = jnp.concatenate([targets[:1, :4], targets[1:, :5], jnp.zeros((1, 2), jnp.int32)], axis=1)
    together = apply({"params": params}, packed, targets_segmentation=jnp.array([[1] * 4 + [2] * 5 + [0] * 2]),
                     targets_position=jnp.array([[0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 0]]))
    np.testing.assert_allclose(together[:, 4:9], apply({"params": params}, targets[1:, :5]), atol=3e-5)
    generator = generation.Generator(cfg, params, WordTokenizer())
    prompt = [5, 9, 7]
    output = generator.generate_ids([prompt], generation.SamplingSettings(temperature=0.0, max_new_tokens=5))[0]
    sequence = list(prompt)
    forward = jax.jit(lambda ids: lm.apply({"params": params}, ids))
    for _ in range(len(output)):  # Greedy: argmax of a full forward pass over the sequence so far.
        padded = sequence + [4] * (9 - len(sequence))  # Causal: later positions change nothing read here.
        logits = np.array(forward(jnp.asarray([padded]))[0, len(sequence)])
        logits[[model.PAD_ID, model.UNK_ID, model.BOS_ID]] = -np.inf
        sequence.append(int(np.argmax(logits)))
    assert output == sequence[len(prompt):]


@pytest.mark.integration
@pytest.mark.parametrize("function", FUNCTIONS)
def test_attention_maps_of_softmax_functions_and_a_clear_refusal_for_linear(function: str) -> None:
    model_config = TINY.replace(attention_function=function, max_len=24)
    params = nn.meta.unbox(init_params(model_config, seed=4))
    settings = dataclasses.replace(SHORT, beam_size=1)
    if function == "linear":
        with pytest.raises(ValueError, match="forms no normalised attention weight matrix") as raised:
            attention_maps.attention_maps(model_config, params, WordTokenizer(), "w5 w6 w7", "w8 w9",
                                          settings=settings)
        assert "\n" not in str(raised.value)
        return
    maps = attention_maps.attention_maps(model_config, params, WordTokenizer(), "w5 w6 w7", "w8 w9",
                                         settings=settings)
    assert maps["encoder"].shape == (2, 4, 4, 4) and maps["cross"].shape == (2, 4, 3, 4)
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(maps[kind].sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(maps["decoder"], k=1) == 0.0)  # Causal.


# --- The sweep file ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_sweep_dry_run_lists_every_row_for_three_seeds(tmp_path: pathlib.Path) -> None:
    from configs.sweeps import attention_function as sweep  # Tests may import configs.

    rows = list(sweep.get_sweep())
    assert len(rows) == 10 and rows[0] == "base" and "linear" in rows
    root = tmp_path / "attention_function"
    result = run_sweep("--config=configs/sweeps/attention_function.py", "--executor=local", f"--root={root}",
                       "--dry_run")
    assert result.returncode == 0, result.stderr
    commands = [shlex.split(line) for line in result.stdout.splitlines() if line and not line.startswith("#")]
    expected = [(row, seed) for seed in (0, 1, 2) for row in rows]  # Every row at seed 0 first.
    assert [(pathlib.Path(c[7].split("=", 1)[1]).parent.name, c[-4]) for c in commands] == [
        (row, f"--config.seed={seed}") for row, seed in expected]
    assert not root.exists()
    for row in rows:
        config = sweep.get_config(row)
        model_config = sections.build_experiment(config, row).model  # Every row is a valid model.
        assert model_config.d_model == 128 and model_config.num_heads == 4 and model_config.value_dim == 32
        assert config.dataset == "tsv:../shared/data/messages_en_de" and config.name == row
    keys = {row: (sweep.get_config(row).attention_function, sweep.get_config(row).key_dim) for row in rows}
    assert keys["base"] == ("scaled_dot_product", 32) and keys["linear"] == ("linear", 32)
    assert sorted(keys.values()) == sorted([(f, k) for f in ("scaled_dot_product", "dot_product", "additive")
                                            for k in (8, 32, 128)] + [("linear", 32)])


# --- End to end: training runs and the commands that read them -------------------------------------

def _command(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO_ROOT)


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("function", ["additive", "linear"])  # dot_product: the scaled program, rescaled.
def test_packed_training_with_a_beam_search_evaluation(function: str, tiny_data_dir: pathlib.Path,
                                                       tmp_path: pathlib.Path) -> None:
    """Two packed training steps, then the evaluation's sampled BLEU (a cached beam search)."""
    from configs import tiny  # Tests may import configs; the library may not.

    config = tiny.get_config()
    config.update(TINY_TRAINING)
    config.update(dict(data_dir=str(tiny_data_dir), num_train_steps=2, eval_every_steps=2,
                       checkpoint_every_steps=2, packing=True, num_bleu_examples=2, compilation_cache_dir="",
                       attention_function=function))
    workdir = tmp_path / "run"
    results = train.train_and_evaluate(sections.build_experiment(config, "test"), str(workdir))
    assert results["finished"] and math.isfinite(results["eval_loss"])
    evaluations = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert any("eval/bleu" in row for row in evaluations)  # The evaluation's beam search ran.
    assert json.loads((workdir / "config.json").read_text())["attention_function"] == function
    if function == "linear":  # The attention plot command refuses in one line, without a traceback.
        plotted = _command("attention_jax.plot_attention", f"--workdir={workdir}", "--text=the cat sleeps",
                           f"--out={tmp_path / 'maps.png'}")
        assert plotted.returncode != 0 and "forms no normalised attention weight matrix" in plotted.stderr
        assert "Traceback" not in plotted.stderr


@pytest.mark.slow
@pytest.mark.end_to_end
def test_linear_language_model_trains_and_generates(tmp_path: pathlib.Path) -> None:
    """The decoder-only model with linear attention: training, then sampling over the running state."""
    from tests.support.lm_corpus import lm_experiment, write_txt_corpus

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_txt_corpus(corpus, train_docs=200)
    config = lm_experiment(corpus, tmp_path / "data", attention_function="linear", num_train_steps=3,
                        eval_every_steps=3, checkpoint_every_steps=3)
    workdir = tmp_path / "lm"
    train.train_and_evaluate(config, str(workdir))
    run = inference.load_run(str(workdir), model_kind="decoder_only")
    assert run.model_config.attention_function == "linear"
    generator = generation.Generator(run.model_config, run.params, run.tokenizer)
    texts = generator.generate(["Der Hund", "Heute"], generation.SamplingSettings(temperature=0.0,
                                                                                max_new_tokens=6))
    assert len(texts) == 2 and all(isinstance(text, str) for text in texts)
