"""The train state (created directly into its shardings: FSDP never holds it on one device), the paper's
optimizer and schedule (Section 5.3), and the jitted steps that advance them.

A step's gradient is the label-smoothed loss summed over all its non-pad target tokens divided by their number,
so ``grad_accum_steps=k`` equals one step on the k batches' union (docs/design.md).
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

from attention_jax.experiment.sections import LearningRateSchedule, OptimizerConfig
from attention_jax.models import language_model, metrics, normalization, normalization_registry
from attention_jax.training import sharding

Batch = dict[str, Any]
MetricSums = dict[str, jax.Array]
Carry = tuple[Any, MetricSums, Any]
"""A step's micro-batches so far: summed gradients, metric sums, batch_norm's combined batch statistics."""


class TrainState(flax.struct.PyTreeNode):
    """Everything a checkpoint holds besides the data iterator's position."""

    step: jax.Array  # int32 scalar: optimizer updates done.
    params: Any  # Unboxed float32 parameters.
    opt_state: Any
    rng: jax.Array  # uint32 key data; each step's dropout keys are folded from it.



def _boxed_initial_state(key: jax.Array, transformer: nn.Module,
                         optimizer: optax.GradientTransformation) -> TrainState:
    init_key, train_key = jax.random.split(key)
    ids = language_model.init_arguments(transformer)  # Parameter shapes do not depend on the lengths.
    params = transformer.init({"params": init_key}, *ids)["params"]  # Boxed with logical axes.
    return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                      opt_state=optimizer.init(params), rng=jax.random.key_data(train_key))


def _abstract_boxed_state(transformer: nn.Module,
                         optimizer: optax.GradientTransformation) -> TrainState:
    """Return the initial state's shapes, parameters boxed with their logical axis names; nothing is allocated."""
    return jax.eval_shape(functools.partial(_boxed_initial_state, transformer=transformer,
                                            optimizer=optimizer), jax.random.key(0))


def _abstract_train_state(boxed_state: TrainState, shardings: TrainState) -> TrainState:
    """Return the state's shapes, dtypes and shardings: the target of a checkpoint restore."""
    return jax.tree.map(lambda leaf, where: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=where),
                        nn.meta.unbox(boxed_state), shardings)


def _create_train_state(seed: int, transformer: nn.Module,
                       optimizer: optax.GradientTransformation, shardings: TrainState) -> TrainState:
    """Initialize step 0's parameters and optimizer state directly in their shardings."""
    def _initialize(key: jax.Array) -> TrainState:
        return nn.meta.unbox(_boxed_initial_state(key, transformer, optimizer))

    return jax.jit(_initialize, out_shardings=shardings)(jax.random.key(seed))


def sharded_initial_state(seed: int, transformer: nn.Module, optimizer: optax.GradientTransformation,
                          mesh: Mesh, rules: tuple) -> tuple[TrainState, TrainState]:
    """Return a fresh state in its shardings, and the shardings (benchmarks, tests).

    Parameters
    ----------
    seed : int
        Seeds the parameters and the dropout keys.
    transformer, optimizer : nn.Module, optax.GradientTransformation
        The model and its optimizer.
    mesh : Mesh
        Device mesh.
    rules : tuple
        Logical axis rules.

    Returns
    -------
    state : TrainState
        Step 0.
    shardings : TrainState
        Where each leaf lives.
    """
    shardings = sharding._tree_shardings(_abstract_boxed_state(transformer, optimizer), mesh, rules)
    return _create_train_state(seed, transformer, optimizer, shardings), shardings


def _paper_learning_rate(step: ArrayLike, *, d_model: int, warmup_steps: int, scale: float = 1.0) -> ArrayLike:
    """Return the learning rate of update ``step``, Equation (3): ``d^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    ``step`` counts updates from 1 (below 1 counts as 1); ``warmup_steps`` is the paper's 4000 (Section 5.3);
    float32, shaped as ``step``.
    """
    step = jnp.maximum(jnp.asarray(step, jnp.float32), 1.0)
    warmup = jnp.float32(warmup_steps)
    return scale * d_model**-0.5 * jnp.minimum(step**-0.5, step * warmup**-1.5)


def _make_schedule(config: OptimizerConfig) -> optax.Schedule:
    """Return ``config.lr_schedule`` as an optax schedule (``constant_then_inverse_sqrt``: no ramp).

    optax's ``count = 0`` is the paper's step 1.
    """
    d_model, warmup, scale = config.d_model, config.warmup_steps, config.learning_rate_scale
    constant_start = config.lr_schedule == LearningRateSchedule.CONSTANT_THEN_INVERSE_SQRT

    def _schedule(count: ArrayLike) -> ArrayLike:
        step = jnp.maximum(count + 1, warmup) if constant_start else count + 1
        return _paper_learning_rate(step, d_model=d_model, warmup_steps=warmup, scale=scale)

    return _schedule


