"""Incremental decoding with the key/value cache, batched beam search on a model, the Translator."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import subprocess
import sys
import textwrap
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.decoding import decode, decode_steps
from attention_jax.experiment.sections import DecodeSettings
from attention_jax.models import attention_registry
from attention_jax.models.model import BOS_ID, EOS_ID, Transformer
from tests.support import REPO_ROOT, train_support
from tests.support.decoding_helpers import (
    SHORT,
    TINY,
    VOCAB_SIZE,
    WordTokenizer,
    assert_logits_match,
    full_logits,
    incremental_logits,
    init_params,
    random_batch,
)


@functools.partial(jax.jit, static_argnames=("model_config",))
def prefix_logits(params, inputs, targets, *, model_config):
    """The same, recomputing the whole prefix at every step (the uncached step function)."""
    model = Transformer(model_config)
    encoded = model.apply({"params": params}, inputs, method=Transformer.encode)
    step = decode_steps._make_uncached_step_fn(model_config, params, encoded, inputs)
    state = decode_steps._init_prefix_state(inputs.shape[0], targets.shape[1])
    decoder_inputs = jnp.concatenate([jnp.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)

    def scan_step(state, token_ids):
        logits, state = step(state, token_ids)
        return state, logits

    _, logits = jax.lax.scan(scan_step, state, decoder_inputs.T)
    return jnp.swapaxes(logits, 0, 1)


@pytest.mark.integration
@pytest.mark.parametrize("overrides,source_len,target_len", [
    ({}, 7, 9),
    ({"layer_norm_position": "pre", "share_embeddings": False, "key_dim": 6, "value_dim": 10}, 7, 9),
    ({"layer_norm_position": "pre", "positional_encoding": "learned"}, 7, 9),
    ({"positional_encoding": "learned", "attention_window": 2}, 7, 9),
    ({"attention_window": 2}, 19, 14),  # Several window blocks: the cache keeps only the last r + 1 keys.
], ids=["post_ln", "pre_ln_unshared_kd6_vd10", "pre_ln_learned_pe", "learned_pe_window2", "window2_long"])
def test_cached_logits_equal_full_forward_pass(overrides, source_len, target_len):
    """Incremental decoding through the key/value cache gives the teacher-forced forward pass's logits.

    The one test of this for every model variant that changes the decoder (layer-norm position,
    unshared embeddings, d_k != d_v, learned positions, restricted self-attention).
    """
    model_config = TINY.replace(**overrides)
    params = init_params(model_config, seed=1)
    inputs, targets, _ = random_batch(0, batch=3, source_len=source_len, target_len=target_len)
    full = full_logits(params, inputs, targets, model_config=model_config)  # [B,T,V]
    cached = incremental_logits(params, inputs, targets, model_config=model_config)
    assert_logits_match(cached, full)


@pytest.mark.integration
def test_uncached_prefix_logits_equal_full_forward_pass():
    model_config = TINY.replace(attention_window=3)
    params = init_params(model_config, seed=2)
    inputs, targets, _ = random_batch(1, batch=2, source_len=6, target_len=8)
    full = full_logits(params, inputs, targets, model_config=model_config)
    np.testing.assert_allclose(prefix_logits(params, inputs, targets, model_config=model_config), full,
                               atol=2e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def tiny_params():
    return nn.meta.unbox(init_params(TINY, seed=3))


def _search(params, inputs, max_lengths, **settings):
    result = decode.decode_batch(params, inputs, jnp.asarray(max_lengths, jnp.int32), model_config=TINY,
                                 max_decode_len=inputs.shape[1] + 6, **settings)
    return jax.tree_util.tree_map(np.asarray, result)


@pytest.mark.integration
def test_cached_and_uncached_search_agree(tiny_params):
    inputs, _, lengths = random_batch(2, batch=4, source_len=8, target_len=1)
    max_lengths = np.minimum(lengths + 6, 14)
    max_lengths[3] = 0  # A padding row.
    cached = _search(tiny_params, inputs, max_lengths, method="beam")
    uncached = _search(tiny_params, inputs, max_lengths, method="beam", use_cache=False)
    np.testing.assert_array_equal(cached.tokens, uncached.tokens)
    np.testing.assert_allclose(cached.scores, uncached.scores, atol=1e-4)
    assert not cached.tokens[3].any()
    for row in range(3):
        length = cached.lengths[row, 0]
        assert 1 <= length <= max_lengths[row]
        assert cached.tokens[row, 0, length - 1] == EOS_ID and not cached.tokens[row, 0, length:].any()


KERNEL_TINY = TINY.replace(key_dim=6, value_dim=10)  # d_k != d_v: the kernels' zero-padding is used too.


def _kernel_implementations() -> list:
    """``(function, implementation)`` for every registered function's implementations other than einsum."""
    cases = []
    for name, entry in attention_registry.ATTENTION_FUNCTIONS.items():
        for implementation in entry.implementations:
            if implementation == "einsum":
                continue
            marks = [pytest.mark.gpu, pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN needs a GPU")
                     ] if implementation == "cudnn" else []
            cases.append(pytest.param(name, implementation, marks=marks, id=f"{name}-{implementation}"))
    return cases


