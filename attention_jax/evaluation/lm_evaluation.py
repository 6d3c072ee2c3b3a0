"""Per-token perplexity and bits per byte of a trained language model, each document in context.

Bits per byte (NLL over ``ln 2`` and UTF-8 bytes) compares across vocabularies (docs/language_models.md).
"""

from __future__ import annotations

import math
from typing import Any, cast

import jax
import numpy as np

from attention_jax.evaluation import lm_windows
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import metrics
from attention_jax.models.language_model import LanguageModel
from attention_jax.models.transformer_config import TransformerConfig


def resolve_stride(stride: int, window: int) -> int:
    """Return ``stride``, or half the window (at least 1) when it is 0.

    Parameters
    ----------
    stride : int
        ``--eval_stride``.
    window : int
        ``L``, the model's row length.

    Returns
    -------
    int
        ``S`` in ``[1, L]``.

    Raises
    ------
    UserInputError
        For a stride outside ``[0, L]``.
    """
    if stride == 0:
        return max(1, window // 2)
    if not 1 <= stride <= window:
        raise UserInputError(f"--eval_stride={stride} must lie in [1, {window}] (the model's rows hold {window} "
                             f"tokens), or be 0 for half of that ({max(1, window // 2)}).")
    return stride


def evaluate_split(model_config: TransformerConfig, params: Any, data: Any, split: str,
                   stride: int = 0) -> dict[str, Any]:
    """Return the per-token perplexity and bits per byte of ``split``, every token scored once in context.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Plain :class:`LanguageModel` parameters.
    data : attention_jax.data.lm_data.LanguageModelData
        The run's data.
    split : str
        ``"validation"``, ``"test"`` or ``"train"`` (or the config's name for one).
    stride : int
        ``S``; 0: half the row length.

    Returns
    -------
    dict
        ``tokens``, ``nll_per_token`` (nats), ``perplexity``, ``utf8_bytes``, ``bits_per_byte`` and the method.

    Raises
    ------
    UserInputError
        For a split without text (no tokens, no perplexity).
    """
    window = data.row_length
    stride = resolve_stride(stride, window)
    documents = data.documents(split)
    if not documents or not any(len(document) for document in documents):
        raise UserInputError(f"the {split} split holds no text (is its file empty?): there is no perplexity to "
                             f"measure on it. Give it some documents, or evaluate another split.")
    rows = lm_windows.pack_windows(documents, window, stride)
    lm = LanguageModel(model_config.replace(decode=False))

    @jax.jit
    def _sums(params: Any, batch: dict) -> dict:  # Parameters an argument, not constants baked into the program.
        logits = cast(jax.Array, lm.apply({"params": params}, batch["inputs"], valid=batch["segmentation"] > 0,
                                          segmentation=batch["segmentation"], positions=batch["positions"],
                                          method=LanguageModel.logits))  # [B,L,N]
        return metrics.token_loss_sums(logits, batch["scored_targets"], 0.0, cpu_kernels=model_config.cpu_kernels)

    nll_sum, tokens = 0.0, 0.0
    for batch in rows.batches(data.rows_per_batch):
        result = jax.device_get(_sums(params, batch))
        nll_sum += float(result["nll_sum"])
        tokens += float(result["tokens"])
    expected_tokens = sum(len(document) for document in documents)
    if int(tokens) != expected_tokens:
        raise ValueError(f"Scored {int(tokens)} tokens of a split holding {expected_tokens}.")
    num_bytes = int(data.split_bytes[data.role_of(split)])
    nll_per_token = nll_sum / max(tokens, 1.0)
    return {"split": split, "tokens": int(tokens), "nll_per_token": nll_per_token,
            "perplexity": float(np.exp(nll_per_token)), "utf8_bytes": num_bytes,
            "bits_per_byte": nll_sum / math.log(2.0) / max(num_bytes, 1),
            "method": lm_windows.METHOD, "window": window, "stride": stride, "min_context": window - stride + 1,
            "documents": len(documents),
            "documents_longer_than_window": sum(len(document) > window for document in documents),
            "windows": len(rows.windows), "rows": rows.num_rows}
