"""Per-token log-probabilities of given translations (``translate --print_scores``, fairseq's ``P-`` lines).

Beam search keeps only the total; a teacher-forced pass gives each token's, summing to ``score``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.decoding import decode
from attention_jax.models.model import PAD_ID, Transformer
from attention_jax.models.transformer_config import TransformerConfig

# Shapes: B pairs, S source length, T target length (both bucketed), N vocabulary.
Array = jax.Array


@functools.partial(jax.jit, static_argnames=("model_config",))
def _forced_log_probs(params: Any, inputs: Array, targets: Array, *, model_config: TransformerConfig) -> Array:
    """Return ``log p(targets[b, t] | inputs[b], targets[b, :t])`` ``[B, T]``, 0 at padding (jitted)."""
    logits = cast(Array, Transformer(model_config).apply({"params": params}, inputs, targets))  # [B,T,N]
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
    chosen = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # [B,T]
    return jnp.where(targets != PAD_ID, chosen, 0.0)


def token_log_probs(model_config: TransformerConfig, params: Any, source_ids: Sequence[Sequence[int]],
                    target_ids: Sequence[Sequence[int]], *, batch_size: int = 64) -> list[np.ndarray]:
    """Return each target token's log-probability given its source and the tokens before it.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Plain parameters.
    source_ids, target_ids : Sequence[Sequence[int]]
        Pairs ending in EOS; a pair with an empty side gives an empty array.
    batch_size : int
        Pairs per forced pass.

    Returns
    -------
    list[np.ndarray]
        float64 ``[len(target)]`` per pair, natural logs.

    Raises
    ------
    ValueError
        For unequal lists, or a side longer than the model's positions.
    """
    if len(source_ids) != len(target_ids):
        raise ValueError(f"{len(source_ids)} sources but {len(target_ids)} targets: give one target per source.")
    forced_config = model_config.replace(decode=False)
    scores = [np.zeros(0, np.float64) for _ in source_ids]
    pairs = [index for index, (source, target) in enumerate(zip(source_ids, target_ids)) if source and target]
    for start in range(0, len(pairs), batch_size):
        indices = pairs[start: start + batch_size]
        rows = decode.bucket_rows(len(indices), batch_size)
        inputs, targets = (_padded([sequences[index] for index in indices], rows, model_config.max_len)
                           for sequences in (source_ids, target_ids))
        values = np.asarray(_forced_log_probs(params, inputs, targets, model_config=forced_config), np.float64)
        for row, index in enumerate(indices):
            scores[index] = values[row, : len(target_ids[index])]
    return scores


def _padded(sequences: list[Sequence[int]], rows: int, max_len: int) -> np.ndarray:
    """Return int32 ``[rows, bucket]`` with ``sequences`` in the first rows, 0-padded."""
    longest = max(len(ids) for ids in sequences)
    if longest > max_len:
        raise ValueError(f"A sequence has {longest} ids, more than the model's {max_len} positions.")
    batch = np.full((rows, decode.bucket_length(longest, max_len)), PAD_ID, np.int32)
    for row, ids in enumerate(sequences):
        batch[row, : len(ids)] = ids
    return batch
