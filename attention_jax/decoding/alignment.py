"""Teacher-forced passes over given translations: hard alignments and per-token log-probabilities.

An alignment pairs each target piece with the source piece it attends to most, heads averaged (fairseq's way;
docs/quickstart.md, ``--alignment``); the log-probabilities are ``translate --print_scores``'s (fairseq's ``P-``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.decoding import decode
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import attention_registry
from attention_jax.models.model import PAD_ID, Transformer

# Shapes: B pairs, S source length, T target length (both bucketed), H heads, N vocabulary.
Array = jax.Array
Alignment = list[tuple[int, int]]  # (source, target) piece positions from 0, EOS excluded, by target.


def check_layer(model_config: TransformerConfig, layer: int) -> int:
    """Return the decoder layer ``layer`` names, as an index from 0.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    layer : int
        ``0 .. num_layers - 1``, or negative from the last (Garg et al., 2019 prefer ``-2``).

    Returns
    -------
    int
        The index.

    Raises
    ------
    ValueError
        For a layer the model lacks, or an attention function that forms no weights.
    """
    attention_registry.require_weights(model_config.attention_function)
    num_layers = model_config.num_layers
    if not -num_layers <= layer < num_layers:
        raise ValueError(f"alignment layer {layer} is not a decoder layer of this model, which has {num_layers} "
                         f"(give 0 to {num_layers - 1}, or -1 for the last).")
    return layer % num_layers


@functools.partial(jax.jit, static_argnames=("model_config",))
def cross_attention(params: Any, inputs: Array, targets: Array, *, model_config: TransformerConfig) -> Array:
    """Return teacher-forced cross-attention weights of every decoder layer, averaged over heads (jitted).

    Parameters
    ----------
    params : pytree
        Plain model parameters.
    inputs, targets : Array
        int32 ``[B, S]`` and ``[B, T]`` ids ending in EOS, 0-padded.
    model_config : TransformerConfig
        The model, with the ``einsum`` attention (the one that records weights).

    Returns
    -------
    Array
        float32 ``[N, B, T, S]`` for ``N`` layers; row ``t`` is the position predicting ``targets[:, t]``.
    """
    _, state = Transformer(model_config).apply({"params": params}, inputs, targets, sow_weights=True,
                                               mutable=["intermediates"])
    intermediates = nn.meta.unbox(state["intermediates"])
    layers = [intermediates[f"decoder_{layer}"]["cross_attention"]["attention_weights"][0]  # each [B,H,T,S]
              for layer in range(model_config.num_layers)]
    return jnp.mean(jnp.stack(layers).astype(jnp.float32), axis=2)  # [N,B,T,S]


def _hard_alignment(weights: np.ndarray, source_length: int, target_length: int) -> Alignment:
    """Return the argmax source piece of each target piece, EOS excluded on both sides (lowest on ties)."""
    source_pieces, target_pieces = source_length - 1, target_length - 1
    if source_pieces < 1 or target_pieces < 1:
        return []
    best = np.argmax(weights[:target_pieces, :source_pieces], axis=-1)  # [T'']
    return [(int(source), target) for target, source in enumerate(best)]


def hard_alignments(model_config: TransformerConfig, params: Any, source_ids: Sequence[Sequence[int]],
                    target_ids: Sequence[Sequence[int]], *, layer: int = -1,
                    batch_size: int = 64) -> list[Alignment]:
    """Return the hard alignments of translation pairs from a teacher-forced pass.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Plain parameters.
    source_ids, target_ids : Sequence[Sequence[int]]
        Pairs ending in EOS; a pair with an empty side gives ``[]``.
    layer, batch_size : int
        Decoder layer read (``-1``: the last); pairs per forced pass.

    Returns
    -------
    list[Alignment]
        One per pair, in input order.

    Raises
    ------
    ValueError
        For unequal lists, a pair longer than the model's positions, or a layer :func:`check_layer` refuses.
    """
    if len(source_ids) != len(target_ids):
        raise ValueError(f"{len(source_ids)} sources but {len(target_ids)} targets: give one target per source.")
    layer = check_layer(model_config, layer)
    einsum_config = model_config.replace(attention_implementation="einsum", decode=False)
    alignments: list[Alignment] = [[] for _ in source_ids]
    pairs = [index for index, (source, target) in enumerate(zip(source_ids, target_ids)) if source and target]
    for start in range(0, len(pairs), batch_size):
        indices = pairs[start: start + batch_size]
        rows = decode.bucket_rows(len(indices), batch_size)
        inputs, targets = (_padded([sequences[index] for index in indices], rows, model_config.max_len)
                           for sequences in (source_ids, target_ids))
        weights = np.asarray(cross_attention(params, inputs, targets, model_config=einsum_config)[layer])  # [B,T,S]
        for row, index in enumerate(indices):
            alignments[index] = _hard_alignment(weights[row], len(source_ids[index]), len(target_ids[index]))
    return alignments


def _padded(sequences: list[Sequence[int]], rows: int, max_len: int) -> np.ndarray:
    """Return int32 ``[rows, bucket]`` with ``sequences`` in the first rows, 0-padded."""
    longest = max(len(ids) for ids in sequences)
    if longest > max_len:
        raise ValueError(f"A sequence has {longest} ids, more than the model's {max_len} positions.")
    batch = np.full((rows, decode.bucket_length(longest, max_len)), PAD_ID, np.int32)
    for row, ids in enumerate(sequences):
        batch[row, : len(ids)] = ids
    return batch


def format_pairs(alignment: Alignment) -> str:
    """Format an alignment as ``"0-0 1-2 ..."`` (``source-target``), as fast_align and fairseq print it.

    Parameters
    ----------
    alignment : Alignment
        ``(source_index, target_index)`` pairs.

    Returns
    -------
    str
        The pairs; ``""`` for none.
    """
    return " ".join(f"{source}-{target}" for source, target in alignment)


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

    Beam search keeps only the total; these sum to a hypothesis's ``score``.

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
