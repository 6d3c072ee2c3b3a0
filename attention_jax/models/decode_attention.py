"""Attention of one query position per row, over a key/value cache or a decode step's encoder output.

Both read keys in their stored layout, so XLA transposes no cache at each step. Shapes: B key/value rows,
R query rows per key/value row, S cache positions, H heads, K and V sizes per head.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attention_jax.models.softmax import _masked_softmax

Array = jax.Array


def single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """Return Equation (1) for one query per row; ``R`` query rows share a key/value row (a beam).

    Parameters
    ----------
    query, key, value : Array
        ``[B * R, 1, H, K]`` (row ``b * R + r`` attends to row ``b``), ``[B, S, H, K]``, ``[B, S, H, V]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, 1, S]``.

    Returns
    -------
    Array
        ``[B * R, 1, H, V]``.

    Raises
    ------
    ValueError
        Query rows not a multiple of key/value rows.
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
    weights = _masked_softmax(scores, mask)
    weights = jnp.swapaxes(weights, 2, 3)[..., None].astype(value.dtype)  # [B,R,S,H,1]
    attended = jnp.sum(weights * value[:, None], axis=2)  # [B,R,H,V]
    return attended.reshape(num_rows, 1, num_heads, value.shape[-1])


def _ungrouped_single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """:func:`single_query_attention` with ``R = 1``."""
    key_dim = query.shape[-1]
    scores = jnp.sum(query.astype(jnp.float32) * key.astype(jnp.float32), axis=-1)  # [B,S,H]
    scores = jnp.swapaxes(scores, 1, 2)[:, :, None, :] / jnp.sqrt(jnp.float32(key_dim))  # [B,H,1,S]
    weights = _masked_softmax(scores, mask)
    weights = jnp.swapaxes(weights[:, :, 0, :], 1, 2)[..., None].astype(value.dtype)  # [B,S,H,1]
    return jnp.sum(weights * value, axis=1, keepdims=True)  # [B,1,H,V]


def cached_single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """Return Equation (1) for one query per row over a heads-first cache (batched over ``(B, H)``).

    Parameters
    ----------
    query, key, value : Array
        ``[B, 1, H, K]``; ``[B, H, S, K]`` and ``[B, H, S, V]``, as stored.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, 1, S]``.

    Returns
    -------
    Array
        ``[B, 1, H, V]``.
    """
    key_dim = query.shape[-1]
    scores = jnp.einsum("bhk,bhsk->bhs", query[:, 0].astype(jnp.float32), key.astype(jnp.float32))
    scores = scores[:, :, None, :] / jnp.sqrt(jnp.float32(key_dim))  # [B,H,1,S]
    weights = _masked_softmax(scores, mask).astype(value.dtype)
    attended = jnp.einsum("bhs,bhsv->bhv", weights[:, :, 0], value)  # [B,H,V]
    return attended[:, None]

