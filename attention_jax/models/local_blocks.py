"""The block layout of restricted self-attention (Table 1), for ``attention.local_dot_product_attention``.

``L`` positions are cut into ``nb = ceil(L / r)`` blocks of ``w = r``; keys within ``r`` of block ``i`` lie
in blocks ``i - 1 .. i + 1`` (``i - 1, i`` when causal): ``C`` neighbour blocks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def to_blocks(sequence: Array, block: int, num_blocks: int, margin: int) -> Array:
    """Return axis 1 cut into ``[B, margin + nb + margin, block, ...]`` zero-padded blocks.

    Parameters
    ----------
    sequence : Array
        ``[B, L, ...]``.
    block, num_blocks, margin : int
        Positions per block, blocks covering ``L``, empty blocks at each end.

    Returns
    -------
    Array
        The blocks.
    """
    edge = [(0, 0)] * sequence.ndim
    edge[1] = (margin * block, (num_blocks + margin) * block - sequence.shape[1])
    padded = jnp.pad(sequence, edge)
    return padded.reshape(sequence.shape[0], num_blocks + 2 * margin, block, *sequence.shape[2:])


def neighbours(blocks: Array, offset: int, num_blocks: int) -> Array:
    """Return block ``i + offset`` for every block ``i`` of one-block-padded ``blocks``.

    Parameters
    ----------
    blocks : Array
        ``[B, nb + 2, w, ...]``.
    offset, num_blocks : int
        -1, 0 or 1, and ``nb``.

    Returns
    -------
    Array
        ``[B, nb, w, ...]``.
    """
    return blocks[:, 1 + offset:1 + offset + num_blocks]


def local_block_mask(length: int, window: int, num_blocks: int, offsets: tuple[int, ...],
                     valid: Array | None, causal: bool) -> Array:
    """Return which neighbour-block keys each query may see: ``|i - j| <= r``, in range, valid, causal.

    Parameters
    ----------
    length, window, num_blocks : int
        ``L``, ``r`` (also ``w``), ``nb``.
    offsets : tuple[int, ...]
        The ``C`` neighbour offsets.
    valid : Array or None
        Boolean ``[B, L]``.
    causal : bool
        Also forbid later keys.

    Returns
    -------
    Array
        Boolean ``[B or 1, 1, nb, w, C w]``.
    """
    block = window
    # Positions: queries [nb, w, 1], keys [nb, 1, Cw] (C = len(offsets)); keys outside [0, L) are padding.
    query_positions = jnp.arange(num_blocks * block).reshape(num_blocks, block, 1)
    block_starts = (jnp.arange(num_blocks)[:, None] + jnp.asarray(offsets)[None, :]) * block  # [nb,C]
    key_positions = (block_starts[:, :, None] + jnp.arange(block)).reshape(num_blocks, 1, -1)
    allowed = jnp.abs(query_positions - key_positions) <= window  # |i - j| <= r
    allowed &= (key_positions >= 0) & (key_positions < length)
    if causal:
        allowed &= key_positions <= query_positions
    allowed = allowed[None]  # [1,nb,w,Cw]
    if valid is not None:
        query_valid = to_blocks(valid, block, num_blocks, margin=0)[..., None]  # [B,nb,w,1]
        valid_blocks = to_blocks(valid, block, num_blocks, margin=1)  # [B,nb+2,w]
        key_valid = jnp.concatenate(  # [B,nb,Cw]
            [neighbours(valid_blocks, o, num_blocks) for o in offsets], axis=2)
        allowed = allowed & query_valid & key_valid[:, :, None, :]
    return allowed[:, None]


def check_one_length(length: int, key: Array, value: Array) -> None:
    """Check that keys and values have the queries' length (self-attention).

    Parameters
    ----------
    length : int
        Query length.
    key, value : Array
        ``[B, S, H, K|V]``.

    Raises
    ------
    ValueError
        ``S != length``.
    """
    if key.shape[1] != length or value.shape[1] != length:
        raise ValueError(f"local_dot_product_attention is self-attention: query, key and value need one length; "
                         f"got {length}, {key.shape[1]}, {value.shape[1]}. Use scaled_dot_product_attention "
                         "for cross-attention.")
