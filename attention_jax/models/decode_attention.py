"""Attention of one query position per row, over a key/value cache or a decode step's encoder output.

Both read keys in their stored layout, so XLA transposes no cache at each step. Shapes: B key/value rows,
R query rows per key/value row, S cache positions, H heads, K and V sizes per head.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from attention_jax.models.softmax import masked_softmax

Array = jax.Array


def single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """Return Equation (1) for one query per row; ``R`` query rows share a key/value row (a beam).

    Parameters
    ----------
    query : Array
        ``[B * R, 1, H, K]``; row ``b * R + r`` attends to row ``b``.
    key, value : Array
        ``[B, S, H, K]`` and ``[B, S, H, V]``.
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
    weights = masked_softmax(scores, mask)
    weights = jnp.swapaxes(weights, 2, 3)[..., None].astype(value.dtype)  # [B,R,S,H,1]
    attended = jnp.sum(weights * value[:, None], axis=2)  # [B,R,H,V]
    return attended.reshape(num_rows, 1, num_heads, value.shape[-1])


def _ungrouped_single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """:func:`single_query_attention` with ``R = 1``."""
    key_dim = query.shape[-1]
    scores = jnp.sum(query.astype(jnp.float32) * key.astype(jnp.float32), axis=-1)  # [B,S,H]
    scores = jnp.swapaxes(scores, 1, 2)[:, :, None, :] / jnp.sqrt(jnp.float32(key_dim))  # [B,H,1,S]
    weights = masked_softmax(scores, mask)
    weights = jnp.swapaxes(weights[:, :, 0, :], 1, 2)[..., None].astype(value.dtype)  # [B,S,H,1]
    return jnp.sum(weights * value, axis=1, keepdims=True)  # [B,1,H,V]


def cached_single_query_attention(query: Array, key: Array, value: Array, mask: Array | None) -> Array:
    """Return Equation (1) for one query per row over a heads-first cache (batched over ``(B, H)``).

    Parameters
    ----------
    query : Array
        ``[B, 1, H, K]``.
    key, value : Array
        ``[B, H, S, K]`` and ``[B, H, S, V]``, as stored.
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
    weights = masked_softmax(scores, mask).astype(value.dtype)
    attended = jnp.einsum("bhs,bhsv->bhv", weights[:, :, 0], value)  # [B,H,V]
    return attended[:, None]


def update_key_value_cache(module: Any, key: Array, value: Array, mask: Array | None, *,
                           window: int = 0) -> tuple[Array, Array, Array | None]:
    """Write a decode step's keys and values into ``cache``; return the cache, heads first, and its mask.

    Parameters
    ----------
    module : Any
        The bound ``MultiHeadAttention``.
    key, value : Array
        ``[B, 1, H, K|V]``; during ``init``, ``[B, L, H, K|V]`` sizing the cache.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, 1, L]``.
    window : int
        Keep only the last ``window`` positions (0: all).

    Returns
    -------
    (Array, Array, Array or None)
        Keys ``[B, H, L, K]``, values ``[B, H, L, V]``, mask of the filled positions.

    Raises
    ------
    ValueError
        More than one position per call.
    """
    key, value = jnp.swapaxes(key, 1, 2), jnp.swapaxes(value, 1, 2)  # [B,H,T,K|V]
    initializing = not module.has_variable("cache", "cached_key")
    cached_key = module.variable("cache", "cached_key", jnp.zeros, key.shape, key.dtype)
    cached_value = module.variable("cache", "cached_value", jnp.zeros, value.shape, value.dtype)
    cache_index = module.variable("cache", "cache_index", lambda: jnp.array(0, jnp.int32))
    if initializing:
        return key, value, mask
    if key.shape[2] != 1:
        raise ValueError(f"decode mode processes one position per call; got {key.shape[2]}.")
    index = cache_index.value
    cached_key.value = jax.lax.dynamic_update_slice_in_dim(cached_key.value, key, index, axis=2)
    cached_value.value = jax.lax.dynamic_update_slice_in_dim(cached_value.value, value, index, axis=2)
    cache_index.value = index + 1
    key_positions = jnp.arange(cached_key.value.shape[2])
    filled = key_positions <= index
    if window > 0:  # Restricted self-attention: only the last r positions.
        filled = jnp.logical_and(filled, index - key_positions <= window)
    filled = filled[None, None, None, :]  # [1,1,1,L]
    return cached_key.value, cached_value.value, filled if mask is None else jnp.logical_and(mask, filled)
