"""The training loop: build, train, log, evaluate, checkpoint, write results; reruns (docs/faults.md)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import jax
import numpy as np
from absl import logging

from attention_jax.checkpointing import checkpoints, resume_checks
from attention_jax.data import batching
from attention_jax.data.training_data import TrainingData
from attention_jax.experiment.sections import Experiment, RunConfig
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import language_model, model
from attention_jax.training import (
    distributed,
    early_stopping,
    metric_writer,
    progress,
    run_context,
    run_evaluation,
    setup_checks,
    sharding,
    train_state,
    workdir_lock,
)
from attention_jax.training.device_peaks import _Throughput
from attention_jax.training.run_context import LoopState, TrainingRun, _EarlierSessions
from attention_jax.training.train_state import Batch, MetricSums, _run_update


class NonFiniteLossError(UserInputError, FloatingPointError):
    """A NaN or infinite loss: a setting's fault (learning rate, warm-up), so one line and exit status 2."""



def _build_run(experiment: Experiment, workdir: str, data: TrainingData | None,
              lock: workdir_lock.WorkdirLock | None = None) -> TrainingRun:
    """Build the mesh, model, compiled steps and the initial or restored state, checked against its data."""
    run_config, optimizer_config = experiment.run, experiment.optimizer
    mesh = sharding.create_mesh(run_config.mesh_shape, run_config.mesh_axes)
    data = data if data is not None else run_context._load_data(experiment, mesh)
    setup_checks._check_data(experiment, data)
    transformer = language_model.build_model(experiment.model, experiment.model_kind)
    schedule = train_state._make_schedule(optimizer_config)
    optimizer = train_state.make_optimizer(optimizer_config, schedule)
    rules = sharding.logical_axis_rules(run_config.param_sharding, mesh)
    boxed_state = train_state._abstract_boxed_state(transformer, optimizer)
    shardings = sharding._tree_shardings(boxed_state, mesh, rules)
    steps = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                      label_smoothing=optimizer_config.label_smoothing,
                                      grad_accum_steps=optimizer_config.grad_accum_steps,
                                      dropout_rng=optimizer_config.dropout_rng)
    manager = checkpoints.TrainingCheckpoints(workdir, keep=run_config.keep_checkpoints)
    abstract_state = train_state._abstract_train_state(boxed_state, shardings)
    setup_checks._check_checkpoint_parameters(workdir, manager.latest_step(), abstract_state.params)
    restored = manager.restore_latest(abstract_state)
    if restored is None:
        state = train_state._create_train_state(experiment.seed, transformer, optimizer, shardings)
        train_iterator = data.train_iterator(experiment.seed)
        writer = metric_writer.MetricWriter(workdir, resumed_step=int(state.step))
        session_start = time.time()
        loop = LoopState(state=state, train_iterator=train_iterator,
                         early_stopping=early_stopping._EarlyStopping.from_config(run_config, {}),
                         throughput=_Throughput(), last_save_time=session_start)
        earlier = _EarlierSessions()
    else:
        setup_checks._check_tokenizer(experiment, workdir, data, restored.step)
        setup_checks.check_data_splits(workdir, data)
        train_iterator = run_context._resumed_iterator(data, experiment.seed, restored)
        logging.info("Resumed from the checkpoint of step %d in %s.", restored.step, workdir)
        writer = metric_writer.MetricWriter(workdir, resumed_step=int(restored.state.step))  # Drops later records.
        session_start = time.time()
        loop = run_context._restored_loop(experiment, workdir, restored, train_iterator, last_save_time=session_start)
        earlier = _EarlierSessions(wall_s=float(restored.progress.get("wall_s", 0.0)),
                                  train_target_tokens=float(restored.progress.get("train_target_tokens", 0.0)))
    return TrainingRun(experiment=experiment, workdir=workdir, data=data, mesh=mesh, steps=steps, schedule=schedule,
                       checkpoints=manager, writer=writer, lock=lock, num_params=model.count_params(loop.state.params),
                       earlier=earlier, session_start=session_start, loop=loop)



def _next_micro_batches(run: TrainingRun) -> tuple[list[Batch], float]:
    """Return the step's global micro-batches and the host's wait for them; count their tokens."""
    multiple = sharding._local_data_shards(run.mesh)
    local, data_wait_s = [], 0.0
    for _ in range(run.experiment.optimizer.grad_accum_steps):
        waited_from = time.perf_counter()
        batch = next(run.loop.train_iterator)
        data_wait_s += time.perf_counter() - waited_from
        local.append(sharding._pad_rows(batch, multiple))
    for batch in local:
        for key, count in batching.count_tokens(batch).items():
            run.loop.token_counts[key] = run.loop.token_counts.get(key, 0) + count
    return [sharding.global_batch(batch, run.steps.batch_sharding) for batch in local], data_wait_s


