"""A synthetic English->German translation task, embedded (no download), and its TFDS builder ``synthetic_en_de``.

Agreement, verb-second and verb-final clauses, separable and modal verbs, negation; one translation each.
"""

from attention_jax.data.synthetic_en_de.builder import SyntheticEnDe, SyntheticEnDeConfig
from attention_jax.data.synthetic_en_de.sampling import MAX_WORDS, SEED, iter_pairs
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
    "SyntheticEnDeConfig", "default_split_sizes", "generate_split", "generate_splits", "iter_pairs", "split_of",
]