@functools.lru_cache(maxsize=None)
def _einsum_beam_search(function: str, dtype: str):
    model_config = KERNEL_TINY.replace(attention_function=function, dtype=dtype)
    params = nn.meta.unbox(init_params(model_config, seed=6))
    inputs, _, lengths = random_batch(7, batch=3, source_len=8, target_len=1)
    max_lengths = jnp.asarray(np.minimum(lengths + 6, 14), jnp.int32)
    result = decode.decode_batch(params, inputs, max_lengths, model_config=model_config, max_decode_len=16)
    return params, inputs, max_lengths, jax.tree_util.tree_map(np.asarray, result)


@pytest.mark.integration
@pytest.mark.parametrize("function,implementation", _kernel_implementations())
def test_cached_beam_search_is_the_same_on_every_implementation(function, implementation):
    """The cached beam search through the XLA / cuDNN kernels equals the einsum path's (issue 64).

    Cached self-attention and cross-attention from the hypotheses (beam rows) to their sentence's
    shared encoder row both go through the kernels. cuDNN takes half precision only: it is compared
    with the einsum path in bfloat16, at bfloat16's tolerance.
    """
    dtype = "bfloat16" if implementation == "cudnn" else "float32"
    params, inputs, max_lengths, expected = _einsum_beam_search(function, dtype)
    model_config = KERNEL_TINY.replace(attention_function=function, dtype=dtype,
                                       attention_implementation=implementation)
    result = jax.tree_util.tree_map(np.asarray, decode.decode_batch(
        params, inputs, max_lengths, model_config=model_config, max_decode_len=16))
    if implementation != "cudnn":
        np.testing.assert_array_equal(result.tokens, expected.tokens)
    np.testing.assert_allclose(result.scores, expected.scores, atol=1e-4 if dtype == "float32" else 5e-2)


def test_cache_stage_ends():
    assert decode_steps._cache_stage_ends(64, 4) == (16, 32, 48)
    assert decode_steps._cache_stage_ends(64, 2) == (32,)
    assert decode_steps._cache_stage_ends(64, 1) == ()
    assert decode_steps._cache_stage_ends(16, 4) == ()  # A stage is at least 16 steps.
    assert decode_steps._cache_stage_ends(24, 4) == (16,)
    assert decode_steps._cache_stage_ends(80, 4) == (32, 64)  # 80 / 4 = 20, rounded up to 32.
    assert decode_steps._cache_stage_ends(114, 4, multiple=8) == (32, 64, 96)
    with pytest.raises(ValueError, match="num_stages"):
        decode_steps._cache_stage_ends(64, 0)


def test_grow_cache_pads_keys_and_values_and_keeps_the_counters():
    cache = decode_steps._init_cache(TINY, num_rows=3, max_decode_len=16)
    cache = jax.tree_util.tree_map(lambda leaf: leaf + 1 if leaf.ndim else leaf + 5, cache)
    grown = decode_steps._grow_cache(cache, 40)
    for name in ("cached_key", "cached_value"):
        before = np.asarray(cache["decoder_1"]["self_attention"][name])
        after = np.asarray(grown["decoder_1"]["self_attention"][name])
        assert before.shape == (3, 4, 16, 8) and after.shape == (3, 4, 40, 8)  # [N, H, L, K]
        np.testing.assert_array_equal(after[:, :, :16], before)
        assert not after[:, :, 16:].any()
    assert int(grown["decoder_0"]["self_attention"]["cache_index"]) == 5
    assert int(grown["decoder_position"]["position"]) == 5


