"""The training loop: resume, train, log, evaluate, checkpoint, write results (:func:`train_and_evaluate`).

The run it works on is built once by :func:`attention_jax.training.run_context.build_run` (fixed for the
session, with the :class:`~attention_jax.training.run_context.LoopState` the loop advances); the compiled
step functions it drives are in :mod:`attention_jax.training.train_state` (benchmarks and tests call them
directly).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import jax
import numpy as np
from absl import logging

from attention_jax import run_files
from attention_jax.checkpointing import checkpoints, resume_checks
from attention_jax.data import batching
from attention_jax.data.training_data import TrainingData
from attention_jax.experiment.sections import Experiment
from attention_jax.models import metrics
from attention_jax.training import (
    device_peaks,
    distributed,
    early_stopping,
    metric_writer,
    profiling,
    reruns,
    run_context,
    run_evaluation,
    setup_checks,
    sharding,
    workdir_lock,
)
from attention_jax.training.run_context import TrainingRun
from attention_jax.training.throughput import IntervalRates
from attention_jax.training.train_state import Batch, MetricSums, logged_gradient_norms, run_update
from attention_jax.user_errors import UserInputError


class NonFiniteLossError(UserInputError, FloatingPointError):
    """Training produced a NaN or infinite loss; the message names the step and the last good checkpoint.

    Notes
    -----
    A :class:`UserInputError`: the cause is a setting (too high a ``learning_rate_scale``, too short a
    warmup), so the commands print the message as one line with exit status 2, without a traceback.
    """


# --- The training loop ------------------------------------------------------------------------------

def _next_micro_batches(run: TrainingRun) -> tuple[list[Batch], float]:
    """The step's global micro-batches and the seconds the host waited for them from the input pipeline.

    Counts their real tokens and slots into ``run.loop.token_counts``.
    """
    multiple = sharding.local_data_shards(run.mesh)
    local, data_wait_s = [], 0.0
    for _ in range(run.experiment.optimizer.grad_accum_steps):
        waited_from = time.perf_counter()
        batch = next(run.loop.train_iterator)
        data_wait_s += time.perf_counter() - waited_from
        local.append(sharding.pad_rows(batch, multiple))
    for batch in local:
        for key, count in batching.count_tokens(batch).items():
            run.loop.token_counts[key] = run.loop.token_counts.get(key, 0) + count
    return [sharding.global_batch(batch, run.steps.batch_sharding) for batch in local], data_wait_s


def _format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    hours, minutes, secs = int(seconds) // 3600, int(seconds) // 60 % 60, int(seconds) % 60
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


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


def _report_train(run: TrainingRun, pending: list[tuple[int, dict]], rates: IntervalRates) -> None:
    """Log the aggregate of the pending steps' host metrics and the interval's speed (console, jsonl, TensorBoard)."""
    config = run.experiment.run
    tokens_per_s = rates.tokens_per_s
    mfu = rates.mfu(run.experiment.training_flops(1.0), run.loop.throughput.peak, jax.device_count())
    step = pending[-1][0]
    summary = metrics.summarize({key: sum(float(sums[key]) for _, sums in pending)
                                 for key in metrics.SUM_KEYS})
    remaining_tokens = (config.num_train_steps - step) * summary["tokens"] / len(pending)
    remaining_s = remaining_tokens / tokens_per_s if tokens_per_s > 0 else math.nan
    eval_s = run.loop.last_eval.get("seconds")  # The last evaluation's time stands for each one to come.
    if eval_s is not None:
        remaining_s += eval_s * remaining_evaluations(step, config.num_train_steps, config.eval_every_steps)
    learning_rate = float(run.schedule(step - 1))  # The rate of this step's update (optax counts from 0).
    padding = metrics.padding_fractions(run.loop.token_counts)
    run.loop.token_counts = {}
    run.loop.last_train = dict(summary, learning_rate=learning_rate, tokens_per_s=tokens_per_s,
                          step_time_ms=1e3 * rates.step_time_s, data_wait_ms=1e3 * rates.data_wait_s, mfu=mfu,
                          **logged_gradient_norms(pending), **padding)
    run.writer.write(step, "train", run.loop.last_train)
    logging.info("step %d/%d | loss %.4f | nll %.4f | acc %.3f | lr %.3g | %.0f tok/s | %.1f ms/step "
                 "(data wait %.1f ms) | MFU %.3g%% | pad %.0f%% | ETA %s",
                 step, config.num_train_steps, summary["loss"], summary["nll_loss"],
                 summary["accuracy"], learning_rate, tokens_per_s, 1e3 * rates.step_time_s,
                 1e3 * rates.data_wait_s, 100 * mfu,
                 100 * padding.get("targets_padding_fraction", math.nan), _format_duration(remaining_s))


def remaining_evaluations(step: int, num_train_steps: int, eval_every_steps: int) -> int:
    """Dev evaluations a run still does after ``step``: every ``eval_every_steps`` and one at the end.

    Parameters
    ----------
    step : int
        The step just trained.
    num_train_steps : int
        The last step.
    eval_every_steps : int
        0: only the final evaluation.

    Returns
    -------
    int
        The count the progress line's ETA multiplies by the last evaluation's time.
    """
    if step >= num_train_steps:
        return 0
    periodic = (num_train_steps - 1) // eval_every_steps - step // eval_every_steps if eval_every_steps > 0 else 0
    return periodic + 1


def _progress(run: TrainingRun, *, evaluation_pending: bool = False) -> dict[str, Any]:
    return {"wall_s": run.earlier.wall_s + time.time() - run.session_start,
            "train_target_tokens": run.earlier.train_target_tokens + run.loop.session_tokens,
            "timed_train_tokens": run.loop.throughput.total_tokens,
            "timed_train_seconds": run.loop.throughput.total_seconds,
            "stop_reason": run.loop.stop_reason, reruns.EVALUATION_PENDING: evaluation_pending,
            **run.loop.early_stopping.to_progress()}


def _save(run: TrainingRun, *, evaluation_pending: bool = False) -> None:
    """Checkpoint the current step; ``evaluation_pending``: its dev evaluation comes after (not in its bookkeeping)."""
    run.checkpoints.save(run.loop.state, data_state=run.loop.train_iterator.get_state(),
                         progress=_progress(run, evaluation_pending=evaluation_pending))
    run.loop.last_save_time = time.time()
    if run.lock is not None:
        run.lock.refresh()


def _time_to_save(run: TrainingRun) -> bool:
    minutes = run.experiment.run.checkpoint_every_minutes
    due = minutes > 0 and time.time() - run.loop.last_save_time >= 60.0 * minutes
    return distributed.all_processes_agree(due)  # Processes' clocks differ: process 0 decides.


def _new_shapes(run: TrainingRun, micro_batches: list[Batch]) -> bool:
    """Whether this step's batch shapes (per micro-batch role) were not compiled yet; records them."""
    last = len(micro_batches) - 1
    keys = {(min(index, 1) if index < last else 2,
             tuple((batch["inputs"] if "inputs" in batch else batch["targets"]).shape),
             tuple(batch["targets"].shape)) for index, batch in enumerate(micro_batches)}
    new = not keys <= run.loop.compiled_shapes
    run.loop.compiled_shapes |= keys
    return new


