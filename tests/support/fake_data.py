"""A stand-in for ``input_pipeline.get_datasets`` in training tests: deterministic random batches.

The task is learnable (the target is the source reversed, token ids shifted by one), so a tiny model
can overfit it. Batches come in a few shapes, like the real pipeline's length buckets; each batch is
a pure function of (seed, batch index), so an iterator restored from ``get_state()`` continues with
exactly the batches an uninterrupted one would have produced. :class:`FakeData` has the whole
:class:`~attention_jax.data.training_data.TrainingData` interface (its tokenizer a ``model_proto``, its
stats a dev split's size, ``split_fingerprints``): the trainer reads them as it reads a real corpus's.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import signal
from typing import Any, Iterator

import numpy as np

PAD, BOS, EOS = 0, 2, 3
FIRST_WORD = 4

# (global rows, source length, target length) of the batch shapes, cycled through.
DEFAULT_SHAPES = ((8, 12, 12), (16, 6, 6), (8, 20, 20))
# The bytes FakeTokenizer writes as WORKDIR/tokenizer.model (not a SentencePiece model: nothing loads it).
FAKE_TOKENIZER_MODEL = b"FakeTokenizer: words w<id>, ids below 4 pad/unk/bos/eos"
# The dev split size FakeData's stats report: early stopping's minimum (early_stopping.MIN_DEV_PAIRS).
DEFAULT_DEV_PAIRS = 100


def make_batch(seed: int, index: int, shape: tuple[int, int, int], vocab_size: int) -> dict[str, np.ndarray]:
    """The global batch number ``index``: random sentences and their reversed, shifted targets."""
    rows, source_len, target_len = shape
    rng = np.random.default_rng([seed, index])
    inputs = np.zeros((rows, source_len), np.int32)
    targets = np.zeros((rows, target_len), np.int32)
    for row in range(rows):
        length = int(rng.integers(2, min(source_len, target_len)))  # Words, EOS excluded.
        words = rng.integers(FIRST_WORD, vocab_size - 1, size=length)
        inputs[row, :length], inputs[row, length] = words, EOS
        targets[row, :length], targets[row, length] = words[::-1] + 1, EOS
    return {"inputs": inputs, "targets": targets}


class FakeTokenizer:
    """Words ``w<id>`` separated by spaces; ids below 4 are pad/unk/bos/eos.

    ``model_proto`` stands for the SentencePiece model a real tokenizer serializes (training writes it to
    ``tokenizer.model`` and compares it when a run resumes).
    """

    pad_id, unk_id, bos_id, eos_id = 0, 1, 2, 3

    def __init__(self, vocab_size: int, model_proto: bytes = FAKE_TOKENIZER_MODEL) -> None:
        self.vocab_size = vocab_size
        self.model_proto = bytes(model_proto)

    def encode(self, text: str) -> list[int]:
        return [int(word[1:]) for word in text.split()] + [EOS]

    def decode(self, ids: Any) -> str:
        return " ".join(f"w{int(i)}" for i in ids if int(i) >= FIRST_WORD)


class FakeIterator:
    """Infinite iterator of this process's rows of each global batch, with get/set_state.

    ``sigterm_at`` sends SIGTERM to the own process when that batch index is produced (a deterministic
    stand-in for a scheduler's preemption), ``sigkill_at`` SIGKILL (a crash); ``bad_token_at`` puts an id
    outside the vocabulary into that batch (the embedding lookup then yields NaN, as with a tokenizer whose
    vocabulary is larger than the model's).
    """

    def __init__(self, data: "FakeData", seed: int) -> None:
        self._data, self._seed, self._index = data, seed, 0

    def __iter__(self) -> "FakeIterator":
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        index = self._index
        self._index += 1
        if self._data.sigterm_at is not None and index == self._data.sigterm_at:
            os.kill(os.getpid(), signal.SIGTERM)
        if self._data.sigkill_at is not None and index == self._data.sigkill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self._data.repeat_batches:
            index = index % self._data.repeat_batches
        shape = self._data.shapes[index % len(self._data.shapes)]
        batch = make_batch(self._seed, index, shape, self._data.vocab_size)
        if self._data.bad_token_at is not None and self._index - 1 == self._data.bad_token_at:
            batch["inputs"][0, 0] = self._data.vocab_size
        return self._data.local_rows(batch)

    def get_state(self) -> dict[str, int]:
        return {"index": self._index, "seed": self._seed}

    def set_state(self, state: dict[str, int]) -> None:
        self._index, self._seed = int(state["index"]), int(state["seed"])


class FakeData:
    """The ``get_datasets`` interface over :func:`_make_batch` batches.

    Parameters
    ----------
    vocab_size : int
        Ids are drawn below it.
    shapes : tuple of (rows, source length, target length)
        Global batch shapes, cycled through.
    process_index, process_count : int
        This process's share of the rows (contiguous blocks, in process order).
    repeat_batches : int
        If > 0, only this many distinct batches recur (for overfitting).
    sigterm_at : int, optional
        Batch index at which the iterator SIGTERMs its own process.
    sigkill_at : int, optional
        Batch index at which the iterator SIGKILLs its own process (no handler, no cleanup).
    bad_token_at : int, optional
        Batch index that gets an out-of-vocabulary id (NaN loss).
    num_eval_batches : int
        Batches of the dev and test splits.
    dev_pairs : int
        The dev split's size ``stats["examples"]["validation"]`` reports (checked against early stopping's
        minimum, as a corpus's pair count is).
    tokenizer_model : bytes
        The tokenizer's ``model_proto`` (a run writes it as ``tokenizer.model``).
    """

    def __init__(self, vocab_size: int = 64, shapes: tuple = DEFAULT_SHAPES, *, process_index: int = 0,
                 process_count: int = 1, repeat_batches: int = 0, sigterm_at: int | None = None,
                 bad_token_at: int | None = None, num_eval_batches: int = 3,
                 sigkill_at: int | None = None, dev_pairs: int = DEFAULT_DEV_PAIRS,
                 tokenizer_model: bytes = FAKE_TOKENIZER_MODEL) -> None:
        self.vocab_size = vocab_size
        self.shapes = tuple(shapes)
        self.process_index, self.process_count = process_index, process_count
        self.repeat_batches = repeat_batches
        self.sigterm_at = sigterm_at
        self.sigkill_at = sigkill_at
        self.bad_token_at = bad_token_at
        self.num_eval_batches = num_eval_batches
        self.tokenizer = FakeTokenizer(vocab_size, tokenizer_model)
        self.stats = {"fake": True, "examples": {"train": 0, "validation": dev_pairs, "test": dev_pairs}}

    def local_rows(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = batch["inputs"].shape[0] // self.process_count
        begin = self.process_index * rows
        return {key: value[begin:begin + rows] for key, value in batch.items()}

    def train_iterator(self, seed: int) -> Iterator:
        return FakeIterator(self, seed)

    def eval_batches(self, split: str, max_batches: int = 0) -> list[dict[str, np.ndarray]]:
        return [self.local_rows(batch) for batch in self._global_eval_batches(split, max_batches)]

    def _global_eval_batches(self, split: str, max_batches: int = 0) -> list[dict[str, np.ndarray]]:
        count = self.num_eval_batches if max_batches <= 0 else min(max_batches, self.num_eval_batches)
        seed = 10_000 + (split == "test")
        return [make_batch(seed, i, self.shapes[i % len(self.shapes)], self.vocab_size) for i in range(count)]

    def text_pairs(self, split: str, max_pairs: int = 0) -> list[tuple[str, str]]:
        pairs = self._text_pairs(split)
        return pairs[:max_pairs] if max_pairs > 0 else pairs

    def _text_pairs(self, split: str) -> list[tuple[str, str]]:
        batch = make_batch(20_000 + (split == "test"), 0, self.shapes[0], self.vocab_size)
        return [(self.tokenizer.decode(source), self.tokenizer.decode(target))
                for source, target in zip(batch["inputs"], batch["targets"])]

    def split_fingerprints(self) -> dict[str, dict[str, Any]]:
        """The dev and test splits' names, sizes and the SHA-256 of their batches and pairs (as a corpus's).

        Of the global batches (every process of a job computes the same), and without calling the methods
        that tests' subclasses override to act when an evaluation asks for its data.
        """
        fingerprints = {}
        for role in ("validation", "test"):
            digest = hashlib.sha256()
            for batch in self._global_eval_batches(role):
                for key in sorted(batch):
                    digest.update(batch[key].tobytes())
            digest.update(repr(self._text_pairs(role)).encode())
            fingerprints[role] = {"split": role, "pairs": self.stats["examples"][role], "sha256": digest.hexdigest()}
        return fingerprints


def tiny_config(**overrides: Any) -> Any:
    """A d_model=32, 1-layer config on :class:`FakeData` (vocabulary 64) for fast tests."""
    from configs import base  # Tests may import configs; the library may not.

    config = base.get_config()
    config.name = "test_tiny"
    config.update(dict(
        vocab_size=64, num_layers=1, d_model=32, d_ff=64, num_heads=2, key_dim=16, value_dim=16,
        max_len=32, max_decode_extra_len=8, dropout_rate=0.1, num_train_steps=8, warmup_steps=4,
        learning_rate_scale=1.0, log_every_steps=2, eval_every_steps=4, checkpoint_every_steps=4,
        checkpoint_every_minutes=0.0, keep_checkpoints=3, num_eval_batches=0, num_bleu_examples=0,
        final_bleu=False, dataset="fake",
    ))
    config.update(overrides)
    return config


def tiny_experiment(**overrides: Any) -> Any:
    """:func:`tiny_config` checked and built into an ``Experiment``, as an entry point passes it on."""
    from attention_jax.experiment import sections

    return sections.build_experiment(tiny_config(**overrides), "test")


def data_config(**fields: Any) -> Any:
    """``configs/base.py``'s data section (a ``DataConfig``) with ``fields`` replaced, for the pipeline tests."""
    import dataclasses

    from attention_jax.experiment import sections
    from configs import base

    return dataclasses.replace(sections.build_experiment(base.get_config(), "configs/base.py").data, **fields)


def train_tiny(workdir: pathlib.Path, data: FakeData | None = None, **overrides: object) -> dict:
    """Train :func:`tiny_experiment` (with ``overrides``) in-process on ``data`` (a fresh FakeData by default)."""
    from attention_jax.training import train

    return train.train_and_evaluate(tiny_experiment(**overrides), str(workdir), data=data or FakeData())


class SigtermDuringFinalBleu(FakeData):
    """Sends SIGTERM to its own process when the final BLEU asks for a whole split."""

    def text_pairs(self, split: str, max_pairs: int = 0) -> list[tuple[str, str]]:
        pairs = super().text_pairs(split, max_pairs)
        if max_pairs == 0:
            os.kill(os.getpid(), signal.SIGTERM)
        return pairs
