"""Small TSV corpora written on the spot, and the input pipeline's settings and reference counts for them.

The input pipeline, packing, token-budget, first-use and command-line tests share these.
"""

from __future__ import annotations

import collections
import os
import pathlib
import random

import numpy as np

from tests.support import fake_data

ENGLISH_WORDS = "the small house is near a green tree and an old car drives over the long road .".split()
GERMAN_WORDS = "das kleine Haus ist über schöne Grüße Mädchen Straße Bäume fährt größer Tür Übung .".split()
MAX_LEN = 32
TOKENS_PER_BATCH = 256
ROWS_MULTIPLE = 2


def _pairs(rng: np.random.Generator, count: int, max_words: int) -> list[tuple[str, str]]:
    def sentence(words: list[str]) -> str:
        return " ".join(rng.choice(words, size=rng.integers(1, max_words + 1)))

    return [(sentence(ENGLISH_WORDS), sentence(GERMAN_WORDS)) for _ in range(count)]


def _write_tsv(path, pairs: list[tuple[str, str]]) -> None:
    with open(path, "w", encoding="utf-8") as tsv_file:
        tsv_file.writelines(f"{source}\t{target}\n" for source, target in pairs)


def make_corpus(directory) -> dict[str, list[tuple[str, str]]]:
    """Write train/dev/test.tsv of random word pairs (a few too long for ``MAX_LEN``); return the pairs."""
    rng = np.random.default_rng(0)
    corpus = {
        "train": _pairs(rng, 300, 12) + _pairs(rng, 20, 40),  # The 20 long pairs exceed MAX_LEN tokens.
        "dev": _pairs(rng, 37, 12) + _pairs(rng, 3, 40),
        "test": _pairs(rng, 30, 12),
    }
    os.makedirs(directory, exist_ok=True)
    for name, pairs in corpus.items():
        _write_tsv(os.path.join(directory, f"{name}.tsv"), pairs)
    return corpus


def pipeline_config(dataset: str, data_dir, **overrides):
    """The data section (``DataConfig``) of ``configs/base.py`` on ``dataset``, with ``overrides``."""
    fields = dict(dataset=dataset, data_dir=str(data_dir), vocab_size=300, max_len=MAX_LEN,
                  tokens_per_batch=TOKENS_PER_BATCH,
                  tokens_per_batch_unit="slots")  # The shapes these tests compute; tests/data/test_batching.py: "real".
    return fake_data.data_config(**{**fields, **overrides})


def expected_rows(tokenizer, pairs, max_len) -> collections.Counter:
    """Independent reference: each pair tokenized directly, EOS appended, filtered by max_len."""
    expected = collections.Counter()
    for source, target in pairs:
        source_ids, target_ids = tokenizer.encode(source), tokenizer.encode(target)
        if max(len(source_ids), len(target_ids)) <= max_len:
            expected[(tuple(source_ids), tuple(target_ids))] += 1
    return expected


def take_batches(iterator, count: int) -> list[dict]:
    """The next ``count`` batches of ``iterator``."""
    return [next(iterator) for _ in range(count)]


WORDS = {  # English -> German, word by word: write_word_corpus's dictionary.
    "cat": "Katze", "dog": "Hund", "house": "Haus", "tree": "Baum", "red": "rot", "big": "gross",
    "small": "klein", "sees": "sieht", "has": "hat", "the": "die", "a": "eine", "one": "eins"}


def write_word_corpus(directory: pathlib.Path, seed: int = 0) -> None:
    """Word-by-word "translations" of 3-6 word sentences: train 240, dev 24, test 24 pairs."""
    rng = random.Random(seed)
    english = sorted(WORDS)
    directory.mkdir()
    for name, count in (("train.tsv", 240), ("dev.tsv", 24), ("test.tsv", 24)):
        lines = []
        for _ in range(count):
            words = [rng.choice(english) for _ in range(rng.randint(3, 6))]
            lines.append(" ".join(words) + "\t" + " ".join(WORDS[word] for word in words))
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
