"""The lowest index of the largest score by two levels of block maxima, replacing XLA's unvectorized CPU argmax."""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

ARGMAX_MAX_BLOCK = 1024
"""Widest block of :func:`first_argmax`."""
ARGMAX_MIN_BLOCK = 32
"""Narrowest block worth the two-level search (else ``top_k``)."""


def _argmax_block_width(num_classes: int) -> int | None:
    """Largest divisor of ``N`` in ``[ARGMAX_MIN_BLOCK, ARGMAX_MAX_BLOCK]`` (``N`` if smaller), else ``None``."""
    for width in range(min(num_classes, ARGMAX_MAX_BLOCK), ARGMAX_MIN_BLOCK - 1, -1):
        if num_classes % width == 0:
            return width
    return None


def first_argmax(logits: Array) -> Array:
    """Return the lowest index of the largest value along the last axis (as ``jnp.argmax``).

    Parameters
    ----------
    logits : Array
        ``[..., N]``, free of NaN.

    Returns
    -------
    Array
        int32 ``[...]``.
    """
    num_classes = logits.shape[-1]
    width = _argmax_block_width(num_classes)
    if width is None:
        return jax.lax.top_k(logits, 1)[1][..., 0]
    blocks = logits.reshape(*logits.shape[:-1], num_classes // width, width)  # [..., N / W, W]
    block_max = jnp.max(blocks, axis=-1)  # [..., N / W]
    best = jnp.max(block_max, axis=-1, keepdims=True)  # [..., 1]
    first_block = jnp.argmax(block_max == best, axis=-1)  # [...]: the first True
    chosen = jnp.take_along_axis(blocks, first_block[..., None, None], axis=-2)[..., 0, :]  # [..., W]
    offset = jnp.argmax(chosen == best, axis=-1)
    return (first_block * width + offset).astype(jnp.int32)
