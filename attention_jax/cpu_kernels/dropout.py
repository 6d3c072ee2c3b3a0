"""Dropout with JAX's own Threefry mask, without the loop JAX's CPU lowering puts around it.

Threefry-2x32 (Salmon et al., 2011) written out as 20 rounds is one vectorized fusion with JAX's bits and masks;
whatever could differ (other keys, 64-bit mode, the legacy layout, over 2^32 elements) calls JAX's own.
"""

from __future__ import annotations

import math
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
"""Rotation distances of Threefry-2x32's rounds; blocks of four alternate rows."""
THREEFRY_PARITY = 0x1BD11BDA
"""Third key word's constant (``k0 ^ k1 ^ parity``) in the key schedule."""
_FLOAT32_MANTISSA_BITS = 23


def _rotate_left(value: Array, distance: int) -> Array:
    return (value << np.uint32(distance)) | (value >> np.uint32(32 - distance))


def _threefry2x32(key_words: tuple[Array, Array], count_hi: Array, count_lo: Array) -> tuple[Array, Array]:
    """Threefry-2x32, 20 rounds unrolled: five blocks of four, key schedule injected after each."""
    schedule = (key_words[0], key_words[1], key_words[0] ^ key_words[1] ^ np.uint32(THREEFRY_PARITY))
    left, right = count_hi + schedule[0], count_lo + schedule[1]
    for block in range(5):
        for distance in THREEFRY_ROTATIONS[block % 2]:
            left = left + right
            right = _rotate_left(right, distance) ^ left
        left = left + schedule[(block + 1) % 3]
        right = right + schedule[(block + 2) % 3] + np.uint32(block + 1)
    return left, right


def _threefry_key_words(key: Array) -> tuple[Array, Array] | None:
    """The two uint32 words of a threefry key, or ``None`` when JAX's own draw is needed."""
    # The ignores: jax's Config declares none of the options it defines at runtime.
    if jax.config.jax_enable_x64 or not jax.config.jax_threefry_partitionable:  # type: ignore[attr-defined]
        return None
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != () or str(jax.random.key_impl(key)) != "threefry2x32":
            return None
        words = jax.random.key_data(key)
    else:
        if (key.shape != (2,) or key.dtype != jnp.uint32
                or jax.config.jax_default_prng_impl != "threefry2x32"):  # type: ignore[attr-defined]
            return None
        words = key
    return words[0], words[1]


def _threefry_random_bits(key: Array, shape: Sequence[int]) -> Array:
    """``jax.random.bits(key, shape, jnp.uint32)``: counter ``i`` split in two words, outputs xored."""
    shape = tuple(int(size) for size in shape)
    key_words = _threefry_key_words(key)
    size = math.prod(shape)
    if key_words is None or size >= 2**32:
        return jax.random.bits(key, shape, jnp.uint32)
    count_lo = jax.lax.iota(jnp.uint32, size).reshape(shape)
    left, right = _threefry2x32(key_words, jnp.zeros(shape, jnp.uint32), count_lo)
    return left ^ right


def _bernoulli_mask(key: Array, keep_prob: float, shape: Sequence[int]) -> Array:
    """``jax.random.bernoulli``, as the exact integer test ``bits >> 9 < ceil(float32(p) 2^23)``."""
    shape = tuple(int(size) for size in shape)
    if _threefry_key_words(key) is None or math.prod(shape) >= 2**32:
        return jax.random.bernoulli(key, keep_prob, shape)
    threshold = math.ceil(float(np.float32(keep_prob)) * 2**_FLOAT32_MANTISSA_BITS)
    mantissa = _threefry_random_bits(key, shape) >> np.uint32(32 - _FLOAT32_MANTISSA_BITS)
    return mantissa < np.uint32(threshold)


class Dropout(nn.Dropout):
    """``flax.linen.Dropout`` (same fields, name and masks) with the mask from the unrolled Threefry."""

    @nn.compact
    def __call__(self, inputs: Array, deterministic: bool | None = None, rng: Array | None = None) -> Array:
        """Zero each element with probability ``rate``, scale the rest by ``1 / (1 - rate)``."""
        deterministic = nn.merge_param("deterministic", self.deterministic, deterministic)
        if self.rate == 0.0 or deterministic:
            return inputs
        if self.rate == 1.0:  # All dropped; no division by zero in the gradient.
            return jnp.zeros_like(inputs)
        keep_prob = 1.0 - self.rate
        if rng is None:
            rng = self.make_rng(self.rng_collection)
        broadcast_axes = {axis % inputs.ndim for axis in self.broadcast_dims}
        mask_shape = [1 if axis in broadcast_axes else size for axis, size in enumerate(inputs.shape)]
        mask = jnp.broadcast_to(_bernoulli_mask(rng, keep_prob, mask_shape), inputs.shape)
        return jax.lax.select(mask, inputs / keep_prob, jnp.zeros_like(inputs))
