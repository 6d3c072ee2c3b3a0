"""Evaluation inside a training run: dev loss, perplexity and sampled BLEU, the best checkpoints, the final BLEU."""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any, Callable

import jax
from absl import logging

from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.evaluation import progress
from attention_jax.foundation import run_files
from attention_jax.models import metrics
from attention_jax.models.variants import ModelKind
from attention_jax.training import distributed, sharding
from attention_jax.training.run_context import TrainingRun


def evaluate(run: TrainingRun, step: int, *,
             should_stop: Callable[[], bool] | None = None) -> dict[str, Any] | None:
    """Return the dev loss, per-token perplexity and accuracy, and sampled BLEU when decoding is available.

    Parameters
    ----------
    run : TrainingRun
        The run; its current parameters are evaluated.
    step : int
        Step to file the metrics under.
    should_stop : Callable[[], bool], optional
        Asked between the sampled BLEU's decoding batches.

    Returns
    -------
    dict or None
        ``None`` when stopped (nothing recorded); else the metrics, ``seconds`` and ``run_wall_s``.
    """
    started = time.time()
    totals = _dev_sums(run, step)
    summary = metrics.summarize(jax.device_get(totals)) if totals is not None else {}
    sampled = _bleu(run, step, should_stop)
    if sampled is None:
        return None
    bleu, samples = sampled
    summary.update(bleu)
    _write_sample_translations(run, step, samples)
    summary["seconds"] = time.time() - started
    summary["run_wall_s"] = run.earlier.wall_s + started - run.session_start  # When it began; earlier evals included.
    if "perplexity" in summary:
        _track_best(run, step, summary["perplexity"])
    run.loop.last_eval = dict(summary, step=step)
    run.writer.write(step, "eval", summary)
    logging.info("eval at step %d | loss %.4f | nll %.4f | ppl %.3f | acc %.3f%s", step,
                 summary.get("loss", math.nan), summary.get("nll_loss", math.nan),
                 summary.get("perplexity", math.nan), summary.get("accuracy", math.nan),
                 f" | sampled BLEU {summary['bleu']:.2f} ({summary['bleu_sentences']} dev sentences)"
                 if "bleu" in summary else "")
    return summary


def _dev_sums(run: TrainingRun, step: int) -> Any:
    """Return the summed dev metrics, one batch in flight."""
    batches = run.eval_batches
    report = progress.progress_logger(f"dev evaluation at step {step}", len(batches), unit="batches",
                                      always_final=False)
    totals, previous = None, None
    for done, batch in enumerate(batches):
        sums = run.steps.evaluate(run.loop.state.params, sharding.global_batch(batch, run.steps.batch_sharding))
        totals = sums if totals is None else metrics.add_sums(totals, sums)
        if previous is not None:
            jax.block_until_ready(previous)
            report(done)
        previous = totals
    if previous is not None:
        jax.block_until_ready(previous)
        report(len(batches))
    return totals


def _replicated_params(run: TrainingRun) -> Any:
    """Return the current parameters replicated on every device."""
    return jax.jit(lambda tree: tree, out_shardings=sharding.replicated(run.mesh))(run.loop.state.params)


def _track_best(run: TrainingRun, step: int, perplexity: float) -> None:
    """Update the best dev perplexity; with early stopping keep the k lowest-perplexity parameters (for "best k")."""
    run.loop.early_stopping.update(step, perplexity)
    if run.loop.early_stopping.patience > 0:
        params_checkpoints.keep_if_among_best(os.path.join(run.workdir, run_files.BEST_DIR), step, perplexity,
                                              lambda: _replicated_params(run),
                                              keep=max(1, run.experiment.run.average_last_checkpoints))


_WARNED_NO_DECODING: list[bool] = []


_SampleTranslation = tuple[str, str, str]  # (source, reference, translation)


def _stop_check(stop: distributed.StopRequest, step: int) -> Callable[[], bool] | None:
    """Return the check, between decoding batches, whether a stop was requested.

    None with several processes: they agree on a stop at training steps only.
    """
    return (lambda: stop.should_stop(step)) if jax.process_count() == 1 else None


def _bleu(run: TrainingRun, step: int, should_stop: Callable[[], bool] | None = None
          ) -> tuple[dict[str, Any], list[_SampleTranslation]] | None:
    """Return sampled dev BLEU and its translations: ``({}, [])`` without it, ``None`` when stopped."""
    count = run.experiment.run.num_bleu_examples
    if count <= 0:
        return {}, []
    try:
        from attention_jax.decoding import decode  # The decoding side; optional here.
        from attention_jax.evaluation import translation_quality
    except ImportError as error:
        if not _WARNED_NO_DECODING:
            logging.warning("BLEU skipped: decoding modules unavailable (%s).", error)
            _WARNED_NO_DECODING.append(True)
        return {}, []
    pairs = run.data.text_pairs(run.experiment.data.eval_split, max_pairs=count)
    if not pairs:
        return {}, []
    translator = decode.Translator(run.experiment.model, _replicated_params(run), run.data.tokenizer,
                                   settings=run.experiment.decoding)
    what = f"sampled dev BLEU at step {step}"
    try:
        with progress.timed_phase(what, len(pairs)):  # A start and an end line; ETA lines between when long.
            hypotheses = translation_quality.translate_stoppably(  # The same translations as translator.translate.
                translator, [source for source, _ in pairs], should_stop=should_stop,
                report_progress=progress.progress_logger(what, len(pairs), always_final=False))
    except translation_quality.EvaluationStopped as stopped:
        logging.warning("Stopped the evaluation of step %d on request during its sampled dev BLEU (%s); its "
                        "checkpoint is saved: rerun the same command to evaluate it and go on.", step, stopped)
        return None
    score, signature = translation_quality.corpus_bleu(hypotheses, [target for _, target in pairs])
    for (source, target), hypothesis in list(zip(pairs, hypotheses))[:2]:
        logging.info("  src: %s\n  ref: %s\n  hyp: %s", source, target, hypothesis)
    samples = [(source, target, hypothesis) for (source, target), hypothesis in zip(pairs, hypotheses)]
    return {"bleu": float(score), "bleu_signature": signature, "bleu_sentences": len(pairs)}, samples


