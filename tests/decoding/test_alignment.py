"""Per-token log-probabilities of hypotheses (``translate --print_scores``) and a run's attention maps by name.

Oracles: a NumPy log-softmax of each pair's own unpadded forward pass (so padding, bucketing and batching
cannot change a value), and beam search's incremental scores, which the tokens' values must sum to.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest

import attention_jax
from attention_jax.commands import translation_output
from attention_jax.decoding import alignment, decode, inference
from attention_jax.decoding.decode import Hypothesis
from attention_jax.evaluation import attention_maps as maps_of_model
from attention_jax.models.model import Transformer
from tests.support import REPO_ROOT, train_support
from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params

SOURCES = ["w5 w6 w7", "w9", "w11 w12 w13 w14 w15 w16 w17", "w20 w21"]


def _numpy_log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@pytest.mark.integration
@pytest.mark.reference
def test_token_log_probs_equal_each_pairs_own_forward_pass_and_sum_to_beam_search_scores():
    params = nn.meta.unbox(init_params(TINY))
    tokenizer = WordTokenizer()
    translator = decode.Translator(TINY, params, tokenizer, settings=SHORT, batch_size=4)
    source_ids = translator.encode_sources(SOURCES)
    nbest = translator.translate_ids_nbest(source_ids, 2)
    pairs = [(source, list(hypothesis.ids)) for source, found in zip(source_ids, nbest) for hypothesis in found]
    values = alignment.token_log_probs(TINY, params, [p[0] for p in pairs], [p[1] for p in pairs], batch_size=3)
    hypotheses = [hypothesis for found in nbest for hypothesis in found]
    assert len(values) == len(pairs) == 2 * len(SOURCES)
    # Each pair's own unpadded forward pass, compiled once per shape: op by op, every operation of every
    # pair's shape compiled on its own (most of a minute on 2 cores).
    forward = jax.jit(Transformer(TINY).apply)
    for (source, target), scores, hypothesis in zip(pairs, values, hypotheses):
        logits = np.asarray(forward({"params": params}, np.asarray([source], np.int32),
                                    np.asarray([target], np.int32)), np.float64)[0]  # [T, N]
        expected = _numpy_log_softmax(logits)[np.arange(len(target)), target]
        np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
        assert scores.shape == (len(target),) and np.all(scores <= 0.0)
        assert float(np.sum(scores)) == pytest.approx(hypothesis.score, abs=1e-3)


def test_token_log_probs_of_an_empty_side_are_empty_and_lengths_must_match():
    params = nn.meta.unbox(init_params(TINY))
    assert alignment.token_log_probs(TINY, params, [[5, 3], []], [[], [6, 3]])[0].shape == (0,)
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        alignment.token_log_probs(TINY, params, [[5, 3], [6, 3]], [[6, 3]])


def test_p_lines_follow_their_h_lines_and_jsonl_carries_the_values():
    hypotheses = [Hypothesis(ids=(7, 3), text="w7", score=-1.5, normalized_score=-1.4),
                  Hypothesis(ids=(8, 9, 3), text="w8 w9", score=-2.25, normalized_score=-2.0)]
    result = translation_output._LineResult(4, "w1", hypotheses, token_log_probs=[[-1.0, -0.5], [-1.0, -0.75, -0.5]])
    assert translation_output._tagged_lines(result) == [
        "H-4\t-1.4000\t-1.5000\tw7", "P-4\t-1.0000 -0.5000",
        "H-4\t-2.0000\t-2.2500\tw8 w9", "P-4\t-1.0000 -0.7500 -0.5000"]
    record = json.loads(translation_output._json_line(result, nbest=True))
    assert record["token_log_probs"] == [-1.0, -0.5]
    assert [entry["token_log_probs"] for entry in record["nbest"]] == [[-1.0, -0.5], [-1.0, -0.75, -0.5]]
    plain = translation_output._LineResult(4, "w1", hypotheses)
    assert "token_log_probs" not in json.loads(translation_output._json_line(plain, nbest=False))


@pytest.mark.end_to_end
def test_top_level_attention_maps_of_a_run_equal_the_model_level_function(workdir):
    run = attention_jax.load_run(str(workdir))
    maps = attention_jax.attention_maps(run, "the house is small")
    expected = maps_of_model.attention_maps(run.model_config, run.params, run.tokenizer, "the house is small",
                                            settings=run.config.decoding)
    assert maps["target"] == expected["target"] and maps["source_tokens"] == expected["source_tokens"]
    for kind in maps_of_model.ATTENTION_KINDS:
        np.testing.assert_array_equal(maps[kind], expected[kind])
    forced = attention_jax.attention_maps(run, "the house is small", target="das Haus ist klein", beam_size=1)
    num_layers, num_heads = run.model_config.num_layers, run.model_config.num_heads
    target_len, source_len = len(forced["target_tokens"]), len(forced["source_tokens"])
    assert forced["cross"].shape == (num_layers, num_heads, target_len, source_len)
    np.testing.assert_allclose(forced["cross"].sum(axis=-1), 1.0, rtol=1e-5)
    greedy = attention_jax.attention_maps(run, "the house is small", beam_size=1)
    greedy_translation = inference.make_translator(run, beam_size=1).translate(["the house is small"])[0]
    assert greedy["target"] == greedy_translation


@pytest.mark.slow
@pytest.mark.end_to_end
def test_translate_prints_p_lines_for_an_input_file(workdir, tmp_path):
    sentences = ["the house is small", "", "my cat sleeps"]
    input_file = tmp_path / "input.en"
    input_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    environment = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
                       XLA_FLAGS=train_support.child_xla_flags())
    command = [sys.executable, "-m", "attention_jax.translate", f"--workdir={workdir}", "--beam_size=2",
               "--nbest=2", "--print_scores", f"--input={input_file}"]
    completed = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, timeout=600,
                               stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    lines = completed.stdout.decode().splitlines()
    run = inference.load_run(str(workdir))
    nbest = inference.make_translator(run, beam_size=2).translate_nbest(sentences, 2)
    expected_tags = [tag for index, found in enumerate(nbest) for _ in found for tag in (f"H-{index}", f"P-{index}")]
    assert [line.split("\t")[0] for line in lines] == expected_tags
    for h_line, p_line, hypothesis in zip(lines[::2], lines[1::2], [h for found in nbest for h in found]):
        values = [float(value) for value in p_line.split("\t")[1].split()]
        assert len(values) == len(hypothesis.ids)  # One per token, EOS's last.
        assert sum(values) == pytest.approx(float(h_line.split("\t")[2]), abs=2e-3)
    missing = subprocess.run(command[:-1] + [f"--input={tmp_path / 'none.en'}"], cwd=tmp_path, env=environment,
                             capture_output=True, timeout=600, stdin=subprocess.DEVNULL)
    assert missing.returncode == 2
    assert missing.stderr.decode().strip() == (f"attention_jax.translate: error: --input={tmp_path / 'none.en'} does not exist: "
                                               f"name a text file with one sentence per line (or leave --input out "
                                               f"to read stdin).")
