"""Attention of one query position per row over a key/value cache, without matrix products.

Incremental decoding attends from one new position (``T = 1``) to the whole cache. Written as the
einsums of :func:`attention_jax.attention.scaled_dot_product_attention`, XLA turns each into a batched
matrix product over ``(B, H)`` and first copies the cache ``[B, S, H, K]`` into the product's layout
``[B, H, K, S]``: on a CPU, that transpose of every layer's cache at every step was 16% of a
base-shape beam search's time. With one query per row there is nothing for a matrix product to reuse,
so this module writes the two contractions as multiply-and-sum, which XLA fuses into one pass over the
cache in its stored layout.

Shape glossary
--------------
B rows, S cache positions, H heads, K key size per head, V value size per head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """softmax(q K^T / sqrt(d_k)) V for a few queries per row (Equation 1), as fused multiply-and-sum.

    Parameters
    ----------
    query : Array
        ``[B, T, H, K]``, ``T`` small (1 for one decoding step; a sentence's beams when grouped).
    key : Array
        ``[B, S, H, K]``.
    value : Array
        ``[B, S, H, V]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``; ``True`` = may attend.

    Returns
    -------
    Array
        ``[B, T, H, V]``, equal to ``scaled_dot_product_attention`` up to float rounding (the same
        float32 scores, masking and fully-masked-row zeros).
    """
    key_dim = query.shape[-1]
    scores = jnp.sum(query.astype(jnp.float32)[:, :, None] * key.astype(jnp.float32)[:, None], axis=-1)  # [B,T,S,H]
    scores = jnp.transpose(scores, (0, 3, 1, 2)) / jnp.sqrt(jnp.float32(key_dim))  # [B,H,T,S]
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    if mask is not None:
        weights = jnp.where(mask, weights, 0.0)  # Zero for fully masked rows, as the einsum path.
    weights = jnp.transpose(weights, (0, 2, 3, 1))[..., None].astype(value.dtype)  # [B,T,S,H,1]
    return jnp.sum(weights * value[:, None], axis=2)  # [B,T,H,V]


def grouped_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """One query per row, ``G`` consecutive rows sharing one row of keys/values (a sentence's beams).

    Parameters
    ----------
    query : Array
        ``[G B, 1, H, K]``: rows ``b G .. b G + G - 1`` attend to key row ``b``.
    key, value : Array
        ``[B, S, H, K]`` and ``[B, S, H, V]``; ``G = 1`` when they have a row per query.
    mask : Array, optional
        Boolean, broadcastable to ``[G B, H, 1, S]``.

    Returns
    -------
    Array
        ``[G B, 1, H, V]``: each row's attention over its key row, as if the keys/values were repeated
        ``G`` times (``jnp.repeat(key, G, axis=0)``), up to float rounding.

    Notes
    -----
    Beam search keeps ``G = K`` hypotheses per sentence, and all of them attend to the same encoder
    output. Grouping them as ``G`` queries of one sentence reads each sentence's cross-attention keys and
    values once per step instead of ``G`` times, and the encoder output is never repeated.
    """
    rows, _, heads, _ = query.shape
    groups = rows // key.shape[0]
    if groups == 1:
        return single_query_attention(query, key, value, mask)
    query = query.reshape(key.shape[0], groups, heads, query.shape[-1])  # [B,G,H,K]: G queries a row.
    if mask is not None:  # [GB,Hm,1,S] -> [B,Hm,G,S]
        mask = jnp.broadcast_to(mask, (rows, *mask.shape[1:]))
        mask = jnp.swapaxes(mask.reshape(key.shape[0], groups, *mask.shape[1:])[:, :, :, 0], 1, 2)
    return single_query_attention(query, key, value, mask).reshape(rows, 1, heads, value.shape[-1])
