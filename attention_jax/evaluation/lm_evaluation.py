"""Per-token perplexity and bits per byte of a trained language model on a split.

Bits per byte divides the total negative log-likelihood (EOS tokens included) by ``ln 2`` and by the
UTF-8 bytes of the split's documents (one newline byte counted per document, standing for its EOS),
so models with different vocabularies compare on the same scale.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from attention_jax.models.language_model import LanguageModel
from attention_jax.models import metrics
from attention_jax.models.transformer_config import TransformerConfig


def evaluate_split(model_config: TransformerConfig, params: Any, data: Any, split: str) -> dict[str, Any]:
    """Teacher-forced per-token perplexity and bits per byte over every row of ``split``.

    Parameters
    ----------
    model_config : TransformerConfig
        The model's hyperparameters.
    params : pytree
        Plain :class:`LanguageModel` parameters.
    data : attention_jax.data.lm_data.LanguageModelData
        The run's data (``eval_batches``, ``split_bytes``, ``role_of``).
    split : str
        ``"validation"``, ``"test"`` or ``"train"`` (or the config's name for one).

    Returns
    -------
    dict
        ``split``, ``tokens``, ``nll_per_token`` (nats), ``perplexity``, ``utf8_bytes``,
        ``bits_per_byte``.
    """
    lm = LanguageModel(model_config.replace(decode=False))

    @jax.jit
    def sums(batch: dict) -> dict:
        logits = lm.apply({"params": params}, batch["targets"], targets_segmentation=batch["targets_segmentation"],
                          targets_position=batch["targets_position"])
        return metrics.token_loss_sums(logits, batch["targets"], 0.0, cpu_kernels=model_config.cpu_kernels)

    nll_sum, tokens = 0.0, 0.0
    for batch in data.eval_batches(split):
        result = jax.device_get(sums(batch))
        nll_sum += float(result["nll_sum"])
        tokens += float(result["tokens"])
    num_bytes = int(data.split_bytes[data.role_of(split)])
    nll_per_token = nll_sum / max(tokens, 1.0)
    return {"split": split, "tokens": int(tokens), "nll_per_token": nll_per_token,
            "perplexity": float(np.exp(nll_per_token)), "utf8_bytes": num_bytes,
            "bits_per_byte": nll_sum / math.log(2.0) / max(num_bytes, 1)}
