"""A synthetic English->German translation task, embedded (no download), and its TFDS builder.

A small grammar and lexicon that exercise what real EN->DE needs (gender and case agreement, plurals,
verb-second and verb-final clauses, separable and modal verbs, negation); every English sentence has one
German translation. Example: "The happy king calls Anna." -> "Der glückliche König ruft Anna an."
Splits are deterministic and disjoint (a hash of the English text), so a split's first N pairs do not
depend on the other splits' sizes. Importing the package registers the TFDS builder::

    builder = SyntheticEnDe(data_dir=d, file_format="array_record")  # config="small" for smoke tests
    builder.download_and_prepare()
    train = builder.as_data_source("train")  # train[i] == {"de": b"...", "en": b"..."}

Without TFDS, ``generate_split("train")`` returns the same pairs in the same order.
"""

from attention_jax.data.synthetic_en_de.builder import SyntheticEnDe, SyntheticEnDeConfig
from attention_jax.data.synthetic_en_de.sampling import MAX_WORDS, SEED, iter_pairs, sample_pair, sample_sentence
from attention_jax.data.synthetic_en_de.splits import (
    SPLITS,
    TEST_SIZE,
    TRAIN_SIZE,
    VALIDATION_SIZE,
    default_split_sizes,
    generate_split,
    generate_splits,
    split_of,
)

__all__ = [
    "MAX_WORDS", "SEED", "SPLITS", "TEST_SIZE", "TRAIN_SIZE", "VALIDATION_SIZE", "SyntheticEnDe",
    "SyntheticEnDeConfig", "default_split_sizes", "generate_split", "generate_splits", "iter_pairs",
    "sample_pair", "sample_sentence", "split_of",
]