@pytest.mark.integration
@pytest.mark.parametrize("method", ["beam", "greedy"])
def test_a_cache_grown_in_stages_gives_the_same_translations(method):
    # L = 64 in stages of 16 (the cache grows three times); the random model's outputs run long, so
    # every stage is used. One full-size cache and recomputing the prefix are the references.
    model_config = TINY.replace(max_len=64)
    params = nn.meta.unbox(init_params(model_config, seed=4))
    inputs, _, lengths = random_batch(5, batch=4, source_len=24, target_len=1)
    max_lengths = jnp.asarray(np.minimum(lengths + 40, 60), jnp.int32)
    search = functools.partial(decode.decode_batch, params, inputs, max_lengths, model_config=model_config,
                               method=method, max_decode_len=64, early_stop=False)
    staged, one_stage, uncached = search(cache_stages=4), search(cache_stages=1), search(use_cache=False)
    assert int(staged.num_steps) > 48  # The last stage ran.
    for reference in (one_stage, uncached):
        np.testing.assert_array_equal(staged.tokens, reference.tokens)
        np.testing.assert_allclose(staged.scores, reference.scores, atol=1e-4)


@pytest.mark.integration
def test_beam_scores_are_the_models_log_probabilities(tiny_params):
    inputs, _, lengths = random_batch(3, batch=4, source_len=8, target_len=1)
    alpha = 0.6
    result = _search(tiny_params, inputs, np.minimum(lengths + 6, 14), method="beam", alpha=alpha)
    targets = result.tokens[:, 0]  # [B,L], 0-padded after EOS.
    log_probs = np.asarray(jax.nn.log_softmax(full_logits(tiny_params, inputs, targets, model_config=TINY)))
    for row in range(4):
        length = result.lengths[row, 0]
        log_prob = float(np.sum(log_probs[row, np.arange(length), targets[row, :length]]))
        assert result.log_probs[row, 0] == pytest.approx(log_prob, abs=1e-4)
        assert result.scores[row, 0] == pytest.approx(log_prob / ((5 + length) / 6) ** alpha, abs=1e-4)


def test_bucket_sizes():
    assert [decode.bucket_length(n, 100) for n in (1, 8, 9, 33, 64, 65, 99)] == [8, 8, 16, 64, 64, 100, 100]
    assert [decode.bucket_rows(n, 64) for n in (1, 3, 4, 5, 64)] == [1, 4, 4, 8, 64]
    assert decode.bucket_rows(70, 64) == 64
    assert [decode.bucket_rows(n, 64, multiple=8) for n in (1, 9, 64)] == [8, 16, 64]


@pytest.fixture(scope="module")
def translator(tiny_params):
    return decode.Translator(TINY, tiny_params, WordTokenizer(), settings=SHORT, batch_size=4)


def test_cache_length_covers_the_longest_output_within_the_limit():
    assert decode.cache_length(64, limit=114) == 64
    assert decode.cache_length(65, limit=114) == 80  # Rounded up to a multiple of 16.
    assert decode.cache_length(110, limit=114) == 112
    assert decode.cache_length(113, limit=114) == 114  # Never past the source bucket plus margin.
    assert decode.cache_length(1, limit=114, multiple=8) == 8
    assert decode.cache_length(17, limit=114) == decode_steps.POSITION_MULTIPLE * 2  # The default is its.


@pytest.mark.integration
def test_translator_keeps_order_and_handles_empty_lines(translator):
    sources = ["w5 w6 w7", "", "w9", "w10 w11 w12 w13 w14 w15", "   ", "w20 w21", "w30 w4 w31 w32"]
    outputs = translator.translate(sources)
    assert len(outputs) == len(sources)
    assert outputs[1] == "" and outputs[4] == ""
    alone = [translator.translate([source])[0] for source in sources if source.strip()]
    assert [output for source, output in zip(sources, outputs) if source.strip()] == alone
    assert translator.translate([]) == []


def test_translator_output_length_is_bounded(translator):
    sources = ["w5", "w8 w9 w10", "w11 w12 w13 w14 w15 w16 w17"]
    for source, ids in zip(sources, translator.translate_ids(translator.encode_sources(sources))):
        source_len = len(source.split()) + 1
        assert 1 <= len(ids) <= source_len + translator.max_extra_len
        assert ids[-1] == EOS_ID and EOS_ID not in ids[:-1]


