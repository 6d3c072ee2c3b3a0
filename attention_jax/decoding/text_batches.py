"""The Python API's sentences and ids: checked before decoding, one line per refusal, or padded into a batch.

A ``str`` would decode one sentence per character; an id outside the vocabulary would read another row.
Training batches: :mod:`attention_jax.data.batching`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attention_jax.decoding.beam_search import PAD_ID  # models.model imports Flax: translate starts without it.

if TYPE_CHECKING:  # decode imports this module.
    from attention_jax.decoding.decode import TextCodec


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
    """Tokenize sentences (and their translations) into a padded batch, rows ending in EOS (no BOS).

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


def _checked_sentences(sources: Any, argument: str = "sources") -> list[str]:
    """Return ``sources`` as a list of ``str``.

    Raises ``TypeError``: for one ``str``, a non-iterable, or an item that is not a ``str``.
    """
    if isinstance(sources, str):
        raise TypeError(f"{argument} is one str; pass a list of sentences: [{sources!r:.40}].")
    if isinstance(sources, bytes | bytearray) or not isinstance(sources, Iterable):
        raise TypeError(f"{argument} must be a list of str sentences; got {type(sources).__name__}.")
    sources = list(sources)
    for index, text in enumerate(sources):
        if not isinstance(text, str):
            fix = ": decode it first, text.decode('utf-8')" if isinstance(text, bytes | bytearray) else ""
            raise TypeError(f"{argument}[{index}] is {type(text).__name__} {text!r:.40}, not a str sentence{fix}.")
    return sources


def _checked_ids(source_ids: Any, vocab_size: int, argument: str = "source_ids") -> list[list[int]]:
    """Return ``source_ids`` as lists of ints within the vocabulary.

    Raises ``TypeError``: for a ``str``, a non-iterable, or an item that is no integer sequence; ``ValueError``: for an
    id outside the vocabulary.
    """
    if isinstance(source_ids, str | bytes) or not isinstance(source_ids, Iterable):
        raise TypeError(f"{argument} must be a list of token id lists; got {type(source_ids).__name__}.")
    checked = []
    for index, ids in enumerate(source_ids):
        array = np.asarray(ids) if isinstance(ids, Iterable) and not isinstance(ids, str | bytes) else None
        if array is None or array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
            raise TypeError(f"{argument}[{index}] is {type(ids).__name__} {ids!r:.40}, not a list of integer "
                            f"token ids.")
        outside = np.flatnonzero((array < 0) | (array >= vocab_size))
        if outside.size:
            at = int(outside[0])
            raise ValueError(f"{argument}[{index}][{at}]={int(array[at])} is outside the vocabulary (ids 0 to "
                             f"{vocab_size - 1}): encode sentences with the run's tokenizer (encode_sources).")
        checked.append([int(token) for token in array])
    return checked