def _train(run: TrainingRun, stop: distributed.StopRequest) -> bool:
    """Run updates until ``num_train_steps`` or a stop request; returns whether training finished.

    At most one step is queued behind the one the device runs: after dispatching step n the host
    waits for step n - 1, so a stop request (SIGTERM) is honoured within a step instead of after
    every step the host had run ahead. The losses are fetched and checked only at log, evaluation
    and checkpoint steps (a non-finite one raises before anything is saved). Train metrics are
    reported every ``log_every_steps``.

    An evaluation step is checkpointed before its evaluation, so an evaluation that fails or is
    stopped loses no training step; the rerun evaluates that step first (:func:`run_context.build_run`).
    A stop request is honoured between the sampled BLEU's decoding batches too, and an evaluation
    step that a stop request ends is checkpointed without being evaluated.
    """
    config = run.experiment.run
    step = int(run.loop.state.step)
    untimed: set[int] = set()  # Steps that compiled a new batch shape.
    unchecked: list[tuple[int, MetricSums]] = []  # Device metrics not yet fetched.
    unreported: list[tuple[int, dict]] = []  # Host metrics checked but not yet logged.
    previous: MetricSums | None = None  # The metrics of the step before, while it may still run.
    profiler = profiling.StepProfiler.from_config(config, run.workdir)  # config.profile_steps > 0: a trace.
    if step < config.num_train_steps and run.loop.stop_reason is None and run.loop.throughput.peak is None:
        _choose_peak(run)
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
        run.loop.state, sums = run_update(run.steps, run.loop.state, micro_batches)
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
            _report_train(run, unreported, run.loop.throughput.close_interval())
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
    """The dev evaluation of ``step``, then early stopping's verdict; False when a stop request ended it.

    A stop request is honoured between the sampled BLEU's decoding batches; nothing of the stopped
    evaluation is recorded, and its step's checkpoint (written before) says it is still to do.
    """
    if run_evaluation.evaluate(run, step, should_stop=run_evaluation.stop_check(stop, step)) is None:
        return False
    if run.loop.early_stopping.should_stop and run.loop.stop_reason is None:
        run.loop.stop_reason = early_stopping.STOPPED_EARLY
        logging.info("Early stopping at step %d: %s.", step, run.loop.early_stopping.stop_description())
    return True


