"""A tiny random Transformer and a word-level tokenizer shared by the decoding and evaluation tests."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.decoding import decode_steps
from attention_jax.experiment.sections import DecodeSettings, TransformerConfig
from attention_jax.models.model import BOS_ID, EOS_ID, PAD_ID, Transformer

VOCAB_SIZE = 40
TINY = TransformerConfig(vocab_size=VOCAB_SIZE, num_layers=2, d_model=32, d_ff=64, num_heads=4, key_dim=8,
                         value_dim=8, max_len=24, dropout_rate=0.1)
SHORT = DecodeSettings(max_decode_extra_len=6)  # The paper's beam and alpha; outputs fit TINY's positions.


class WordTokenizer:
    """Word-level stand-in for the SentencePiece tokenizer: ``"w7 w12"`` <-> ``[7, 12, EOS]``."""

    vocab_size = VOCAB_SIZE

    def encode(self, text: str) -> list[int]:
        """Ids of the words ``w<id>`` of ``text``, then EOS."""
        return [int(word[1:]) for word in text.split()] + [EOS_ID]

    def decode(self, ids) -> str:
        """Words of ``ids`` up to the first EOS, without pad and bos."""
        words = []
        for token in list(ids):
            if token == EOS_ID:
                break
            if token not in (PAD_ID, BOS_ID):
                words.append(f"w{token}")
        return " ".join(words)

    def id_to_piece(self, token_id: int) -> str:
        """The word of one id (``</s>`` for EOS)."""
        return {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>"}.get(token_id, f"w{token_id}")


def init_params(model_config: TransformerConfig, seed: int = 0):
    """Random (boxed) parameters of ``model_config``."""
    ids = jnp.ones((1, 4), jnp.int32)
    return Transformer(model_config).init(jax.random.key(seed), ids, ids)["params"]


@functools.partial(jax.jit, static_argnames=("model_config",))
def incremental_logits(params, inputs, targets, *, model_config):
    """Teacher-forced logits computed one position at a time through the cache (a lax.scan)."""
    model = Transformer(model_config)
    encoded = model.apply({"params": params}, inputs, method=Transformer.encode)
    step = decode_steps._make_cached_step_fn(model_config, params, encoded, inputs)
    cache = decode_steps._init_cache(model_config, inputs.shape[0], targets.shape[1])
    decoder_inputs = jnp.concatenate([jnp.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)

    def scan_step(cache, token_ids):
        logits, cache = step(cache, token_ids)
        return cache, logits

    _, logits = jax.lax.scan(scan_step, cache, decoder_inputs.T)  # [T,B,V]
    return jnp.swapaxes(logits, 0, 1)


def assert_logits_match(actual: jax.Array, expected: jax.Array) -> None:
    """Assert two float32 passes over the same logits agree to float32 rounding at their scale.

    The cached and the teacher-forced pass sum the same terms in a different order, so their
    difference is a few float32 ulps of the largest logit, not of each element: models whose
    logits reach tens (random BatchNorm averages, no normalisation) need the wider absolute bound.
    A real mismatch (a wrong cache entry, batch statistics at decode time) is of order one.
    """
    scale = max(1.0, float(np.max(np.abs(np.asarray(expected)))))
    np.testing.assert_allclose(actual, expected, atol=2e-5 * scale, rtol=1e-5)


def random_batch(seed: int, batch: int, source_len: int, target_len: int):
    """Random source ids padded after an EOS (row 0 full length), random targets, and the source lengths."""
    rng = np.random.default_rng(seed)
    inputs = rng.integers(4, VOCAB_SIZE, (batch, source_len))
    lengths = rng.integers(2, source_len + 1, batch)
    lengths[0] = source_len
    for row, length in enumerate(lengths):
        inputs[row, length - 1] = EOS_ID
        inputs[row, length:] = PAD_ID
    targets = rng.integers(4, VOCAB_SIZE, (batch, target_len))
    return jnp.asarray(inputs, jnp.int32), jnp.asarray(targets, jnp.int32), lengths


@functools.partial(jax.jit, static_argnames=("model_config",))
def full_logits(params, inputs, targets, *, model_config):
    """The uncached reference: one teacher-forced forward pass."""
    return Transformer(model_config).apply({"params": params}, inputs, targets)


def assert_lm_cached_steps_and_packed_documents(config: TransformerConfig) -> tuple[Any, Any]:
    """Check a language model's cached steps against its full pass, and two packed documents against each alone.

    Returns the model and its parameters, for further checks on the same model.
    """
    import flax.linen as nn

    from attention_jax.models import language_model, model

    first, second = (jnp.asarray(np.random.default_rng(seed).integers(4, 40, (1, n)), jnp.int32)
                     for seed, n in ((0, 4), (1, 6)))
    lm = language_model.LanguageModel(config)
    params = nn.meta.unbox(lm.init(jax.random.key(0), second)["params"])
    full = lm.apply({"params": params}, second)
    decoder = language_model.LanguageModel(config.replace(decode=True))
    cache = jax.tree.map(jnp.zeros_like, decoder.init(jax.random.key(0), second)["cache"])
    for position, token in enumerate(np.asarray(model._shift_right(second))[0]):
        step, updated = decoder.apply({"params": params, "cache": cache}, jnp.full((1, 1), token),
                                      method=language_model.LanguageModel.logits, mutable=["cache"])
        cache = updated["cache"]
        np.testing.assert_allclose(step[:, 0], full[:, position], atol=2e-5)
    packed = jnp.concatenate([first, second, jnp.zeros((1, 2), jnp.int32)], axis=1)
    together = lm.apply({"params": params}, packed, targets_segmentation=jnp.array([[1] * 4 + [2] * 6 + [0] * 2]),
                        targets_position=jnp.array([[0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 0, 0]]))
    np.testing.assert_allclose(together[:, :4], lm.apply({"params": params}, first), atol=2e-5)
    np.testing.assert_allclose(together[:, 4:10], full, atol=2e-5)
    return lm, params
