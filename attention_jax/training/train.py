"""Training and evaluation of the Transformer on any device mesh (Sections 5.1-5.4).

The pieces, each usable on its own (benchmarks and tests call them directly):

- :class:`TrainState`: step, params, opt_state, rng: everything a checkpoint must hold besides the
  data iterator's position;
- :func:`create_train_state`: parameters initialized directly into their shardings;
- :func:`train_step` / :func:`accumulate_gradients` / :func:`eval_step`: pure functions, compiled by
  :func:`compile_steps` with explicit ``in_shardings``/``out_shardings`` and donated buffers;
- :func:`train_and_evaluate`: the loop: resume, train, log, evaluate, checkpoint, write results.

Loss normalization: a step's gradient is the gradient of the label-smoothed loss summed over all
non-pad target tokens of the step (every device, every micro-batch) divided by their number, so
``grad_accum_steps=k`` with k batches equals one step on their union (up to float rounding).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from typing import Any, Callable, Iterator

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import logging
from jax.sharding import Mesh, NamedSharding

from attention_jax import model
from attention_jax.training import checkpoints, distributed, metric_writer, metrics, optim, sharding

Batch = dict[str, Any]
MetricSums = dict[str, jax.Array]
RESULTS_FILE = "results.json"


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or infinite loss; the message names the step."""


@flax.struct.dataclass
class TrainState:
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


# --- State creation and sharding --------------------------------------------------------------------

def _boxed_initial_state(key: jax.Array, transformer: model.Transformer,
                         optimizer: optax.GradientTransformation) -> TrainState:
    init_key, train_key = jax.random.split(key)
    ids = jnp.ones((1, 1), jnp.int32)  # Parameter shapes do not depend on the lengths.
    params = transformer.init({"params": init_key}, ids, ids)["params"]  # Boxed with logical axes.
    return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                      opt_state=optimizer.init(params), rng=jax.random.key_data(train_key))


def abstract_boxed_state(transformer: model.Transformer,
                         optimizer: optax.GradientTransformation) -> TrainState:
    """Shapes of the initial train state, parameters still boxed with their logical axis names.

    Parameters
    ----------
    transformer : model.Transformer
        The model.
    optimizer : optax.GradientTransformation
        The optimizer (its moments inherit the parameters' logical axes).

    Returns
    -------
    TrainState
        ``jax.ShapeDtypeStruct`` leaves (``jax.eval_shape``: nothing is allocated).
    """
    return jax.eval_shape(functools.partial(_boxed_initial_state, transformer=transformer,
                                            optimizer=optimizer), jax.random.key(0))


def train_state_shardings(boxed_state: TrainState, mesh: Mesh, rules: tuple) -> TrainState:
    """Where every leaf of the train state lives.

    Parameters
    ----------
    boxed_state : TrainState
        From :func:`abstract_boxed_state`.
    mesh : Mesh
        Device mesh.
    rules : tuple
        Logical axis rules (:func:`sharding.logical_axis_rules`).

    Returns
    -------
    TrainState
        ``NamedSharding`` leaves; step and rng replicated.
    """
    return sharding.tree_shardings(boxed_state, mesh, rules)


def abstract_train_state(boxed_state: TrainState, shardings: TrainState) -> TrainState:
    """Shapes, dtypes and shardings of the train state (the target of a checkpoint restore).

    Parameters
    ----------
    boxed_state : TrainState
        From :func:`abstract_boxed_state`.
    shardings : TrainState
        From :func:`train_state_shardings`.

    Returns
    -------
    TrainState
        Unboxed ``jax.ShapeDtypeStruct`` leaves with ``sharding`` set.
    """
    return jax.tree.map(lambda leaf, where: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=where),
                        nn.meta.unbox(boxed_state), shardings)


def create_train_state(seed: int, transformer: model.Transformer,
                       optimizer: optax.GradientTransformation, shardings: TrainState) -> TrainState:
    """Initialize parameters and optimizer state directly in their shardings.

    Parameters
    ----------
    seed : int
        Seeds parameter initialization and, through a split, the dropout keys.
    transformer : model.Transformer
        The model.
    optimizer : optax.GradientTransformation
        The optimizer.
    shardings : TrainState
        From :func:`train_state_shardings`.

    Returns
    -------
    TrainState
        Step 0, unboxed parameters (FSDP never materializes them whole on one device).
    """
    def initialize(key: jax.Array) -> TrainState:
        return nn.meta.unbox(_boxed_initial_state(key, transformer, optimizer))

    return jax.jit(initialize, out_shardings=shardings)(jax.random.key(seed))


