"""The masked softmax every softmax attention path shares, and the weighted sum of values after it."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array


def _masked_softmax(scores: Array, mask: Array | None) -> Array:
    """Return the softmax over the last axis restricted to ``mask`` (0 where masked, 0 for empty rows).

    Masked scores are set to the float32 minimum, not ``-inf``, so an empty row gives no NaN.

    ``scores`` float32 ``[..., S]``; ``mask`` boolean, broadcastable to it.
    """
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    return weights if mask is None else jnp.where(mask, weights, 0.0)


def attend(scores: Array, value: Array, mask: Array | None, *, return_weights: bool = False,
           dropout_fn: Callable[[Array], Array] | None = None) -> Array | tuple[Array, Array]:
    """Return softmax weights, attention dropout and the weighted values from scores.

    Parameters
    ----------
    scores, value : Array
        float32 ``[B, H, T, S]`` and ``[B, S, H, V]``.
    mask : Array or None
        Boolean, broadcastable to ``[B, H, T, S]``.
    return_weights : bool
        Also return the weights.
    dropout_fn : callable, optional
        Attention dropout.

    Returns
    -------
    Array or (Array, Array)
        ``[B, T, H, V]`` (and the weights ``[B, H, T, S]``).
    """
    weights = _masked_softmax(scores, mask).astype(value.dtype)
    attended = dropout_fn(weights) if dropout_fn is not None else weights
    output = jnp.einsum("bhts,bshv->bthv", attended, value)
    return (output, weights) if return_weights else output
