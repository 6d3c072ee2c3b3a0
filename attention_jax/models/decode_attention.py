"""Attention of one query position per row, over a key/value cache or a decode step's encoder output.

Incremental decoding attends from one new position (``T = 1``) to the whole cache. Written as the
einsums of :func:`attention_jax.models.attention.scaled_dot_product_attention` over a cache stored like the
other paths' keys, ``[B, S, H, K]``, XLA turns each into a batched matrix product over ``(B, H)`` and
first copies the cache into the product's layout ``[B, H, K, S]``: on a CPU, that transpose of every
layer's cache at every step was 16% of a base-shape beam search's time. Two ways round it are here:

- :func:`cached_single_query_attention`, for the self-attention cache, which
  :class:`attention_jax.models.attention.MultiHeadAttention` stores heads first, ``[B, H, S, K]``: both
  products then read the cache as stored;
- :func:`single_query_attention`, for keys and values in the ``[B, S, H, K]`` layout: the two
  contractions as multiply-and-sum, which XLA fuses into one pass over the keys as stored.

Cross-attention of a decode step has one query position too, and its keys and values (the encoder
output, projected) do not change during a search; XLA hoisted their projection out of the search
loop but still transposed them at every step, 12% of a base-shape beam search's thread time
(``benchmarks/op_profile.py``). It therefore takes :func:`single_query_attention`, as does every
attention with one query position outside decode mode (without dropout or stored weights). In a
beam search the hypotheses of one sentence share its cross-attention keys and values (one row per
sentence, not per hypothesis).

Shape glossary
--------------
B key/value rows, R query rows per key/value row, S cache positions, H heads, K key size per head,
V value size per head.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array


def single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """softmax(q K^T / sqrt(d_k)) V for one query per row (Equation 1), as fused multiply-and-sum.

    Parameters
    ----------
    query : Array
        ``[B * R, 1, H, K]``: ``R`` query rows per key/value row, row ``b * R + r`` attending to the
        keys of row ``b`` (``R = 1`` for self-attention; the beam size for cross-attention over one
        encoder output per sentence).
    key : Array
        ``[B, S, H, K]``.
    value : Array
        ``[B, S, H, V]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, 1, S]`` (the key/value rows' layout): ``True`` = may attend.

    Returns
    -------
    Array
        ``[B * R, 1, H, V]``, equal to ``scaled_dot_product_attention`` of each query row with its
        key/value row (the same float32 scores, masking and fully-masked-row zeros) up to float rounding.

    Notes
    -----
    Sharing one key/value row among ``R`` query rows lets a beam search keep one cross-attention
    key/value set per sentence instead of one per hypothesis: their projection (hoisted out of the
    search loop) and their reads at every step shrink ``R``-fold. On the 2-core CPU that made a
    base-shape beam search (8 sentences, beam 4, 64 steps) 12% faster, 1.40 against 1.59 s a batch.
    ``R = 1`` keeps its own ungrouped form: the grouped one with ``R = 1`` over the self-attention
    cache made that search 2.5 times slower (4.0 s a batch).
    """
    num_rows, kv_rows = query.shape[0], key.shape[0]
    if num_rows % kv_rows:
        raise ValueError(f"{num_rows} query rows cannot share {kv_rows} key/value rows evenly.")
    if num_rows == kv_rows:
        return _ungrouped_single_query_attention(query, key, value, mask)
    *_, num_heads, key_dim = query.shape
    grouped_query = query.reshape(kv_rows, num_rows // kv_rows, 1, num_heads, key_dim)  # [B,R,1,H,K]
    scores = jnp.sum(grouped_query.astype(jnp.float32) * key.astype(jnp.float32)[:, None], axis=-1)  # [B,R,S,H]
    scores = jnp.swapaxes(scores, 2, 3) / jnp.sqrt(jnp.float32(key_dim))  # [B,R,H,S]
    if mask is not None:
        mask = jnp.reshape(mask, (1,) * (4 - mask.ndim) + mask.shape)[:, None, :, 0, :]  # [B|1,1,H|1,S]
    weights = masked_softmax(scores, mask)
    weights = jnp.swapaxes(weights, 2, 3)[..., None].astype(value.dtype)  # [B,R,S,H,1]
    attended = jnp.sum(weights * value[:, None], axis=2)  # [B,R,H,V]
    return attended.reshape(num_rows, 1, num_heads, value.shape[-1])


def _ungrouped_single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """:func:`single_query_attention` with one query row per key/value row (``R = 1``)."""
    key_dim = query.shape[-1]
    scores = jnp.sum(query.astype(jnp.float32) * key.astype(jnp.float32), axis=-1)  # [B,S,H]
    scores = jnp.swapaxes(scores, 1, 2)[:, :, None, :] / jnp.sqrt(jnp.float32(key_dim))  # [B,H,1,S]
    weights = masked_softmax(scores, mask)
    weights = jnp.swapaxes(weights[:, :, 0, :], 1, 2)[..., None].astype(value.dtype)  # [B,S,H,1]
    return jnp.sum(weights * value, axis=1, keepdims=True)  # [B,1,H,V]


def cached_single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """softmax(q K^T / sqrt(d_k)) V for one query per row over a key/value cache stored heads first.

    Parameters
    ----------
    query : Array
        ``[B, 1, H, K]``, one query position per cache row.
    key : Array
        ``[B, H, S, K]``, the cache as :class:`attention_jax.models.attention.MultiHeadAttention` stores it.
    value : Array
        ``[B, H, S, V]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, 1, S]``: ``True`` = may attend.

    Returns
    -------
    Array
        ``[B, 1, H, V]``, equal to ``scaled_dot_product_attention`` of the query with the cache (keys and
        values moved back to ``[B, S, H, K|V]``) up to float rounding.

    Notes
    -----
    With the heads before the positions, both contractions are batched matrix products over
    ``(B, H)`` whose operands XLA takes as stored: ``q K^T`` contracts the last axis of each, and
    ``weights V`` contracts the positions, the second-to-last axis of ``V``. In the layout of the
    other paths (``[B, S, H, K]``) they needed either a transpose of the cache at every step or the
    multiply-and-sum of :func:`single_query_attention`, which XLA's CPU backend runs more slowly: a
    base-shape beam search (8 sentences, beam 4, 64 steps) took 2.65 instead of 2.89 s a batch
    (``benchmarks/decode.py``, medians of 3 alternating runs on 2 Sapphire Rapids cores).
    """
    key_dim = query.shape[-1]
    scores = jnp.einsum("bhk,bhsk->bhs", query[:, 0].astype(jnp.float32), key.astype(jnp.float32))
    scores = scores[:, :, None, :] / jnp.sqrt(jnp.float32(key_dim))  # [B,H,1,S]
    weights = masked_softmax(scores, mask).astype(value.dtype)
    attended = jnp.einsum("bhs,bhsv->bhv", weights[:, :, 0], value)  # [B,H,V]
    return attended[:, None]


def masked_softmax(scores: Array, mask: Array | None) -> Array:
    """Softmax over the last axis restricted to ``mask``; masked entries and fully masked rows are 0.

    Parameters
    ----------
    scores : Array
        float32 attention scores ``[..., S]``.
    mask : Array, optional
        Boolean, broadcastable to ``scores``; ``True`` = may attend.

    Returns
    -------
    Array
        Weights of the shape of ``scores``, summing to 1 over allowed keys (0 for a row with none).

    Notes
    -----
    Shared by every attention path (:mod:`attention_jax.models.attention` imports it from here): masked
    scores are set to the float32 minimum rather than ``-inf``, so a fully masked row gives no NaN,
    and its weights are then zeroed.
    """
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    return weights if mask is None else jnp.where(mask, weights, 0.0)


def attend(scores: Array, value: Array, mask: Array | None, *, return_weights: bool = False,
           dropout_fn: Callable[[Array], Array] | None = None) -> Array | tuple[Array, Array]:
    """The part every softmax attention function shares once it has its scores: weights, dropout, values.

    Parameters
    ----------
    scores : Array
        ``[B, H, T, S]`` float32 scores (scaled, unscaled or additive).
    value : Array
        ``[B, S, H, V]`` values.
    mask : Array or None
        Boolean, broadcastable to ``[B, H, T, S]``; ``True`` = may attend.
    return_weights : bool
        Also return the attention weights.
    dropout_fn : callable, optional
        Applied to the weights before they multiply the values (attention dropout).

    Returns
    -------
    Array or (Array, Array)
        The output ``[B, T, H, V]``, and with ``return_weights`` the weights ``[B, H, T, S]``.

    Notes
    -----
    Weights come from :func:`masked_softmax` (fully masked rows give zeros) in the values' dtype; the
    returned weights are those before dropout.
    """
    weights = masked_softmax(scores, mask).astype(value.dtype)
    attended = dropout_fn(weights) if dropout_fn is not None else weights
    output = jnp.einsum("bhts,bshv->bthv", attended, value)
    return (output, weights) if return_weights else output
