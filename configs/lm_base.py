"""A decoder-only Transformer language model at the paper's base width (Table 3 "base" shapes).

N=6 layers of causal self-attention and feed-forward (d_model=512, d_ff=2048, h=8, d_k=d_v=64,
P_drop=0.1), the encoder-decoder's own layers without encoder-decoder attention, shared input/output
embedding scaled by sqrt(d_model), sinusoidal positions, post-LN, the paper's Adam schedule. Documents
are packed into rows of ``max_len`` tokens whose attention never crosses documents. No paper figure: the
paper trains translation models only.

Run (lm1b prepared by TFDS in array_record format)::

    python -m attention_jax.main --config=configs/lm_base.py --workdir=runs/lm_base

or on your own text: ``--config.dataset=txt:/path/to/dir`` (train.txt, dev.txt, test.txt, one document per
line). Then ``python -m attention_jax.generate --workdir=runs/lm_base --prompt="..."``.
"""

import ml_collections

from configs import base

LM_OVERRIDES = dict(
    model_kind="decoder_only",
    dataset="lm1b",
    vocab_size=32000,
    max_len=256,  # Row length: documents are packed into rows of this many tokens.
    tokens_per_batch=32768,  # 128 rows of 256 tokens.
    label_smoothing=0.0,  # Perplexity is the figure of merit for a language model.
    num_bleu_examples=0,  # No source sentences: no BLEU.
    final_bleu=False,
    average_last_checkpoints=1,
)


def get_config() -> ml_collections.ConfigDict:
    """Return the base-width language model: ``configs/base.py`` plus :data:`LM_OVERRIDES`.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name == "lm_base"``; ``config.paper`` figures are ``None`` (no paper counterpart).
    """
    config = base.get_config()
    config.update(LM_OVERRIDES)
    config.text_feature = "text"  # The TFDS feature holding a document (lm1b: "text").
    config.name = "lm_base"
    config.paper = ml_collections.ConfigDict(dict(dev_ppl=None, dev_bleu=None, params_millions=None))
    return config
