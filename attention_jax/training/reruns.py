"""What rerunning the training command on an existing work directory does: train on, finish, or nothing.

A work directory records how far its run got: the newest checkpoint's step and bookkeeping (its
``stop_reason`` and early-stopping counts), ``metrics.jsonl`` and, once the run finished,
``results.json``. A rerun, with the same config or a changed one, does exactly one of three things:

- **train on** when the new config leaves steps to train: ``num_train_steps`` above the checkpoint's
  step, and early stopping (if it had ended the run) no longer stops it, e.g. after raising
  ``early_stopping_patience``;
- **finish** when training is complete but its final evaluation is not: a run stopped during the final
  whole-split BLEU, or a finished run rerun with ``final_bleu=True``. Only the evaluation runs; the
  training figures of ``results.json`` are kept (or recovered from ``metrics.jsonl``) and the new
  figures are added to them;
- **nothing**, changing no file and saying why (:func:`nothing_to_do`): the run reached its
  ``num_train_steps``, went past a lowered one (a run is never cut back), or early stopping still
  ends it.

An evaluation step is checkpointed before it is evaluated (an evaluation that fails then loses no
training step), so the checkpoint's bookkeeping says the evaluation is still to come
(:data:`EVALUATION_PENDING`); whoever reads it adds the evaluation that ``metrics.jsonl`` logged at that
step (:func:`with_logged_evaluation`), so that the best step, early stopping and the final figures
all count it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from attention_jax.checkpointing import checkpoints
from attention_jax.experiment.sections import RunConfig
from attention_jax.foundation import run_files
from attention_jax.training import early_stopping

EVALUATION_PENDING = "evaluation_pending"
"""The key of a checkpoint's bookkeeping that is true when the checkpoint was written before its step's dev
evaluation: its early-stopping figures do not count that evaluation yet. Older checkpoints lack it."""


def why_nothing_to_train(step: int, stop_reason: str | None, tracker: early_stopping.EarlyStopping,
                         num_train_steps: int) -> str | None:
    """Why a run at ``step`` has no step left to train up to ``num_train_steps``, or ``None`` when it trains on.

    Parameters
    ----------
    step : int
        The step of the newest checkpoint.
    stop_reason : str or None
        The checkpoint's ``stop_reason`` (``early_stopping.STOPPED_EARLY`` when patience ran out).
    tracker : early_stopping.EarlyStopping
        The early-stopping state restored with the new config's patience.
    num_train_steps : int
        The new command's ``config.num_train_steps``.

    Returns
    -------
    str or None
        A sentence naming what holds the run and how to train on.
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
    """The splits ``config.final_bleu`` asks to decode that ``results`` has no figures for.

    Parameters
    ----------
    results : dict
        A finished run's ``results.json``.
    config : RunConfig
        The new command's run section (``final_bleu``, ``final_bleu_splits``).

    Returns
    -------
    list[str]
        Names from ``run_files.FINAL_BLEU_SPLITS`` (empty without ``final_bleu``).
    """
    if not config.final_bleu:
        return []
    done = set(results.get("final_bleu_splits") or [])
    return [name for name in run_files.final_bleu_splits(config.final_bleu_splits)
            if name not in done and results.get(f"{name}_bleu") is None]


def read_finished_results(workdir: str) -> dict[str, Any] | None:
    """``WORKDIR/results.json`` when it records a finished run, else ``None``.

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
    """Whether finished ``results`` are those of the run's newest checkpoint, not of a run extended since.

    Parameters
    ----------
    workdir : str
        A training work directory.
    results : dict
        Its ``results.json``.

    Returns
    -------
    bool
        False when a newer checkpoint exists (an extension stopped or killed after it trained on), or when
        the results say the run reached ``num_train_steps`` below the ``config.json`` an extension wrote
        before its first new checkpoint; True when there is no checkpoint to compare with.
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
    """Remove ``WORKDIR/results.json`` before a run trains on: a finished record would contradict the extension.

    Parameters
    ----------
    workdir : str
        A training work directory (process 0 writes it).
    """
    try:
        os.remove(os.path.join(workdir, run_files.RESULTS_FILE))
    except FileNotFoundError:
        pass


def nothing_to_do(workdir: str, config: RunConfig) -> dict[str, Any] | None:
    """A finished run's results with the ``reason`` a rerun under ``config`` does nothing, else ``None``.

    Parameters
    ----------
    workdir : str
        The work directory.
    config : RunConfig
        The new command's run section, the run's own or a changed one (:func:`checkpoints.finished_results`
        answers for the run's own config alone, and ``train`` asks it first).

    Returns
    -------
    dict or None
        ``results.json`` plus ``reason`` when the run finished, has no step left to train under
        ``config`` (:func:`why_nothing_to_train`) and no final evaluation it asks for is missing;
        ``None`` when the rerun trains on or finishes an evaluation (or there is no finished run).

    Notes
    -----
    Reads files only, so the caller can return before taking the work directory's lock.
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
    """A checkpoint's bookkeeping with the dev evaluation of its step added, when the checkpoint came first.

    Parameters
    ----------
    progress : dict
        The checkpoint's bookkeeping (``TrainingCheckpoints.restore_latest``'s ``progress``).
    logged_eval : dict
        The evaluation ``metrics.jsonl`` logged at the checkpoint's step (:func:`logged_figures`), ``{}``
        when none finished.
    config : RunConfig
        The command's run section (early stopping's patience and thresholds).

    Returns
    -------
    dict
        ``progress`` itself when it counts the evaluation already or none was logged (then
        :data:`EVALUATION_PENDING` stays true: the evaluation is still to do). Otherwise a copy whose
        early-stopping figures count the logged perplexity, whose ``stop_reason`` is
        ``early_stopping.STOPPED_EARLY`` when that evaluation ran out ``config``'s patience, and whose
        :data:`EVALUATION_PENDING` is false.

    Notes
    -----
    The parameters of a best evaluation were kept in ``WORKDIR/best/`` before its figures were logged,
    so they need no replay.
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
    """The last train figures logged at or before ``step`` and the dev evaluation logged at ``step``.

    Parameters
    ----------
    workdir : str
        A training work directory (``metrics.jsonl``).
    step : int
        The step a run resumes from.

    Returns
    -------
    (dict, dict)
        ``train`` and ``eval`` values without their prefixes, each empty when none was logged; the
        evaluation carries ``step``. A resumed run reports these in ``results.json`` instead of
        ``null`` when it trains no step itself.
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
