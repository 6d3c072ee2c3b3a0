"""What a training run reports: log lines with an ETA, a checkpoint's bookkeeping, ``results.json``."""

from __future__ import annotations

import math
import os
import time
from typing import Any

import jax
from absl import logging

from attention_jax.foundation import run_files
from attention_jax.models import metrics
from attention_jax.training import device_peaks, run_context
from attention_jax.training.run_context import TrainingRun
from attention_jax.training.train_state import _logged_gradient_norms


def _format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    hours, minutes, secs = int(seconds) // 3600, int(seconds) // 60 % 60, int(seconds) % 60
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _log_train(run: TrainingRun, pending: list[tuple[int, dict]], rates: device_peaks._IntervalRates) -> None:
    """Log the pending steps' aggregated metrics and the interval's speed (console, jsonl, TensorBoard).

    The ETA adds the last evaluation's time for each evaluation to come.
    """
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
        remaining_s += eval_s * _remaining_evaluations(step, config.num_train_steps, config.eval_every_steps)
    learning_rate = float(run.schedule(step - 1))  # The rate of this step's update (optax counts from 0).
    padding = metrics.padding_fractions(run.loop.token_counts)
    run.loop.token_counts = {}
    run.loop.last_train = dict(summary, learning_rate=learning_rate, tokens_per_s=tokens_per_s,
                               step_time_ms=1e3 * rates.step_time_s, data_wait_ms=1e3 * rates.data_wait_s, mfu=mfu,
                               **_logged_gradient_norms(pending), **padding)
    run.writer.write(step, "train", run.loop.last_train)
    logging.info("step %d/%d | loss %.4f | nll %.4f | acc %.3f | lr %.3g | %.0f tok/s | %.1f ms/step "
                 "(data wait %.1f ms) | MFU %.3g%% | pad %.0f%% | ETA %s",
                 step, config.num_train_steps, summary["loss"], summary["nll_loss"],
                 summary["accuracy"], learning_rate, tokens_per_s, 1e3 * rates.step_time_s,
                 1e3 * rates.data_wait_s, 100 * mfu,
                 100 * padding.get("targets_padding_fraction", math.nan), _format_duration(remaining_s))


def _remaining_evaluations(step: int, num_train_steps: int, eval_every_steps: int) -> int:
    """Return the dev evaluations a run still does after ``step``: every ``eval_every_steps`` and one at the end."""
    if step >= num_train_steps:
        return 0
    periodic = (num_train_steps - 1) // eval_every_steps - step // eval_every_steps if eval_every_steps > 0 else 0
    return periodic + 1


def bookkeeping(run: TrainingRun, *, evaluation_pending: bool = False) -> dict[str, Any]:
    """Return what a checkpoint records besides the state (its ``progress``), over all the run's sessions.

    Parameters
    ----------
    run : TrainingRun
        The run, at the step being saved.
    evaluation_pending : bool
        Whether this step's dev evaluation comes after the save.

    Returns
    -------
    dict
        Wall time, tokens, throughput, ``stop_reason``, the pending flag and early stopping's figures.
    """
    return {"wall_s": run.earlier.wall_s + time.time() - run.session_start,
            "train_target_tokens": run.earlier.train_target_tokens + run.loop.session_tokens,
            "timed_train_tokens": run.loop.throughput.total_tokens,
            "timed_train_seconds": run.loop.throughput.total_seconds,
            "stop_reason": run.loop.stop_reason, run_context.EVALUATION_PENDING: evaluation_pending,
            **run.loop.early_stopping.to_progress()}


def _choose_peak(run: TrainingRun) -> None:
    """Set ``run.loop.throughput.peak``, the peak MFU divides by, and log it."""
    device_kind, dtype = jax.devices()[0].device_kind, run.experiment.model.dtype
    run.loop.throughput.peak = device_peaks._device_peak(device_kind, dtype, run.experiment.run.peak_tflops_per_device)
    logging.info("MFU against %s.", run.loop.throughput.peak.describe(device_kind, dtype, jax.device_count()))


def _run_results(run: TrainingRun) -> dict[str, Any]:
    """Return the run's figures as ``results.json`` holds them, before the final BLEU."""
    experiment = run.experiment
    sessions = bookkeeping(run)  # Read once: wall time and tokens of the same moment.
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
        "wall_s": sessions["wall_s"],
        "train_tokens_per_s": run.loop.throughput.tokens_per_s,
        "train_target_tokens": sessions["train_target_tokens"],
        "train_flops": experiment.training_flops(sessions["train_target_tokens"]),
        "devices": jax.device_count(),
        "device_kind": jax.devices()[0].device_kind,
        "processor": device_peaks._processor_model(),  # Where it ran: XLA's CPU code depends on it.
        "mesh": dict(run.mesh.shape),
        "fine_tuned_from": run_files.read_fine_tuned_from(run.workdir),
    }


def _write_results(workdir: str, results: dict[str, Any]) -> None:
    """Write ``results.json`` atomically on process 0, non-finite floats as ``null``."""
    if jax.process_index() != 0:
        return
    clean = {key: (None if isinstance(value, float) and not math.isfinite(value) else value)
             for key, value in results.items()}
    run_files.write_json_atomically(os.path.join(workdir, run_files.RESULTS_FILE), clean)


def _summary_line(results: dict[str, Any], workdir: str) -> str:
    """Return the line that ends a run's log: steps, time, best dev figures, final BLEU, where the results are."""
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
