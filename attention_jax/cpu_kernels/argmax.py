"""The lowest index of the largest score, found in two levels of plain maxima instead of XLA's CPU ``argmax``.

XLA's CPU ``argmax`` (a reduction over value/index pairs) is not vectorized; :func:`first_argmax` uses
block maxima and one gather and returns exactly ``jnp.argmax``'s index.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

ARGMAX_MAX_BLOCK = 1024
"""Widest block of :func:`first_argmax`: the largest divisor of ``N`` not above it is used."""
ARGMAX_MIN_BLOCK = 32
"""Narrowest block worth the two-level search; below it (``N`` without such a divisor) ``top_k`` is used."""


def argmax_block_width(num_classes: int) -> int | None:
    """The block width of :func:`first_argmax` for ``num_classes`` scores, or ``None``.

    Parameters
    ----------
    num_classes : int
        Length ``N`` of the searched axis.

    Returns
    -------
    int or None
        The largest divisor of ``N`` in ``[ARGMAX_MIN_BLOCK, ARGMAX_MAX_BLOCK]`` (``N`` itself when it is
        no larger), or ``None`` when there is none (``N`` prime and large, for example).
    """
    for width in range(min(num_classes, ARGMAX_MAX_BLOCK), ARGMAX_MIN_BLOCK - 1, -1):
        if num_classes % width == 0:
            return width
    return None


def first_argmax(logits: Array) -> Array:
    """Index of the largest value along the last axis, the lowest one on ties (``jnp.argmax``'s answer).

    Parameters
    ----------
    logits : Array
        ``[..., N]`` scores, free of NaN.

    Returns
    -------
    Array
        int32 ``[...]``.

    Notes
    -----
    The scores are cut into blocks of :func:`argmax_block_width` ``W``; the first block whose maximum
    equals the overall maximum is the block of the answer, and the first position in that one block
    (``[..., W]``, gathered) that holds the maximum is the offset. Lengths without a block width use
    ``top_k``. Written for XLA's CPU backend; callers use ``jnp.argmax`` elsewhere.
    """
    num_classes = logits.shape[-1]
    width = argmax_block_width(num_classes)
    if width is None:
        return jax.lax.top_k(logits, 1)[1][..., 0]
    blocks = logits.reshape(*logits.shape[:-1], num_classes // width, width)  # [..., N / W, W]
    block_max = jnp.max(blocks, axis=-1)  # [..., N / W]
    best = jnp.max(block_max, axis=-1, keepdims=True)  # [..., 1]
    first_block = jnp.argmax(block_max == best, axis=-1)  # [...]: the first True
    chosen = jnp.take_along_axis(blocks, first_block[..., None, None], axis=-2)[..., 0, :]  # [..., W]
    offset = jnp.argmax(chosen == best, axis=-1)
    return (first_block * width + offset).astype(jnp.int32)
