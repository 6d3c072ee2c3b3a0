"""A tiny random Transformer and a word-level tokenizer shared by the decoding and evaluation tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attention_jax.models.decode_settings import DecodeSettings
from attention_jax.models.model import BOS_ID, EOS_ID, PAD_ID, Transformer
from attention_jax.models.transformer_config import TransformerConfig

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
