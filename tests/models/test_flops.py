"""Training FLOPs (attention_jax.models.flops) against counts read off the models' own parameters and XLA's
count of each attention function; Table 3 report."""

from __future__ import annotations

import csv
import json
import pathlib
import subprocess
import sys
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

from attention_jax.experiment import sections
from attention_jax.models import (
    attention,
    attention_functions,
    attention_registry,
    flops,
    language_model,
    positional_encodings,
)
from attention_jax.models.positional_encodings import AttentionPositions, RelativeSettings
from tests.support.fake_data import tiny_experiment
from tests.support.flop_counts import kernel_scalars, xla_flops


@pytest.mark.parametrize("model_kind", ["decoder_only", "encoder_decoder"])
def test_training_flops_equal_three_forward_passes_counted_from_the_parameters(model_kind: str) -> None:
    experiment = tiny_experiment(model_kind=model_kind, max_len=16, d_ff=48, vocab_size=50)
    model_config = experiment.model
    params = language_model.abstract_params(model_config, model_kind)
    length = experiment.data.max_len  # The training length, without the decoding margin of model_config.max_len.
    heads_kv = model_config.num_heads * (model_config.key_dim + model_config.value_dim)
    scores = 2 * length * heads_kv  # Per query token: q.k over L keys and the weighted sum of L values.
    logits = 2 * model_config.d_model * model_config.vocab_size
    if model_kind == "decoder_only":
        per_token = 2 * kernel_scalars(params, "layer_") + scores + logits
    else:  # One source token per target token: both stacks' kernels, three attentions' scores.
        per_token = (2 * (kernel_scalars(params, "encoder_") + kernel_scalars(params, "decoder_"))
                     + 3 * scores + logits)
    assert flops.training_flops(model_config, model_kind, 1000, length) == pytest.approx(3 * per_token * 1000, rel=1e-9)
    assert experiment.training_flops(1000) == flops.training_flops(model_config, model_kind, 1000, length)


def _attention_alone(function: str, causal: bool) -> Callable[..., jax.Array]:
    """The attention function of ``config.attention_function`` on projected heads, as the model calls it."""
    if function == "scaled_dot_product":
        return lambda query, key, value, _: attention.scaled_dot_product_attention(query, key, value)
    if function == "dot_product":
        return lambda query, key, value, _: attention.scaled_dot_product_attention(
            attention_functions.unscaled_query(query), key, value)
    if function == "additive":
        return attention_functions.additive_attention
    mask = attention_functions.StructuredMask(causal=True) if causal else None
    return lambda query, key, value, _: attention_functions.linear_attention(query, key, value, mask)


# (function, T, S, causal): cross-attention shapes for the non-causal forms; causal linear attention at
# 96 positions (two chunks of 64, the second half padding) and 200 (four chunks, carried sums).
XLA_CASES = [("scaled_dot_product", 128, 128, False), ("scaled_dot_product", 64, 32, False),
             ("dot_product", 64, 32, False), ("additive", 128, 128, False), ("additive", 64, 32, False),
             ("linear", 64, 32, False), ("linear", 96, 96, True), ("linear", 200, 200, True)]


@pytest.mark.parametrize("function,query_len,key_len,causal", XLA_CASES)
def test_attention_function_flops_agree_with_xla_cost_analysis(function: str, query_len: int, key_len: int,
                                                               causal: bool) -> None:
    num_heads, key_dim, value_dim = 2, 128, 128
    query = jnp.ones((1, query_len, num_heads, key_dim))
    key = jnp.ones((1, key_len, num_heads, key_dim))
    value = jnp.ones((1, key_len, num_heads, value_dim))
    score_vector = jnp.ones((num_heads, key_dim))
    measured = xla_flops(_attention_alone(function, causal), query, key, value, score_vector)
    counted = flops.attention_function_flops(function, query_len=query_len, key_len=key_len, num_heads=num_heads,
                                             key_dim=key_dim, value_dim=value_dim, causal=causal)
    # XLA counts everything our convention leaves out, each O(1) per score or per head component: softmax
    # (~5 per score), the sqrt(d_k) rescaling, elu + 1 (~5 per component of q and k), masks and the
    # division (~4 per output component). Against the >= 2 (K + V) = 512 counted per score, or 4 V = 512
    # per query component for linear attention, that is 0.5% (additive) to ~3% (linear): never below our
    # count, under 4% above it. A missing or extra term of the count is >= 1/3 of it at these shapes.
    assert counted <= measured <= 1.04 * counted


