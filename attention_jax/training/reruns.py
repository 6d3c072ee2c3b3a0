"""What rerunning the training command on a work directory does: train on, finish, or nothing (docs/faults.md)."""

from __future__ import annotations

import json
import os
from typing import Any

from attention_jax.checkpointing import checkpoints
from attention_jax.experiment.sections import RunConfig
from attention_jax.foundation import run_files
from attention_jax.training import early_stopping

EVALUATION_PENDING = "evaluation_pending"
"""Bookkeeping key: true when the checkpoint precedes its step's dev evaluation (early stopping lacks it)."""


def why_nothing_to_train(step: int, stop_reason: str | None, tracker: early_stopping.EarlyStopping,
                         num_train_steps: int) -> str | None:
    """Return why a run at ``step`` has no step left to train (and how to train on), or ``None`` when it trains on.

    Parameters
    ----------
    step : int
        The newest checkpoint's step.
    stop_reason : str or None
        The checkpoint's ``stop_reason``.
    tracker : early_stopping.EarlyStopping
        Early stopping restored with the new config's patience.
    num_train_steps : int
        The new config's (a run is never cut back).

    Returns
    -------
    str or None
        The reason.
    """
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


def pending_final_splits(results: dict[str, Any], config: RunConfig) -> list[str]:
    """Return the splits ``config.final_bleu`` asks to decode that ``results`` (``results.json``) has no figures for.

    Parameters
    ----------
    results : dict
        A finished run's results.
    config : RunConfig
        The new command's run section.

    Returns
    -------
    list[str]
        Names from ``run_files.FINAL_BLEU_SPLITS``.
    """
    if not config.final_bleu:
        return []
    done = set(results.get("final_bleu_splits") or [])
    return [name for name in run_files.final_bleu_splits(config.final_bleu_splits)
            if name not in done and results.get(f"{name}_bleu") is None]


def read_finished_results(workdir: str) -> dict[str, Any] | None:
    """Return ``WORKDIR/results.json`` when it records a finished run, else ``None``.

    Parameters
    ----------
    workdir : str
        A training work directory.

    Returns
    -------
    dict or None
        The results.
    """
    path = os.path.join(workdir, run_files.RESULTS_FILE)
    try:
        with open(path, encoding="utf-8") as file:
            results = json.load(file)
    except (OSError, ValueError):
        return None
    if not isinstance(results, dict) or not results.get("finished"):
        return None
    return results if describes_newest_checkpoint(workdir, results) else None


def describes_newest_checkpoint(workdir: str, results: dict[str, Any]) -> bool:
    """Return whether finished ``results`` are the newest checkpoint's (True without one), not a run extended since.

    Parameters
    ----------
    workdir : str
        A training work directory.
    results : dict
        Its ``results.json``.

    Returns
    -------
    bool
        False for a newer checkpoint or a raised ``num_train_steps``.
    """
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


def discard_results(workdir: str) -> None:
    """Remove ``WORKDIR/results.json`` before a run trains on: a finished record would contradict it.

    Parameters
    ----------
    workdir : str
        A training work directory.
    """
    try:
        os.remove(os.path.join(workdir, run_files.RESULTS_FILE))
    except FileNotFoundError:
        pass


def nothing_to_do(workdir: str, config: RunConfig) -> dict[str, Any] | None:
    """Return a finished run's results with the ``reason`` a rerun does nothing; reads files only (before the lock).

    Parameters
    ----------
    workdir : str
        The work directory.
    config : RunConfig
        The new command's run section.

    Returns
    -------
    dict or None
        ``None`` when the rerun trains on or finishes an evaluation.
    """
    results = read_finished_results(workdir)
    latest = checkpoints.latest_progress(workdir)
    if results is None or latest is None:
        return None
    step, progress = latest
    progress = with_logged_evaluation(progress, logged_figures(workdir, step)[1], config)
    tracker = early_stopping.EarlyStopping.from_config(config, progress)
    reason = why_nothing_to_train(step, progress.get("stop_reason"), tracker, config.num_train_steps)
    if reason is None or pending_final_splits(results, config):
        return None
    return dict(results, reason=reason)


def with_logged_evaluation(progress: dict[str, Any], logged_eval: dict[str, Any], config: RunConfig) -> dict[str, Any]:
    """Return a checkpoint's bookkeeping with its step's logged dev evaluation added, if it came first.

    Parameters
    ----------
    progress : dict
        The checkpoint's bookkeeping.
    logged_eval : dict
        That step's logged evaluation (:func:`logged_figures`); ``{}`` when none.
    config : RunConfig
        The run section (early stopping).

    Returns
    -------
    dict
        ``progress``, or a copy counting the logged perplexity with ``EVALUATION_PENDING`` false.
    """
    if not progress.get(EVALUATION_PENDING) or not logged_eval:
        return progress
    tracker = early_stopping.EarlyStopping.from_config(config, progress)
    if "perplexity" in logged_eval:  # Logged as null when it was not finite: it counts, never improving.
        perplexity = logged_eval["perplexity"]
        tracker.update(int(logged_eval["step"]), float("nan") if perplexity is None else float(perplexity))
    stop_reason = progress.get("stop_reason")
    if stop_reason is None and tracker.should_stop:
        stop_reason = early_stopping.STOPPED_EARLY
    return dict(progress, **tracker.to_progress(), stop_reason=stop_reason, **{EVALUATION_PENDING: False})


def logged_figures(workdir: str, step: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the last train figures logged at or before ``step`` and the dev evaluation logged at ``step``.

    Parameters
    ----------
    workdir : str
        A training work directory.
    step : int
        The step a run resumes from.

    Returns
    -------
    tuple of (dict, dict)
        ``train`` and ``eval`` values unprefixed (``{}`` when none); the evaluation carries ``step``.
    """
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
