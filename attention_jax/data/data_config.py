"""The data section of an experiment: corpus, splits, tokenizer and batches (Section 5.1), frozen.

Each config field is declared here once (:func:`attention_jax.foundation.field_declarations.setting`): its type,
default, allowed values, meaning and what a change means for a resumed run. Built once from a checked
config by :func:`attention_jax.experiment.sections.build_experiment`.
"""

from __future__ import annotations

import dataclasses

from attention_jax.foundation.field_declarations import POSITIVE, ResumeRule, check_declared, setting


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the pairs (or documents) come from and how they are tokenized and batched.

    Attributes
    ----------
    corpus, dataset, source_lang, target_lang, train_split, eval_split, test_split, data_dir, text_feature, \
max_len, tokens_per_batch, tokens_per_batch_unit, packing, packing_row_lengths, tokenizer_max_sentences, \
data_threads
        Declared below, each with its meaning and range (``docs/config_fields.md`` lists them).
    vocab_size : int
        The BPE vocabulary trained (the model section's ``vocab_size``, copied).
    fine_tune_from : str
        A run whose ``tokenizer.model`` tokenizes this data (``""``: train one): the source run when
        fine-tuning, the run itself when ``evaluate`` or ``generate`` scores its splits (the run
        section's field, copied or replaced).
    """

    corpus: str = setting("", "The corpus recipe this run follows ('' for none; attention_jax.experiment.corpora).",
                          old_run_value="")
    dataset: str = setting("wmt14_translate/de-en", "TFDS name, 'synthetic_en_de', 'tsv:DIR' or 'txt:DIR' (a "
                           "language model's corpus).", resume=ResumeRule.DATA)
    source_lang: str = setting("en", "Source language code.", resume=ResumeRule.DATA)
    target_lang: str = setting("de", "Target language code.", resume=ResumeRule.DATA)
    train_split: str = setting("train", "Training split (TFDS slicing such as 'train[:4000]' works).",
                               resume=ResumeRule.DATA)
    eval_split: str = setting("validation", "Dev split (newstest2013 in TFDS wmt14_translate).")
    test_split: str = setting("test", "Test split (newstest2014).")
    data_dir: str = setting("", "TFDS data directory ('': $ATTENTION_JAX_CACHE_DIR/tensorflow_datasets, else "
                                "TFDS's default).")
    text_feature: str = setting("text", "A language model's TFDS text feature.", old_run_value="text")
    max_len: int = setting(256, "Longest example kept for training, in tokens with EOS.", **POSITIVE,
                           resume=ResumeRule.POSITIONS)
    tokens_per_batch: int = setting(25000, "Tokens per side of a batch (5.1).", **POSITIVE)
    tokens_per_batch_unit: str = setting("real", "real: the pairs' own tokens (the paper); slots: rows x padded "
                                         "length.", choices=("slots", "real"),
                                         old_run_value="slots")  # Runs from before the field counted slots.
    packing: bool = setting(False, "Several pairs per training row, attending within their own pair.")
    packing_row_lengths: tuple[int, ...] = setting((), "Packed row lengths ending in max_len (): 3/8, 3/4 and all "
                                                   "of max_len).", **POSITIVE)
    tokenizer_max_sentences: int = setting(2_000_000, "Sentences (both sides) that train the BPE model.",
                                           **POSITIVE, resume=ResumeRule.DATA)
    data_threads: int = setting(2, "Grain reader threads.", **POSITIVE)
    vocab_size: int
    fine_tune_from: str

    def __post_init__(self) -> None:
        """Check every declared field (:func:`attention_jax.foundation.field_declarations.check_declared`)."""
        check_declared(self, "data")