# --- Steps ------------------------------------------------------------------------------------------

DROPOUT_RNGS = ("threefry", "rbg")


def _dropout_key(state: TrainState, micro_index: jax.Array | int, dropout_rng: str = "threefry") -> jax.Array:
    """Fresh dropout key per step and micro-batch, a pure function of (rng, step, micro_index).

    ``dropout_rng="rbg"`` turns that threefry key into an ``rbg`` key (XLA's RngBitGenerator draws the
    masks; whole train steps on 2 CPU cores timed within run-to-run noise of threefry: README,
    Benchmarks); the state and checkpoints are the same either way.
    """
    key = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
    key = jax.random.fold_in(key, micro_index)
    if dropout_rng == "rbg":
        return jax.random.wrap_key_data(jax.random.bits(key, (4,), jnp.uint32), impl="rbg")
    return key


def _summed_loss_gradients(params: Any, batch: Batch, dropout_key: jax.Array,
                           transformer: model.Transformer,
                           label_smoothing: float) -> tuple[Any, MetricSums]:
    """Gradient of the label-smoothed loss summed (not averaged) over non-pad targets, and the sums."""
    def summed_loss(candidate: Any) -> tuple[jax.Array, MetricSums]:
        logits = transformer.apply({"params": candidate}, batch["inputs"], batch["targets"],
                                   deterministic=False, rngs={"dropout": dropout_key})
        sums = metrics.token_loss_sums(logits, batch["targets"], label_smoothing)
        return sums["loss_sum"], sums

    return jax.grad(summed_loss, has_aux=True)(params)


def accumulate_gradients(state: TrainState, carry: tuple[Any, MetricSums] | None, batch: Batch,
                         micro_index: jax.Array, *, transformer: model.Transformer,
                         label_smoothing: float, dropout_rng: str = "threefry") -> tuple[Any, MetricSums]:
    """Add one micro-batch's summed-loss gradient and metric sums to ``carry``.

    Parameters
    ----------
    state : TrainState
        Current state (parameters, step and rng are read).
    carry : (grads, sums) or None
        What earlier micro-batches of this step accumulated; ``None`` for the first.
    batch : Batch
        ``{"inputs": [B, S], "targets": [B, T]}`` global arrays.
    micro_index : jax.Array
        int32 index of this micro-batch within the step (selects its dropout key).
    transformer : model.Transformer
        The model.
    label_smoothing : float
        ``eps_ls``.
    dropout_rng : str
        ``"threefry"`` (JAX's default: the same masks on any mesh) or ``"rbg"`` (XLA's RngBitGenerator; the
        masks depend on how the batch is sharded). See ``config.dropout_rng``.

    Returns
    -------
    (grads, sums)
        Running sums; pass them to the next micro-batch or to :func:`train_step`.
    """
    dropout_key = _dropout_key(state, micro_index, dropout_rng)
    grads, sums = _summed_loss_gradients(state.params, batch, dropout_key, transformer, label_smoothing)
    if carry is None:
        return grads, sums
    return jax.tree.map(jnp.add, carry[0], grads), metrics.add_sums(carry[1], sums)


def train_step(state: TrainState, batch: Batch, carry: tuple[Any, MetricSums] | None = None, *,
               transformer: model.Transformer, optimizer: optax.GradientTransformation,
               label_smoothing: float, micro_index: int = 0,
               dropout_rng: str = "threefry") -> tuple[TrainState, MetricSums]:
    """One optimizer update: the last (or only) micro-batch's gradient, normalization, Adam.

    Parameters
    ----------
    state : TrainState
        Current state.
    batch : Batch
        The last micro-batch of the step.
    carry : (grads, sums) or None
        Accumulated over the step's earlier micro-batches (:func:`accumulate_gradients`).
    transformer : model.Transformer
        The model (``dtype`` selects the compute precision; parameters stay float32).
    optimizer : optax.GradientTransformation
        From :func:`optim.make_optimizer`.
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
        ``tokens``) plus ``grad_norm`` of the per-token gradient.
    """
    grads, sums = accumulate_gradients(state, carry, batch, jnp.int32(micro_index), transformer=transformer,
                                       label_smoothing=label_smoothing, dropout_rng=dropout_rng)
    grads = jax.tree.map(lambda g: g / jnp.maximum(sums["tokens"], 1.0), grads)  # Per-token mean.
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    new_state = state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                              opt_state=opt_state)
    return new_state, dict(sums, grad_norm=optax.tree.norm(grads))