def test_attention_function_flops_by_hand_on_a_tiny_shape() -> None:
    shape = dict(query_len=3, key_len=3, num_heads=1, key_dim=2, value_dim=1)  # T = S = 3, K = 2, V = 1.
    # q.k and the weighted sum over the 9 pairs: 9 * (2 * 2 + 2 * 1).
    assert flops.attention_function_flops("scaled_dot_product", **shape) == 54
    assert flops.attention_function_flops("dot_product", **shape, causal=True) == 54  # All pairs, masked.
    # w^T tanh(q + k): an add and a multiply-add per pair and component, 9 * 2 * 3; weighted sum 9 * 2 * 1.
    assert flops.attention_function_flops("additive", **shape) == 72
    # sum_s phi(k_s) v_s^T: 3 keys * 2 * 2 * 1; sum_s phi(k_s): 3 * 2 adds; each query reads both:
    # 3 * 2 * 2 * 1 and 3 * 2 * 2.
    assert flops.attention_function_flops("linear", **shape) == 12 + 6 + 12 + 12
    # Causal, chunks of 2: P = 4 padded positions. Within chunks 4 * 2 * (2 K + 2 V + 1) = 56; each chunk's
    # sums: tail * phi(k) (8), its product with v (16), its normaliser (16); carried across 2 chunks:
    # 2 * 2 * (1 + 1) = 8; read: 16 + 4 (added in) and 16 + 4.
    assert flops.attention_function_flops("linear", **shape, causal=True, linear_chunk_size=2) == (
        56 + 8 + 16 + 16 + 8 + 20 + 20)
    # One chunk: nothing carried in, so no chunk sums: within 3 * 3 * 7 = 63, read 3 * (4 + 1 + 4 + 1) = 30.
    assert flops.attention_function_flops("linear", **shape, causal=True) == 63 + 30
    with pytest.raises(ValueError, match="attention_function must be one of"):
        flops.attention_function_flops("softmax", **shape)


@pytest.mark.slow
def test_flops_are_read_from_the_registry_without_importing_a_framework() -> None:
    # One home for each count: every entry's FLOPs are its own, and models/flops.py (loaded by the PyTorch
    # benchmark's environment) pulls in no JAX through either registry.
    shape = dict(query_len=7, key_len=5, num_heads=3, key_dim=4, value_dim=6)
    for name, entry in attention_registry.ATTENTION_FUNCTIONS.items():
        per_head = entry.flops(query_len=7, key_len=5, key_dim=4, value_dim=6, causal=False,
                               chunk_size=attention_registry.LINEAR_CHUNK_SIZE)
        assert flops.attention_function_flops(name, **shape) == 3 * per_head > 0
    assert attention_functions.LINEAR_CHUNK_SIZE == attention_registry.LINEAR_CHUNK_SIZE
    for name, scheme in positional_encodings.POSITIONAL_ENCODINGS.items():
        expected = 0.0 if scheme.flops is None else 3 * scheme.flops(AttentionPositions(name), query_len=7,
                                                                       key_len=5, key_dim=4, value_dim=6)
        assert flops._positional_encoding_flops(name, **shape) == expected
        assert (expected > 0) == (not scheme.adds_to_embeddings)
    probe = ("import sys; import attention_jax.models.flops; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'flax', 'numpy', 'torch')))")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                              cwd=pathlib.Path(__file__).resolve().parents[2], check=True)
    assert imported.stdout.strip() == "[]"


class _PositionTerms(nn.Module):
    """What an in-attention encoding computes in one self-attention, and nothing else.

    Given the scores, the weights and the heads, it returns the scores plus ``score_bias`` and the heads
    plus ``value_term`` (relative, ALiBi), or the rotated queries and keys (rotary).
    """

    settings: AttentionPositions
    value_dim: int

    @property
    def positional_encoding(self) -> AttentionPositions:  # Read by the hooks, as MultiHeadAttention's is.
        return self.settings

    @nn.compact
    def __call__(self, query: jax.Array, key: jax.Array, scores: jax.Array, weights: jax.Array, heads: jax.Array,
                 positions: jax.Array) -> tuple[jax.Array, jax.Array]:
        scheme = positional_encodings.positional_encoding(self.settings.encoding)
        if scheme.rotate is not None:
            return scheme.rotate(query, positions), scheme.rotate(key, positions)
        assert scheme.score_bias is not None
        biased = scores + scheme.score_bias(self, self.settings, query, positions, positions)
        term = None if scheme.value_term is None else scheme.value_term(self, self.settings, weights, positions,
                                                                           positions)
        return biased, heads if term is None else heads + term


