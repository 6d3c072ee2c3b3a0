"""The train state and the update that advances it (Sections 5.1-5.4), compiled for a device mesh.

- :class:`TrainState`: step, params, opt_state, rng: everything a checkpoint must hold besides the
  data iterator's position (created into its shardings by :mod:`attention_jax.training.initial_state`);
- :func:`make_optimizer` / :func:`make_schedule`: the paper's Adam and its warm-up schedule,

      lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)       (paper, Equation 3)

  with ``step`` counted from 1 (the first update) and an extra multiplier ``learning_rate_scale``
  (1.0 reproduces the paper; tensor2tensor calls it ``learning_rate``): the rate rises linearly for
  ``warmup_steps`` updates, peaks at ``scale * (d_model * warmup_steps)^-0.5`` and then decays as
  ``step^-0.5``; ``lr_schedule="constant_then_inverse_sqrt"`` is that curve without its ramp,
  ``peak * min(1, sqrt(warmup_steps / step))``. Two knobs researchers expect are off by default so the
  paper's Adam stays exact: global-norm gradient clipping (``grad_clip_norm``) and decoupled weight decay
  (``weight_decay``, AdamW);
- :func:`train_step` / :func:`accumulate_gradients` / :func:`eval_step`: pure functions (the forward
  pass, the label-smoothed loss of :func:`attention_jax.models.metrics.token_loss_sums`, the gradient
  and the optimizer's update), compiled by :func:`compile_steps` with explicit
  ``in_shardings``/``out_shardings`` and donated buffers; :func:`run_update` applies one step of
  (possibly accumulated) micro-batches.

Loss normalization: a step's gradient is the gradient of the label-smoothed loss summed over all
non-pad target tokens of the step (every device, every micro-batch) divided by their number, so
``grad_accum_steps=k`` with k batches equals one step on their union (up to float rounding); with batch_norm
only its running averages do, each micro-batch being normalised by its own statistics.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.typing import ArrayLike

from attention_jax.experiment.sections import OptimizerConfig
from attention_jax.experiment.settings import LearningRateSchedule
from attention_jax.models import language_model, metrics, normalization, normalization_registry
from attention_jax.training import sharding

Batch = dict[str, Any]
MetricSums = dict[str, jax.Array]
Carry = tuple[Any, MetricSums, Any]
"""A step's micro-batches so far: summed gradients, metric sums, batch_norm's combined batch statistics."""


class TrainState(flax.struct.PyTreeNode):
    """Everything that evolves during training.

    Attributes
    ----------
    step : jax.Array
        int32 scalar, optimizer updates done (the paper's step of the last update).
    params : pytree
        Unboxed float32 parameters.
    opt_state : pytree
        Adam state (moments and update count).
    rng : jax.Array
        uint32 key data (``jax.random.key_data``); dropout keys are folded from it per step.
    """

    step: jax.Array
    params: Any
    opt_state: Any
    rng: jax.Array


# --- The update: Adam and the paper's schedule (Section 5.3) --------------------------------------

def paper_learning_rate(step: ArrayLike, *, d_model: int, warmup_steps: int, scale: float = 1.0) -> ArrayLike:
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
    """``config.lr_schedule`` as an optax schedule of the update count.

    Parameters
    ----------
    config : OptimizerConfig
        The optimizer section (``d_model``, ``warmup_steps``, ``lr_schedule`` and ``learning_rate_scale``
        are read).

    Returns
    -------
    optax.Schedule
        ``count -> lr``; optax passes ``count = 0`` for the first update, which is the paper's step 1.

    Notes
    -----
    ``constant_then_inverse_sqrt`` is :func:`paper_learning_rate` at ``max(step, warmup_steps)``.
    ``warmup_steps`` is positive (its declared range), so neither divides by zero.
    """
    d_model, warmup, scale = config.d_model, config.warmup_steps, config.learning_rate_scale
    constant_start = config.lr_schedule == LearningRateSchedule.CONSTANT_THEN_INVERSE_SQRT

    def schedule(count: ArrayLike) -> ArrayLike:
        step = jnp.maximum(count + 1, warmup) if constant_start else count + 1
        return paper_learning_rate(step, d_model=d_model, warmup_steps=warmup, scale=scale)

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


# --- Steps ------------------------------------------------------------------------------------------

DROPOUT_RNGS = ("threefry", "rbg")
LAYER_GRAD_NORM_PREFIX = "grad_norm/"
"""Metric-sum keys ``grad_norm/<module>`` of :func:`layer_gradient_norms` (``grad_norm/encoder_0`` and so on)."""


def layer_gradient_norms(grads: Any) -> dict[str, jax.Array]:
    """The L2 norm of each top-level module's gradient: the embedding, every layer, the final norms.

    Parameters
    ----------
    grads : pytree
        Per-token gradient, the parameters' structure (``{"encoder_0": ..., "decoder_0": ..., ...}``).

    Returns
    -------
    dict[str, jax.Array]
        ``grad_norm/<module name>`` -> float32 scalar (Xiong et al., 2020, read the norms of each layer's
        gradient at initialisation to explain why post-LN needs the warm-up; ``docs/normalization.md``).
    """
    return {f"{LAYER_GRAD_NORM_PREFIX}{name}": optax.tree.norm(subtree) for name, subtree in grads.items()}


def logged_gradient_norms(fetched: list[tuple[int, dict]]) -> dict[str, float]:
    """What a training log line records of the gradient norms of its interval's fetched steps.

    Parameters
    ----------
    fetched : list of (step, sums)
        The interval's steps and their metric sums from :func:`train_step`, on the host.

    Returns
    -------
    dict[str, float]
        ``grad_norm`` and ``grad_norm/<module>`` of the interval's last step; when the interval starts at
        step 1, also ``init/grad_norm`` and ``init/grad_norm/<module>`` of step 1, whose gradient is the
        one at the initial parameters.
    """
    def norms(sums: dict, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}{key}": float(value) for key, value in sums.items()
                if key == "grad_norm" or key.startswith(LAYER_GRAD_NORM_PREFIX)}

    logged = norms(fetched[-1][1])
    if fetched[0][0] == 1:
        logged.update(norms(fetched[0][1], "init/"))
    return logged


def _dropout_key(state: TrainState, micro_index: jax.Array | int, dropout_rng: str = "threefry") -> jax.Array:
    """Fresh dropout key per step and micro-batch, a pure function of (rng, step, micro_index).

    ``dropout_rng="rbg"`` turns that threefry key into an ``rbg`` key (XLA's RngBitGenerator draws the
    masks). Threefry masks are drawn loop-free (:mod:`attention_jax.cpu_kernels.dropout`), so on a CPU the
    step is faster with them than with ``rbg`` (``docs/benchmarks.md``). The state and checkpoints are the same
    either way.
    """
    key = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
    key = jax.random.fold_in(key, micro_index)
    if dropout_rng == "rbg":
        return jax.random.wrap_key_data(jax.random.bits(key, (4,), jnp.uint32), impl="rbg")
    return key


def model_logits(transformer: nn.Module, params: Any, batch: Batch, **kwargs: Any) -> jax.Array:
    """Teacher-forced logits ``[B, T, N]`` of a bucketed or packed batch.

    Parameters
    ----------
    transformer : model.Transformer or language_model.LanguageModel
        The model.
    params : pytree
        Parameters.
    batch : Batch
        ``inputs`` ``[B, S]``, ``targets`` ``[B, T]`` and, for packed batches (``config.packing``),
        the segment ids and positions named in :data:`model.PACKED_KEYS`. A decoder-only language
        model's batches have no ``inputs`` (:mod:`attention_jax.models.language_model`).
    **kwargs
        Passed to ``transformer.apply`` (``deterministic``, ``rngs``).

    Returns
    -------
    jax.Array
        float32 logits.
    """
    return language_model.apply_to_batch(transformer, params, batch, **kwargs)


def _summed_loss_gradients(params: Any, batch: Batch, dropout_key: jax.Array,
                           transformer: nn.Module,
                           label_smoothing: float) -> tuple[Any, MetricSums, Any]:
    """Gradient of the label-smoothed loss summed (not averaged) over non-pad targets, the sums, and the
    batch statistics the forward pass wrote (batch_norm's; empty without it)."""
    collection = normalization_registry.STATISTICS_COLLECTION

    def summed_loss(candidate: Any) -> tuple[jax.Array, tuple[MetricSums, Any]]:
        logits, written = model_logits(transformer, candidate, batch, deterministic=False,
                                       rngs={"dropout": dropout_key}, mutable=[collection])
        sums = metrics.token_loss_sums(logits, batch["targets"], label_smoothing,
                                       cpu_kernels=transformer.config.cpu_kernels)
        return sums["loss_sum"], (sums, written.get(collection, {}))

    grads, (sums, statistics) = jax.grad(summed_loss, has_aux=True)(params)
    return grads, sums, statistics


def accumulate_gradients(state: TrainState, carry: Carry | None, batch: Batch, micro_index: jax.Array, *,
                         transformer: nn.Module, label_smoothing: float, dropout_rng: str = "threefry") -> Carry:
    """Add one micro-batch's summed-loss gradient, metric sums and batch statistics to ``carry``.

    Parameters
    ----------
    state : TrainState
        Current state (parameters, step and rng are read).
    carry : Carry or None
        What earlier micro-batches of this step accumulated; ``None`` for the first.
    batch : Batch
        ``{"inputs": [B, S], "targets": [B, T]}`` global arrays, plus the :data:`model.PACKED_KEYS` arrays
        of a packed batch.
    micro_index : jax.Array
        int32 index of this micro-batch within the step (selects its dropout key).
    transformer : model.Transformer or language_model.LanguageModel
        The model.
    label_smoothing : float
        ``eps_ls``.
    dropout_rng : str
        ``"threefry"`` (JAX's default: the same masks on any mesh) or ``"rbg"`` (XLA's RngBitGenerator; the
        masks depend on how the batch is sharded). See ``config.dropout_rng``.

    Returns
    -------
    Carry
        Running sums; pass them to the next micro-batch or to :func:`train_step`.
    """
    dropout_key = _dropout_key(state, micro_index, dropout_rng)
    grads, sums, statistics = _summed_loss_gradients(state.params, batch, dropout_key, transformer, label_smoothing)
    if carry is None:
        return grads, sums, statistics
    return (jax.tree.map(jnp.add, carry[0], grads), metrics.add_sums(carry[1], sums),
            normalization.combined_statistics(carry[2], statistics))


def train_step(state: TrainState, batch: Batch, carry: Carry | None = None, *,
               transformer: nn.Module, optimizer: optax.GradientTransformation,
               label_smoothing: float, micro_index: int = 0,
               dropout_rng: str = "threefry") -> tuple[TrainState, MetricSums]:
    """One optimizer update: the last (or only) micro-batch's gradient, normalization, Adam.

    Parameters
    ----------
    state : TrainState
        Current state.
    batch : Batch
        The last micro-batch of the step.
    carry : Carry or None
        Accumulated over the step's earlier micro-batches (:func:`accumulate_gradients`).
    transformer : model.Transformer or language_model.LanguageModel
        The model (``dtype`` selects the compute precision; parameters stay float32).
    optimizer : optax.GradientTransformation
        From :func:`make_optimizer`.
    label_smoothing : float
        ``eps_ls``.
    micro_index : int
        This micro-batch's index (``grad_accum_steps - 1``).
    dropout_rng : str
        As in :func:`accumulate_gradients`.

    Returns
    -------
    (TrainState, dict)
        The updated state and the step's metric sums (``loss_sum``, ``nll_sum``, ``correct``,
        ``tokens``) plus ``grad_norm`` of the per-token gradient and each module's share of it
        (:func:`layer_gradient_norms`).

    Notes
    -----
    batch_norm's running averages (parameters no gradient reaches) then move once, by the statistics of
    all the step's real tokens (``models/normalization.py``). With ``grad_accum_steps = k`` each micro-batch
    is still normalised by its own statistics, so a batch_norm model's gradient is not one big batch's.
    """
    grads, sums, statistics = accumulate_gradients(state, carry, batch, jnp.int32(micro_index),
                                                   transformer=transformer, label_smoothing=label_smoothing,
                                                   dropout_rng=dropout_rng)
    grads = jax.tree.map(lambda g: g / jnp.maximum(sums["tokens"], 1.0), grads)  # Per-token mean.
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    if statistics:  # A model with batch_norm.
        params = normalization.with_running_statistics(params, statistics)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
    return new_state, dict(sums, grad_norm=optax.tree.norm(grads), **layer_gradient_norms(grads))


def eval_step(params: Any, batch: Batch, *, transformer: nn.Module,
              label_smoothing: float) -> MetricSums:
    """Metric sums of one evaluation batch (no dropout).

    Parameters
    ----------
    params : pytree
        Parameters.
    batch : Batch
        Global batch; all-pad rows count for nothing.
    transformer : model.Transformer or language_model.LanguageModel
        The model.
    label_smoothing : float
        ``eps_ls`` (the smoothed loss is reported beside the unsmoothed one).

    Returns
    -------
    dict
        As :func:`metrics.token_loss_sums`.
    """
    logits = model_logits(transformer, params, batch, deterministic=True)
    return metrics.token_loss_sums(logits, batch["targets"], label_smoothing,
                                   cpu_kernels=transformer.config.cpu_kernels)


@dataclasses.dataclass(frozen=True)
class CompiledSteps:
    """The jitted step functions of one run and the shardings they use.

    Attributes
    ----------
    train : callable
        ``(state, batch) -> (state, sums)`` without accumulation, ``(state, batch, carry)`` with.
    first_micro_batch, next_micro_batch : callable or None
        ``(state, batch, index) -> carry`` and ``(state, carry, batch, index) -> carry``
        (``grad_accum_steps > 1`` only).
    evaluate : callable
        ``(params, batch) -> sums``.
    state_shardings : TrainState
        Shardings of the train state.
    batch_sharding : NamedSharding
        Rows over ``"data"``.
    """

    train: Callable
    first_micro_batch: Callable | None
    next_micro_batch: Callable | None
    evaluate: Callable
    state_shardings: TrainState
    batch_sharding: NamedSharding


def compile_steps(transformer: nn.Module, optimizer: optax.GradientTransformation,
                  mesh: Mesh, state_shardings: TrainState, *, label_smoothing: float,
                  grad_accum_steps: int = 1, dropout_rng: str = "threefry") -> CompiledSteps:
    """Jit the step functions with explicit shardings and donated state/accumulator buffers.

    Parameters
    ----------
    transformer, optimizer
        Model and optimizer.
    mesh : Mesh
        Device mesh.
    state_shardings : TrainState
        From :func:`attention_jax.training.initial_state.train_state_shardings`.
    label_smoothing : float
        ``eps_ls``.
    grad_accum_steps : int
        Micro-batches per update.
    dropout_rng : str
        ``"threefry"`` or ``"rbg"`` (:func:`accumulate_gradients`).

    Returns
    -------
    CompiledSteps
        Compilation happens on first call, once per batch shape.
    """
    batch_sharding = sharding.batch_sharding(mesh)
    replicated = sharding.replicated(mesh)
    carry_sharding = (state_shardings.params, replicated, replicated)
    if dropout_rng not in DROPOUT_RNGS:
        raise ValueError(f"dropout_rng must be one of {DROPOUT_RNGS}; got {dropout_rng!r}.")
    last = functools.partial(train_step, optimizer=optimizer, micro_index=grad_accum_steps - 1,
                             dropout_rng=dropout_rng, transformer=transformer, label_smoothing=label_smoothing)
    first_micro = next_micro = None
    if grad_accum_steps == 1:
        train = jax.jit(lambda state, batch: last(state, batch),
                        in_shardings=(state_shardings, batch_sharding),
                        out_shardings=(state_shardings, replicated), donate_argnums=(0,))
    else:
        train = jax.jit(lambda state, batch, carry: last(state, batch, carry),
                        in_shardings=(state_shardings, batch_sharding, carry_sharding),
                        out_shardings=(state_shardings, replicated),
                        donate_argnums=(0,))  # The carry has no output to alias; it is freed anyway.
        accumulate = functools.partial(accumulate_gradients, dropout_rng=dropout_rng, transformer=transformer,
                                       label_smoothing=label_smoothing)
        first_micro = jax.jit(lambda state, batch, index: accumulate(state, None, batch, index),
                              in_shardings=(state_shardings, batch_sharding, replicated),
                              out_shardings=carry_sharding)
        next_micro = jax.jit(accumulate, in_shardings=(state_shardings, carry_sharding, batch_sharding,
                                                       replicated),
                             out_shardings=carry_sharding, donate_argnums=(1,))
    evaluate = jax.jit(functools.partial(eval_step, transformer=transformer, label_smoothing=label_smoothing),
                       in_shardings=(state_shardings.params, batch_sharding), out_shardings=replicated)
    return CompiledSteps(train, first_micro, next_micro, evaluate, state_shardings, batch_sharding)


def run_update(steps: CompiledSteps, state: TrainState,
               micro_batches: list[Batch]) -> tuple[TrainState, MetricSums]:
    """Apply one optimizer update from ``len(micro_batches)`` global micro-batches.

    Parameters
    ----------
    steps : CompiledSteps
        From :func:`compile_steps` with ``grad_accum_steps == len(micro_batches)``.
    state : TrainState
        Current state (donated: do not use it afterwards).
    micro_batches : list[Batch]
        Global batches (shapes may differ between micro-batches).

    Returns
    -------
    (TrainState, dict)
        As :func:`train_step`.
    """
    if len(micro_batches) == 1:
        return steps.train(state, micro_batches[0])
    assert steps.first_micro_batch is not None and steps.next_micro_batch is not None  # grad_accum_steps > 1.
    carry = steps.first_micro_batch(state, micro_batches[0], np.int32(0))
    for index, batch in enumerate(micro_batches[1:-1], start=1):
        carry = steps.next_micro_batch(state, carry, batch, np.int32(index))
    return steps.train(state, micro_batches[-1], carry)
