"""Transformer base model of Vaswani et al. (2017), Table 3 row "base" / Table 2 row "base".

Reproduces: EN->DE on WMT 2014 (newstest2013 dev, newstest2014 test), N=6, d_model=512, d_ff=2048,
h=8, d_k=d_v=64, P_drop=0.1, eps_ls=0.1, 100k steps of ~25k source + ~25k target tokens.
Expected: dev PPL 4.92 / BLEU 25.8 (Table 2), test BLEU 27.3 (Table 3), 65M parameters.

Run::

    python -m attention_jax.main --config=configs/base.py --workdir=runs/base

(needs the WMT14 data prepared by TFDS first:
``python -c "import tensorflow_datasets as tfds; tfds.builder('wmt14_translate/de-en').download_and_prepare()"``).
"""

import ml_collections

from attention_jax.experiment import schema


def get_config() -> ml_collections.ConfigDict:
    """Return the paper's base configuration: every field of the schema at its default.

    Returns
    -------
    ml_collections.ConfigDict
        Every setting the library reads: model, data, optimisation, checkpointing, evaluation and
        decoding. Other config files start from this one and override fields.

    Notes
    -----
    The fields, their defaults (the paper's base model), allowed values and meanings are declared in the
    sections' dataclasses and listed in ``docs/config_fields.md``; the sections follow the paper's: 3
    (model), 5.1-5.2 (data and batching), 5.3-5.4 (optimizer, regularization), 6.1 (checkpoint averaging
    and beam search).
    """
    config = ml_collections.ConfigDict(schema.default_config())
    config.name = "base"
    # The paper's dev figures for this config (Table 2), shown beside ours in reports.
    config.paper = ml_collections.ConfigDict(dict(dev_ppl=4.92, dev_bleu=25.8, params_millions=65))
    return config
