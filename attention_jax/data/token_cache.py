"""Token ids of a whole split, computed once and kept on disk as flat, memory-mapped NumPy arrays.

A side is ``ids`` (back to back, no EOS) and ``offsets``: sentence ``i`` is ``ids[offsets[i]:offsets[i + 1]]``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import os
import re

import numpy as np
from absl import logging

from attention_jax.data import data_sources, first_use
from attention_jax.data import tokenizer as tokenizer_lib
from attention_jax.foundation import run_files

_TOKENIZE_CHUNK = 8192


@dataclasses.dataclass(frozen=True)
class _TokenizedSide:
    """Token ids of one side of a split: ``ids [total_tokens]`` and ``offsets [num_sentences + 1]``."""

    ids: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths_with_eos(self) -> np.ndarray:
        """Return each sentence's length in a batch row, subwords + EOS.

        int64 ``[num_sentences]``.
        """
        return (np.diff(self.offsets) + 1).astype(np.int64)

    def fill_rows(self, rows: np.ndarray, sentence_indices: np.ndarray) -> None:
        """Write sentences, each followed by EOS, into the rows of a zero (pad) array.

        ``rows``: int32 ``[len(sentence_indices), padded_len]`` zeros, written in place; a negative index is a pad row.
        """
        for row, sentence in enumerate(sentence_indices.tolist()):
            if sentence < 0:
                continue
            start, end = int(self.offsets[sentence]), int(self.offsets[sentence + 1])
            rows[row, : end - start] = self.ids[start:end]
            rows[row, end - start] = tokenizer_lib.EOS_ID

    def _sentence_hashes(self) -> np.ndarray:
        """Return a 64-bit hash of each sentence: ids mixed with positions (SplitMix64), summed, then the length."""
        hashes = np.empty(len(self), np.uint64)
        for first in range(0, len(self), _HASH_CHUNK_SENTENCES):
            last = min(first + _HASH_CHUNK_SENTENCES, len(self))
            offsets = np.asarray(self.offsets[first : last + 1], np.int64)
            ids = np.asarray(self.ids[offsets[0] : offsets[-1]], np.uint64)
            lengths = np.diff(offsets)
            positions = np.arange(len(ids), dtype=np.int64) - np.repeat(offsets[:-1] - offsets[0], lengths)
            mixed = _mix64(ids ^ (positions.astype(np.uint64) << np.uint64(32)))
            sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(mixed, dtype=np.uint64)])
            relative = offsets - offsets[0]
            hashes[first:last] = _mix64((sums[relative[1:]] - sums[relative[:-1]]) ^ lengths.astype(np.uint64))
        return hashes


_HASH_CHUNK_SENTENCES = 1 << 20


def _mix64(values: np.ndarray) -> np.ndarray:
    """Return SplitMix64's finalizer, elementwise on ``uint64`` (modulo 2**64)."""
    with np.errstate(over="ignore"):
        values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return values ^ (values >> np.uint64(31))


@dataclasses.dataclass(frozen=True)
class _TokenizedSplit:
    """Source and target token ids of one split; sentence ``i`` of each side form pair ``i``."""

    source: _TokenizedSide
    target: _TokenizedSide

    def __len__(self) -> int:
        return len(self.source)

    def pair_hashes(self) -> np.ndarray:
        """Return a 64-bit hash of each pair's ids (to find dev/test pairs in train).

        uint64 ``[num_pairs]``.
        """
        with np.errstate(over="ignore"):
            return _mix64(self.source._sentence_hashes() * np.uint64(0x9E3779B97F4A7C15)
                          ^ self.target._sentence_hashes())


def _load_or_tokenize_split(
    source: data_sources._TranslationSource, split: str, tokenizer: tokenizer_lib.Tokenizer
) -> _TokenizedSplit:
    """Return the token ids of both sides of ``split``, tokenized and cached (once across processes) on first use."""
    cache_dir = os.path.join(source.cache_dir, f"tokens-{hashlib.sha256(tokenizer.model_proto).hexdigest()[:12]}")
    split_name = re.sub(r"[^A-Za-z0-9_.\-]+", "_", split)
    prefixes = {
        side: os.path.join(cache_dir, f"{split_name}.{feature}")
        for side, feature in (("source", source.source_key), ("target", source.target_key))
    }
    sides: dict[str, _TokenizedSide | None] = {}

    def _is_cached() -> bool:
        sides.update({side: _load_side(prefix) for side, prefix in prefixes.items()})
        return all(side is not None for side in sides.values())

    def _tokenize_and_write() -> None:
        logging.info("Tokenizing %s split %r into %s", source.description, split, cache_dir)
        for side, tokenized in _tokenize_split(source, split, tokenizer).items():
            _write_side(prefixes[side], tokenized)

    if first_use._prepare_once(os.path.join(cache_dir, split_name + first_use.LOCK_SUFFIX),
                              f"the token ids of split {split!r} in {cache_dir}", _is_cached, _tokenize_and_write):
        _is_cached()
    source_side, target_side = sides["source"], sides["target"]
    assert source_side is not None and target_side is not None  # Written here, or by the process waited for.
    return _TokenizedSplit(source=source_side, target=target_side)


def _tokenize_split(
    source: data_sources._TranslationSource, split: str, tokenizer: tokenizer_lib.Tokenizer
) -> dict[str, _TokenizedSide]:
    """Tokenize both sides of every pair in one pass over the split (reading dominates)."""
    id_dtype = np.uint16 if tokenizer.vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    id_chunks: dict[str, list[np.ndarray]] = {"source": [], "target": []}
    lengths: dict[str, list[int]] = {"source": [], "target": []}
    pairs = source.text_pairs(split, range(source.num_examples(split)))
    while chunk := list(itertools.islice(pairs, _TOKENIZE_CHUNK)):
        for side, texts in zip(("source", "target"), zip(*chunk)):
            encoded = tokenizer.encode_batch(texts, add_eos=False)
            lengths[side].extend(len(ids) for ids in encoded)
            id_chunks[side].append(np.fromiter(itertools.chain.from_iterable(encoded), dtype=id_dtype))
    tokenized = {}
    for side in ("source", "target"):
        offsets = np.zeros(len(lengths[side]) + 1, np.int64)
        np.cumsum(lengths[side], out=offsets[1:])
        ids = np.concatenate(id_chunks[side]) if id_chunks[side] else np.zeros(0, id_dtype)
        tokenized[side] = _TokenizedSide(ids=ids, offsets=offsets)
    return tokenized


def _write_side(prefix: str, side: _TokenizedSide) -> None:
    # Offsets last: their presence marks a complete pair of files.
    for suffix, array in (("ids", side.ids), ("offsets", side.offsets)):
        buffer = io.BytesIO()
        np.save(buffer, array)
        run_files.write_atomically(f"{prefix}.{suffix}.npy", buffer.getvalue())


def _load_side(prefix: str) -> _TokenizedSide | None:
    ids_path, offsets_path = f"{prefix}.ids.npy", f"{prefix}.offsets.npy"
    if not (os.path.exists(ids_path) and os.path.exists(offsets_path)):
        return None
    offsets = np.load(offsets_path)
    # NumPy cannot memory-map an empty array.
    side = _TokenizedSide(ids=np.load(ids_path, mmap_mode="r" if offsets[-1:].sum() else None), offsets=offsets)
    if len(side.offsets) == 0 or side.offsets[-1] != len(side.ids):
        logging.warning("Token cache %s is inconsistent; tokenizing again.", prefix)
        return None
    return side
