"""A tiny language model's corpus (German sentences of the synthetic task, as ``txt:`` files) and its config."""

from __future__ import annotations

import pathlib

from attention_jax.data import synthetic_en_de
from attention_jax.experiment import sections


def write_txt_corpus(directory: pathlib.Path, train_docs: int = 400) -> dict[str, list[str]]:
    """Write train/dev/test.txt of synthetic German sentences, one document a line; return the texts."""
    pairs = synthetic_en_de.generate_splits({"train": train_docs, "validation": 40, "test": 40})
    texts = {split: [german for _, german in pairs[split]] for split in ("train", "validation", "test")}
    for split, name in (("train", "train.txt"), ("validation", "dev.txt"), ("test", "test.txt")):
        (directory / name).write_text("\n".join(texts[split]) + "\n", encoding="utf-8")
    return texts


def lm_experiment(corpus: pathlib.Path, data_dir: pathlib.Path, **overrides: object) -> object:
    """``configs/lm_tiny.py`` shrunk to train in seconds on the ``txt:`` corpus in ``corpus``."""
    from configs import lm_tiny  # Tests may import configs; the library may not.

    config = lm_tiny.get_config()
    config.update(dict(dataset=f"txt:{corpus}", data_dir=str(data_dir), vocab_size=300, num_layers=1,
                       d_model=32, d_ff=64, num_heads=2, key_dim=16, value_dim=16, max_len=32,
                       tokens_per_batch=512, num_train_steps=30, warmup_steps=10, log_every_steps=10,
                       eval_every_steps=10, checkpoint_every_steps=30, compilation_cache_dir="",
                       data_threads=1))
    config.update(overrides)
    return sections.build_experiment(config, "configs/lm_tiny.py")
