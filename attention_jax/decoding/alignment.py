"""Hard source-target alignments of translations, read from the decoder's cross-attention.

Beam search decodes with the key/value cache and no attention weights; the alignment of a chosen
hypothesis comes from one more, teacher-forced pass over it (the source as encoder input, the
hypothesis as decoder target), which leaves the search itself untouched. Each target piece is
aligned to the source piece its decoder position attends to most, the weights averaged over all
heads of one decoder layer, the last by default.

Shape glossary
--------------
B pairs, S source length (bucketed), T target length (bucketed), H heads.

Why one layer's head average: single heads specialise (the paper's Figures 3-5 show heads doing
distinct jobs), so one head alone is a noisy alignment, and averaging the heads of one layer is what
fairseq's Transformer decoder does for its alignments, for the last layer unless an alignment layer is
chosen. The last layer is the default here too: it is the cross-attention nearest the prediction of
the token being aligned, and it matches fairseq's default, so alignments compare. Garg et al. (2019,
"Jointly Learning to Align and Translate with Transformer Models") report that the penultimate layer
of a six-layer model aligns better; ``layer=-2`` reads that one.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.decoding import decode
from attention_jax.models import attention_registry
from attention_jax.models.model import PAD_ID, Transformer
from attention_jax.models.transformer_config import TransformerConfig

Array = jax.Array
Alignment = list[tuple[int, int]]
"""``(source_index, target_index)`` pairs, 0-based piece positions without EOS, by target position."""


def check_layer(model_config: TransformerConfig, layer: int) -> int:
    """The decoder layer ``layer`` names, as an index from 0; ``ValueError`` for one the model lacks.

    Parameters
    ----------
    model_config : TransformerConfig
        The model (its ``num_layers`` and attention function).
    layer : int
        ``0 .. num_layers - 1``, or negative from the last (``-1``: the last layer).

    Returns
    -------
    int
        The layer's index from 0.

    Notes
    -----
    Also raises ``ValueError`` (one line) for an attention function that forms no attention weights
    (``attention_registry.require_weights``).
    """
    attention_registry.require_weights(model_config.attention_function)
    num_layers = model_config.num_layers
    if not -num_layers <= layer < num_layers:
        raise ValueError(f"alignment layer {layer} is not a decoder layer of this model, which has {num_layers} "
                         f"(give 0 to {num_layers - 1}, or -1 for the last).")
    return layer % num_layers


@functools.partial(jax.jit, static_argnames=("model_config",))
def cross_attention(params: Any, inputs: Array, targets: Array, *, model_config: TransformerConfig) -> Array:
    """Teacher-forced cross-attention weights of every decoder layer, each averaged over its heads (jitted).

    Parameters
    ----------
    params : pytree
        Model parameters (plain arrays).
    inputs : Array
        int32 ``[B, S]`` source ids ending in EOS, 0-padded.
    targets : Array
        int32 ``[B, T]`` target ids ending in EOS, 0-padded (the decoder reads ``[BOS] + targets[:-1]``).
    model_config : TransformerConfig
        The model, computed with the ``einsum`` attention (the one that can record weights).

    Returns
    -------
    Array
        float32 ``[N, B, T, S]`` for the ``N`` decoder layers: row ``t`` of layer ``n`` is the
        attention of the position predicting ``targets[:, t]`` over the source, summing to 1 over real
        source positions.

    Notes
    -----
    One compilation serves every layer: the pass computes them all anyway.
    """
    _, state = Transformer(model_config).apply({"params": params}, inputs, targets, sow_weights=True,
                                               mutable=["intermediates"])
    intermediates = nn.meta.unbox(state["intermediates"])
    layers = [intermediates[f"decoder_{layer}"]["cross_attention"]["attention_weights"][0]  # each [B,H,T,S]
              for layer in range(model_config.num_layers)]
    return jnp.mean(jnp.stack(layers).astype(jnp.float32), axis=2)  # [N,B,T,S]


def hard_alignment(weights: np.ndarray, source_length: int, target_length: int) -> Alignment:
    """The argmax source piece of each target piece, EOS excluded on both sides.

    Parameters
    ----------
    weights : np.ndarray
        ``[T', S']`` attention (target positions by source positions), ``T' >= target_length`` and
        ``S' >= source_length``.
    source_length, target_length : int
        Ids of the source and of the target, each counting its final EOS.

    Returns
    -------
    Alignment
        ``(j, t)`` for every target piece ``t < target_length - 1``, with ``j`` the source piece
        ``< source_length - 1`` of largest weight (the lowest index on ties); empty when either side
        holds EOS alone.
    """
    source_pieces, target_pieces = source_length - 1, target_length - 1
    if source_pieces < 1 or target_pieces < 1:
        return []
    best = np.argmax(weights[:target_pieces, :source_pieces], axis=-1)  # [T'']
    return [(int(source), target) for target, source in enumerate(best)]


def hard_alignments(model_config: TransformerConfig, params: Any, source_ids: Sequence[Sequence[int]],
                    target_ids: Sequence[Sequence[int]], *, layer: int = -1,
                    batch_size: int = 64) -> list[Alignment]:
    """Hard alignments of translation pairs from a teacher-forced pass (see the module's notes).

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Its parameters (plain arrays).
    source_ids, target_ids : Sequence[Sequence[int]]
        As many sources and targets, each ending in EOS (a hypothesis's ``ids``); a pair with an empty
        side gives ``[]``. The same source may appear once per hypothesis of it.
    layer : int
        Decoder layer whose head-averaged cross-attention is read: ``-1`` (default) the last,
        ``-2`` the penultimate, or an index from 0 (:func:`check_layer`).
    batch_size : int
        Pairs per forced pass.

    Returns
    -------
    list[Alignment]
        One alignment per pair, in input order.

    Notes
    -----
    Sources and targets are padded to powers of two (at least 8) and batches to a power of two
    rows, so few compilations serve any input. Raises ``ValueError`` for a pair longer than the
    model's positions, for a layer the model lacks and for an attention function without weights.
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
            alignments[index] = hard_alignment(weights[row], len(source_ids[index]), len(target_ids[index]))
    return alignments


def _padded(sequences: list[Sequence[int]], rows: int, max_len: int) -> np.ndarray:
    """int32 ``[rows, bucket]`` with ``sequences`` in the first rows, 0-padded; ``ValueError`` past ``max_len``."""
    longest = max(len(ids) for ids in sequences)
    if longest > max_len:
        raise ValueError(f"A sequence has {longest} ids, more than the model's {max_len} positions.")
    batch = np.full((rows, decode.bucket_length(longest, max_len)), PAD_ID, np.int32)
    for row, ids in enumerate(sequences):
        batch[row, : len(ids)] = ids
    return batch


def format_pairs(alignment: Alignment) -> str:
    """``"0-0 1-2 ..."``: each pair as ``source-target``, as fast_align and fairseq print them.

    Parameters
    ----------
    alignment : Alignment
        ``(source_index, target_index)`` pairs.

    Returns
    -------
    str
        The pairs separated by single spaces (``""`` for none).
    """
    return " ".join(f"{source}-{target}" for source, target in alignment)