def _check_finite(run: TrainingRun, pending: list[tuple[int, dict]]) -> None:
    for step, sums in pending:
        if not (np.isfinite(sums["loss_sum"]) and np.isfinite(sums["grad_norm"])):
            run.checkpoints.wait()  # Let a pending (good) save finish before naming the latest.
            latest = run.checkpoints.latest_step()
            then = (f"The last good checkpoint is step {latest} in {run.checkpoints.directory}. Lower "
                    f"learning_rate_scale or raise warmup_steps, then rerun to resume from it."
                    if latest is not None else
                    "No checkpoint was saved before it, so a rerun starts from scratch. Lower "
                    "learning_rate_scale or raise warmup_steps, then rerun.")
            raise NonFiniteLossError(
                f"non-finite training loss at step {step} (loss_sum={float(sums['loss_sum'])}, "
                f"grad_norm={float(sums['grad_norm'])}); stopping. {then}")


def _save(run: TrainingRun, *, evaluation_pending: bool = False) -> None:
    """Checkpoint the current step; ``evaluation_pending``: its dev evaluation comes after."""
    run.checkpoints.save(run.loop.state, data_state=run.loop.train_iterator.get_state(),
                         progress=progress.bookkeeping(run, evaluation_pending=evaluation_pending))
    run.loop.last_save_time = time.time()
    if run.lock is not None:
        run.lock.refresh()


def _time_to_save(run: TrainingRun) -> bool:
    minutes = run.experiment.run.checkpoint_every_minutes
    due = minutes > 0 and time.time() - run.loop.last_save_time >= 60.0 * minutes
    return distributed._all_processes_agree(due)  # Processes' clocks differ: process 0 decides.


def _new_shapes(run: TrainingRun, micro_batches: list[Batch]) -> bool:
    """Return whether this step's batch shapes were not compiled yet; record them."""
    last = len(micro_batches) - 1
    keys = {(min(index, 1) if index < last else 2,
             tuple((batch["inputs"] if "inputs" in batch else batch["targets"]).shape),
             tuple(batch["targets"].shape)) for index, batch in enumerate(micro_batches)}
    new = not keys <= run.loop.compiled_shapes
    run.loop.compiled_shapes |= keys
    return new


