"""A float64 NumPy oracle of whole models: the encoder-decoder's and the language model's logits.

Written from the papers (Vaswani et al., 2017, Sections 3.1-3.5; the norms of Ba et al., 2016, Zhang and
Sennrich, 2019, Ioffe and Szegedy, 2015; pre-LN of Xiong et al., 2020), reading the Flax parameter pytree
but none of the library's code; attention and its positional encodings come from ``tests/support/reference.py``.
At ``deterministic=True``: no dropout, batch_norm normalises with its running averages.

Shape glossary: B batch, S source length, T target length, L length, D d_model, N vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tests.support import reference

PAD_ID, BOS_ID = 0, 2
EPSILON = 1e-6
"""Every norm's epsilon, inside the square root."""
EMBEDDING_ENCODINGS = ("sinusoidal", "learned", "none")
"""Encodings added to the embeddings (3.5); the others (relative, rotary, alibi) act in self-attention."""


def batch_norm(params: dict, x: np.ndarray, epsilon: float) -> np.ndarray:
    """Ioffe and Szegedy (2015), Alg. 2 (inference) with the running mean and variance ``[D]`` per feature.

    The running averages start at 0 and are debiased as Adam's moments: divided by ``running_weight`` = 1 - m^t
    (before any step, t = 0: mean 0, variance 1).
    """
    weight = float(params["running_weight"])
    mean, variance = ((params["running_mean"] / weight, params["running_var"] / weight) if weight > 0
                      else (np.zeros_like(params["running_mean"]), np.ones_like(params["running_var"])))
    return (x - mean) / np.sqrt(variance + epsilon) * params["scale"] + params["bias"]


NORMS: dict[str, Callable[[dict, np.ndarray, float], np.ndarray]] = {
    "layer_norm": reference.layer_norm, "rms_norm": reference.rms_norm, "batch_norm": batch_norm}


def normalize(config: Any, params: dict | None, x: np.ndarray, epsilon: float) -> np.ndarray:
    """``config.normalization`` of ``x`` ``[B, L, D]``; ``none`` returns ``x``."""
    if config.normalization == "none":
        return x
    assert params is not None, f"no parameters for the norm {config.normalization!r}"
    return NORMS[config.normalization](params, x, epsilon)


def residual_sublayer(config: Any, block: dict, x: np.ndarray, sublayer: Callable[[np.ndarray], np.ndarray],
                      epsilon: float) -> np.ndarray:
    """Section 3.1, post: ``Norm(x + F(x))``; Xiong et al. (2020), pre: ``x + F(Norm(x))``; no residual: no ``x +``."""
    norm = block.get("layer_norm")
    if config.layer_norm_position == "pre":
        output = sublayer(normalize(config, norm, x, epsilon))
        return x + output if config.residual_connections else output
    output = sublayer(x)
    return normalize(config, norm, x + output if config.residual_connections else output, epsilon)


def _feed_forward(x: np.ndarray, params: dict, config: Any) -> np.ndarray:
    """The position-wise network ``config.feed_forward`` names (Eq. 2: relu), ``[B,L,D]`` -> ``[B,L,D]``."""
    kind = getattr(config, "feed_forward", "relu")
    if kind not in reference.FEED_FORWARD_ACTIVATIONS:
        raise NotImplementedError(f"the model oracle has no feed_forward={kind!r}: add it to reference.py.")
    return reference.feed_forward(params, x, kind)


def padding_mask(query_valid: np.ndarray, key_valid: np.ndarray) -> np.ndarray:
    """``[B, 1, T, S]``: real queries attend to real keys (a padded query's row is empty: zero output)."""
    return query_valid[:, None, :, None] & key_valid[:, None, None, :]


def causal_mask(length: int) -> np.ndarray:
    """``[1, 1, L, L]``: position i attends to j <= i (Section 3.2.3), by explicit loops."""
    allowed = np.zeros((length, length), bool)
    for i in range(length):
        for j in range(i + 1):
            allowed[i, j] = True
    return allowed[None, None]


def embed(config: Any, table: np.ndarray, position: dict, ids: np.ndarray) -> np.ndarray:
    """Section 3.4: ``E[ids] sqrt(d_model)``, plus (3.5) an added encoding; ``[B,L]`` -> ``[B,L,D]``."""
    x = table[ids] * np.sqrt(config.d_model)
    length = ids.shape[1]
    if config.positional_encoding == "sinusoidal":
        return x + reference.sinusoidal_encoding(length, config.d_model)[None]
    if config.positional_encoding == "learned":  # Table 2 row E: one learned row per position.
        return x + position["position_embedding"][:length][None]
    return x  # none, or an encoding that acts in self-attention.


def self_attention(config: Any, params: dict, x: np.ndarray, mask: np.ndarray, *, causal: bool) -> np.ndarray:
    """Multi-head self-attention (3.2.2) of ``x`` ``[B, L, D]``, with rotary, relative or ALiBi positions 0..L-1."""
    if config.positional_encoding in EMBEDDING_ENCODINGS:
        return reference.multi_head_attention(params, x, x, mask)
    positions = np.broadcast_to(np.arange(x.shape[1]), x.shape[:2])  # [B,L]
    output, _ = reference.positional_self_attention(params, x, mask, encoding=config.positional_encoding,
                                                    positions=positions, causal=causal)
    return output