def _choose_peak(run: TrainingRun) -> None:
    """Set the peak that MFU divides by (:mod:`~attention_jax.training.device_peaks`) and log which it is."""
    device_kind, dtype = jax.devices()[0].device_kind, run.experiment.model.dtype
    run.loop.throughput.peak = device_peaks.device_peak(device_kind, dtype, run.experiment.run.peak_tflops_per_device)
    logging.info("MFU against %s.", run.loop.throughput.peak.describe(device_kind, dtype, jax.device_count()))


# --- Entry point ------------------------------------------------------------------------------------

def _results(run: TrainingRun) -> dict[str, Any]:
    experiment = run.experiment
    return {
        "name": experiment.name,
        "paper": experiment.to_json_dict()["paper"],
        "step": int(run.loop.state.step),
        "train_loss": run.loop.last_train.get("loss"),
        "train_nll_loss": run.loop.last_train.get("nll_loss"),
        "eval_loss": run.loop.last_eval.get("loss"),
        "eval_nll_loss": run.loop.last_eval.get("nll_loss"),
        "eval_ppl": run.loop.last_eval.get("perplexity"),
        "eval_accuracy": run.loop.last_eval.get("accuracy"),
        "bleu": run.loop.last_eval.get("bleu"),  # Sampled: the first num_bleu_examples dev sentences.
        "bleu_signature": run.loop.last_eval.get("bleu_signature"),
        "bleu_num_examples": (run.loop.last_eval.get("bleu_sentences", experiment.run.num_bleu_examples)  # As decoded.
                              if run.loop.last_eval.get("bleu") is not None else None),
        "stop_reason": run.loop.stop_reason,
        **run.loop.early_stopping.to_progress(),
        "params": run.num_params,
        "wall_s": _progress(run)["wall_s"],
        "train_tokens_per_s": run.loop.throughput.tokens_per_s,
        "train_target_tokens": _progress(run)["train_target_tokens"],
        "train_flops": experiment.training_flops(_progress(run)["train_target_tokens"]),
        "devices": jax.device_count(),
        "mesh": dict(run.mesh.shape),
        "fine_tuned_from": run_files.read_fine_tuned_from(run.workdir),
    }


def _write_results(workdir: str, results: dict[str, Any]) -> None:
    if jax.process_index() != 0:
        return
    clean = {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
             for key, value in results.items()}
    run_files.write_json_atomically(os.path.join(workdir, run_files.RESULTS_FILE), clean)


def train_and_evaluate(experiment: Experiment, workdir: str, *, data: TrainingData | None = None) -> dict[str, Any]:
    """Train ``experiment``'s model in ``workdir``, resuming from its latest checkpoint if there is one.

    Parameters
    ----------
    experiment : Experiment
        The checked experiment, built once by the entry point
        (:func:`attention_jax.experiment.sections.build_experiment`).
    workdir : str
        Output directory (layout in :mod:`attention_jax.checkpointing.checkpoints`); rerunning the same command
        resumes.
    data : TrainingData, optional
        The data (:class:`~attention_jax.data.training_data.TrainingData`; default: built from the
        experiment's data section with local rows divisible by the data-parallel devices).

    Returns
    -------
    dict
        The results (also written to ``WORKDIR/results.json`` when training finished); ``"finished"``
        is False when a stop request (SIGTERM) ended the run early.

    Notes
    -----
    Checkpoints are written every ``checkpoint_every_steps``, at the first log step after
    ``checkpoint_every_minutes`` (process 0's clock decides for all), at every evaluation step before
    its evaluation (a failed or stopped evaluation then loses no step; the rerun evaluates it first),
    at the last step, and when SIGTERM or Ctrl-C asks training to stop (it then returns with
    ``finished=False`` within a step of the request, or between two decoding batches of an evaluation's
    BLEU, and ``steps_after_stop_request``). A run whose ``results.json`` shows it finished
    with the same config is not touched: its results are returned with ``already_finished=True``.
    Only one trainer may work in ``workdir`` at a time (:mod:`attention_jax.training.workdir_lock`;
    a second raises :class:`workdir_lock.WorkdirLockedError` naming the first). Raises
    ``ValueError`` if ``workdir`` holds a run of a different model, and :class:`NonFiniteLossError` (a
    :class:`UserInputError` naming the step and the last good checkpoint) when the loss becomes NaN/inf;
    checkpoints written before are kept.
    """
    resume_checks.check_resume_compatible(workdir, experiment)
    finished_before = checkpoints.finished_results(workdir, experiment)
    if finished_before is not None:
        finished_before["reason"] = "the same command ran it to the end"
    else:
        finished_before = reruns.nothing_to_do(workdir, experiment.run)
    if finished_before is not None:  # Checked before the lock: a finished rerun writes nothing.
        logging.info("%s already finished at step %d (%s): nothing to do, no file changed: %s.", workdir,
                     finished_before["step"], finished_before.get("stop_reason"), finished_before["reason"])
        return dict(finished_before, finished=True, already_finished=True)
    setup_checks.check_devices(experiment)
    created = not os.path.exists(workdir)
    lock = workdir_lock.acquire_for_job(workdir)
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