def _train(run: TrainingRun, stop: distributed.StopRequest) -> bool:
    """Run updates until ``num_train_steps`` or a stop request; return whether training finished."""
    config = run.experiment.run
    step = int(run.loop.state.step)
    untimed: set[int] = set()  # Steps that compiled a new batch shape.
    unchecked: list[tuple[int, MetricSums]] = []  # Device metrics not yet fetched.
    unreported: list[tuple[int, dict]] = []  # Host metrics checked but not yet logged.
    previous: MetricSums | None = None  # The metrics of the step before, while it may still run.
    profiler = _StepProfiler.from_config(config, run.workdir)  # config.profile_steps > 0: a trace.
    if step < config.num_train_steps and run.loop.stop_reason is None and run.loop.throughput.peak is None:
        progress._choose_peak(run)
    if run.loop.evaluation_pending and step < config.num_train_steps and run.loop.stop_reason is None:
        logging.info("Evaluating step %d first: its checkpoint was written before an evaluation that did not "
                     "finish.", step)
        if not _evaluate(run, step, stop):
            profiler.close()
            return False
        run.loop.evaluation_pending = False
    while step < config.num_train_steps and run.loop.stop_reason is None:
        micro_batches, data_wait_s = _next_micro_batches(run)
        compiles = _new_shapes(run, micro_batches)
        if compiles:  # Keep compilation out of the throughput: time this step apart.
            jax.block_until_ready(run.loop.state.step)
            run.loop.throughput.pause()
            shapes = sorted({"x".join(map(str, b["targets"].shape)) for b in micro_batches})
            logging.info("Compiling the train step for target batches of %s (rows x length) ...", ", ".join(shapes))
            compile_started = time.perf_counter()
        profiler.before_step(step)
        run.loop.state, sums = _run_update(run.steps, run.loop.state, micro_batches)
        step += 1
        if previous is not None:  # Bound the run-ahead: wait for the previous step (its metrics are outputs).
            jax.block_until_ready(previous)
            stop.note_completed(step - 1)
        previous = sums
        profiler.after_step(step, sums)
        unchecked.append((step, sums))
        if compiles:
            jax.block_until_ready(sums)
            logging.info("Compiled and ran step %d in %.1f s.", step, time.perf_counter() - compile_started)
            untimed.add(step)
            run.loop.throughput.resume()
        else:
            run.loop.throughput.add_step(data_wait_s)
        stopping = stop.should_stop(step)
        last = step == config.num_train_steps
        log_now = step % config.log_every_steps == 0 or last or stopping
        every = config.checkpoint_every_steps
        save_now = last or stopping or (every > 0 and step % every == 0)
        eval_now = config.eval_every_steps > 0 and step % config.eval_every_steps == 0 and not last
        if not (log_now or save_now or eval_now):
            continue
        fetched = list(zip([s for s, _ in unchecked], jax.device_get([m for _, m in unchecked])))
        unchecked, previous = [], None
        stop.note_completed(step)
        _check_finite(run, fetched)
        run.loop.throughput.add_tokens(sum(float(m["tokens"]) for s, m in fetched if s not in untimed))
        run.loop.session_tokens += sum(float(m["tokens"]) for _, m in fetched)
        unreported += fetched
        if log_now:
            progress._log_train(run, unreported, run.loop.throughput.close_interval())
            unreported = []
        run.loop.throughput.pause()
        if eval_now or save_now or (log_now and _time_to_save(run)):
            _save(run, evaluation_pending=eval_now or last)  # Before the evaluation: one that fails loses no step.
        if eval_now and not stopping:  # A stop request skips it: the rerun evaluates this step first.
            stopping = not _evaluate(run, step, stop)
        run.loop.throughput.resume()
        if stopping:
            profiler.close()
            logging.warning("Stopped at step %d on request (%s step(s) after the last one finished when it "
                            "came); rerun the same command to resume.", step,
                            "?" if stop.completed_at_request is None else step - stop.completed_at_request)
            return False
    profiler.close()
    return True


def _evaluate(run: TrainingRun, step: int, stop: distributed.StopRequest) -> bool:
    """Run the dev evaluation of ``step`` and early stopping's verdict; False when a stop request ended it."""
    if run_evaluation.evaluate(run, step, should_stop=run_evaluation._stop_check(stop, step)) is None:
        return False
    if run.loop.early_stopping.should_stop and run.loop.stop_reason is None:
        run.loop.stop_reason = early_stopping.STOPPED_EARLY
        logging.info("Early stopping at step %d: %s.", step, run.loop.early_stopping.stop_description())
    return True



def train_and_evaluate(experiment: Experiment, workdir: str, *, data: TrainingData | None = None) -> dict[str, Any]:
    """Train ``experiment``'s model in ``workdir``, resuming from its latest checkpoint if there is one.

    Checkpoints every ``checkpoint_every_steps`` or ``checkpoint_every_minutes``, before each evaluation, at the
    end and on SIGTERM or Ctrl-C (``finished=False``). A run finished with the same config is left alone.

    Parameters
    ----------
    experiment : Experiment
        The checked experiment.
    workdir : str
        Output directory; rerunning the same command resumes.
    data : TrainingData, optional
        The data (default: built from the experiment's data section).

    Returns
    -------
    dict
        The results (also ``WORKDIR/results.json`` when training finished).

    Raises
    ------
    workdir_lock.WorkdirLockedError
        When another trainer holds ``workdir``.
    ValueError
        When ``workdir`` holds a run of a different model.
    NonFiniteLossError
        When the loss becomes NaN or inf; earlier checkpoints are kept.
    """
    resume_checks.check_resume_compatible(workdir, experiment)
    finished_before = checkpoints.finished_results(workdir, experiment)
    if finished_before is not None and not _describes_newest_checkpoint(workdir, finished_before):
        finished_before = None  # An extension stopped after it rewrote config.json: it trains on.
    if finished_before is not None:
        finished_before["reason"] = "the same command ran it to the end"
    else:
        finished_before = _nothing_to_do(workdir, experiment.run)
    if finished_before is not None:  # Checked before the lock: a finished rerun writes nothing.
        logging.info("%s already finished at step %d (%s): nothing to do, no file changed: %s.", workdir,
                     finished_before["step"], finished_before.get("stop_reason"), finished_before["reason"])
        return dict(finished_before, finished=True, already_finished=True)
    setup_checks._check_devices(experiment)
    setup_checks._warn_unreached_peak(experiment)
    created = not os.path.exists(workdir)
    lock = workdir_lock._acquire_for_job(workdir)
    try:
        return _train_locked(experiment, workdir, data, lock)
    except BaseException:
        if lock is not None:
            lock.release()
            lock = None
        if created:
            _remove_if_only_lock(workdir)
        raise
    finally:
        if lock is not None:
            lock.release()


