"""A run directory for the decoding commands: a one-layer model's random parameters on a tiny TSV corpus.

It follows the training contract (``config.json``, ``tokenizer.model`` and orbax checkpoints written
with the training side's ``checkpoints`` module) without training, so a module of command tests makes
one in about a second: the commands' plumbing, ordering and messages are what such tests check, not
translation quality.
"""

from __future__ import annotations

import pathlib
import shutil

import flax.linen as nn
import jax
import numpy as np

from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.data import input_pipeline
from attention_jax.experiment import sections
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files
from attention_jax.models.model import Transformer
from configs import tiny

WORDS_EN = ["the", "house", "is", "small", "a", "dog", "runs", "big", "green", "my", "cat", "sleeps"]
WORDS_DE = ["das", "Haus", "ist", "klein", "ein", "Hund", "läuft", "groß", "grün", "mein", "Katze", "schläft"]
STEPS = (10, 20)


def write_corpus(directory: pathlib.Path) -> None:
    """``train.tsv``, ``dev.tsv`` and ``test.tsv`` of random word-by-word sentence pairs in ``directory``."""
    rng = np.random.default_rng(0)
    directory.mkdir()
    for name, count in (("train", 60), ("dev", 6), ("test", 6)):
        lines = []
        for _ in range(count):
            picks = rng.integers(0, len(WORDS_EN), rng.integers(2, 7))
            lines.append(" ".join(WORDS_EN[i] for i in picks) + "\t" + " ".join(WORDS_DE[i] for i in picks))
        (directory / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def experiment(tmp: pathlib.Path, num_layers: int = 1) -> Experiment:
    """The tiny config shrunk further (d_model 32, 2 heads, 16 positions) on ``tmp / 'corpus'``."""
    config = tiny.get_config()
    config.dataset = f"tsv:{tmp / 'corpus'}"
    config.data_dir = str(tmp / "tfds")
    config.vocab_size = 128
    config.num_layers, config.d_model, config.d_ff = num_layers, 32, 64
    config.num_heads, config.key_dim, config.value_dim = 2, 16, 16
    config.max_len = 16
    config.max_decode_extra_len = 8
    return sections.build_experiment(config, "test")


def make_random_run(tmp: pathlib.Path, num_layers: int = 1, steps: tuple[int, ...] = STEPS) -> pathlib.Path:
    """``tmp / 'run'``: the corpus, config, tokenizer and one random checkpoint per step (seed = its index)."""
    write_corpus(tmp / "corpus")
    config = experiment(tmp, num_layers)
    data = input_pipeline.get_datasets(config.data)  # Prepares the corpus and tokenizer once for every command.
    run_dir = tmp / "run"
    checkpoints.write_config(str(run_dir), config)
    checkpoints.write_tokenizer(str(run_dir), data.tokenizer.model_proto)  # As training keeps it.
    ids = np.ones((1, 4), np.int32)
    for seed, step in enumerate(steps):
        params = nn.meta.unbox(Transformer(config.model).init(jax.random.key(seed), ids, ids)["params"])
        # _save_params keeps one step per directory: write each alone, then gather the step folders.
        single = tmp / f"single_{step}"
        params_checkpoints._save_params(str(single), step, params, {"seed": seed})
        (run_dir / run_files.CHECKPOINT_DIR).mkdir(exist_ok=True)
        shutil.move(single / str(step), run_dir / run_files.CHECKPOINT_DIR / str(step))
    return run_dir
