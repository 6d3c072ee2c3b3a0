"""A recipe for small real parallel corpora (about 10k-200k pairs) on one machine: the 2-core CPU budget.

The paper's base model (post-LN, shared embeddings and BPE vocabulary, sinusoidal PE, Adam with the
paper's warmup + inverse-square-root schedule, label smoothing 0.1, beam 4, alpha 0.6), scaled to what
two CPU cores can train in an hour. The corpus comes from the user; nothing here names one.

Run (from the repository root; ``DIR`` holds ``train.tsv``, ``dev.tsv``, ``test.tsv`` of
``source<TAB>target`` lines)::

    python -m attention_jax.main --config=configs/small_corpus.py --workdir=runs/small_corpus \
        --config.dataset=tsv:DIR
    python -m attention_jax.evaluate --workdir=runs/small_corpus --split=test --checkpoint=averaged

Without ``--config.dataset`` training stops at once with a message saying how to give one.

PLACEHOLDER: results and evidence are filled in from the measured runs below.
"""

from __future__ import annotations

import ml_collections

from configs import base


def get_config() -> ml_collections.ConfigDict:
    """Return the small-corpus recipe: base with the measured size, schedule and budget.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name == "small_corpus"``; ``config.dataset`` is empty and must be given on the
        command line (``--config.dataset=tsv:DIR`` or a TFDS translation dataset name).

    Notes
    -----
    See the module docstring for the probes behind every choice.
    """
    config = base.get_config()
    config.name = "small_corpus"
    config.paper = ml_collections.ConfigDict(dict(dev_ppl=None, dev_bleu=None, params_millions=None))
    config.dataset = ""  # The user's corpus: --config.dataset=tsv:DIR (or a TFDS translation dataset).
    config.num_layers = 3
    config.d_model = 128
    config.d_ff = 512
    config.num_heads = 4
    config.key_dim = 32
    config.value_dim = 32
    config.dropout_rate = 0.1
    config.label_smoothing = 0.1
    config.vocab_size = 4000
    config.max_len = 64
    config.tokens_per_batch = 4096
    config.num_train_steps = 1700
    config.warmup_steps = 300
    config.learning_rate_scale = 0.4
    config.checkpoint_every_steps = 100
    config.checkpoint_every_minutes = 0.0
    config.keep_checkpoints = 5
    config.average_last_checkpoints = 5
    config.log_every_steps = 50
    config.eval_every_steps = 500
    config.num_bleu_examples = 100
    return config