def eval_step(params: Any, batch: Batch, *, transformer: model.Transformer,
              label_smoothing: float) -> MetricSums:
    """Metric sums of one evaluation batch (no dropout).

    Parameters
    ----------
    params : pytree
        Parameters.
    batch : Batch
        Global batch; all-pad rows count for nothing.
    transformer : model.Transformer
        The model.
    label_smoothing : float
        ``eps_ls`` (the smoothed loss is reported beside the unsmoothed one).

    Returns
    -------
    dict
        As :func:`metrics.token_loss_sums`.
    """
    logits = transformer.apply({"params": params}, batch["inputs"], batch["targets"], deterministic=True)
    return metrics.token_loss_sums(logits, batch["targets"], label_smoothing)


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


def compile_steps(transformer: model.Transformer, optimizer: optax.GradientTransformation,
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
        From :func:`train_state_shardings`.
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
    carry_sharding = (state_shardings.params, replicated)
    if dropout_rng not in DROPOUT_RNGS:
        raise ValueError(f"dropout_rng must be one of {DROPOUT_RNGS}; got {dropout_rng!r}.")
    common = dict(transformer=transformer, label_smoothing=label_smoothing)
    last = functools.partial(train_step, optimizer=optimizer, micro_index=grad_accum_steps - 1,
                             dropout_rng=dropout_rng, **common)
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
        accumulate = functools.partial(accumulate_gradients, dropout_rng=dropout_rng, **common)
        first_micro = jax.jit(lambda state, batch, index: accumulate(state, None, batch, index),
                              in_shardings=(state_shardings, batch_sharding, replicated),
                              out_shardings=carry_sharding)
        next_micro = jax.jit(accumulate, in_shardings=(state_shardings, carry_sharding, batch_sharding,
                                                       replicated),
                             out_shardings=carry_sharding, donate_argnums=(1,))
    evaluate = jax.jit(functools.partial(eval_step, **common),
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
    carry = steps.first_micro_batch(state, micro_batches[0], np.int32(0))
    for index, batch in enumerate(micro_batches[1:-1], start=1):
        carry = steps.next_micro_batch(state, carry, batch, np.int32(index))
    return steps.train(state, micro_batches[-1], carry)


# --- The training loop ------------------------------------------------------------------------------

@dataclasses.dataclass
class _Run:
    """Everything one call of :func:`train_and_evaluate` works with (mutable: state advances)."""

    config: ml_collections.ConfigDict
    workdir: str
    mesh: Mesh
    data: Any
    model_config: model.TransformerConfig
    steps: CompiledSteps
    state: TrainState
    train_iterator: Iterator
    checkpoints: checkpoints.TrainingCheckpoints
    writer: metric_writer.MetricWriter
    num_params: int
    wall_s_before: float = 0.0  # Training wall time of earlier sessions (from the checkpoint).
    tokens_before: float = 0.0
    session_start: float = dataclasses.field(default_factory=time.time)
    last_save_time: float = dataclasses.field(default_factory=time.time)
    eval_batches: list | None = None
    last_train: dict = dataclasses.field(default_factory=dict)
    last_eval: dict = dataclasses.field(default_factory=dict)
    session_tokens: float = 0.0  # Target tokens trained on in this session.
    compiled_shapes: set = dataclasses.field(default_factory=set)
    throughput: "_Throughput" = dataclasses.field(default_factory=lambda: _Throughput())


def validate_training_config(config: ml_collections.ConfigDict) -> None:
    """Raise ``ValueError`` naming the first unusable training setting.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        Experiment config.
    """
    positive = ("num_train_steps", "warmup_steps", "grad_accum_steps", "log_every_steps",
                "keep_checkpoints")
    for name in positive:
        if int(config[name]) <= 0:
            raise ValueError(f"{name} must be positive; got {config[name]!r}.")
    non_negative = ("eval_every_steps", "checkpoint_every_steps", "checkpoint_every_minutes",
                    "num_eval_batches", "num_bleu_examples")
    for name in non_negative:
        if config[name] < 0:
            raise ValueError(f"{name} must be >= 0 (0 disables it); got {config[name]!r}.")
    if not 0.0 <= config.label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1); got {config.label_smoothing!r}.")
    if config.get("dropout_rng", "threefry") not in DROPOUT_RNGS:
        raise ValueError(f"dropout_rng must be one of {DROPOUT_RNGS}; got {config.dropout_rng!r}.")


def _load_data(config: ml_collections.ConfigDict, mesh: Mesh) -> Any:
    from attention_jax.data import input_pipeline  # The data pipeline (TFDS, grain) is heavy to import.

    return input_pipeline.get_datasets(config, process_index=jax.process_index(),
                                       process_count=jax.process_count(),
                                       rows_multiple=sharding.data_parallel_size(mesh))


def _setup(config: ml_collections.ConfigDict, workdir: str, data: Any) -> _Run:
    """Mesh, model, compiled steps, and the initial or restored state and data iterator."""
    mesh = sharding.create_mesh(config.mesh_shape, config.mesh_axes)
    data = data if data is not None else _load_data(config, mesh)
    if data.tokenizer.vocab_size > config.vocab_size:
        raise ValueError(f"the tokenizer has {data.tokenizer.vocab_size} tokens but the model's "
                         f"vocab_size is {config.vocab_size}: raise config.vocab_size.")
    model_config = model.TransformerConfig.from_config(config)
    transformer = model.Transformer(model_config)
    optimizer = optim.make_optimizer(config)
    rules = sharding.logical_axis_rules(config.param_sharding, mesh)
    boxed_state = abstract_boxed_state(transformer, optimizer)
    shardings = train_state_shardings(boxed_state, mesh, rules)
    steps = compile_steps(transformer, optimizer, mesh, shardings, label_smoothing=config.label_smoothing,
                          grad_accum_steps=config.grad_accum_steps,
                          dropout_rng=config.get("dropout_rng", "threefry"))
    manager = checkpoints.TrainingCheckpoints(workdir, keep=config.keep_checkpoints)
    restored = manager.restore_latest(abstract_train_state(boxed_state, shardings))
    if restored is None:
        state = create_train_state(config.seed, transformer, optimizer, shardings)
        train_iterator, progress = data.train_iterator(config.seed), {}
    else:
        state, progress = restored.state, restored.progress
        train_iterator = _resumed_iterator(data, config, restored)
        logging.info("Resumed from the checkpoint of step %d in %s.", restored.step, workdir)
    return _Run(config=config, workdir=workdir, mesh=mesh, data=data, model_config=model_config,
                steps=steps, state=state, train_iterator=train_iterator, checkpoints=manager,
                writer=metric_writer.MetricWriter(workdir, resumed_step=int(state.step)),
                num_params=model.count_params(state.params),
                wall_s_before=float(progress.get("wall_s", 0.0)),
                tokens_before=float(progress.get("train_target_tokens", 0.0)))


def _resumed_iterator(data: Any, config: ml_collections.ConfigDict,
                      restored: checkpoints.Restored) -> Iterator:
    if restored.data_state is None:
        logging.warning("No usable data iterator state at step %d: continuing with a fresh data "
                        "order seeded with seed + step.", restored.step)
        return data.train_iterator(config.seed + restored.step)
    iterator = data.train_iterator(config.seed)
    iterator.set_state(restored.data_state)
    return iterator


def _next_micro_batches(run: _Run) -> list[Batch]:
    multiple = sharding.local_data_shards(run.mesh)
    return [sharding.global_batch(sharding.pad_rows(next(run.train_iterator), multiple),
                                  run.steps.batch_sharding)
            for _ in range(run.config.grad_accum_steps)]


def _format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class _Throughput:
    """Target tokens per second of training time (evaluation, checkpoints, compilation excluded)."""

    def __init__(self) -> None:
        self._running_since: float | None = None
        self._seconds = 0.0
        self._tokens = 0.0
        self.total_seconds = 0.0
        self.total_tokens = 0.0

    def resume(self) -> None:
        """Start (or continue) the clock."""
        if self._running_since is None:
            self._running_since = time.time()

    def pause(self) -> None:
        """Stop the clock, keeping the time so far."""
        if self._running_since is not None:
            self._seconds += time.time() - self._running_since
            self._running_since = None

    def add_tokens(self, tokens: float) -> None:
        """Count tokens trained on while the clock was running."""
        self._tokens += tokens

    def close_interval(self) -> float:
        """Tokens per second since the last call (NaN if nothing was timed); the clock keeps state."""
        running = self._running_since is not None
        self.pause()
        rate = self._tokens / self._seconds if self._seconds > 0 else float("nan")
        self.total_seconds += self._seconds
        self.total_tokens += self._tokens
        self._seconds = self._tokens = 0.0
        if running:
            self.resume()
        return rate

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second over all closed intervals of the session."""
        return self.total_tokens / self.total_seconds if self.total_seconds > 0 else float("nan")


def _check_finite(run: _Run, pending: list[tuple[int, dict]]) -> None:
    for step, sums in pending:
        if not (np.isfinite(sums["loss_sum"]) and np.isfinite(sums["grad_norm"])):
            run.checkpoints.wait()  # Let a pending (good) save finish before naming the latest.
            raise NonFiniteLossError(
                f"non-finite training loss at step {step} (loss_sum={float(sums['loss_sum'])}, "
                f"grad_norm={float(sums['grad_norm'])}); stopping. The last good checkpoint is step "
                f"{run.checkpoints.latest_step()} in {run.checkpoints.directory}. Lower "
                f"learning_rate_scale or raise warmup_steps, then rerun to resume from it."
            )


def _report_train(run: _Run, pending: list[tuple[int, dict]], tokens_per_s: float) -> None:
    """Log the aggregate of the pending steps' host metrics (console, jsonl, TensorBoard)."""
    config = run.config
    step = pending[-1][0]
    summary = metrics.summarize({key: sum(float(sums[key]) for _, sums in pending)
                                 for key in metrics.SUM_KEYS})
    remaining_tokens = (config.num_train_steps - step) * summary["tokens"] / len(pending)
    learning_rate = float(optim.paper_learning_rate(step, d_model=config.d_model,
                                                    warmup_steps=config.warmup_steps,
                                                    scale=config.learning_rate_scale))
    run.last_train = dict(summary, learning_rate=learning_rate, tokens_per_s=tokens_per_s,
                          grad_norm=float(pending[-1][1]["grad_norm"]))
    run.writer.write(step, "train", run.last_train)
    logging.info("step %d/%d | loss %.4f | nll %.4f | acc %.3f | lr %.3g | %.0f tok/s | ETA %s",
                 step, config.num_train_steps, summary["loss"], summary["nll_loss"],
                 summary["accuracy"], learning_rate, tokens_per_s,
                 _format_duration(remaining_tokens / tokens_per_s if tokens_per_s > 0 else math.nan))


def _progress(run: _Run) -> dict[str, float]:
    return {"wall_s": run.wall_s_before + time.time() - run.session_start,
            "train_target_tokens": run.tokens_before + run.session_tokens}


def _iterator_state(iterator: Iterator) -> Any:
    get_state = getattr(iterator, "get_state", None)
    return get_state() if get_state is not None else None


def _save(run: _Run) -> None:
    run.checkpoints.save(run.state, data_state=_iterator_state(run.train_iterator),
                         progress=_progress(run))
    run.last_save_time = time.time()


def _time_to_save(run: _Run) -> bool:
    minutes = run.config.checkpoint_every_minutes
    due = minutes > 0 and time.time() - run.last_save_time >= 60.0 * minutes
    return distributed.all_processes_agree(due)  # Processes' clocks differ: process 0 decides.


def _new_shapes(run: _Run, micro_batches: list[Batch]) -> bool:
    """Whether this step's batch shapes (per micro-batch role) were not compiled yet; records them."""
    last = len(micro_batches) - 1
    keys = {(min(index, 1) if index < last else 2, tuple(batch["inputs"].shape),
             tuple(batch["targets"].shape)) for index, batch in enumerate(micro_batches)}
    new = not keys <= run.compiled_shapes
    run.compiled_shapes |= keys
    return new


def _train(run: _Run, stop: distributed.StopRequest) -> bool:
    """Run updates until ``num_train_steps`` or a stop request; returns whether training finished.

    The host waits for the device only at log, evaluation and checkpoint steps: there the losses of
    the steps since the last such point are fetched and checked (a non-finite one raises before
    anything is saved). Train metrics are reported every ``log_every_steps``.
    """
    config = run.config
    step = int(run.state.step)
    untimed: set[int] = set()  # Steps that compiled a new batch shape.
    unchecked: list[tuple[int, MetricSums]] = []  # Device metrics not yet fetched.
    unreported: list[tuple[int, dict]] = []  # Host metrics checked but not yet logged.
    while step < config.num_train_steps:
        micro_batches = _next_micro_batches(run)
        compiles = _new_shapes(run, micro_batches)
        if compiles:  # Keep compilation out of the throughput: time this step apart.
            jax.block_until_ready(run.state.step)
            run.throughput.pause()
        run.state, sums = run_update(run.steps, run.state, micro_batches)
        step += 1
        unchecked.append((step, sums))
        if compiles:
            jax.block_until_ready(sums)
            untimed.add(step)
            run.throughput.resume()
        stopping = stop.should_stop(step)
        last = step == config.num_train_steps
        log_now = step % config.log_every_steps == 0 or last or stopping
        every = config.checkpoint_every_steps
        save_now = last or stopping or (every > 0 and step % every == 0)
        eval_now = config.eval_every_steps > 0 and step % config.eval_every_steps == 0 and not last
        if not (log_now or save_now or eval_now):
            continue
        fetched = list(zip([s for s, _ in unchecked], jax.device_get([m for _, m in unchecked])))
        unchecked = []
        _check_finite(run, fetched)
        run.throughput.add_tokens(sum(float(m["tokens"]) for s, m in fetched if s not in untimed))
        run.session_tokens += sum(float(m["tokens"]) for _, m in fetched)
        unreported += fetched
        if log_now:
            _report_train(run, unreported, run.throughput.close_interval())
            unreported = []
        run.throughput.pause()
        if save_now or (log_now and _time_to_save(run)):
            _save(run)
        if eval_now:
            _evaluate(run, step)
        run.throughput.resume()
        if stopping:
            logging.warning("Stopped at step %d on request; rerun the same command to resume.", step)
            return False
    return True


# --- Evaluation -------------------------------------------------------------------------------------

def _eval_batches(run: _Run) -> list[Batch]:
    if run.eval_batches is None:
        multiple = sharding.local_data_shards(run.mesh)
        local = run.data.eval_batches(run.config.eval_split, max_batches=run.config.num_eval_batches)
        run.eval_batches = [sharding.pad_rows(batch, multiple) for batch in local]
    return run.eval_batches


def _evaluate(run: _Run, step: int) -> dict[str, Any]:
    """Dev loss, per-token perplexity and accuracy, and BLEU when decoding is available.

    Parameters
    ----------
    run : _Run
        The run (its current parameters are evaluated).
    step : int
        Step to file the metrics under.

    Returns
    -------
    dict
        ``loss`` (label-smoothed), ``nll_loss``, ``perplexity``, ``accuracy``, ``tokens`` and, with
        ``config.num_bleu_examples > 0`` and the decoding modules present, ``bleu`` and
        ``bleu_signature``.
    """
    started = time.time()
    totals = None
    for batch in _eval_batches(run):
        sums = run.steps.evaluate(run.state.params, sharding.global_batch(batch, run.steps.batch_sharding))
        totals = sums if totals is None else metrics.add_sums(totals, sums)
    summary = metrics.summarize(jax.device_get(totals)) if totals is not None else {}
    summary.update(_bleu(run))
    summary["seconds"] = time.time() - started
    run.last_eval = dict(summary, step=step)
    run.writer.write(step, "eval", summary)
    logging.info("eval at step %d | loss %.4f | nll %.4f | ppl %.3f | acc %.3f%s", step,
                 summary.get("loss", math.nan), summary.get("nll_loss", math.nan),
                 summary.get("perplexity", math.nan), summary.get("accuracy", math.nan),
                 f" | BLEU {summary['bleu']:.2f}" if "bleu" in summary else "")
    return summary


_WARNED_NO_DECODING = []


def _bleu(run: _Run) -> dict[str, Any]:
    """BLEU of beam-search translations of the first ``num_bleu_examples`` dev pairs."""
    count = run.config.num_bleu_examples
    if count <= 0:
        return {}
    try:
        from attention_jax import decode, evaluation  # The decoding side; optional here.
    except ImportError as error:
        if not _WARNED_NO_DECODING:
            logging.warning("BLEU skipped: decoding modules unavailable (%s).", error)
            _WARNED_NO_DECODING.append(True)
        return {}
    pairs = run.data.text_pairs(run.config.eval_split, max_pairs=count)
    if not pairs:
        return {}
    params = jax.jit(lambda tree: tree, out_shardings=sharding.replicated(run.mesh))(run.state.params)
    translator = decode.Translator(run.model_config, params, run.data.tokenizer,
                                   beam_size=run.config.beam_size,
                                   alpha=run.config.length_penalty_alpha,
                                   max_extra_len=run.config.max_decode_extra_len)
    hypotheses = translator.translate([source for source, _ in pairs])
    score, signature = evaluation.corpus_bleu(hypotheses, [target for _, target in pairs])
    for (source, target), hypothesis in list(zip(pairs, hypotheses))[:2]:
        logging.info("  src: %s\n  ref: %s\n  hyp: %s", source, target, hypothesis)
    return {"bleu": float(score), "bleu_signature": signature}


# --- Entry point ------------------------------------------------------------------------------------

def _results(run: _Run) -> dict[str, Any]:
    config = run.config
    paper = config.get("paper", None)
    return {
        "name": config.get("name", None),
        "paper": paper.to_dict() if isinstance(paper, ml_collections.ConfigDict) else paper,
        "step": int(run.state.step),
        "train_loss": run.last_train.get("loss"),
        "train_nll_loss": run.last_train.get("nll_loss"),
        "eval_loss": run.last_eval.get("loss"),
        "eval_nll_loss": run.last_eval.get("nll_loss"),
        "eval_ppl": run.last_eval.get("perplexity"),
        "eval_accuracy": run.last_eval.get("accuracy"),
        "bleu": run.last_eval.get("bleu"),
        "bleu_signature": run.last_eval.get("bleu_signature"),
        "params": run.num_params,
        "wall_s": _progress(run)["wall_s"],
        "train_tokens_per_s": run.throughput.tokens_per_s,
        "train_target_tokens": _progress(run)["train_target_tokens"],
        "devices": jax.device_count(),
        "mesh": dict(run.mesh.shape),
    }


def _write_results(workdir: str, results: dict[str, Any]) -> None:
    if jax.process_index() != 0:
        return
    clean = {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
             for key, value in results.items()}
    path = os.path.join(workdir, RESULTS_FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(clean, file, indent=2)
        file.write("\n")
    os.replace(path + ".tmp", path)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str, *,
                       data: Any = None) -> dict[str, Any]:
    """Train ``config``'s model in ``workdir``, resuming from its latest checkpoint if there is one.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        Experiment config (``configs/base.py`` lists every field).
    workdir : str
        Output directory (layout in :mod:`attention_jax.training.checkpoints`); rerunning the same command
        resumes.
    data : object, optional
        A data object with the ``input_pipeline.get_datasets`` interface (default: built from the
        config with local rows divisible by the data-parallel devices).

    Returns
    -------
    dict
        The results (also written to ``WORKDIR/results.json`` when training finished); ``"finished"``
        is False when a stop request (SIGTERM) ended the run early.

    Notes
    -----
    Checkpoints are written every ``checkpoint_every_steps``, at the first log step after
    ``checkpoint_every_minutes`` (process 0's clock decides for all), at the last step, and when
    SIGTERM or Ctrl-C asks training to stop (it then returns with ``finished=False``). Raises
    ``ValueError`` if ``workdir`` holds a run of a different model, and :class:`NonFiniteLossError`
    (naming the step) when the loss becomes NaN/inf; checkpoints written before are kept.
    """
    validate_training_config(config)
    checkpoints.check_resume_compatible(workdir, config)
    checkpoints.write_config(workdir, config)
    run = _setup(config, workdir, data)
    model_proto = getattr(run.data.tokenizer, "model_proto", None)
    if model_proto is not None:  # Test doubles without a SentencePiece model have none.
        checkpoints.write_tokenizer(workdir, model_proto)
    logging.info("%s: %d parameters, mesh %s, param_sharding=%s, dtype=%s.", config.get("name", "?"),
                 run.num_params, dict(run.mesh.shape), config.param_sharding, config.dtype)
    try:
        with distributed.StopRequest() as stop:
            finished = _train(run, stop)
        if finished:
            if run.last_eval.get("step") != int(run.state.step):
                _evaluate(run, int(run.state.step))
            if not run.last_train:  # Resumed a finished run: nothing trained this session.
                logging.info("Training had already reached step %d.", int(run.state.step))
        results = dict(_results(run), finished=finished)
        if finished:
            _write_results(workdir, results)
    finally:
        run.checkpoints.close()
        run.writer.close()
    return results
