"""Corpus BLEU, chrF and TER against sacrebleu, teacher-forced perplexity against per-pair forward passes."""

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
    with pytest.raises(ValueError, match="one reference per hypothesis"):
        translation_quality.corpus_scores(HYPOTHESES, REFERENCES[:-1])


def test_corpus_scores_equal_sacrebleus_bleu_chrf_and_ter():
    scores = translation_quality.corpus_scores(HYPOTHESES, REFERENCES)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score, abs=1e-9)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score, abs=1e-9)
    assert scores.ter == pytest.approx(sacrebleu.corpus_ter(HYPOTHESES, [REFERENCES]).score, abs=1e-9)
    assert 0.0 < scores.chrf < 100.0 and scores.ter > 0.0
    assert (scores.bleu, scores.bleu_signature) == translation_quality.corpus_bleu(HYPOTHESES, REFERENCES)
    assert "nc:6" in scores.chrf_signature and "tok:tercom" in scores.ter_signature
    assert all(f"version:{sacrebleu.__version__}" in signature
               for signature in (scores.bleu_signature, scores.chrf_signature, scores.ter_signature))
    identical = translation_quality.corpus_scores(REFERENCES, REFERENCES)
    assert (identical.bleu, identical.chrf, identical.ter) == pytest.approx((100.0, 100.0, 0.0))


@functools.partial(jax.jit, static_argnames=("model_config",))
def _logits(params, inputs, targets, *, model_config):
    return Transformer(model_config).apply({"params": params}, inputs, targets)


@pytest.fixture(scope="module")
def tiny_params():
    return nn.meta.unbox(init_params(TINY, seed=5))


@pytest.mark.integration
def test_cross_entropy_equals_per_pair_forward_passes(tiny_params):
    tokenizer = WordTokenizer()
    pairs = [("w5 w6 w7", "w8 w9"), ("w10", "w11 w12 w13 w14"), ("w15 w16 w17", "w18 w19"),
             ("w20", "w21 w22 w23 w24")]  # Two shapes; two sorted batches of two.
    too_long = ("w5 " * 30, "w6")
    result = translation_quality._cross_entropy(TINY, tiny_params, tokenizer, pairs + [too_long], max_len=18,
                                                batch_size=2)
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


@pytest.mark.integration
def test_cross_entropy_by_position_sums_each_positions_tokens(tiny_params):
    tokenizer = WordTokenizer()
    pairs = [("w5 w6 w7", "w8 w9"), ("w10", "w11 w12 w13 w14"), ("w15 w16 w17", "w18 w19"),
             ("w20", "w21 w22 w23 w24 w25 w26 w27 w28 w29")]  # Two batches of two; padded lengths 4, 8 and 16.
    too_long = ("w5 " * 30, "w6")
    sums, counts = translation_quality._cross_entropy_by_position(TINY, tiny_params, tokenizer, pairs + [too_long],
                                                                 max_len=18, batch_size=2)
    expected_sums, expected_counts = np.zeros(18), np.zeros(18, np.int64)
    for source, target in pairs:  # Unpadded, one pair at a time: position t's loss goes to bin t.
        inputs = jnp.asarray([tokenizer.encode(source)])
        targets = jnp.asarray([tokenizer.encode(target)])
        log_probs = np.asarray(jax.nn.log_softmax(_logits(tiny_params, inputs, targets, model_config=TINY)),
                               np.float64)[0]
        for t, token in enumerate(np.asarray(targets[0])):
            expected_sums[t] -= log_probs[t, token]
            expected_counts[t] += 1
    np.testing.assert_array_equal(counts, expected_counts)
    assert counts[:3].tolist() == [4, 4, 4] and counts[3] == 2 and counts[9] == 1 and not counts[10:].any()
    np.testing.assert_allclose(sums, expected_sums, rtol=1e-5, atol=1e-6)
    whole = translation_quality._cross_entropy(TINY, tiny_params, tokenizer, pairs + [too_long], max_len=18,
                                              batch_size=2)
    assert whole.num_tokens == counts.sum() and whole.mean == pytest.approx(sums.sum() / counts.sum(), rel=1e-6)


@pytest.mark.integration
def test_evaluate_reports_bleu_and_perplexity_of_the_translations(tiny_params):
    translator = decode.Translator(TINY, tiny_params, WordTokenizer(), settings=SHORT, batch_size=4)
    pairs = [("w5 w6 w7", "w8 w9"), ("w10", "w11 w12"), ("w13 w14", "w15"), ("", "w16")]
    result = translation_quality.evaluate(translator, pairs)
    assert result.hypotheses == translator.translate([source for source, _ in pairs])
    assert result.hypotheses[3] == ""
    scores = translation_quality.corpus_scores(result.hypotheses, [target for _, target in pairs])
    assert (result.bleu, result.chrf, result.ter) == (scores.bleu, scores.chrf, scores.ter)
    assert (result.chrf_signature, result.ter_signature) == (scores.chrf_signature, scores.ter_signature)
    entropy = translation_quality._cross_entropy(TINY, tiny_params, WordTokenizer(), pairs, max_len=18, batch_size=4)
    assert result.cross_entropy == pytest.approx(entropy.mean)
    assert result.perplexity == pytest.approx(math.exp(entropy.mean))
    assert result.num_examples == 4 and result.num_target_tokens == 3 + 3 + 2 + 2
    summary = result.summary()
    assert "hypotheses" not in summary and summary["bleu_signature"] == result.bleu_signature
    with pytest.raises(ValueError, match="at least one"):
        translation_quality.evaluate(translator, [])


def test_write_report_writes_json_and_hypotheses(tmp_path):
    path = tmp_path / "eval_test.json"
    written = translation_quality.write_report(str(path), {"bleu": 12.5, "split": "test"}, ["a b", "", "c\nd"])
    assert json.loads(path.read_text()) == {"bleu": 12.5, "split": "test"}
    assert written == [str(tmp_path / "eval_test.hypotheses.txt")]
    assert open(written[0], encoding="utf-8").read().split("\n") == ["a b", "", "c d", ""]


def test_write_report_writes_source_reference_and_hypothesis_side_by_side(tmp_path):
    path = tmp_path / "eval_file_news.latest.json"
    pairs = [("Das Haus.", "The house."), ("", "Nothing\there"), ("Ä\tb", "ä \"b\"")]
    hypotheses = ["The home.", "", "a b"]
    written = translation_quality.write_report(str(path), {"bleu": 1.0}, hypotheses, pairs)
    assert written == [str(tmp_path / "eval_file_news.latest.hypotheses.txt"),
                       str(tmp_path / "eval_file_news.latest.translations.jsonl")]
    lines = (tmp_path / "eval_file_news.latest.translations.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"source": source, "reference": reference, "hypothesis": hypothesis}
        for (source, reference), hypothesis in zip(pairs, hypotheses)]
    assert "Ä" in lines[2]  # Readable UTF-8, not \u escapes.
    with pytest.raises(ValueError, match="one \\(source, reference\\) pair per hypothesis"):
        translation_quality.write_report(str(tmp_path / "other.json"), {}, hypotheses, pairs[:2])
    assert not (tmp_path / "other.json").exists()
