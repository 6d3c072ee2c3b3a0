"""Attention of one query position per row over a key/value cache, without matrix products.

Incremental decoding attends from one new position (``T = 1``) to the whole cache. Written as the
einsums of :func:`attention_jax.attention.scaled_dot_product_attention`, XLA turns each into a batched
matrix product over ``(B, H)`` and first copies the cache ``[B, S, H, K]`` into the product's layout
``[B, H, K, S]``: on a CPU, that transpose of every layer's cache at every step was 16% of a
base-shape beam search's time. With one query per row there is nothing for a matrix product to reuse,
so this module writes the two contractions as multiply-and-sum, which XLA fuses into one pass over the
cache in its stored layout.

Cross-attention of a decode step has one query position too, and its keys and values (the encoder
output, projected) do not change during a search; XLA hoisted their projection out of the search
loop but still transposed them at every step, 12% of a base-shape beam search's thread time
(``benchmarks/op_profile.py``). :class:`attention_jax.attention.MultiHeadAttention` therefore uses
this path for every attention with one query position (self- or cross-, without dropout or stored
weights).

Shape glossary
--------------
B rows, S cache positions, H heads, K key size per head, V value size per head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """softmax(q K^T / sqrt(d_k)) V for one query per row (Equation 1), as fused multiply-and-sum.

    Parameters
    ----------
    query : Array
        ``[B, 1, H, K]``.
    key : Array
        ``[B, S, H, K]``.
    value : Array
        ``[B, S, H, V]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, 1, S]``; ``True`` = may attend.

    Returns
    -------
    Array
        ``[B, 1, H, V]``, equal to ``scaled_dot_product_attention`` up to float rounding (the same
        float32 scores, masking and fully-masked-row zeros).
    """
    key_dim = query.shape[-1]
    scores = jnp.sum(query.astype(jnp.float32) * key.astype(jnp.float32), axis=-1)  # [B,S,H]
    scores = jnp.swapaxes(scores, 1, 2)[:, :, None, :] / jnp.sqrt(jnp.float32(key_dim))  # [B,H,1,S]
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    if mask is not None:
        weights = jnp.where(mask, weights, 0.0)  # Zero for fully masked rows, as the einsum path.
    weights = jnp.swapaxes(weights[:, :, 0, :], 1, 2)[..., None].astype(value.dtype)  # [B,S,H,1]
    return jnp.sum(weights * value, axis=1, keepdims=True)  # [B,1,H,V]
