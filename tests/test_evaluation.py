"""Corpus BLEU against sacrebleu, teacher-forced perplexity against per-pair forward passes."""

from __future__ import annotations

import functools
import json
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sacrebleu

from attention_jax.decoding import decode
from attention_jax.evaluation import translation_quality
from attention_jax.models.model import Transformer
from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params

HYPOTHESES = ["The cat sat on the mat.", "He reads a book, slowly!", "Es regnet heute nicht.", "ok"]
REFERENCES = ["The cat is sitting on the mat.", "He reads the book slowly!", "Es regnet heute.", "okay"]


def test_corpus_bleu_equals_sacrebleu():
    score, signature = translation_quality.corpus_bleu(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    assert score == pytest.approx(expected.score, abs=1e-9)
    assert 0.0 < score < 100.0
    assert "tok:13a" in signature and "nrefs:1" in signature and f"version:{sacrebleu.__version__}" in signature


def test_corpus_bleu_is_100_for_identical_text():
    assert translation_quality.corpus_bleu(REFERENCES, REFERENCES)[0] == pytest.approx(100.0)


def test_corpus_bleu_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="one reference per hypothesis"):
        translation_quality.corpus_bleu(HYPOTHESES, REFERENCES[:-1])


@functools.partial(jax.jit, static_argnames=("model_config",))
def _logits(params, inputs, targets, *, model_config):
    return Transformer(model_config).apply({"params": params}, inputs, targets)


@pytest.fixture(scope="module")
def tiny_params():
    return nn.meta.unbox(init_params(TINY, seed=5))


def test_cross_entropy_equals_per_pair_forward_passes(tiny_params):
    tokenizer = WordTokenizer()
    pairs = [("w5 w6 w7", "w8 w9"), ("w10", "w11 w12 w13 w14"), ("w15 w16 w17", "w18 w19"),
             ("w20", "w21 w22 w23 w24")]  # Two shapes; two sorted batches of two.
    too_long = ("w5 " * 30, "w6")
    result = translation_quality.cross_entropy(TINY, tiny_params, tokenizer, pairs + [too_long], max_len=18, batch_size=2)
    total, count = 0.0, 0
    for source, target in pairs:  # Unpadded, one pair at a time.
        inputs = jnp.asarray([tokenizer.encode(source)])
        targets = jnp.asarray([tokenizer.encode(target)])
        log_probs = np.asarray(jax.nn.log_softmax(_logits(tiny_params, inputs, targets, model_config=TINY)),
                               np.float64)[0]
        total -= sum(log_probs[t, token] for t, token in enumerate(np.asarray(targets[0])))
        count += targets.shape[1]
    assert result.num_tokens == count == 3 + 5 + 3 + 5
    assert result.num_pairs == 4 and result.num_skipped == 1
    assert result.mean == pytest.approx(total / count, rel=1e-5)
    assert result.perplexity == pytest.approx(math.exp(total / count), rel=1e-5)


def test_evaluate_reports_bleu_and_perplexity_of_the_translations(tiny_params):
    translator = decode.Translator(TINY, tiny_params, WordTokenizer(), settings=SHORT, batch_size=4)
    pairs = [("w5 w6 w7", "w8 w9"), ("w10", "w11 w12"), ("w13 w14", "w15"), ("", "w16")]
    result = translation_quality.evaluate(translator, pairs)
    assert result.hypotheses == translator.translate([source for source, _ in pairs])
    assert result.hypotheses[3] == ""
    assert result.bleu == translation_quality.corpus_bleu(result.hypotheses, [target for _, target in pairs])[0]
    entropy = translation_quality.cross_entropy(TINY, tiny_params, WordTokenizer(), pairs, max_len=18, batch_size=4)
    assert result.cross_entropy == pytest.approx(entropy.mean)
    assert result.perplexity == pytest.approx(math.exp(entropy.mean))
    assert result.num_examples == 4 and result.num_target_tokens == 3 + 3 + 2 + 2
    summary = result.summary()
    assert "hypotheses" not in summary and summary["bleu_signature"] == result.bleu_signature
    with pytest.raises(ValueError, match="at least one"):
        translation_quality.evaluate(translator, [])


def test_write_report_writes_json_and_hypotheses(tmp_path):
    path = tmp_path / "eval_test.json"
    hypotheses_path = translation_quality.write_report(str(path), {"bleu": 12.5, "split": "test"}, ["a b", "", "c\nd"])
    assert json.loads(path.read_text()) == {"bleu": 12.5, "split": "test"}
    assert hypotheses_path == str(tmp_path / "eval_test.hypotheses.txt")
    assert open(hypotheses_path, encoding="utf-8").read().split("\n") == ["a b", "", "c d", ""]
