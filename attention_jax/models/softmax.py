"""The masked softmax every softmax attention path shares, and the weighted sum of values after it.

Shapes: B batch, T queries, S keys, H heads, V d_v.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array


def masked_softmax(scores: Array, mask: Array | None) -> Array:
    """Softmax over the last axis restricted to ``mask``; masked entries and fully masked rows are 0.

    Parameters
    ----------
    scores : Array
        float32 attention scores ``[..., S]``.
    mask : Array, optional
        Boolean, broadcastable to ``scores``; ``True`` = may attend.

    Returns
    -------
    Array
        Weights of the shape of ``scores``, summing to 1 over allowed keys (0 for a row with none).

    Notes
    -----
    Masked scores are set to the float32 minimum rather than ``-inf``, so a fully masked row gives no NaN;
    its weights are then zeroed.
    """
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    return weights if mask is None else jnp.where(mask, weights, 0.0)


def attend(scores: Array, value: Array, mask: Array | None, *, return_weights: bool = False,
           dropout_fn: Callable[[Array], Array] | None = None) -> Array | tuple[Array, Array]:
    """The part every softmax attention function shares once it has its scores: weights, dropout, values.

    Parameters
    ----------
    scores : Array
        ``[B, H, T, S]`` float32 scores (scaled, unscaled or additive).
    value : Array
        ``[B, S, H, V]`` values.
    mask : Array or None
        Boolean, broadcastable to ``[B, H, T, S]``; ``True`` = may attend.
    return_weights : bool
        Also return the attention weights.
    dropout_fn : callable, optional
        Applied to the weights before they multiply the values (attention dropout).

    Returns
    -------
    Array or (Array, Array)
        The output ``[B, T, H, V]``, and with ``return_weights`` the weights ``[B, H, T, S]``.
    """
    weights = masked_softmax(scores, mask).astype(value.dtype)
    attended = dropout_fn(weights) if dropout_fn is not None else weights
    output = jnp.einsum("bhts,bshv->bthv", attended, value)
    return (output, weights) if return_weights else output
