"""The paper's optimizer: Adam with the inverse-square-root warmup schedule (Section 5.3).

lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)       (paper, Equation 3)

with ``step`` counted from 1 (the first update) and an extra multiplier ``learning_rate_scale``
(1.0 reproduces the paper; tensor2tensor calls it ``learning_rate``). The rate rises linearly for
``warmup_steps`` updates, peaks at ``scale * (d_model * warmup_steps)^-0.5`` and then decays as
``step^-0.5``.

Two knobs researchers expect are off by default so the paper's Adam stays exact: global-norm gradient
clipping (``grad_clip_norm``) and decoupled weight decay (``weight_decay``, AdamW).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from attention_jax.experiment.sections import OptimizerConfig

Array = Any


def paper_learning_rate(step: Array, *, d_model: int, warmup_steps: int, scale: float = 1.0) -> Array:
    """The learning rate of update number ``step`` (1-based), the paper's Equation (3).

    Parameters
    ----------
    step : int or Array
        Update number, 1 for the first update. Values below 1 are treated as 1.
    d_model : int
        Model width.
    warmup_steps : int
        Updates of linear warmup (4000 in the paper).
    scale : float
        Multiplier of the whole schedule (``config.learning_rate_scale``).

    Returns
    -------
    Array
        float32 learning rate, same shape as ``step``.

    Notes
    -----
    At ``step == warmup_steps`` both branches of the ``min`` are equal: the peak.
    """
    step = jnp.maximum(jnp.asarray(step, jnp.float32), 1.0)
    warmup = jnp.float32(warmup_steps)
    return scale * d_model**-0.5 * jnp.minimum(step**-0.5, step * warmup**-1.5)


def make_schedule(config: OptimizerConfig) -> optax.Schedule:
    """The paper's schedule as an optax schedule of the update count.

    Parameters
    ----------
    config : OptimizerConfig
        The optimizer section (``d_model``, ``warmup_steps`` and ``learning_rate_scale`` are read).

    Returns
    -------
    optax.Schedule
        ``count -> lr``; optax passes ``count = 0`` for the first update, which is the paper's step 1.

    Notes
    -----
    Raises ``ValueError`` for a non-positive ``warmup_steps``.
    """
    if config.warmup_steps <= 0:
        raise ValueError(f"warmup_steps must be positive; got {config.warmup_steps}.")
    d_model, warmup, scale = config.d_model, config.warmup_steps, config.learning_rate_scale

    def schedule(count: Array) -> Array:
        return paper_learning_rate(count + 1, d_model=d_model, warmup_steps=warmup, scale=scale)

    return schedule


def decayed_parameters(params: Any) -> Any:
    """Which parameters decoupled weight decay applies to: those of two or more dimensions.

    Parameters
    ----------
    params : pytree
        The model's parameters (or any tree of arrays of the same structure).

    Returns
    -------
    pytree
        The same structure with ``True`` for the weight matrices and the shared embedding, ``False`` for
        biases and layer-norm scales and offsets (one dimension).

    Notes
    -----
    The usual AdamW convention (BERT, GPT-2, fairseq's default): decaying a layer norm's scale or a bias
    pulls it towards 0, which is not a simpler function, so they are left alone.
    """
    return jax.tree.map(lambda leaf: jnp.ndim(leaf) >= 2, params)


def make_optimizer(config: OptimizerConfig, schedule: optax.Schedule | None = None) -> optax.GradientTransformation:
    """Adam(beta1, beta2, eps) driven by :func:`make_schedule` (Section 5.3), with optional clipping and decay.

    Parameters
    ----------
    config : OptimizerConfig
        The optimizer section (``adam_b1``, ``adam_b2``, ``adam_eps``, paper: 0.9, 0.98, 1e-9, the
        schedule's fields, ``grad_clip_norm`` and ``weight_decay`` are read).
    schedule : optax.Schedule, optional
        The learning-rate schedule to drive (default: ``make_schedule(config)``); the training loop
        passes the one it logs, so the logged rate is the optimizer's own.

    Returns
    -------
    optax.GradientTransformation
        With ``grad_clip_norm == weight_decay == 0`` (the default): plain Adam, as in the paper, whose
        state is Adam's alone. Otherwise a chain of ``clip_by_global_norm(grad_clip_norm)`` (when
        positive) and AdamW with ``weight_decay`` on :func:`decayed_parameters` (Adam when 0).

    Notes
    -----
    Gradient accumulation (``config.grad_accum_steps``) is done by the training loop, which sums
    token-weighted gradients over micro-batches before one call of this optimizer; the optimizer's
    update count therefore equals the paper's step, and clipping applies to the whole step's gradient.

    Weight decay is decoupled (Loshchilov and Hutter, 2019) and, as in optax and PyTorch's AdamW, scaled
    by the learning rate: each step subtracts ``lr_t * weight_decay * w`` besides Adam's update.

    Turning either knob on or off changes the optimizer state's structure, so a run cannot be resumed
    with a different setting (the resume check refuses it).
    """
    learning_rate = schedule if schedule is not None else make_schedule(config)
    if config.weight_decay > 0:
        adam = optax.adamw(learning_rate=learning_rate, b1=config.adam_b1, b2=config.adam_b2, eps=config.adam_eps,
                           weight_decay=config.weight_decay, mask=decayed_parameters)
    else:
        adam = optax.adam(learning_rate=learning_rate, b1=config.adam_b1, b2=config.adam_b2, eps=config.adam_eps)
    if config.grad_clip_norm > 0:
        return optax.chain(optax.clip_by_global_norm(config.grad_clip_norm), adam)
    return adam
