"""Packed batches against each pair alone: a small model, random pairs and the two layouts of them.

The packing tests and the attention, positional-encoding and normalisation axes' packed-batch checks use
these (tests/data/test_packing.py).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.data import batching, packing, token_cache
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import model
from attention_jax.training import train_state

SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4,
                          value_dim=6, dropout_rate=0.0, max_len=32)


def tokenized_split(pairs: list[tuple[list[int], list[int]]]) -> token_cache._TokenizedSplit:
    """A _TokenizedSplit holding ``pairs`` of (source ids, target ids), EOS not stored."""
    sides = []
    for side in (0, 1):
        sentences = [pair[side] for pair in pairs]
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences])]).astype(np.int64)
        ids = np.asarray([token for s in sentences for token in s], np.int32)
        sides.append(token_cache._TokenizedSide(ids=ids, offsets=offsets))
    return token_cache._TokenizedSplit(source=sides[0], target=sides[1])


def random_pairs(count: int, seed: int, max_words: int = 6) -> list[tuple[list[int], list[int]]]:
    """``count`` pairs of 1 to ``max_words`` random non-special ids of ``SMALL``'s vocabulary."""
    rng = np.random.default_rng(seed)
    return [tuple(rng.integers(4, SMALL.vocab_size, size=rng.integers(1, max_words + 1)).tolist()
                  for _ in range(2)) for _ in range(count)]


def packed_and_alone(pairs, rows: np.ndarray, length: int = 16):
    """A packed batch of ``pairs`` laid out as ``rows``, and one unpacked batch per pair."""
    split = tokenized_split(pairs)
    packed = {key: jnp.asarray(value) for key, value in packing._make_packed_batch(split, length, rows).items()}
    alone = [batching._make_batch(split, length, np.array([index])) for index in range(len(pairs))]
    return packed, alone


def init_transformer(cfg: TransformerConfig) -> dict:
    """The encoder-decoder's parameters for ``cfg`` at seed 0."""
    ids = jnp.ones((1, 4), jnp.int32)
    return nn.meta.unbox(model.Transformer(cfg).init(jax.random.key(0), ids, ids)["params"])


def logits_of(cfg: TransformerConfig, params: dict, batch: dict) -> np.ndarray:
    """The model's logits on a (packed or padded) ``batch``, dropout off."""
    return np.asarray(train_state._model_logits(model.Transformer(cfg), params, batch, deterministic=True))


ROWS = np.array([[0, 1, 2], [3, 4, -1]])
"""Five pairs packed into two rows (-1: an empty slot)."""
