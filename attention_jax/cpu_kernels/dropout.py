"""Dropout with JAX's own threefry mask, drawn without the loop JAX's CPU lowering puts around it.

On CPUs JAX lowers Threefry-2x32 (Salmon et al., 2011) as a ``while`` loop over its five blocks of four
rounds; written out as 20 rounds it is one vectorized fusion. The bits and masks equal
``jax.random.bits`` / ``bernoulli`` exactly (a jitted step still rounds differently, being another
program); where they could differ (non-threefry keys, ``jax_threefry_partitionable`` off, 64-bit mode,
over 2^32 elements) JAX's own implementation is called.
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
"""Rotation distances of Threefry-2x32's rounds; blocks of four alternate between the two rows."""
THREEFRY_PARITY = 0x1BD11BDA
"""Constant of the third key word (``k0 ^ k1 ^ parity``) in the Threefish key schedule."""
_FLOAT32_MANTISSA_BITS = 23


def _rotate_left(value: Array, distance: int) -> Array:
    return (value << np.uint32(distance)) | (value >> np.uint32(32 - distance))


def threefry2x32(key_words: tuple[Array, Array], count_hi: Array, count_lo: Array) -> tuple[Array, Array]:
    """Threefry-2x32 with 20 rounds of the counter words ``(count_hi, count_lo)`` under a 64-bit key.

    Parameters
    ----------
    key_words : (Array, Array)
        The key's two uint32 words (scalars).
    count_hi, count_lo : Array
        uint32 counter words, any shape (the same for both).

    Returns
    -------
    (Array, Array)
        The two uint32 output words, shaped like the counters.

    Notes
    -----
    Five blocks of four rounds (add, rotate, xor); after block ``b`` the key schedule adds key words
    ``b + 1`` and ``b + 2`` (mod 3) and the block number. Unrolled, so that XLA fuses it into one loop.
    """
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
    """The two uint32 words of a threefry key (typed or raw), or ``None`` if another draw is needed."""
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


def threefry_random_bits(key: Array, shape: Sequence[int]) -> Array:
    """``jax.random.bits(key, shape, jnp.uint32)``, computed in one loop-free expression.

    Parameters
    ----------
    key : Array
        A threefry key: typed (``jax.random.key``) or raw uint32 ``[2]`` (``jax.random.PRNGKey``).
    shape : sequence of int
        Shape of the result.

    Returns
    -------
    Array
        uint32 bits equal to JAX's for the same key and shape.

    Notes
    -----
    JAX's partitionable layout gives element ``i`` (row-major) the counter ``(i >> 32, i & 0xFFFFFFFF)``
    and returns the xor of the two output words. Keys of other generators, 64-bit mode, the legacy
    layout and more than 2^32 elements go to ``jax.random.bits`` itself.
    """
    shape = tuple(int(size) for size in shape)
    key_words = _threefry_key_words(key)
    size = math.prod(shape)
    if key_words is None or size >= 2**32:
        return jax.random.bits(key, shape, jnp.uint32)
    count_lo = jax.lax.iota(jnp.uint32, size).reshape(shape)
    left, right = threefry2x32(key_words, jnp.zeros(shape, jnp.uint32), count_lo)
    return left ^ right


def bernoulli_mask(key: Array, keep_prob: float, shape: Sequence[int]) -> Array:
    """``jax.random.bernoulli(key, keep_prob, shape)``, with the bits of :func:`threefry_random_bits`.

    Parameters
    ----------
    key : Array
        A PRNG key.
    keep_prob : float
        Probability of ``True``, a Python number.
    shape : sequence of int
        Shape of the mask.

    Returns
    -------
    Array
        bool mask, equal to JAX's for the same arguments.

    Notes
    -----
    JAX draws ``u = (bits >> 9) * 2^-23`` (a float32 in [0, 1)) and keeps where ``u < float32(p)``.
    Both sides are exact, so the test is the integer comparison ``bits >> 9 < ceil(float32(p) * 2^23)``.
    Keys that :func:`threefry_random_bits` would hand to JAX go to ``jax.random.bernoulli`` whole.
    """
    shape = tuple(int(size) for size in shape)
    if _threefry_key_words(key) is None or math.prod(shape) >= 2**32:
        return jax.random.bernoulli(key, keep_prob, shape)
    threshold = math.ceil(float(np.float32(keep_prob)) * 2**_FLOAT32_MANTISSA_BITS)
    mantissa = threefry_random_bits(key, shape) >> np.uint32(32 - _FLOAT32_MANTISSA_BITS)
    return mantissa < np.uint32(threshold)


class Dropout(nn.Dropout):
    """``flax.linen.Dropout`` (same fields, same masks) with the mask from :func:`bernoulli_mask`.

    Notes
    -----
    The class keeps Flax's name, so modules are auto-named ``Dropout_0``, ... as before and
    ``make_rng`` hands each the same key: swapping one for the other changes no mask.
    """

    @nn.compact
    def __call__(self, inputs: Array, deterministic: bool | None = None, rng: Array | None = None) -> Array:
        """``inputs`` with each element zeroed with probability ``rate`` and the rest scaled by ``1 / (1 - rate)``.

        Parameters
        ----------
        inputs : Array
            Any shape and float dtype.
        deterministic : bool, optional
            True returns ``inputs`` unchanged (merged with the attribute, as in Flax).
        rng : Array, optional
            Key to use instead of ``make_rng(rng_collection)``.

        Returns
        -------
        Array
            Same shape and dtype as ``inputs``.
        """
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
        mask = jnp.broadcast_to(bernoulli_mask(rng, keep_prob, mask_shape), inputs.shape)
        return jax.lax.select(mask, inputs / keep_prob, jnp.zeros_like(inputs))
