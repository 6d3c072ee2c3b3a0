"""One training run: what stays fixed for the session (:class:`TrainingRun`) and what the loop advances."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any

import jax
import optax
from absl import logging
from jax.sharding import Mesh

from attention_jax.checkpointing import checkpoints
from attention_jax.data.training_data import TrainingData, TrainIterator
from attention_jax.experiment.sections import Experiment, RunConfig
from attention_jax.foundation import run_files
from attention_jax.models import variants
from attention_jax.training import early_stopping, metric_writer, sharding, workdir_lock
from attention_jax.training.device_peaks import _Throughput
from attention_jax.training.train_state import (
    Batch,
    TrainState,
    _CompiledSteps,
)

EVALUATION_PENDING = "evaluation_pending"
"""Bookkeeping key: true when the checkpoint precedes its step's dev evaluation (early stopping lacks it)."""


@dataclasses.dataclass(frozen=True)
class _EarlierSessions:
    """What the sessions before this one did (0 for a new run)."""

    wall_s: float = 0.0  # Their training wall time.
    train_target_tokens: float = 0.0  # The target tokens they trained on.


@dataclasses.dataclass
class LoopState:
    """What the training loop advances: the only mutable part of a run."""

    state: TrainState
    train_iterator: TrainIterator  # Its position is checkpointed.
    early_stopping: early_stopping._EarlyStopping
    throughput: _Throughput  # Timed tokens and seconds, earlier sessions' included, and the device peak.
    last_save_time: float  # time.time() of the last checkpoint; checkpoint_every_minutes counts from it.
    stop_reason: str | None = None  # Why training ended, once it has.
    evaluation_pending: bool = False  # Restored from a checkpoint whose step's evaluation did not finish.
    last_train: dict[str, Any] = dataclasses.field(default_factory=dict)  # Last logged train figures.
    last_eval: dict[str, Any] = dataclasses.field(default_factory=dict)  # Last logged dev evaluation.
    session_tokens: float = 0.0  # Target tokens trained on in this session.
    token_counts: dict[str, int] = dataclasses.field(default_factory=dict)  # Real tokens and slots since the last log.
    compiled_shapes: set[tuple] = dataclasses.field(default_factory=set)  # Compiled batch shapes.


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """Everything one call of ``train_and_evaluate`` works with; only ``loop`` changes."""

    experiment: Experiment
    workdir: str
    data: TrainingData
    mesh: Mesh
    steps: _CompiledSteps
    schedule: optax.Schedule  # The learning rate of the update count (logged).
    checkpoints: checkpoints.TrainingCheckpoints
    writer: metric_writer.MetricWriter
    lock: workdir_lock.WorkdirLock | None  # Process 0's; refreshed at each save.
    num_params: int
    earlier: _EarlierSessions
    session_start: float  # time.time() when this session's run was built.
    loop: LoopState

    @functools.cached_property
    def eval_batches(self) -> list[Batch]:
        """Pad this process's dev batches to the mesh's shards, once.

        Returns
        -------
        list[Batch]
            ``num_eval_batches`` of ``eval_split``.
        """
        multiple = sharding._local_data_shards(self.mesh)
        local = self.data.eval_batches(self.experiment.data.eval_split,
                                       max_batches=self.experiment.run.num_eval_batches)
        return [sharding._pad_rows(batch, multiple) for batch in local]


def _load_data(experiment: Experiment, mesh: Mesh) -> TrainingData:
    """Return the training data ``experiment`` names: translation pairs or a language model's documents."""
    rows_multiple = int(mesh.shape[sharding.DATA_AXIS])  # The devices along "data".
    if experiment.model_kind == variants.ModelKind.DECODER_ONLY:
        from attention_jax.data import lm_data  # Documents packed into rows.

        return lm_data.get_datasets(experiment.data, process_index=jax.process_index(),
                                    process_count=jax.process_count(), rows_multiple=rows_multiple)
    from attention_jax.data import input_pipeline  # The data pipeline (TFDS, grain) is heavy to import.

    return input_pipeline.get_datasets(experiment.data, process_index=jax.process_index(),
                                       process_count=jax.process_count(), rows_multiple=rows_multiple)


