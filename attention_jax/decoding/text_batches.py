"""Sentences as a batch of token ids, as the model takes them: ``{"inputs": [B, S], "targets": [B, T]}``.

Rows end in EOS (no BOS: the model prepends it) and are 0-padded on the right; for a notebook, a test or an
exported function's fixed shape (training batches come from :mod:`attention_jax.data.batching`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attention_jax.decoding.decode import TextCodec
from attention_jax.models.model import PAD_ID


def pad_ids(rows: Sequence[Sequence[int]], length: int = 0) -> np.ndarray:
    """Right-pad id sequences with 0 into one int32 array.

    Parameters
    ----------
    rows : Sequence[Sequence[int]]
        Token ids, one sequence per row.
    length : int
        The padded length; 0: the longest row's.

    Returns
    -------
    np.ndarray
        int32 ``[len(rows), length]``.

    Raises
    ------
    ValueError
        For a row longer than ``length``.
    """
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
        Source sentences, one row each.
    targets : Sequence[str], optional
        Their translations; without them the batch holds ``inputs`` alone.
    source_len, target_len : int
        Padded lengths ``S`` and ``T``; 0: the longest row's.

    Returns
    -------
    dict[str, np.ndarray]
        ``inputs`` int32 ``[B, S]`` and, with targets, ``targets`` int32 ``[B, T]``.

    Raises
    ------
    ValueError
        For a sentence longer than the length asked for, or as many targets as sources not given.
    """
    batch = {"inputs": pad_ids([tokenizer.encode(text) for text in sources], source_len)}
    if targets is not None:
        if len(targets) != len(sources):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets: give one translation per source.")
        batch["targets"] = pad_ids([tokenizer.encode(text) for text in targets], target_len)
    return batch
