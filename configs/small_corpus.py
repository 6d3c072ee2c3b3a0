"""A recipe for small real parallel corpora (about 10k-200k pairs) on one machine: one hour on 2 CPU cores.

The paper's base model (post-LN, shared embeddings and BPE vocabulary, sinusoidal PE, Adam with the
paper's warmup + inverse-square-root schedule, dropout and label smoothing 0.1, beam 4,
alpha 0.6) scaled to what two CPU cores train in an hour: N=3, d_model=128, d_ff=512, h=4
(1.9M parameters), a shared 4,000-piece BPE vocabulary, 1,700 steps of at most 4,096 (padded) target
tokens. The corpus comes from the user; nothing here names one.

Run (from the repository root; ``DIR`` holds ``train.tsv``, ``dev.tsv``, ``test.tsv`` of
``source<TAB>target`` lines)::

    python -m attention_jax.main --config=configs/small_corpus.py --workdir=runs/small_corpus \
        --config.dataset=tsv:DIR
    python -m attention_jax.evaluate --workdir=runs/small_corpus --split=test   # the last checkpoint

Without ``--config.dataset`` training stops at once with a message saying how to give one.

Results on ``../shared/data/messages_en_de`` and on an English-French corpus: ``docs/real_language.md``;
the run's files, the probes behind every setting and the reason for each: ``docs/small_corpus/README.md``.
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
    ``docs/small_corpus/README.md`` gives the probes behind every choice.
    """
    config = base.get_config()
    config.name = "small_corpus"
    config.paper = ml_collections.ConfigDict(dict(dev_ppl=None, dev_bleu=None, params_millions=None))
    config.dataset = ""  # The user's corpus: --config.dataset=tsv:DIR (or a TFDS translation dataset).
    config.num_layers = 3  # d_model=128, N=3: faster per token than d_model=256 (probes p1-p3).
    config.d_model = 128
    config.d_ff = 512
    config.num_heads = 4
    config.key_dim = 32
    config.value_dim = 32
    config.dropout_rate = 0.1
    config.label_smoothing = 0.1
    config.vocab_size = 4000  # Shared BPE.
    config.max_len = 64  # 7 bucket shapes.
    config.tokens_per_batch = 4096  # Padded slots per side.
    config.tokens_per_batch_unit = "slots"  # The unit the recipe was tuned with; "real" counts real tokens.
    config.num_train_steps = 1700  # Set by the clock on 2 CPU cores (raise it on a faster machine).
    config.warmup_steps = 300  # Short: the run is ~1,700 updates (p4 against p3).
    config.learning_rate_scale = 0.4  # Peak 2.0e-3 at step 300.
    config.checkpoint_every_steps = 100
    config.checkpoint_every_minutes = 0.0
    config.keep_checkpoints = 5
    config.average_last_checkpoints = 1  # The last checkpoint beat the average of 5 on dev.
    config.log_every_steps = 50
    config.eval_every_steps = 500
    config.num_bleu_examples = 100  # A progress signal; the figure is evaluate on the full split.
    return config
