"""A synthetic English->German translation task, embedded (no download), and its TFDS builder.

Sentences come from a small grammar and lexicon (74 nouns, 25 adjectives, 55 verbs; about 480 English
and 640 German word types) chosen so that a tiny Transformer must learn what real EN->DE needs: German
gender (m/f/n) and case (nominative, accusative, dative) agreement of determiners, adjectives and nouns
(weak, mixed and strong adjective declension, weak masculine nouns, dative plural -n), plurals with
numbers and quantifiers, verb-second main clauses (inverted after a fronted adverb or subordinate
clause), verb-final subordinate clauses, separable and modal verbs that send a verb part to the end,
negation with "nicht"/"kein", and dative, accusative and prepositional objects. Every English sentence
has exactly one German translation, so the task can be learned to (nearly) 100 BLEU. Examples::

    The happy king calls Anna.
    Der glückliche König ruft Anna an.

    Today she helps this happy monkey under a lamp.
    Heute hilft sie diesem glücklichen Affen unter einer Lampe.

    The queen invites my small friend while I carry the old window to Maria.
    Die Königin lädt meinen kleinen Freund ein, während ich das alte Fenster zu Maria trage.

    Because the girl cannot find her key, she waits in front of the house.
    Weil das Mädchen ihren Schlüssel nicht finden kann, wartet sie vor dem Haus.

Splits are deterministic and disjoint: one random stream (seed `SEED`) is deduplicated on the English
side and each sentence goes to the split named by a hash of its English text, so the first N pairs of
a split do not change when another split's size changes.

Build and read it with TFDS (no TensorFlow needed; "array_record" is this builder's default format)::

    from attention_jax.data.synthetic_en_de import SyntheticEnDe
    builder = SyntheticEnDe(data_dir=d, file_format="array_record")
    builder.download_and_prepare()         # generates the full size once
    train = builder.as_data_source("train")  # train[i] == {"de": b"...", "en": b"..."}

or, once this package is imported, ``tfds.data_source("synthetic_en_de", split="train", data_dir=d)``.
The "small" config (``SyntheticEnDe(config="small", ...)``, 10,000/100/100 pairs) is for smoke tests.
Without TFDS, ``generate_split("train")`` returns the same (english, german) pairs in the same order.

Modules, each importing only those before it: ``lexicon`` (words and their forms), ``declension``
(German endings), ``clauses`` (phrases and sentences in both languages), ``sampling`` (random
sentences), ``splits`` (the deterministic splits) and ``builder`` (the TFDS builder). This package
exports the corpus's interface; importing it registers the TFDS builder.
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