def _restored_loop(experiment: Experiment, workdir: str, restored: checkpoints.Restored,
                  train_iterator: TrainIterator, *, last_save_time: float) -> LoopState:
    """Return a restored run's loop state; a step saved before its evaluation takes it from ``metrics.jsonl``."""
    step = int(restored.state.step)
    throughput = _Throughput()
    throughput.total_tokens = float(restored.progress.get("timed_train_tokens", 0.0))
    throughput.total_seconds = float(restored.progress.get("timed_train_seconds", 0.0))
    last_train, last_eval = _logged_figures(workdir, step)
    progress = _with_logged_evaluation(restored.progress, last_eval, experiment.run)
    stopping = early_stopping._EarlyStopping.from_config(experiment.run, progress)
    stop_reason = progress.get("stop_reason")
    if stop_reason == early_stopping.STOPPED_EARLY and not stopping.should_stop:
        logging.info("Early stopping had ended this run at step %d; with early_stopping_patience=%d it trains on.",
                     step, stopping.patience)
        stop_reason = None
    return LoopState(state=restored.state, train_iterator=train_iterator,
                     early_stopping=stopping, throughput=throughput, last_save_time=last_save_time,
                     stop_reason=stop_reason, evaluation_pending=bool(progress.get(EVALUATION_PENDING)),
                     last_train=last_train, last_eval=last_eval)


def _resumed_iterator(data: TrainingData, seed: int, restored: checkpoints.Restored) -> TrainIterator:
    """Return the training batches from where the checkpoint left them."""
    if restored.data_state is None:
        logging.warning("No usable data iterator state at step %d: continuing with a fresh data "
                        "order seeded with seed + step.", restored.step)
        return data.train_iterator(seed + restored.step)
    iterator = data.train_iterator(seed)
    iterator.set_state(restored.data_state)
    return iterator


def _with_logged_evaluation(progress: dict[str, Any], logged_eval: dict[str, Any], config: RunConfig) -> dict[str, Any]:
    """Return a checkpoint's bookkeeping with its step's logged dev evaluation added, if it came first."""
    if not progress.get(EVALUATION_PENDING) or not logged_eval:
        return progress
    tracker = early_stopping._EarlyStopping.from_config(config, progress)
    if "perplexity" in logged_eval:  # Logged as null when it was not finite: it counts, never improving.
        perplexity = logged_eval["perplexity"]
        tracker.update(int(logged_eval["step"]), float("nan") if perplexity is None else float(perplexity))
    stop_reason = progress.get("stop_reason")
    if stop_reason is None and tracker.should_stop:
        stop_reason = early_stopping.STOPPED_EARLY
    return dict(progress, **tracker.to_progress(), stop_reason=stop_reason, **{EVALUATION_PENDING: False})


def _logged_figures(workdir: str, step: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the last train figures logged at or before ``step`` and the dev evaluation logged at ``step``."""
    path = os.path.join(workdir, run_files.METRICS_FILE)
    last_train: dict[str, Any] = {}
    last_eval: dict[str, Any] = {}
    if not os.path.exists(path):
        return last_train, last_eval
    with open(path, encoding="utf-8") as file:
        for line in file:
            try:
                record = json.loads(line)
                at = int(record["step"])
            except (ValueError, KeyError, TypeError):  # A line cut by a crash.
                continue
            if at > step:
                continue
            train = {key[len("train/"):]: value for key, value in record.items() if key.startswith("train/")}
            evaluation = {key[len("eval/"):]: value for key, value in record.items() if key.startswith("eval/")}
            if train:
                last_train = train
            if evaluation and at == step:
                last_eval = dict(evaluation, step=step)
    return last_train, last_eval
