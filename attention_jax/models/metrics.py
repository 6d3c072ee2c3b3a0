"""Label-smoothed cross-entropy and the per-token metrics reported during training and evaluation.

Label smoothing (Section 5.4) as ``optax.smooth_labels``: ``q(v) = (1 - eps) [v == gold] + eps / N``,
computed as ``(1 - eps) NLL + eps mean_v(-log p(v))`` without a one-hot. Padding (id 0) is excluded;
perplexity is ``exp`` of the unsmoothed loss. Metrics travel as sums so that micro-batches and devices
add up exactly.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import jax
import jax.numpy as jnp

from attention_jax.cpu_kernels import argmax, cpu_kernels_enabled
from attention_jax.models import model

Array = jax.Array

SUM_KEYS = ("loss_sum", "nll_sum", "correct", "tokens")


def first_argmax(logits: Array, *, cpu_kernels: bool = True) -> Array:
    """Index of the largest value along the last axis, the lowest one on ties (``jnp.argmax``).

    Parameters
    ----------
    logits : Array
        ``[..., N]`` scores, free of NaN.
    cpu_kernels : bool
        ``config.cpu_kernels``: on a CPU, search with
        :func:`attention_jax.cpu_kernels.argmax.first_argmax` (two levels of plain maxima, faster than
        XLA's CPU ``argmax``); off, or on another backend, ``jnp.argmax``. Both give the same index.

    Returns
    -------
    Array
        int32 ``[...]``.
    """
    if cpu_kernels_enabled(cpu_kernels):
        return argmax.first_argmax(logits)
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def _gold_token_logit(logits: Array, targets: Array) -> Array:
    """Return ``logits[..., targets]`` by a gather (a select-and-sum was timed and was no faster)."""
    return jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]


def token_loss_sums(logits: Array, targets: Array, label_smoothing: float, *,
                    cpu_kernels: bool = True) -> dict[str, Array]:
    """Sum the smoothed and unsmoothed loss and the correct guesses over non-pad target tokens.

    Parameters
    ----------
    logits : Array
        ``[B, T, N]`` pre-softmax scores (any float dtype; computed in float32).
    targets : Array
        ``[B, T]`` gold ids, 0 = padding.
    label_smoothing : float
        ``eps_ls`` in ``[0, 1)``.
    cpu_kernels : bool
        ``config.cpu_kernels``, for the accuracy's :func:`first_argmax`.

    Returns
    -------
    dict[str, Array]
        float32 scalars ``loss_sum`` (label-smoothed cross-entropy), ``nll_sum`` (unsmoothed),
        ``correct`` (argmax equals gold) and ``tokens`` (non-pad targets).

    Notes
    -----
    ``log p(v) = logit(v) - logsumexp(logits)``, so NLL = ``lse - logit(gold)`` and the uniform term
    ``mean_v(-log p(v)) = lse - mean_v logit(v)``.
    """
    logits = logits.astype(jnp.float32)
    log_normalizer = jax.nn.logsumexp(logits, axis=-1)  # [B,T]
    gold_logit = _gold_token_logit(logits, targets)  # [B,T]
    nll = log_normalizer - gold_logit
    uniform_cross_entropy = log_normalizer - jnp.mean(logits, axis=-1)
    smoothed = (1.0 - label_smoothing) * nll + label_smoothing * uniform_cross_entropy
    weights = (targets != model.PAD_ID).astype(jnp.float32)
    correct = (first_argmax(logits, cpu_kernels=cpu_kernels) == targets).astype(jnp.float32)
    return {
        "loss_sum": jnp.sum(smoothed * weights),
        "nll_sum": jnp.sum(nll * weights),
        "correct": jnp.sum(correct * weights),
        "tokens": jnp.sum(weights),
    }


def add_sums(left: Mapping[str, Any], right: Mapping[str, Any]) -> dict[str, Any]:
    """Add two metric-sum dicts key by key (arrays or floats).

    Parameters
    ----------
    left, right : Mapping[str, Any]
        Dicts with the same keys.

    Returns
    -------
    dict[str, Any]
        ``{key: left[key] + right[key]}``.
    """
    return {key: left[key] + right[key] for key in left}


def summarize(sums: Mapping[str, Any]) -> dict[str, float]:
    """Per-token means from metric sums.

    Parameters
    ----------
    sums : Mapping[str, Any]
        ``loss_sum``, ``nll_sum``, ``correct`` and ``tokens`` (host scalars or 0-d arrays).

    Returns
    -------
    dict[str, float]
        ``loss`` (label-smoothed, per token), ``nll_loss`` (unsmoothed), ``perplexity``
        (``exp(nll_loss)``), ``accuracy`` and ``tokens``.

    Notes
    -----
    With zero tokens every mean is NaN (nothing was measured) rather than a misleading 0.
    """
    tokens = float(sums["tokens"])
    if tokens <= 0:
        nan = float("nan")
        return {"loss": nan, "nll_loss": nan, "perplexity": nan, "accuracy": nan, "tokens": 0.0}
    nll_loss = float(sums["nll_sum"]) / tokens
    return {
        "loss": float(sums["loss_sum"]) / tokens,
        "nll_loss": nll_loss,
        "perplexity": math.exp(nll_loss) if nll_loss < 700 else float("inf"),
        "accuracy": float(sums["correct"]) / tokens,
        "tokens": tokens,
    }


def padding_fractions(counts: Mapping[str, int]) -> dict[str, float]:
    """Padding fraction of each side of the batches trained on.

    Parameters
    ----------
    counts : Mapping[str, int]
        Sums of ``attention_jax.data.batching.count_tokens`` over batches: ``inputs_tokens``,
        ``inputs_slots``, ``targets_tokens``, ``targets_slots``.

    Returns
    -------
    dict[str, float]
        ``inputs_padding_fraction`` and ``targets_padding_fraction``, ``1 - tokens / slots``; a side
        without slots is left out.
    """
    return {f"{side}_padding_fraction": 1.0 - counts[f"{side}_tokens"] / counts[f"{side}_slots"]
            for side in ("inputs", "targets") if counts.get(f"{side}_slots")}
