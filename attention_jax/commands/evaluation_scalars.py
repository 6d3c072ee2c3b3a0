"""The figures of ``python -m attention_jax.evaluate`` as TensorBoard scalars of the run it evaluates.

A whole-split evaluation adds ``evaluate/<split>/bleu`` and ``evaluate/<split>/perplexity`` to the run's
own event files (``WORKDIR/tensorboard``), at the step of the evaluated checkpoint, so evaluating several
steps draws a curve beside training's and the HParams tab gets them as metric columns. Parameters that
are not one training checkpoint, and decoding settings other than the run's, get series of their own:
``evaluate/test/averaged/bleu`` (``--checkpoint=averaged``), ``evaluate/test/best/bleu``,
``evaluate/test/average_last5/bleu``, ``evaluate/test/beam1/bleu`` (``--beam_size=1``),
``evaluate/test/averaged/beam8_alpha1/bleu``. The split is named as in the report's file name
(``validation`` for ``--split=dev``).
"""

from __future__ import annotations

import os

from absl import logging

from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.foundation import run_files
from attention_jax.training import metric_writer


def checkpoint_step(workdir: str, checkpoint: str, average_last: int = 0) -> int:
    """The training step the evaluated parameters stand for.

    Parameters
    ----------
    workdir : str
        The run's directory.
    checkpoint : str
        ``--checkpoint``: ``latest``, ``averaged``, ``best`` or a step number.
    average_last : int
        ``--average_last``; when positive it replaces ``checkpoint``.

    Returns
    -------
    int
        The step number itself, the newest checkpoint for ``latest`` and for an average of the last
        checkpoints, the newest averaged step for ``averaged``, and the step of the lowest dev
        perplexity kept for ``best``.
    """
    if average_last > 0:
        return checkpoints.finished_steps(os.path.join(workdir, run_files.CHECKPOINT_DIR))[-1]
    if checkpoint.isdigit():
        return int(checkpoint)
    _, steps = params_checkpoints.checkpoint_candidates(workdir, checkpoint)
    return steps[0]


def series(split: str, checkpoint: str, average_last: int = 0,
           decoding_changes: dict[str, float] | None = None) -> str:
    """The tag prefix of one kind of evaluation, e.g. ``evaluate/test`` or ``evaluate/test/averaged/beam1``.

    Parameters
    ----------
    split : str
        The split's data name (``validation``, ``test``, ``train``).
    checkpoint : str
        ``--checkpoint``.
    average_last : int
        ``--average_last``.
    decoding_changes : dict[str, float], optional
        Decoding settings that differ from the run's config: ``{"beam": 1, "alpha": 1.0}``.

    Returns
    -------
    str
        ``evaluate/<split>``, then the checkpoint's label unless it is one training checkpoint
        (``latest`` or a step), then the changed settings as ``<name><value>`` joined by ``_``.
    """
    parts = ["evaluate", split]
    if average_last > 0 or not (checkpoint == "latest" or checkpoint.isdigit()):
        parts.append(run_files.checkpoint_label(checkpoint, average_last))
    if decoding_changes:
        parts.append("_".join(f"{name}{value:g}" for name, value in decoding_changes.items()))
    return "/".join(parts)


def write(workdir: str, step: int, prefix: str, bleu: float, perplexity: float) -> str | None:
    """Add one evaluation's BLEU and perplexity to the run's TensorBoard event files.

    Parameters
    ----------
    workdir : str
        The run's directory (its ``tensorboard/`` folder gets a new event file).
    step : int
        The evaluated checkpoint's step (:func:`checkpoint_step`).
    prefix : str
        The tags' prefix (:func:`series`).
    bleu, perplexity : float
        The figures.

    Returns
    -------
    str or None
        The folder written to, or ``None`` when it could not be written (a warning says why: the
        figures are in the report already).

    Notes
    -----
    TensorBoard only; the run's ``metrics.jsonl`` (training's record) is not touched. A trainer that
    still runs in ``workdir`` writes its own event file beside this one.
    """
    try:
        writer = metric_writer.MetricWriter(workdir, enabled=True, metrics_file=False)
        writer.write(step, prefix, {"bleu": bleu, "perplexity": perplexity})
        writer.close()
    except OSError as error:
        logging.warning("Could not add the figures to %s's TensorBoard (%s); they are in the report.", workdir, error)
        return None
    return os.path.join(workdir, run_files.TENSORBOARD_DIR)