def _decayed_parameters(params: Any) -> Any:
    """Return ``True`` for leaves of two or more dimensions: weight decay spares biases and norm scales."""
    return jax.tree.map(lambda leaf: jnp.ndim(leaf) >= 2, params)


def make_optimizer(config: OptimizerConfig, schedule: optax.Schedule | None = None) -> optax.GradientTransformation:
    """Return Adam on the schedule (Section 5.3), with optional clipping and decoupled weight decay (AdamW).

    Both are off by default so the paper's Adam stays exact; either changes the optimizer state's structure.

    Parameters
    ----------
    config : OptimizerConfig
        The optimizer section (paper: 0.9, 0.98, 1e-9).
    schedule : optax.Schedule, optional
        Default ``_make_schedule(config)``.

    Returns
    -------
    optax.GradientTransformation
        Adam, AdamW, or either after ``clip_by_global_norm``.
    """
    learning_rate = schedule if schedule is not None else _make_schedule(config)
    if config.weight_decay > 0:
        adam = optax.adamw(learning_rate=learning_rate, b1=config.adam_b1, b2=config.adam_b2, eps=config.adam_eps,
                           weight_decay=config.weight_decay, mask=_decayed_parameters)
    else:
        adam = optax.adam(learning_rate=learning_rate, b1=config.adam_b1, b2=config.adam_b2, eps=config.adam_eps)
    if config.grad_clip_norm > 0:
        return optax.chain(optax.clip_by_global_norm(config.grad_clip_norm), adam)
    return adam



DROPOUT_RNGS = ("threefry", "rbg")
LAYER_GRAD_NORM_PREFIX = "grad_norm/"
"""Metric-sum keys ``grad_norm/<module>`` of :func:`_layer_gradient_norms` (``grad_norm/encoder_0`` and so on)."""


def _layer_gradient_norms(grads: Any) -> dict[str, jax.Array]:
    """Return the L2 norm of each top-level module's gradient (Xiong et al. 2020; docs/normalization.md)."""
    return {f"{LAYER_GRAD_NORM_PREFIX}{name}": optax.tree.norm(subtree) for name, subtree in grads.items()}


def _logged_gradient_norms(fetched: list[tuple[int, dict]]) -> dict[str, float]:
    """Return the gradient norms a training log line records for its interval's fetched steps."""
    def _norms(sums: dict, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}{key}": float(value) for key, value in sums.items()
                if key == "grad_norm" or key.startswith(LAYER_GRAD_NORM_PREFIX)}

    logged = _norms(fetched[-1][1])
    if fetched[0][0] == 1:
        logged.update(_norms(fetched[0][1], "init/"))
    return logged


def _dropout_key(state: TrainState, micro_index: jax.Array | int, dropout_rng: str = "threefry") -> jax.Array:
    """Return the dropout key of (rng, step, micro_index); ``"rbg"`` turns it into an RngBitGenerator key."""
    key = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
    key = jax.random.fold_in(key, micro_index)
    if dropout_rng == "rbg":
        return jax.random.wrap_key_data(jax.random.bits(key, (4,), jnp.uint32), impl="rbg")
    return key


def _model_logits(transformer: nn.Module, params: Any, batch: Batch, **kwargs: Any) -> jax.Array:
    """Return teacher-forced float32 logits ``[B, T, V]`` of a bucketed or packed batch.

    ``inputs`` ``[B, S]`` and ``targets`` ``[B, T]``; a ``LanguageModel``'s batches have no ``inputs``.
    """
    return language_model.apply_to_batch(transformer, params, batch, **kwargs)


def _summed_loss_gradients(params: Any, batch: Batch, dropout_key: jax.Array,
                           transformer: nn.Module,
                           label_smoothing: float) -> tuple[Any, MetricSums, Any]:
    """Return the summed-loss gradient, the metric sums and batch_norm's batch statistics."""
    collection = normalization_registry.STATISTICS_COLLECTION

    def _summed_loss(candidate: Any) -> tuple[jax.Array, tuple[MetricSums, Any]]:
        logits, written = _model_logits(transformer, candidate, batch, deterministic=False,
                                       rngs={"dropout": dropout_key}, mutable=[collection])
        sums = metrics.token_loss_sums(logits, batch["targets"], label_smoothing,
                                       cpu_kernels=transformer.config.cpu_kernels)
        return sums["loss_sum"], (sums, written.get(collection, {}))

    grads, (sums, statistics) = jax.grad(_summed_loss, has_aux=True)(params)
    return grads, sums, statistics