def _position_terms_xla_flops(settings: AttentionPositions, length: int, num_heads: int, key_dim: int) -> float:
    """XLA's count of :class:`_PositionTerms` on distinct random inputs (``T = S = length``, ``V = K``)."""
    draws = jax.random.split(jax.random.key(0), 5)
    query, key, heads = (jax.random.normal(draw, (1, length, num_heads, key_dim)) for draw in draws[:3])
    scores = jax.random.normal(draws[3], (1, num_heads, length, length))
    weights = jax.nn.softmax(jax.random.normal(draws[4], scores.shape))
    positions = jnp.arange(length)[None]
    module = _PositionTerms(settings, key_dim)
    variables = module.init(jax.random.key(1), query, key, scores, weights, heads, positions)
    return xla_flops(lambda variables, *inputs: module.apply(variables, *inputs, positions), variables, query, key,
                      scores, weights, heads)


@pytest.mark.integration
@pytest.mark.parametrize("settings", [AttentionPositions("relative"),
                                      AttentionPositions("relative", RelativeSettings(max_distance=4,
                                                                                      add_to_values=False)),
                                      AttentionPositions("rotary"), AttentionPositions("alibi")],
                         ids=["relative", "relative_keys_k4", "rotary", "alibi"])
@pytest.mark.parametrize("length,key_dim", [(64, 64), (48, 32)])
def test_positional_encoding_flops_per_head_agree_with_xla_cost_analysis(settings: AttentionPositions, length: int,
                                                                         key_dim: int) -> None:
    # The count is per head. XLA's per-head share is the difference between 4 heads and 2 (the work that
    # depends on the positions alone, |i - j|, the one-hot, the rotation angles, is the same for both and
    # cancels). What the convention leaves out per head is elementwise on the relative bias's [T, S]
    # (its 1/sqrt(d_k) scale; XLA counts 2 T S there), allowed up to 3 T S; rotary and ALiBi leave nothing
    # out (1% allowed). A missing or extra product (2 T R K, 2 T S R, 2 T R V, the rotation) is >= 1/3 of
    # the count at these shapes, and so is each of ALiBi's two terms; the lone adds are checked by hand below.
    xla_per_head = (_position_terms_xla_flops(settings, length, 4, key_dim)
                    - _position_terms_xla_flops(settings, length, 2, key_dim)) / 2
    counted = flops._positional_encoding_flops(settings.encoding, query_len=length, key_len=length, num_heads=1,
                                              key_dim=key_dim, value_dim=key_dim,
                                              encoding_settings=settings.entry_settings)
    left_out = 3 * length * length if settings.encoding == "relative" else 0
    assert counted <= xla_per_head <= 1.01 * counted + left_out


def test_positional_encoding_flops_by_hand_on_a_tiny_shape() -> None:
    shape = dict(query_len=3, key_len=3, num_heads=1, key_dim=2, value_dim=1)  # T = S = 3, K = 2, V = 1.
    for embedding_encoding in ("sinusoidal", "learned", "none"):
        assert flops._positional_encoding_flops(embedding_encoding, **shape) == 0
    # k = 1, R = 3. Keys: q . w^K_r for 3 queries and 3 distances, 3 * 3 * 2 * 2 = 36, plus the 9 adds.
    # Values: the weights times the [3, 3, 3] one-hot, 2 * 27 = 54; times w^V, 2 * 3 * 3 * 1 = 18; 3 adds.
    assert flops._positional_encoding_flops("relative", **shape, encoding_settings=RelativeSettings(
        max_distance=1, add_to_values=False)) == 36 + 9
    assert flops._positional_encoding_flops("relative", **shape, encoding_settings=RelativeSettings(
        max_distance=1)) == 36 + 9 + 54 + 18 + 3
    # Rotary: 6 FLOPs a pair of components, for 3 queries and 3 keys of 1 pair each.
    assert flops._positional_encoding_flops("rotary", **shape) == 6 * 6
    # ALiBi: a multiply and an add per score; per head, so 3 heads are 3 times it.
    assert flops._positional_encoding_flops("alibi", **{**shape, "num_heads": 3}) == 3 * 2 * 9
    with pytest.raises(ValueError, match="positional_encoding must be one of"):
        flops._positional_encoding_flops("sinusoids", **shape)


