"""A loaded run's attention maps for one sentence: ``attention_jax.attention_maps(run, text)``."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from attention_jax.evaluation import attention_maps as maps_of_model

if TYPE_CHECKING:
    from attention_jax.decoding.inference import TrainedRun


def attention_maps(run: TrainedRun, source: str, target: str | None = None, *,
                   beam_size: int | None = None) -> dict[str, Any]:
    """Return every attention weight of ``run``'s model for ``source`` and ``target`` (or the run's translation).

    Parameters
    ----------
    run : TrainedRun
        From ``attention_jax.load_run``.
    source : str
        The source sentence.
    target : str, optional
        Teacher-forced target; ``None`` translates ``source``.
    beam_size : int, optional
        With ``target=None``: instead of the run's (1: greedy).

    Returns
    -------
    dict
        As :func:`attention_jax.evaluation.attention_maps.attention_maps`.
    """
    settings = run.config.decoding
    if beam_size is not None:
        settings = dataclasses.replace(settings, beam_size=beam_size)
    return maps_of_model.attention_maps(run.model_config, run.params, run.tokenizer, source, target,
                                        settings=settings)
