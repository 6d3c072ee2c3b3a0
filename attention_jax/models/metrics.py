"""Label-smoothed cross-entropy and the per-token metrics of training and evaluation.

Label smoothing (Section 5.4) is ``(1 - eps) NLL + eps mean_v(-log p(v))``, without a one-hot; padding is
excluded. Metrics travel as sums so that micro-batches and devices add up exactly.
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
    """Return the index of the largest value along the last axis, the lowest on ties.

    Parameters
    ----------
    logits : Array
        ``[..., N]``, free of NaN.
    cpu_kernels : bool
        Use :mod:`attention_jax.cpu_kernels` on a CPU (same index).

    Returns
    -------
    Array
        int32 ``[...]``.
    """
    if cpu_kernels_enabled(cpu_kernels):
        return argmax.first_argmax(logits)
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def _gold_token_logit(logits: Array, targets: Array) -> Array:
    """``logits[..., targets]`` by a gather."""
    return jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]


def token_loss_sums(logits: Array, targets: Array, label_smoothing: float, *,
                    cpu_kernels: bool = True) -> dict[str, Array]:
    """Return sums of the smoothed and unsmoothed loss and correct guesses over non-pad targets.

    Parameters
    ----------
    logits, targets : Array
        ``[B, T, N]``, computed in float32; ``[B, T]`` gold ids, 0 = pad.
    label_smoothing : float
        ``eps_ls`` in ``[0, 1)``.
    cpu_kernels : bool
        For the accuracy's :func:`first_argmax`.

    Returns
    -------
    dict[str, Array]
        float32 ``loss_sum``, ``nll_sum``, ``correct``, ``tokens``.
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
    """Return two metric-sum dicts added key by key.

    Parameters
    ----------
    left, right : Mapping[str, Any]
        Same keys.

    Returns
    -------
    dict[str, Any]
        The sums.
    """
    return {key: left[key] + right[key] for key in left}


def summarize(sums: Mapping[str, Any]) -> dict[str, float]:
    """Return per-token means of metric sums (NaN with zero tokens, rather than a misleading 0).

    Parameters
    ----------
    sums : Mapping[str, Any]
        The :data:`SUM_KEYS`.

    Returns
    -------
    dict[str, float]
        ``loss``, ``nll_loss``, ``perplexity`` (``exp(nll_loss)``), ``accuracy``, ``tokens``.
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
    """Return ``1 - tokens / slots`` of each side of the batches (a side without slots left out).

    Parameters
    ----------
    counts : Mapping[str, int]
        ``{inputs,targets}_{tokens,slots}`` sums.

    Returns
    -------
    dict[str, float]
        ``inputs_padding_fraction``, ``targets_padding_fraction``.
    """
    return {f"{side}_padding_fraction": 1.0 - counts[f"{side}_tokens"] / counts[f"{side}_slots"]
            for side in ("inputs", "targets") if counts.get(f"{side}_slots")}
