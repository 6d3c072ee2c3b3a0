"""Attention through ``jax.nn.dot_product_attention``: the ``xla``, ``cudnn`` and ``fused`` implementations."""

from __future__ import annotations

from typing import Literal, cast

import jax
import jax.numpy as jnp

from attention_jax.models.attention_registry import AttentionImplementation

Array = jax.Array


def fused_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    mask: Array | None = None,
    *,
    implementation: str = "fused",
) -> Array:
    """Return attention through ``jax.nn.dot_product_attention`` (XLA, or cuDNN flash attention).

    ``d_k != d_v`` is zero-padded to one width and sliced back; fully masked rows are zeroed afterwards (the
    kernels average uniformly there).

    Parameters
    ----------
    query, key, value : Array
        ``[B, T, H, K]``, ``[B, S, H, K]``, ``[B, S, H, V]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``.
    implementation : str
        ``xla``, ``cudnn`` or ``fused`` (cuDNN on GPU for 16-bit inputs, else XLA).

    Returns
    -------
    Array
        ``[B, T, H, V]``.
    """
    key_dim, value_dim = query.shape[-1], value.shape[-1]
    width = max(key_dim, value_dim)

    def _pad_last(array: Array) -> Array:
        extra = width - array.shape[-1]
        return array if extra == 0 else jnp.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, extra)])

    # "xla" or "cudnn" pass through unchanged; jax.nn.dot_product_attention rejects any other value.
    backend = cast(Literal["xla", "cudnn"], implementation)
    if implementation == AttentionImplementation.FUSED:
        on_gpu = jax.default_backend() == "gpu"
        backend = "cudnn" if on_gpu and query.dtype in (jnp.bfloat16, jnp.float16) else "xla"
    output = jax.nn.dot_product_attention(
        _pad_last(query),
        _pad_last(key),
        _pad_last(value),
        mask=mask,
        scale=1.0 / float(key_dim) ** 0.5,
        implementation=backend,
    )[..., :value_dim]
    if mask is not None:
        any_key = jnp.any(jnp.broadcast_to(mask, mask.shape[:-1] + (key.shape[1],)), axis=-1)
        output = output * jnp.swapaxes(any_key, 1, 2)[..., None].astype(output.dtype)  # [B,T,H,1]
    return output