def encoder_layer(config: Any, params: dict, x: np.ndarray, mask: np.ndarray, epsilon: float, *,
                  causal: bool = False) -> np.ndarray:
    """Self-attention then feed-forward, each a residual sublayer; the language model's layer with ``causal``."""
    x = residual_sublayer(config, params.get("attention_block", {}), x,
                          lambda h: self_attention(config, params["self_attention"], h, mask, causal=causal), epsilon)
    return residual_sublayer(config, params.get("ffn_block", {}), x,
                             lambda h: _feed_forward(h, params["ffn"], config), epsilon)


def decoder_layer(config: Any, params: dict, y: np.ndarray, encoded: np.ndarray, self_mask: np.ndarray,
                  cross_mask: np.ndarray, epsilon: float) -> np.ndarray:
    """Masked self-attention, encoder-decoder attention (queries y ``[B,T,D]``, keys ``encoded`` ``[B,S,D]``), FFN."""
    y = residual_sublayer(config, params.get("self_attention_block", {}), y,
                          lambda h: self_attention(config, params["self_attention"], h, self_mask, causal=True),
                          epsilon)
    y = residual_sublayer(config, params.get("cross_attention_block", {}), y,
                          lambda h: reference.multi_head_attention(params["cross_attention"], h, encoded, cross_mask),
                          epsilon)
    return residual_sublayer(config, params.get("ffn_block", {}), y,
                             lambda h: _feed_forward(h, params["ffn"], config), epsilon)


def _final_norm(config: Any, params: dict, name: str, x: np.ndarray, epsilon: float) -> np.ndarray:
    """A pre-LN stack ends in a norm (Xiong et al., 2020); a post-LN stack's last sublayer already normalised."""
    if config.layer_norm_position != "pre" or config.normalization == "none":
        return x
    if name not in params:
        raise ValueError(f"the parameters hold no {name!r}: a pre-LN stack ends in a norm.")
    return normalize(config, params[name], x, epsilon)


def _project(config: Any, params: dict, table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pre-softmax projection ``[B,T,D]`` -> ``[B,T,N]``: the shared embedding's transpose (3.4), or its own matrix."""
    return x @ table.T if config.share_embeddings else x @ params["output_projection"]["kernel"]


def transformer_logits(params: dict, config: Any, inputs: np.ndarray, targets: np.ndarray, *,
                       epsilon: float = EPSILON) -> np.ndarray:
    """Teacher-forced logits ``[B, T, N]`` of the encoder-decoder (Figure 1).

    Parameters
    ----------
    params : dict
        The Flax parameter pytree of ``model.Transformer``, unboxed, as float64 NumPy arrays.
    config : TransformerConfig
        Read as data: widths, normalisation, position, residual connections, encoding, embedding sharing.
    inputs, targets : np.ndarray
        Integer ``[B, S]`` source and ``[B, T]`` target ids (0 = padding); the decoder reads ``[BOS] + targets[:-1]``.
    epsilon : float
        Every norm's epsilon.

    Returns
    -------
    np.ndarray
        float64 ``[B, T, N]``.
    """
    source_valid, target_valid = inputs != PAD_ID, targets != PAD_ID
    source_table = params["shared_embedding" if config.share_embeddings else "source_embedding"]["embedding"]
    target_table = params["shared_embedding" if config.share_embeddings else "target_embedding"]["embedding"]
    x = embed(config, source_table, params.get("encoder_position", {}), inputs)  # [B,S,D]
    for i in range(config.num_layers):
        x = encoder_layer(config, params[f"encoder_{i}"], x, padding_mask(source_valid, source_valid), epsilon)
    encoded = _final_norm(config, params, "encoder_norm", x, epsilon)
    decoder_inputs = np.concatenate([np.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)
    y = embed(config, target_table, params.get("decoder_position", {}), decoder_inputs)  # [B,T,D]
    self_mask = padding_mask(target_valid, target_valid) & causal_mask(targets.shape[1])
    for i in range(config.num_layers):
        y = decoder_layer(config, params[f"decoder_{i}"], y, encoded, self_mask,
                          padding_mask(target_valid, source_valid), epsilon)
    return _project(config, params, target_table, _final_norm(config, params, "decoder_norm", y, epsilon))


def language_model_logits(params: dict, config: Any, targets: np.ndarray, *, epsilon: float = EPSILON) -> np.ndarray:
    """Teacher-forced logits ``[B, L, N]`` of the decoder-only model: causal encoder layers, no cross-attention.

    Parameters
    ----------
    params : dict
        The Flax parameter pytree of ``language_model.LanguageModel``, unboxed, as float64 NumPy arrays.
    config : TransformerConfig
        As :func:`transformer_logits`.
    targets : np.ndarray
        Integer ``[B, L]`` document ids (0 = padding); the model reads ``[BOS] + targets[:-1]``.
    epsilon : float
        Every norm's epsilon.

    Returns
    -------
    np.ndarray
        float64 ``[B, L, N]``.
    """
    valid = targets != PAD_ID
    table = params["shared_embedding" if config.share_embeddings else "input_embedding"]["embedding"]
    input_ids = np.concatenate([np.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], axis=1)
    x = embed(config, table, params.get("position", {}), input_ids)  # [B,L,D]
    mask = padding_mask(valid, valid) & causal_mask(targets.shape[1])
    for i in range(config.num_layers):
        x = encoder_layer(config, params[f"layer_{i}"], x, mask, epsilon, causal=True)
    return _project(config, params, table, _final_norm(config, params, "final_norm", x, epsilon))