@pytest.mark.integration
def test_translator_truncates_overlong_input_with_a_warning(translator):
    assert translator.max_source_len == TINY.max_len - 6
    long_source = " ".join(f"w{4 + i % 30}" for i in range(40))
    with pytest.warns(UserWarning, match="longer than the model's maximum input of 18 tokens"):
        encoded = translator.encode_sources(["w5", long_source])
    assert len(encoded[1]) == 18 and encoded[1][-1] == EOS_ID
    with pytest.warns(UserWarning, match="truncated"):
        outputs = translator.translate([long_source, "w6"])
    assert len(outputs) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        translator.encode_sources(["w5 w6"])  # No warning for inputs that fit.


def test_translator_replaces_invalid_characters_with_a_warning(translator):
    assert decode.replace_invalid_characters("w5 \udcff w6\ud800") == "w5 \ufffd w6\ufffd"
    assert decode.replace_invalid_characters("Grüße w5") == "Grüße w5"

    class StrictTokenizer(WordTokenizer):
        def encode(self, text: str) -> list[int]:
            text.encode("utf-8")  # Raises for lone surrogates, as SentencePiece does.
            return [int(word[1:]) if word[1:].isdigit() else 1 for word in text.split()] + [EOS_ID]

    strict = decode.Translator(TINY, translator.params, StrictTokenizer(), settings=SHORT, batch_size=4)
    with pytest.warns(UserWarning, match="replaced by U\\+FFFD"):
        assert strict.encode_sources(["w5 \udcff"]) == [[5, 1, EOS_ID]]


def test_translator_rejects_mismatched_params_and_tokenizer(tiny_params):
    with pytest.raises(ValueError, match="do not match the model config"):
        decode.Translator(TINY.replace(d_ff=128), tiny_params, WordTokenizer(), settings=SHORT)
    big_tokenizer = WordTokenizer()
    big_tokenizer.vocab_size = VOCAB_SIZE + 1
    with pytest.raises(ValueError, match="tokenizer has 41 ids"):
        decode.Translator(TINY, tiny_params, big_tokenizer, settings=SHORT)
    with pytest.raises(ValueError, match="leaves no room"):
        decode.Translator(TINY, tiny_params, WordTokenizer(), settings=DecodeSettings(max_decode_extra_len=24))
    with pytest.raises(ValueError, match="beam_size"):
        decode.Translator(TINY, tiny_params, WordTokenizer(), settings=dataclasses.replace(SHORT, beam_size=0))
    with pytest.raises(ValueError, match="cache_stages must be positive; got 0"):
        dataclasses.replace(SHORT, cache_stages=0)


def test_decode_settings_read_cache_stages_from_the_config():
    from attention_jax.experiment import schema
    from tests.support import fake_data

    assert fake_data.tiny_experiment().decoding.cache_stages == 2
    assert fake_data.tiny_experiment(cache_stages=4).decoding.cache_stages == 4
    assert schema.with_old_run_defaults({})["cache_stages"] == 2  # A run from before the field.


@pytest.mark.integration
def test_greedy_translator_matches_greedy_search(tiny_params):
    greedy = decode.Translator(TINY, tiny_params, WordTokenizer(), settings=dataclasses.replace(SHORT, beam_size=1),
                               batch_size=4)
    sources = ["w5 w6 w7", "w9", "w10 w11"]
    ids = greedy.translate_ids(greedy.encode_sources(sources))
    inputs = np.zeros((4, 8), np.int32)
    max_lengths = np.zeros(4, np.int32)
    for row, source in enumerate(sources):
        encoded = WordTokenizer().encode(source)
        inputs[row, :len(encoded)] = encoded
        max_lengths[row] = len(encoded) + 6
    result = decode.decode_batch(tiny_params, jnp.asarray(inputs), jnp.asarray(max_lengths), model_config=TINY,
                                 method="greedy", max_decode_len=14)
    for row in range(3):
        length = int(result.lengths[row, 0])
        assert ids[row] == np.asarray(result.tokens[row, 0, :length]).tolist()


