"""``evaluate``'s figures as TensorBoard scalars at the checkpoint's step (series: docs/quickstart.md)."""

from __future__ import annotations

import os

from absl import logging

from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.foundation import run_files
from attention_jax.training import metric_writer


def _checkpoint_step(workdir: str, checkpoint: str, average_last: int = 0) -> int:
    """Return the training step the evaluated parameters stand for."""
    if average_last > 0:
        return checkpoints.finished_steps(os.path.join(workdir, run_files.CHECKPOINT_DIR))[-1]
    if checkpoint.isdigit():
        return int(checkpoint)
    _, steps = params_checkpoints.checkpoint_candidates(workdir, checkpoint)
    return steps[0]


def series(split: str, checkpoint: str, average_last: int = 0,
           decoding_changes: dict[str, float] | None = None) -> str:
    """Return the tag prefix of one kind of evaluation, e.g. ``evaluate/test`` or ``evaluate/test/averaged/beam1``.

    Parameters
    ----------
    split : str
        The split's data name.
    checkpoint : str
        ``--checkpoint``.
    average_last : int
        ``--average_last``.
    decoding_changes : dict[str, float], optional
        Decoding settings that differ from the run's: ``{"beam": 1, "alpha": 1.0}``.

    Returns
    -------
    str
        The prefix.
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
        The run's directory.
    step : int
        The evaluated checkpoint's step.
    prefix : str
        The tags' prefix (:func:`series`).
    bleu, perplexity : float
        The figures.

    Returns
    -------
    str or None
        The folder written to; ``None``, with a warning, when it could not be written.
    """
    try:
        writer = metric_writer.MetricWriter(workdir, enabled=True, metrics_file=False)
        writer.write(step, prefix, {"bleu": bleu, "perplexity": perplexity})
        writer.close()
    except OSError as error:
        logging.warning("Could not add the figures to %s's TensorBoard (%s); they are in the report.", workdir, error)
        return None
    return os.path.join(workdir, run_files.TENSORBOARD_DIR)