def _write_sample_translations(run: TrainingRun, step: int, sampled: list[_SampleTranslation]) -> None:
    """Write dev translations to TensorBoard (the sampled-BLEU ones, else greedy; none for an LM)."""
    count = run.experiment.run.num_sample_translations
    if count <= 0 or run.experiment.model_kind == ModelKind.DECODER_ONLY:
        return
    samples = sampled[:count]
    if not samples:
        try:
            from attention_jax.decoding import decode  # The decoding side; optional here.
        except ImportError:
            return
        pairs = run.data.text_pairs(run.experiment.data.eval_split, max_pairs=count)
        if not pairs:
            return
        greedy = dataclasses.replace(run.experiment.decoding, beam_size=1)
        translator = decode.Translator(run.experiment.model, _replicated_params(run), run.data.tokenizer,
                                       settings=greedy)
        hypotheses = translator.translate([source for source, _ in pairs])
        samples = [(source, target, hypothesis) for (source, target), hypothesis in zip(pairs, hypotheses)]
    run.writer.write_table(step, "eval/sample_translations", ("source", "reference", "translation"), samples)


def _final_params(run: TrainingRun) -> tuple[Any, str]:
    """Return the parameters whose BLEU counts and their name (Section 6.1's average, or the best)."""
    count = run.experiment.run.average_last_checkpoints
    if run.loop.early_stopping.patience > 0:
        best = checkpoints.finished_steps(os.path.join(run.workdir, run_files.BEST_DIR))
        if best:
            params, steps = params_checkpoints.average_last_params(
                run.workdir, min(max(count, 1), len(best)), directory_name=run_files.BEST_DIR)
            return params, f"best {len(steps)} (steps {steps})" if len(steps) > 1 else f"best (step {steps[0]})"
    if count > 1:
        saved = checkpoints.finished_steps(os.path.join(run.workdir, run_files.CHECKPOINT_DIR))
        if len(saved) >= count:
            params, steps = params_checkpoints.average_last_params(run.workdir, count)
            return params, f"average of steps {steps}"
        logging.warning("Final BLEU from the last parameters: %d checkpoints to average, %d kept "
                        "(config.keep_checkpoints).", count, len(saved))
    return _replicated_params(run), f"step {int(run.loop.state.step)}"


def final_bleu(run: TrainingRun, stop: distributed.StopRequest) -> dict[str, Any] | None:
    """Return the beam-search BLEU and perplexity of whole splits; writes ``eval_<split>.json`` as ``evaluate`` does.

    Parameters
    ----------
    run : TrainingRun
        The run, after its last step.
    stop : distributed.StopRequest
        Honoured between decoding batches.

    Returns
    -------
    dict or None
        ``<split>_bleu``, signatures, perplexities, counts, ``final_checkpoint``; ``None`` when stopped.
    """
    from attention_jax.decoding import decode  # The decoding side.
    from attention_jax.evaluation import translation_quality

    run.checkpoints.wait()  # Averaging reads the checkpoints from disk.
    params, described = _final_params(run)
    settings = run.experiment.decoding
    translator = decode.Translator(run.experiment.model, params, run.data.tokenizer, settings=settings)
    names = run_files.final_bleu_splits(run.experiment.run.final_bleu_splits)
    results: dict[str, Any] = {"final_checkpoint": described, "final_bleu_splits": list(names)}
    split_of = {"dev": run.experiment.data.eval_split, "test": run.experiment.data.test_split}
    should_stop = _stop_check(stop, int(run.loop.state.step))
    for name, split in ((name, split_of[name]) for name in names):
        pairs = run.data.text_pairs(split)
        if not pairs:
            continue
        started = time.time()
        try:
            evaluated = translation_quality.evaluate(
                translator, pairs, should_stop=should_stop,
                report_progress=progress.progress_logger(f"final {name} BLEU", len(pairs)),
                progress_name=f"final {name}")
        except translation_quality.EvaluationStopped as stopped:
            logging.warning("Stopped the final %s evaluation on request (%s); training is complete: rerun the "
                            "same command to finish the evaluation only.", name, stopped)
            return None
        results.update({f"{name}_bleu": evaluated.bleu, f"{name}_bleu_signature": evaluated.bleu_signature,
                        f"{name}_ppl": evaluated.perplexity, f"{name}_sentences": len(pairs)})
        if jax.process_index() == 0:
            report = dict(split=split, checkpoint=described, name=run.experiment.name,
                          **evaluated.summary(), wall_s=round(time.time() - started, 2))
            translation_quality.write_report(run_files.eval_report_path(run.workdir, split), report,
                                             evaluated.hypotheses, pairs)
        logging.info("final %s BLEU %.2f, perplexity %.3f on %d sentences (%s, beam %d).", name,
                     evaluated.bleu, evaluated.perplexity, len(pairs), described, settings.beam_size)
    return results
