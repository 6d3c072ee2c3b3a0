"""The language-model quickstart: a tiny decoder-only Transformer on the embedded German text (CPU).

``configs/lm_base.py`` scaled down like ``configs/tiny.py``: 2 layers, d_model=128, rows of 64 tokens. The
data is the German side of the embedded synthetic corpus (``attention_jax.data.synthetic_en_de``, no
download), one sentence per document; the dev perplexity falls within minutes on a laptop CPU.

Run::

    python -m attention_jax.main --config=configs/lm_tiny.py --workdir=runs/lm_tiny
    python -m attention_jax.generate --workdir=runs/lm_tiny --prompt="Der Hund" --temperature=0.8 --top_k=20
"""

import ml_collections

from configs import lm_base

TINY_LM_OVERRIDES = dict(
    dataset="synthetic_en_de",
    vocab_size=1000,
    num_layers=2,
    d_model=128,
    d_ff=512,
    num_heads=4,
    key_dim=32,
    value_dim=32,
    max_len=64,
    tokens_per_batch=2048,  # 32 rows of 64 tokens.
    num_train_steps=600,
    warmup_steps=200,
    learning_rate_scale=2.0,
    checkpoint_every_steps=200,
    checkpoint_every_minutes=2.0,
    log_every_steps=50,
    eval_every_steps=200,
)


def get_config() -> ml_collections.ConfigDict:
    """Return the tiny CPU language model: ``lm_base`` plus :data:`TINY_LM_OVERRIDES`.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name == "lm_tiny"``.
    """
    config = lm_base.get_config()
    config.update(TINY_LM_OVERRIDES)
    config.name = "lm_tiny"
    return config
