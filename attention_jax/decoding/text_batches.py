"""Sentences as a padded batch of ids, ``{"inputs": [B, S], "targets": [B, T]}``, rows ending in EOS (no BOS).

For a notebook, a test or an exported function's fixed shape; training batches: :mod:`attention_jax.data.batching`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attention_jax.decoding.decode import TextCodec
from attention_jax.models.model import PAD_ID


def _pad_ids(rows: Sequence[Sequence[int]], length: int = 0) -> np.ndarray:
    """Right-pad id rows with 0 into int32 ``[len(rows), length or longest]``; a longer row raises ``ValueError``."""
    width = length or max((len(row) for row in rows), default=1)
    batch = np.full((len(rows), width), PAD_ID, np.int32)
    for index, row in enumerate(rows):
        if len(row) > width:
            raise ValueError(f"row {index} has {len(row)} ids, more than the batch's length {width}.")
        batch[index, :len(row)] = row
    return batch


def encode_batch(tokenizer: TextCodec, sources: Sequence[str], targets: Sequence[str] | None = None, *,
                 source_len: int = 0, target_len: int = 0) -> dict[str, np.ndarray]:
    """Tokenize sentences (and their translations) into a padded batch.

    Parameters
    ----------
    tokenizer : TextCodec
        ``run.tokenizer``.
    sources : Sequence[str]
        Source sentences.
    targets : Sequence[str], optional
        Their translations.
    source_len, target_len : int
        Padded lengths ``S`` and ``T``; 0: the longest row's.

    Returns
    -------
    dict[str, np.ndarray]
        ``inputs`` int32 ``[B, S]`` and, with targets, ``targets`` int32 ``[B, T]``.

    Raises
    ------
    ValueError
        For a sentence longer than asked for, or not one target per source.
    """
    batch = {"inputs": _pad_ids([tokenizer.encode(text) for text in sources], source_len)}
    if targets is not None:
        if len(targets) != len(sources):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets: give one translation per source.")
        batch["targets"] = _pad_ids([tokenizer.encode(text) for text in targets], target_len)
    return batch