@pytest.mark.parametrize("encoding", ["relative", "rotary", "alibi"])
@pytest.mark.parametrize("model_kind", ["decoder_only", "encoder_decoder"])
def test_training_flops_count_the_encoding_in_every_self_attention_only(model_kind: str, encoding: str) -> None:
    paper = tiny_experiment(model_kind=model_kind, max_len=96, d_ff=48, vocab_size=50).model
    other = tiny_experiment(model_kind=model_kind, max_len=96, d_ff=48, vocab_size=50,
                            positional_encoding=encoding).model
    length = 96
    per_self_attention = flops._positional_encoding_flops(
        encoding, query_len=length, key_len=length, num_heads=other.num_heads, key_dim=other.key_dim,
        value_dim=other.value_dim, encoding_settings=other.positional_encoding_settings)
    self_attentions = paper.num_layers * (1 if model_kind == "decoder_only" else 2)  # Not the cross-attention.

    def training_flops(model_config: object) -> float:
        return flops.training_flops(model_config, model_kind, length, length)

    assert per_self_attention > 0
    assert training_flops(other) == pytest.approx(training_flops(paper) + 3 * self_attentions * per_self_attention,
                                                  rel=1e-12)
    learned = tiny_experiment(model_kind=model_kind, max_len=96, d_ff=48, vocab_size=50,
                              positional_encoding="learned").model
    assert training_flops(learned) == training_flops(paper)


@pytest.mark.parametrize("function", ["dot_product", "additive", "linear"])
@pytest.mark.parametrize("model_kind", ["decoder_only", "encoder_decoder"])
def test_training_flops_swap_in_each_attention_function(model_kind: str, function: str) -> None:
    paper = tiny_experiment(model_kind=model_kind, max_len=96, d_ff=48, vocab_size=50).model
    other = tiny_experiment(model_kind=model_kind, max_len=96, d_ff=48, vocab_size=50,
                            attention_function=function).model
    length = 96

    def attention_only(name: str, key_len: int, causal: bool) -> float:
        return flops.attention_function_flops(name, query_len=length, key_len=key_len, num_heads=paper.num_heads,
                                              key_dim=paper.key_dim, value_dim=paper.value_dim, causal=causal)

    def change(causal: bool) -> float:  # Per layer and sequence: only the attention function differs.
        return attention_only(function, length, causal) - attention_only("scaled_dot_product", length, causal)

    per_sequence = change(True) if model_kind == "decoder_only" else change(True) + 2 * change(False)
    def training_flops(model_config: object) -> float:
        return flops.training_flops(model_config, model_kind, length, length)

    expected = training_flops(paper) + 3 * paper.num_layers * per_sequence
    assert training_flops(other) == pytest.approx(expected, rel=1e-12)
    assert (training_flops(other) == training_flops(paper)) == (function == "dot_product")


def test_paper_estimate_reproduces_table_3_costs() -> None:
    assert flops.paper_training_flops(12, 8, 9.5) == pytest.approx(3.3e18, rel=0.01)  # base: 12 h, 8 P100.
    assert flops.paper_training_flops(84, 8, 9.5) == pytest.approx(2.3e19, rel=0.01)  # big: 3.5 days.


def test_table3_report_puts_our_bleu_and_flops_beside_the_papers(tmp_path: pathlib.Path) -> None:
    from configs import table3

    base_en_fr = sections.build_experiment(table3.get_config("base_en_fr"), "configs/table3.py:base_en_fr")
    for row, bleu in (("base_en_fr", 12.5), ("big_en_fr", None)):
        (tmp_path / row).mkdir()
        (tmp_path / row / "config.json").write_text(json.dumps(table3.get_config(row).to_dict()))
    tokens = 4.0e6
    results = dict(finished=True, step=160, test_bleu=12.5, dev_bleu=11.0, train_target_tokens=tokens,
                   train_flops=base_en_fr.training_flops(tokens), wall_s=7200.0,
                   devices=2)
    (tmp_path / "base_en_fr" / "results.json").write_text(json.dumps(results))
    md_path, csv_path = table3.write_table3_report(str(tmp_path), sustained_tflops=100.0)
    records = {record["row"]: record for record in csv.DictReader(open(csv_path, encoding="utf-8"))}
    done, pending = records["base_en_fr"], records["big_en_fr"]
    assert float(done["test_bleu"]) == 12.5 and float(done["paper_test_bleu"]) == 38.1
    assert float(done["train_flops"]) == pytest.approx(results["train_flops"])
    assert float(done["our_estimate_flops"]) == pytest.approx(2 * 2 * 3600 * 100e12)  # 2 h x 2 devices.
    base_schedule = base_en_fr.training_flops(100_000 * 25_000)
    assert float(done["schedule_flops"]) == pytest.approx(base_schedule)
    assert float(pending["paper_train_flops"]) == 2.3e19 and pending["test_bleu"] == ""
    text = pathlib.Path(md_path).read_text()
    assert "| base_en_fr | done |" in text and "38.1" in text and "41.8" in text
