"""Sampling for the language model: top-k/top-p sets, reproducibility, greedy against a full forward pass."""

from __future__ import annotations

import dataclasses
import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.commands import generation_output
from attention_jax.decoding import generation
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import language_model, model

SMALL = TransformerConfig(vocab_size=30, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4,
                          value_dim=4, dropout_rate=0.0, max_len=24)


class _IdTokenizer:
    """Text is space-separated ids; enough to drive :class:`generation.Generator`."""

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        return [int(word) for word in text.split()] + ([model.EOS_ID] if add_eos else [])

    def decode(self, ids: list[int]) -> str:
        return " ".join(str(token) for token in ids)


def _params() -> dict:
    ids = jnp.ones((1, 4), jnp.int32)
    return nn.meta.unbox(language_model.LanguageModel(SMALL).init(jax.random.key(3), ids)["params"])


def _numpy_nucleus(logits: np.ndarray, top_p: float) -> set[int]:
    """Smallest set of most likely tokens whose probability reaches top_p (independent of the library)."""
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    kept, mass = set(), 0.0
    for token in np.argsort(-probs, kind="stable"):
        kept.add(int(token))
        mass += probs[token]
        if mass >= top_p:
            break
    return kept


@pytest.mark.parametrize("top_k,top_p", [(3, 1.0), (0, 0.5), (0, 0.9), (5, 0.6)])
def test_filtered_logits_keep_exactly_the_top_k_and_nucleus_sets(top_k: int, top_p: float) -> None:
    logits = np.random.default_rng(top_k).normal(size=(4, 12)).astype(np.float32) * 2
    kept = np.isfinite(np.asarray(generation.filter_logits(jnp.asarray(logits), top_k, top_p)))
    for row in range(4):
        expected = set(range(12))
        if top_k:
            expected &= set(np.argsort(-logits[row])[:top_k].tolist())
            restricted = np.where(np.isin(np.arange(12), list(expected)), logits[row], -np.inf)
        else:
            restricted = logits[row]
        if top_p < 1.0:
            expected &= _numpy_nucleus(restricted, top_p)
        assert set(np.flatnonzero(kept[row]).tolist()) == expected


@pytest.mark.integration
def test_samples_never_leave_the_top_k_or_nucleus_set() -> None:
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(1, 20)), jnp.float32)
    samplable = logits.at[0, jnp.array([model.PAD_ID, model.UNK_ID, model.BOS_ID])].set(-jnp.inf)
    for settings in (generation.SamplingSettings(top_k=4), generation.SamplingSettings(top_p=0.5),
                     generation.SamplingSettings(temperature=2.0, top_k=6, top_p=0.8)):
        allowed = np.flatnonzero(np.isfinite(np.asarray(generation.filter_logits(
            samplable / settings.temperature, settings.top_k, settings.top_p)[0])))
        draws = jax.vmap(lambda key: generation._choose_next_token(key, logits, settings))(
            jax.random.split(jax.random.key(1), 2000))
        drawn = set(np.asarray(draws).ravel().tolist())
        assert drawn <= set(allowed.tolist()) and len(drawn) > 1


@pytest.mark.integration
def test_greedy_generation_equals_argmax_of_repeated_full_forward_passes() -> None:
    params = _params()
    generator = generation.Generator(SMALL, params, _IdTokenizer())
    prompts = [[5, 9, 7], [12]]
    settings = generation.SamplingSettings(temperature=0.0, max_new_tokens=6)
    outputs = generator.generate_ids(prompts, settings)
    # Compiled once per length (jax.jit): op by op, every operation compiled on its own for each length.
    forward = jax.jit(language_model.LanguageModel(SMALL).apply)
    for prompt, output in zip(prompts, outputs):
        sequence = list(prompt)
        for _ in range(6):  # Uncached: the whole sequence again (plus a causally unseen last target).
            logits = np.array(forward({"params": params}, jnp.asarray([sequence + [4]]))[0, len(sequence)])
            logits[[model.PAD_ID, model.UNK_ID, model.BOS_ID]] = -np.inf
            sequence.append(int(np.argmax(logits)))
            if sequence[-1] == model.EOS_ID:
                break
        assert output == sequence[len(prompt):]


@pytest.mark.integration
def test_sampling_with_a_fixed_seed_is_reproducible() -> None:
    generator = generation.Generator(SMALL, _params(), _IdTokenizer())
    settings = generation.SamplingSettings(temperature=1.5, top_k=10, max_new_tokens=8, seed=7)
    first = generator.generate(["5 6", "9"], settings)
    assert generator.generate(["5 6", "9"], settings) == first
    others = [generator.generate(["5 6", "9"], generation.SamplingSettings(
        temperature=1.5, top_k=10, max_new_tokens=8, seed=seed)) for seed in range(8, 12)]
    assert any(other != first for other in others)


def test_bad_prompts_and_settings_are_clear_errors() -> None:
    generator = generation.Generator(SMALL, _params(), _IdTokenizer(), max_length=10)
    with pytest.raises(ValueError, match="prompt is empty"):
        generator.generate(["  "])
    with pytest.raises(ValueError, match="shorten it to at most 8 tokens"):
        generator.generate([" ".join(["5"] * 9)])
    with pytest.raises(ValueError, match="top_p must lie in"):
        generation.SamplingSettings(top_p=0.0)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        generation.SamplingSettings(temperature=-1.0)
    continuation = generator.generate_ids([[5] * 8], generation.SamplingSettings(max_new_tokens=50))[0]
    assert 1 <= len(continuation) <= 1  # BOS + 8 prompt tokens leave one position of the 10.


def test_echoed_prompts_keep_their_text_before_the_continuation() -> None:
    generator = generation.Generator(SMALL, _params(), _IdTokenizer())
    settings = generation.SamplingSettings(temperature=1.0, max_new_tokens=5, seed=2)
    prompts = ["5  9", "12"]  # Typed with two spaces: echoed as typed, not as the tokenizer would write it.
    continuations = generator.generate(prompts, settings)
    echoed = generator.generate(prompts, settings, echo_prompt=True)
    assert echoed == [prompt + (" " + text if text else "") for prompt, text in zip(prompts, continuations)]


def test_each_sample_is_the_run_with_its_own_seed_in_text_and_json_lines() -> None:
    generator = generation.Generator(SMALL, _params(), _IdTokenizer())
    settings = generation.SamplingSettings(temperature=2.0, max_new_tokens=6, seed=40)
    prompts = ["5 6", "9"]
    alone = [generator.generate(prompts, dataclasses.replace(settings, seed=40 + k)) for k in range(3)]
    text = generation_output._sample_lines(generator, prompts, settings, num_samples=3)
    assert text == [alone[k][i] for i in range(2) for k in range(3)]  # Prompt by prompt, samples in order.
    assert len(set(text[:3])) > 1  # Three seeds, not one sample printed three times.
    records = [json.loads(line) for line in generation_output._sample_lines(
        generator, prompts, settings, num_samples=3, echo_prompt=True, output_format="jsonl")]
    assert [(r["prompt"], r["sample"], r["seed"]) for r in records] == [
        (prompt, k, 40 + k) for prompt in prompts for k in range(3)]
    assert [r["continuation"] for r in records] == text  # JSON keeps prompt and continuation apart.
    with pytest.raises(UserInputError, match="lower --seed"):
        generation_output._sample_lines(generator, prompts, dataclasses.replace(settings, seed=2**32 - 2),
                                       num_samples=3)
