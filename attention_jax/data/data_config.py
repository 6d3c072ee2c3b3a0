"""The data section of an experiment: corpus, splits, tokenizer and batches (Section 5.1), frozen.

Built once from a checked config by :func:`attention_jax.experiment.sections.build_experiment`; the
fields' meanings and allowed values are in :mod:`attention_jax.experiment.schema`.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Where the pairs (or documents) come from and how they are tokenized and batched.

    Attributes
    ----------
    dataset : str
        A TFDS name, ``"synthetic_en_de"``, ``"tsv:DIR"`` or ``"txt:DIR"``.
    source_lang, target_lang : str
        Language codes.
    train_split, eval_split, test_split : str
        Split names (TFDS slicing allowed).
    data_dir : str
        TFDS data directory (``""``: TFDS's default).
    text_feature : str
        A language model's TFDS text feature.
    max_len : int
        Longest example kept for training, in tokens with EOS.
    tokens_per_batch : int
        Tokens per side of a batch.
    tokens_per_batch_unit : str
        ``"real"`` or ``"slots"``.
    packing : bool
        Several pairs per training row.
    packing_row_lengths : tuple[int, ...]
        Packed row lengths (``()``: the default three).
    tokenizer_max_sentences : int
        Sentences that train the BPE model.
    data_threads : int
        Grain reader threads.
    vocab_size : int
        The BPE vocabulary trained (the model's embedding rows).
    fine_tune_from : str
        A run whose ``tokenizer.model`` tokenizes this data (``""``: train one): the source run when
        fine-tuning, the run itself when ``evaluate`` or ``generate`` scores its splits.
    """

    dataset: str
    source_lang: str
    target_lang: str
    train_split: str
    eval_split: str
    test_split: str
    data_dir: str
    text_feature: str
    max_len: int
    tokens_per_batch: int
    tokens_per_batch_unit: str
    packing: bool
    packing_row_lengths: tuple[int, ...]
    tokenizer_max_sentences: int
    data_threads: int
    vocab_size: int
    fine_tune_from: str