def _remove_if_only_lock(workdir: str) -> None:
    """Remove a work directory this command created when a failure (e.g. a bad corpus) left only its lock."""
    try:
        if jax.process_index() == 0 and os.listdir(workdir) == [run_files.LOCK_FILE]:
            os.remove(os.path.join(workdir, run_files.LOCK_FILE))
            os.rmdir(workdir)
    except OSError:  # Another process or a remote file system: leave it.
        pass


def _train_locked(experiment: Experiment, workdir: str, data: TrainingData | None,
                  lock: workdir_lock.WorkdirLock | None) -> dict[str, Any]:
    """:func:`train_and_evaluate` once the work directory's lock is held.

    The config and tokenizer are written once the data loaded and the checkpoint restored, and only
    when this session trains (or the run has none yet): a rerun that only finishes a run's final
    evaluation changes neither. The results of a finished run keep their training figures; the final
    evaluation's figures are added to them.
    """
    run = run_context.build_run(experiment, workdir, data, lock)
    held_by = reruns.why_nothing_to_train(int(run.loop.state.step), run.loop.stop_reason, run.loop.early_stopping,
                                          experiment.run.num_train_steps)
    if held_by is None or not os.path.exists(os.path.join(workdir, run_files.CONFIG_FILE)):
        checkpoints.write_config(workdir, experiment)
        run.writer.write_hparams(metric_writer.flat_hparams(experiment.to_json_dict()))
    if held_by is None or not os.path.exists(os.path.join(workdir, run_files.TOKENIZER_FILE)):
        checkpoints.write_tokenizer(workdir, run.data.tokenizer.model_proto)
    if held_by is None or resume_checks.read_data_splits(workdir) is None:
        resume_checks.write_data_splits(workdir, run.data.split_fingerprints())
    logging.info("%s: %d parameters, mesh %s, param_sharding=%s, dtype=%s.", experiment.name,
                 run.num_params, dict(run.mesh.shape), experiment.run.param_sharding, experiment.model.dtype)
    previous = reruns.read_finished_results(workdir) if held_by is not None else None
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
            results = dict(previous or _results(run), finished=finished)
            if not finished and stop.completed_at_request is not None:
                results["steps_after_stop_request"] = int(run.loop.state.step) - stop.completed_at_request
            if finished and reruns.pending_final_splits(results, experiment.run):
                evaluated = run_evaluation.final_bleu(run, stop)
                finished = results["finished"] = evaluated is not None
                results.update(evaluated or {})
        if finished:
            _write_results(workdir, results)
            run.writer.write_final(int(run.loop.state.step), results)  # TensorBoard's final/dev_bleu, ...
            logging.info("%s", summary_line(results, workdir))
        ended = metric_writer.FINISHED if finished else metric_writer.STOPPED
    finally:
        run.checkpoints.close()
        run.writer.close(session_status=ended, step=int(run.loop.state.step))
    return results


def summary_line(results: dict[str, Any], workdir: str) -> str:
    """One line to end a run's log: steps, time, best dev figures, final BLEU, where the results are.

    Parameters
    ----------
    results : dict
        The run's results (``results.json``).
    workdir : str
        The run directory.

    Returns
    -------
    str
        E.g. ``"Done: step 40 (early_stopping), 3m12s; best dev perplexity 8.100 at step 30; dev BLEU
        21.35, test BLEU 22.10; results in runs/tiny/results.json"``.
    """
    parts = [f"Done: step {results.get('step')} ({results.get('stop_reason')}), "
             f"{_format_duration(float(results.get('wall_s') or math.nan))}"]
    if results.get("best_eval_ppl") is not None:
        parts.append(f"best dev perplexity {results['best_eval_ppl']:.3f} at step {results.get('best_step')}")
    elif results.get("eval_ppl") is not None:
        parts.append(f"dev perplexity {results['eval_ppl']:.3f}")
    bleu = [f"{name} BLEU {results[f'{name}_bleu']:.2f}" for name in run_files.FINAL_BLEU_SPLITS
            if results.get(f"{name}_bleu") is not None]
    if bleu:
        parts.append(", ".join(bleu))
    parts.append(f"results in {os.path.join(workdir, run_files.RESULTS_FILE)}")
    return "; ".join(parts)
