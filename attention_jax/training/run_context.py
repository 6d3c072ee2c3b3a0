"""The state of one training run, shared by the loop (:mod:`~attention_jax.training.train`) and its
evaluations (:mod:`~attention_jax.training.run_evaluation`)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterator

from jax.sharding import Mesh

from attention_jax.checkpointing import checkpoints
from attention_jax.experiment.sections import Experiment
from attention_jax.models.transformer_config import TransformerConfig
from attention_jax.training import early_stopping, metric_writer, workdir_lock
from attention_jax.training.throughput import Throughput
from attention_jax.training.train_state import CompiledSteps, TrainState


@dataclasses.dataclass
class TrainingRun:
    """Everything one call of :func:`~attention_jax.training.train.train_and_evaluate` works with.

    Mutable: the state advances as training goes.
    """

    experiment: Experiment
    workdir: str
    mesh: Mesh
    data: Any
    model_config: TransformerConfig
    steps: CompiledSteps
    state: TrainState
    train_iterator: Iterator
    checkpoints: checkpoints.TrainingCheckpoints
    schedule: Any  # The optimizer's learning-rate schedule (optax: update count -> rate).
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
    throughput: Throughput = dataclasses.field(default_factory=Throughput)
    early_stopping: early_stopping.EarlyStopping = dataclasses.field(
        default_factory=lambda: early_stopping.EarlyStopping(patience=0))
    stop_reason: str | None = None  # Set when training ends: early_stopping.STOPPED_EARLY or REACHED_NUM_STEPS.
    evaluation_pending: bool = False  # Restored from a checkpoint written before its step's unfinished evaluation.
    token_counts: dict = dataclasses.field(default_factory=dict)  # Real tokens and slots since the last log.
    lock: workdir_lock.WorkdirLock | None = None  # The work directory's lock (process 0).