def _why_nothing_to_train(step: int, stop_reason: str | None, tracker: early_stopping._EarlyStopping,
                          num_train_steps: int) -> str | None:
    """Return why a run at ``step`` has no step left to train (and how to train on), or ``None`` when it trains on."""
    if stop_reason == early_stopping.STOPPED_EARLY and tracker.should_stop:
        return (f"early stopping ended it at step {step} after {tracker.stop_description()}; to train on, "
                f"raise --config.early_stopping_patience above {tracker.evaluations_since_best} (or set it to 0) "
                f"with --config.num_train_steps above {step}")
    target = int(num_train_steps)
    if step > target:
        return (f"it trained to step {step}, beyond num_train_steps={target}, and a run is never cut back; "
                f"evaluate an earlier step with python -m attention_jax.evaluate --checkpoint=STEP, or train "
                f"a new --workdir")
    if step == target:
        return f"it reached num_train_steps={target}; raise --config.num_train_steps to train on"
    return None


def _pending_final_splits(results: dict[str, Any], config: RunConfig) -> list[str]:
    """Return the splits ``config.final_bleu`` asks to decode that ``results`` (``results.json``) has no figures for."""
    if not config.final_bleu:
        return []
    done = set(results.get("final_bleu_splits") or [])
    return [name for name in run_files.final_bleu_splits(config.final_bleu_splits)
            if name not in done and results.get(f"{name}_bleu") is None]


def _read_finished_results(workdir: str) -> dict[str, Any] | None:
    """Return ``WORKDIR/results.json`` when it records a finished run, else ``None``."""
    path = os.path.join(workdir, run_files.RESULTS_FILE)
    try:
        with open(path, encoding="utf-8") as file:
            results = json.load(file)
    except (OSError, ValueError):
        return None
    if not isinstance(results, dict) or not results.get("finished"):
        return None
    return results if _describes_newest_checkpoint(workdir, results) else None


def _describes_newest_checkpoint(workdir: str, results: dict[str, Any]) -> bool:
    """Return whether finished ``results`` are the newest checkpoint's (True without one), not a run extended since."""
    latest = checkpoints.latest_progress(workdir)
    step = results.get("step")
    if latest is not None and step != latest[0]:
        return False
    if results.get("stop_reason") != early_stopping.REACHED_NUM_STEPS or not isinstance(step, int):
        return True
    try:
        with open(os.path.join(workdir, run_files.CONFIG_FILE), encoding="utf-8") as file:
            return step >= int(json.load(file)["num_train_steps"])
    except (OSError, ValueError, KeyError, TypeError):  # An unreadable config.json is resume_checks' to name.
        return True


def _discard_results(workdir: str) -> None:
    """Remove ``WORKDIR/results.json`` before a run trains on: a finished record would contradict it."""
    try:
        os.remove(os.path.join(workdir, run_files.RESULTS_FILE))
    except FileNotFoundError:
        pass


def _nothing_to_do(workdir: str, config: RunConfig) -> dict[str, Any] | None:
    """Return a finished run's results with the ``reason`` a rerun does nothing; reads files only (before the lock)."""
    results = _read_finished_results(workdir)
    latest = checkpoints.latest_progress(workdir)
    if results is None or latest is None:
        return None
    step, saved = latest
    saved = run_context._with_logged_evaluation(saved, run_context._logged_figures(workdir, step)[1], config)
    tracker = early_stopping._EarlyStopping.from_config(config, saved)
    reason = _why_nothing_to_train(step, saved.get("stop_reason"), tracker, config.num_train_steps)
    if reason is None or _pending_final_splits(results, config):
        return None
    return dict(results, reason=reason)


def _remove_if_only_lock(workdir: str) -> None:
    """Remove a work directory this command created when a failure left only its lock."""
    try:
        if jax.process_index() == 0 and os.listdir(workdir) == [run_files.LOCK_FILE]:
            os.remove(os.path.join(workdir, run_files.LOCK_FILE))
            os.rmdir(workdir)
    except OSError:  # Another process or a remote file system: leave it.
        pass