SHARDED_SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    import flax.linen as nn
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params
    from attention_jax.decoding import decode
    assert jax.device_count() == 8, jax.devices()
    params = nn.meta.unbox(init_params(TINY, seed=3))
    mesh = Mesh(np.array(jax.devices()), ("data",))
    rng = np.random.default_rng(0)
    inputs = rng.integers(4, 40, (8, 8)).astype(np.int32)
    inputs[:, 7] = 3
    max_lengths = np.full((8,), 14, np.int32)
    max_lengths[5] = 0
    settings = dict(model_config=TINY, max_decode_len=14)
    expected = decode.decode_batch(params, jnp.asarray(inputs), jnp.asarray(max_lengths), **settings)
    by_row = NamedSharding(mesh, PartitionSpec("data"))
    arguments = (jax.device_put(params, NamedSharding(mesh, PartitionSpec())), jax.device_put(inputs, by_row),
                 jax.device_put(max_lengths, by_row))
    compiled = decode.decode_batch.lower(*arguments, mesh=mesh, **settings).compile()
    assert "all-gather" not in compiled.as_text()  # Each device searches its own sentences.
    result = compiled(*arguments)
    sharding = result.tokens.sharding
    assert len(sharding.device_set) == 8 and sharding.is_equivalent_to(by_row, 3), sharding
    np.testing.assert_array_equal(result.tokens, expected.tokens)
    np.testing.assert_allclose(result.scores, expected.scores, atol=1e-5)
    sources = [" ".join(f"w{4 + (i * 7 + j) % 35}" for j in range(1 + i % 7)) for i in range(8)]
    sharded = decode.Translator(TINY, params, WordTokenizer(), settings=SHORT, batch_size=8, mesh=mesh)
    single = decode.Translator(TINY, params, WordTokenizer(), settings=SHORT, batch_size=8)
    assert sharded.translate(sources) == single.translate(sources)
    print("SHARDED_OK")
""")


@pytest.mark.slow
def test_beam_search_on_a_batch_sharded_over_eight_devices():
    environment = dict(os.environ, JAX_PLATFORMS="cpu",  # 8 CPU devices for this process only.
                       XLA_FLAGS=train_support.child_xla_flags("--xla_force_host_platform_device_count=8"))
    completed = subprocess.run([sys.executable, "-c", SHARDED_SCRIPT], cwd=REPO_ROOT, env=environment,
                               capture_output=True, text=True, timeout=600)
    assert "SHARDED_OK" in completed.stdout, completed.stderr[-3000:]


# Operations that only move data (the removed benchmarks/op_profile.py's "transpose/copy" kind).
_DATA_MOVEMENT = {"transpose", "copy", "bitcast", "parameter", "reshape", "broadcast", "slice", "concatenate",
                  "dynamic-slice", "dynamic-update-slice", "tuple", "get-tuple-element", "constant", "pad", "reverse"}


def test_a_cached_decode_step_moves_no_cross_attention_keys_or_values() -> None:
    # One query position per row: both attentions contract the keys/values as stored. Before, XLA
    # transposed every layer's cross-attention keys and values at every step of the search loop (12% of
    # a base-shape beam search's thread time: docs/benchmarks.md, "History: where a beam search's time went").
    params = nn.meta.unbox(init_params(TINY, seed=0))
    search = functools.partial(decode.decode_batch, model_config=TINY, beam_size=2, alpha=0.6, max_decode_len=16,
                               cache_stages=1)
    hlo = jax.jit(search).lower(params, jnp.full((4, 12), 5, jnp.int32), jnp.full((4,), 10, jnp.int32)).compile()
    computations: dict[str, set[str]] = {}
    instructions, current = [], ""
    for line in hlo.as_text().splitlines():
        if line[:1].strip() and line.rstrip().endswith("{"):  # A computation's header, at column 0.
            current = line.removeprefix("ENTRY ").lstrip("%").split()[0]
        elif match := re.match(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\((.*)$", line):
            opcode, rest = match.groups()
            computations.setdefault(current, set()).add(opcode)
            calls, op_name = re.search(r"calls=%?([\w.\-]+)", rest), re.search(r'op_name="([^"]*)"', rest)
            instructions.append((current, opcode, calls.group(1) if calls else "", op_name.group(1) if op_name else ""))
    fused = {calls for _, opcode, calls, _ in instructions if opcode == "fusion"}
    cross = [(opcode, calls, op_name) for computation, opcode, calls, op_name in instructions
             if computation not in fused and "while/body" in op_name and "cross_attention" in op_name]
    assert cross  # The loop body attends to the source.
    moved = [op_name for opcode, calls, op_name in cross
             if (computations.get(calls, set()) if opcode == "fusion" else {opcode}) <= _DATA_MOVEMENT
             and opcode not in ("parameter", "bitcast", "get-tuple-element", "tuple", "constant")]
    assert moved == []