def _accumulate_gradients(state: TrainState, carry: Carry | None, batch: Batch, micro_index: jax.Array, *,
                         transformer: nn.Module, label_smoothing: float, dropout_rng: str = "threefry") -> Carry:
    """Add one micro-batch's summed-loss gradient, metric sums and batch statistics to ``carry`` (``None``: the first).

    ``label_smoothing`` is eps_ls (Section 5.4); ``dropout_rng="threefry"`` gives the same masks on any mesh,
    ``"rbg"`` masks that depend on the sharding.
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
    """Apply one optimizer update: the last micro-batch's gradient, the division by tokens, the optimizer.

    batch_norm's running averages move once, by all the step's tokens; each micro-batch uses its own statistics.

    Parameters
    ----------
    state : TrainState
        Current state.
    batch, carry : Batch, Carry or None
        The step's last (or only) micro-batch; the earlier ones' sums.
    transformer : nn.Module
        The model (``dtype``: compute precision; parameters stay float32).
    optimizer : optax.GradientTransformation
        From :func:`make_optimizer`.
    label_smoothing : float
        ``eps_ls``.
    micro_index : int
        ``grad_accum_steps - 1``.
    dropout_rng : str
        As in :func:`_accumulate_gradients`.

    Returns
    -------
    tuple of (TrainState, dict)
        The new state and metric sums, with ``grad_norm`` and :func:`_layer_gradient_norms`.
    """
    grads, sums, statistics = _accumulate_gradients(state, carry, batch, jnp.int32(micro_index),
                                                   transformer=transformer, label_smoothing=label_smoothing,
                                                   dropout_rng=dropout_rng)
    grads = jax.tree.map(lambda g: g / jnp.maximum(sums["tokens"], 1.0), grads)  # Per-token mean.
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    if statistics:  # A model with batch_norm.
        params = normalization.with_running_statistics(params, statistics)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
    return new_state, dict(sums, grad_norm=optax.tree.norm(grads), **_layer_gradient_norms(grads))


def _eval_step(params: Any, batch: Batch, *, transformer: nn.Module,
              label_smoothing: float) -> MetricSums:
    """Return the metric sums of one evaluation batch, without dropout."""
    logits = _model_logits(transformer, params, batch, deterministic=True)
    return metrics.token_loss_sums(logits, batch["targets"], label_smoothing,
                                   cpu_kernels=transformer.config.cpu_kernels)


@dataclasses.dataclass(frozen=True)
class _CompiledSteps:
    """The jitted step functions of one run and the shardings they use."""

    train: Callable  # (state, batch[, carry]) -> (state, sums)
    first_micro_batch: Callable | None  # (state, batch, index) -> carry; accumulation only.
    next_micro_batch: Callable | None  # (state, carry, batch, index) -> carry; accumulation only.
    evaluate: Callable  # (params, batch) -> sums
    state_shardings: TrainState
    batch_sharding: NamedSharding  # Rows over "data".


def compile_steps(transformer: nn.Module, optimizer: optax.GradientTransformation,
                  mesh: Mesh, state_shardings: TrainState, *, label_smoothing: float,
                  grad_accum_steps: int = 1, dropout_rng: str = "threefry") -> _CompiledSteps:
    """Jit the step functions with explicit shardings and donated state and accumulator buffers.

    Parameters
    ----------
    transformer, optimizer : nn.Module, optax.GradientTransformation
        The model and its optimizer.
    mesh : Mesh
        Device mesh.
    state_shardings : TrainState
        The state's shardings.
    label_smoothing : float
        ``eps_ls``.
    grad_accum_steps : int
        Micro-batches per update.
    dropout_rng : str
        ``"threefry"`` or ``"rbg"``.

    Returns
    -------
    _CompiledSteps
        Compiled on first call, once per batch shape.

    Raises
    ------
    ValueError
        For a ``dropout_rng`` not in ``DROPOUT_RNGS``.
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
        accumulate = functools.partial(_accumulate_gradients, dropout_rng=dropout_rng, transformer=transformer,
                                       label_smoothing=label_smoothing)
        first_micro = jax.jit(lambda state, batch, index: accumulate(state, None, batch, index),
                              in_shardings=(state_shardings, batch_sharding, replicated),
                              out_shardings=carry_sharding)
        next_micro = jax.jit(accumulate, in_shardings=(state_shardings, carry_sharding, batch_sharding,
                                                       replicated),
                             out_shardings=carry_sharding, donate_argnums=(1,))
    evaluate = jax.jit(functools.partial(_eval_step, transformer=transformer, label_smoothing=label_smoothing),
                       in_shardings=(state_shardings.params, batch_sharding), out_shardings=replicated)
    return _CompiledSteps(train, first_micro, next_micro, evaluate, state_shardings, batch_sharding)


def _run_update(steps: _CompiledSteps, state: TrainState,
               micro_batches: list[Batch]) -> tuple[TrainState, MetricSums]:
    """Apply one optimizer update from ``len(micro_batches)`` global micro-batches (shapes may differ)."""
    if len(micro_batches) == 1:
        return steps.train(state, micro_batches[0])
    assert steps.first_micro_batch is not None and steps.next_micro_batch is not None  # grad_accum_steps > 1.
    carry = steps.first_micro_batch(state, micro_batches[0], np.int32(0))
    for index, batch in enumerate(micro_batches[1:-1], start=1):
        carry = steps.next_micro_batch(state, carry, batch, np.int32(index))
    return steps.train(state, micro_batches[-1], carry)
