"""Independent NumPy oracles of the normalisations and of a sublayer with or without its residual connection.

Written from the papers' equations only (Ba et al., 2016, LayerNorm; Zhang and Sennrich, 2019, RMSNorm;
Vaswani et al., 2017, Section 3.1, the residual sublayer; Xiong et al., 2020, pre-LN), in float64, with none
of the library's code. Parameter dictionaries follow the Flax layout of ``attention_jax.models.model``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tests.support import reference

EPSILON = 1e-6


def normalize(name: str, params: dict | None, x: np.ndarray) -> np.ndarray:
    """The normalisation ``name`` of ``x`` (``none``: ``x`` itself)."""
    if name == "none":
        return x
    return {"layer_norm": reference.layer_norm, "rms_norm": reference.rms_norm}[name](params, x, EPSILON)


def residual_sublayer(name: str, params: dict | None, x: np.ndarray, sublayer: Callable[[np.ndarray], np.ndarray],
                      *, pre: bool, residual: bool) -> np.ndarray:
    """post: ``Norm(x + F(x))``; pre: ``x + F(Norm(x))``; without the residual connection the ``x +`` goes."""
    if pre:
        output = sublayer(normalize(name, params, x))
        return x + output if residual else output
    output = sublayer(x)
    return normalize(name, params, x + output if residual else output)


def encoder_layer(params: dict, x: np.ndarray, mask: np.ndarray | None, *, normalization: str, pre: bool,
                  residual: bool) -> np.ndarray:
    """One encoder layer (self-attention, feed-forward) without dropout, each sublayer as above."""
    def norm_params(block: str) -> dict | None:
        return params[block].get("layer_norm") if block in params else None

    x = residual_sublayer(normalization, norm_params("attention_block"), x,
                          lambda h: reference.multi_head_attention(params["self_attention"], h, h, mask),
                          pre=pre, residual=residual)
    return residual_sublayer(normalization, norm_params("ffn_block"), x,
                             lambda h: reference.feed_forward(params["ffn"], h), pre=pre, residual=residual)


def numerical_gradient(function: Callable[[np.ndarray], float], x: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central differences of a scalar ``function`` at ``x``, one entry at a time (float64)."""
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        shifted = x.copy()
        shifted[index] += step
        above = function(shifted)
        shifted[index] -= 2 * step
        gradient[index] = (above - function(shifted)) / (2 * step)
    return gradient


def norm_param_count(normalization: str, *, d_model: int, num_layers: int, decoder_only: bool, pre: bool) -> int:
    """Parameters of every norm of a model: 2 D (g, b) a LayerNorm, D (g) an RMSNorm, 0 without norms, 4 D + 1
    a BatchNorm (g, b and the running mean, variance and their scalar weight it keeps among the parameters).

    The encoder-decoder has 2 sublayers per encoder layer and 3 per decoder layer; the decoder-only
    model 2 per layer; pre-LN adds one final norm per stack.
    """
    per_norm = {"layer_norm": 2 * d_model, "rms_norm": d_model, "batch_norm": 4 * d_model + 1, "none": 0}[normalization]
    sublayers = 2 * num_layers if decoder_only else 5 * num_layers
    final_norms = (1 if decoder_only else 2) if pre else 0
    return per_norm * (sublayers + final_norms)


def masked_batch_statistics(x: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and biased variance of ``x`` ``[B, L, D]`` over the real tokens, by explicit loops."""
    tokens = [x[b, position] for b in range(x.shape[0]) for position in range(x.shape[1]) if valid[b, position]]
    stacked = np.stack(tokens)  # [real tokens, D]
    mean = stacked.mean(axis=0)
    return mean, ((stacked - mean) ** 2).mean(axis=0)


def batch_norm(params: dict, x: np.ndarray, mean: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """``(x - mu) / sqrt(sigma^2 + eps) g + b`` per feature, with the given statistics (Ioffe and Szegedy, 2015)."""
    return (x - mean) / np.sqrt(variance + EPSILON) * params["scale"] + params["bias"]


def running_averages(batches: list[tuple[np.ndarray, np.ndarray]], momentum: float) -> tuple[np.ndarray, np.ndarray]:
    """The bias-corrected running mean and variance after one training step per ``(x, valid)`` batch.

    As Adam's moments (Kingma and Ba, 2015): ``avg_t = m avg_{t-1} + (1 - m) stat_t`` from 0, divided by
    ``1 - m^t``, ``t`` counting the batches with a real token (the others are skipped).
    """
    features = batches[0][0].shape[-1]
    mean, variance, steps = np.zeros(features), np.zeros(features), 0
    for x, valid in batches:
        if not valid.any():
            continue
        batch_mean, batch_variance = masked_batch_statistics(x, valid)
        mean = momentum * mean + (1 - momentum) * batch_mean
        variance = momentum * variance + (1 - momentum) * batch_variance
        steps += 1
    return mean / (1 - momentum ** steps), variance / (1 - momentum ** steps)