def _train_locked(experiment: Experiment, workdir: str, data: TrainingData | None,
                  lock: workdir_lock.WorkdirLock | None) -> dict[str, Any]:
    """Run :func:`train_and_evaluate` once the lock is held; config and tokenizer are written only if it trains."""
    run = _build_run(experiment, workdir, data, lock)
    held_by = _why_nothing_to_train(int(run.loop.state.step), run.loop.stop_reason, run.loop.early_stopping,
                                          experiment.run.num_train_steps)
    if held_by is None and jax.process_index() == 0:
        _discard_results(workdir)  # Before config.json changes: the two never disagree on disk.
    if held_by is None or not os.path.exists(os.path.join(workdir, run_files.CONFIG_FILE)):
        checkpoints.write_config(workdir, experiment)
        run.writer.write_hparams(metric_writer._flat_hparams(experiment.to_json_dict()))
    if held_by is None or not os.path.exists(os.path.join(workdir, run_files.TOKENIZER_FILE)):
        checkpoints.write_tokenizer(workdir, run.data.tokenizer.model_proto)
    if held_by is None or resume_checks.read_data_splits(workdir) is None:
        resume_checks.write_data_splits(workdir, run.data.split_fingerprints())
    logging.info("%s: %d parameters, mesh %s, param_sharding=%s, dtype=%s.", experiment.name,
                 run.num_params, dict(run.mesh.shape), experiment.run.param_sharding, experiment.model.dtype)
    previous = _read_finished_results(workdir) if held_by is not None else None
    ended = metric_writer.FAILED  # The session's HParams status unless it gets to the end of the block below.
    try:
        with distributed.StopRequest() as stop:
            finished = _train(run, stop)
            if finished:
                run.loop.stop_reason = run.loop.stop_reason or early_stopping.REACHED_NUM_STEPS
                if run.loop.last_eval.get("step") != int(run.loop.state.step):  # Its checkpoint is written: see _train.
                    finished = _evaluate(run, int(run.loop.state.step), stop)
            if finished and held_by is not None:
                logging.info("Nothing to train: %s. Finishing the run's final evaluation only.", held_by)
            results = dict(previous or progress._run_results(run), finished=finished)
            if not finished and stop.completed_at_request is not None:
                results["steps_after_stop_request"] = int(run.loop.state.step) - stop.completed_at_request
            if finished and _pending_final_splits(results, experiment.run):
                evaluated = run_evaluation.final_bleu(run, stop)
                finished = results["finished"] = evaluated is not None
                results.update(evaluated or {})
        if finished:
            progress._write_results(workdir, results)
            run.writer.write_final(int(run.loop.state.step), results)  # TensorBoard's final/dev_bleu, ...
            logging.info("%s", progress._summary_line(results, workdir))
        ended = metric_writer.FINISHED if finished else metric_writer.STOPPED
    finally:
        run.checkpoints.close()
        run.writer.close(session_status=ended, step=int(run.loop.state.step))
    return results


class _StepProfiler:
    """Trace ``num_steps`` train steps after ``start_step`` with ``jax.profiler`` into ``log_dir`` (0 steps: off)."""

    def __init__(self, log_dir: str, num_steps: int, start_step: int) -> None:
        if num_steps < 0 or start_step < 0:
            raise ValueError(f"profile_steps and profile_start_step must be >= 0; got {num_steps} and {start_step}.")
        self.log_dir = log_dir
        self.num_steps = num_steps
        self.start_step = start_step
        self.tracing = False

    @classmethod
    def from_config(cls, config: RunConfig, workdir: str) -> _StepProfiler:
        """Return the profiler of ``config.profile_steps`` and ``profile_start_step``, tracing into TensorBoard."""
        return cls(os.path.join(workdir, run_files.TENSORBOARD_DIR), config.profile_steps, config.profile_start_step)

    def before_step(self, steps_done: int) -> None:
        """Start the trace when ``steps_done`` equals the start step; call before each update."""
        if self.num_steps > 0 and steps_done == self.start_step and not self.tracing:
            jax.profiler.start_trace(self.log_dir)
            self.tracing = True

    def after_step(self, steps_done: int, outputs: Any) -> None:
        """Stop the trace after the last traced step, once ``outputs`` are computed."""
        if self.tracing and steps_done >= self.start_step + self.num_steps:
            jax.block_until_ready(outputs)
            self.close()

    def close(self) -> None:
        """Stop a running trace (writing it)."""
        if self.tracing:
            jax.profiler.stop_trace()
            self.tracing = False
