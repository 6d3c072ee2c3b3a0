"""Transformer (big) of Vaswani et al. (2017), Table 3 row "big" / Table 2 last row.

d_model=1024, d_ff=4096, h=16 (d_k=d_v=64), P_drop=0.3, 300k steps, average of the last 20 checkpoints.
Expected: dev PPL 4.33 / BLEU 26.4 (Table 2), test BLEU 28.4 on newstest2014 EN-DE (Table 3), 213M params.

Run::

    python -m attention_jax.main --config=configs/big.py --workdir=runs/big
"""

import ml_collections

from configs import base

BIG_OVERRIDES = dict(
    d_model=1024,
    d_ff=4096,
    num_heads=16,
    key_dim=64,
    value_dim=64,
    dropout_rate=0.3,
    num_train_steps=300_000,
    keep_checkpoints=20,
    average_last_checkpoints=20,
)


def get_config() -> ml_collections.ConfigDict:
    """Return the paper's big configuration: base plus :data:`BIG_OVERRIDES`.

    Returns
    -------
    ml_collections.ConfigDict
        The full config, ``config.name == "big"``.

    Notes
    -----
    The same overrides form the ``big`` row of ``configs/table2.py``.
    """
    config = base.get_config()
    config.update(BIG_OVERRIDES)
    config.name = "big"
    config.paper = ml_collections.ConfigDict(dict(dev_ppl=4.33, dev_bleu=26.4, params_millions=213))
    return config
