"""Positional encodings inside self-attention: relative (Shaw et al.), rotary (Su et al.), ALiBi (Press et al.).

Equations and constraints: docs/positions.md. Shapes: B batch, T queries, S keys, H heads, K d_k, V d_v,
R = 2k + 1 relative embeddings.
"""

from __future__ import annotations

import math
from typing import cast

import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.models.positional_encodings import AttentionPositions  # Re-exported: defined there, JAX-free.

Array = jax.Array

ROTARY_BASE = 10000.0
"""Su et al.'s base of the rotation frequencies, ``theta_p = base^(-2p / d)``."""


# --- rotary (Su et al., 2021) ---------------------------------------------------------------------

def _rotary_embedding(x: Array, positions: Array, base: float = ROTARY_BASE) -> Array:
    """``R_m x`` (Su et al., Eq. 34): each pair ``(x_2p, x_2p+1)`` of ``[B, T, H, K]`` rotated by ``m theta_p``."""
    key_dim = x.shape[-1]
    inverse_frequency = base ** (-jnp.arange(0, key_dim, 2, dtype=jnp.float32) / key_dim)  # theta_p [K/2]
    angles = positions[..., None, None].astype(jnp.float32) * inverse_frequency  # [B|1,T,1,K/2]
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], key_dim // 2, 2)  # [B,T,H,K/2,2]
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return rotated.reshape(x.shape).astype(x.dtype)


# --- ALiBi (Press et al., 2022) -------------------------------------------------------------------

def _alibi_slopes(num_heads: int) -> tuple[float, ...]:
    """Head slopes ``2^(-8 h / H)``, largest first; for ``H`` no power of two, Press et al.'s interleaving."""
    def _power_of_two(count: int) -> list[float]:
        return [2.0 ** (-8.0 * head / count) for head in range(1, count + 1)]

    closest = 2 ** int(math.floor(math.log2(num_heads)))
    return tuple(_power_of_two(closest) + _power_of_two(2 * closest)[0::2][:num_heads - closest])


def _alibi_bias(module: nn.Module, settings: AttentionPositions, query: Array, query_positions: Array,
                key_positions: Array) -> Array:
    """The ALiBi score bias ``-m_h |i - j|`` (Press et al., 2022, Section 3), float32 ``[B|1, H, T, S]``."""
    slopes = jnp.asarray(_alibi_slopes(query.shape[2]), jnp.float32)  # [H]
    distance = jnp.abs(query_positions[:, :, None] - key_positions[:, None, :]).astype(jnp.float32)  # [B|1,T,S]
    return -slopes[None, :, None, None] * distance[:, None]


# --- relative (Shaw et al., 2018) -----------------------------------------------------------------

def _relative_indices(query_positions: Array, key_positions: Array, max_distance: int) -> Array:
    """``clip(j - i, -k, k) + k``: integer ``[B|1, T, S]`` table rows."""
    offsets = key_positions[:, None, :] - query_positions[:, :, None]  # j - i
    return jnp.clip(offsets, -max_distance, max_distance) + max_distance


def _relative_table(module: nn.Module, name: str, settings: AttentionPositions, width: int) -> Array:
    """A learned ``[2k + 1, width]`` table shared by the layer's heads (Shaw et al., Section 3.1)."""
    table = module.param(name, nn.with_logical_partitioning(nn.initializers.normal(stddev=0.02), (None, "kv")),
                         (2 * settings.entry_settings.max_distance + 1, width))
    return cast(Array, table)  # param unboxes the LogicallyPartitioned its init returns.


def _relative_key_bias(module: nn.Module, settings: AttentionPositions, query: Array, query_positions: Array,
                       key_positions: Array) -> Array:
    """``q_i a^K_ij^T / sqrt(d_k)`` (Shaw et al., 2018, Eq. 4), float32 ``[B, H, T, S]``, formed once per distance."""
    table = _relative_table(module, "relative_key_embedding", settings, query.shape[-1])  # [R,K]
    per_distance = jnp.einsum("bthk,rk->bhtr", query, table.astype(query.dtype),
                              preferred_element_type=jnp.float32)  # [B,H,T,R]
    max_distance = settings.entry_settings.max_distance
    index = _relative_indices(query_positions, key_positions, max_distance)[:, None]  # [B|1,1,T,S]
    index = jnp.broadcast_to(index, (per_distance.shape[0], 1, *index.shape[2:]))
    return jnp.take_along_axis(per_distance, index, axis=-1) / jnp.sqrt(jnp.float32(query.shape[-1]))


def _relative_value_term(module: nn.Module, settings: AttentionPositions, weights: Array, query_positions: Array,
                         key_positions: Array) -> Array | None:
    """``sum_j alpha_ij a^V_ij`` (Shaw et al., 2018, Eq. 3) ``[B, T, H, V]``; ``None`` without ``add_to_values``."""
    if not settings.entry_settings.add_to_values:
        return None
    table = _relative_table(module, "relative_value_embedding", settings, module.value_dim)  # [R,V]
    index = _relative_indices(query_positions, key_positions, settings.entry_settings.max_distance)  # [B|1,T,S]
    one_hot = jax.nn.one_hot(index, table.shape[0], dtype=weights.dtype)  # [B|1,T,S,R]
    if one_hot.shape[0] == 1:
        per_distance = jnp.einsum("bhts,tsr->bhtr", weights, one_hot[0])
    else:
        per_distance = jnp.einsum("bhts,btsr->bhtr", weights, one_hot)
    return jnp.einsum("bhtr,rv->bthv", per_distance, table.astype(weights.dtype))
