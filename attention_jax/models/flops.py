"""Matmul FLOPs of Transformer training, counted from the shapes (no framework imports).

A multiply-add is 2 FLOPs, padding and masked pairs included; elementwise ops, norms, lookups and the
optimizer are left out, as is usual for model FLOPs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # The dataclass only: this module imports no framework.
    from attention_jax.experiment.sections import TransformerConfig

from attention_jax.models import attention_registry, feed_forward_registry, positional_encodings
from attention_jax.models.variants import ModelKind


def attention_function_flops(attention_function: str, *, query_len: int, key_len: int, num_heads: int,
                             key_dim: int, value_dim: int, causal: bool = False,
                             linear_chunk_size: int = attention_registry.LINEAR_CHUNK_SIZE) -> float:
    """Return an attention function's forward FLOPs over projected heads (softmax ones score every pair).

    Parameters
    ----------
    attention_function : str
        ``config.attention_function``.
    query_len, key_len, num_heads, key_dim, value_dim : int
        ``T``, ``S``, ``H``, ``K``, ``V``.
    causal : bool
        Causal self-attention.
    linear_chunk_size : int
        Chunk of causal linear attention.

    Returns
    -------
    float
        Forward FLOPs.
    """
    entry = attention_registry.attention_function(attention_function)
    per_head = entry.flops(query_len=query_len, key_len=key_len, key_dim=key_dim, value_dim=value_dim,
                           causal=causal, chunk_size=linear_chunk_size)
    return float(num_heads * per_head)


def _positional_encoding_flops(positional_encoding: str, *, query_len: int, key_len: int, num_heads: int,
                              key_dim: int, value_dim: int, encoding_settings: Any = None) -> float:
    """``H`` times the encoding's per-head ``flops`` (0 for embedding encodings)."""
    entry = positional_encodings.positional_encoding(positional_encoding)
    if entry.flops is None:
        return 0.0
    settings = positional_encodings.AttentionPositions(positional_encoding, encoding_settings)
    return float(num_heads * entry.flops(settings, query_len=query_len, key_len=key_len, key_dim=key_dim,
                                         value_dim=value_dim))


def _feed_forward_flops(feed_forward: str, *, length: int, d_model: int, d_ff: int, match_params: bool = True) -> float:
    """``2 L D F`` per matrix (two, or three gated) plus ``L F`` for a gate's product."""
    gated = feed_forward_registry.feed_forward(feed_forward).gated
    width = feed_forward_registry._hidden_width(feed_forward, d_ff, match_params=match_params)
    return float((3 if gated else 2) * 2 * length * d_model * width + (length * width if gated else 0))


def _multi_head_attention_flops(attention_function: str, query_len: int, key_len: int, d_model: int,
                                num_heads: int, key_dim: int, value_dim: int, causal: bool) -> float:
    """Forward FLOPs of one multi-head attention: projections, function, output."""
    heads_k, heads_v = num_heads * key_dim, num_heads * value_dim
    projections = 2 * d_model * (query_len * heads_k + key_len * (heads_k + heads_v))
    function = attention_function_flops(attention_function, query_len=query_len, key_len=key_len,
                                        num_heads=num_heads, key_dim=key_dim, value_dim=value_dim, causal=causal)
    output = 2 * query_len * heads_v * d_model
    return projections + function + output


def transformer_train_flops(*, rows: int, source_len: int, target_len: int, num_layers: int, d_model: int,
                            d_ff: int, num_heads: int, key_dim: int, value_dim: int, vocab_size: int,
                            attention_function: str = "scaled_dot_product", positional_encoding: str = "sinusoidal",
                            encoding_settings: Any = None, feed_forward: str = "relu",
                            feed_forward_match_params: bool = True) -> float:
    """Return the matmul FLOPs of one encoder-decoder training step, ``3 x forward``.

    Parameters
    ----------
    rows, source_len, target_len, num_layers, d_model, d_ff, num_heads, key_dim, value_dim, vocab_size : int
        Batch shape, padding included; model shape (Section 3).
    attention_function, positional_encoding : str
        The config's variants.
    encoding_settings : Any
        ``config.positional_encoding_settings``.
    feed_forward : str
        ``config.feed_forward``.
    feed_forward_match_params : bool
        ``config.feed_forward_match_params``.

    Returns
    -------
    float
        Model FLOPs (no recomputation of additive scores).
    """
    def _attention(query_len: int, key_len: int, causal: bool) -> float:
        return _multi_head_attention_flops(attention_function, query_len, key_len, d_model, num_heads, key_dim,
                                           value_dim, causal)

    def _positions(length: int) -> float:  # A self-attention's; cross-attention sees no positions.
        return _positional_encoding_flops(positional_encoding, query_len=length, key_len=length, num_heads=num_heads,
                                         key_dim=key_dim, value_dim=value_dim,
                                         encoding_settings=encoding_settings)

    def _ffn(length: int) -> float:
        return _feed_forward_flops(feed_forward, length=length, d_model=d_model, d_ff=d_ff,
                                  match_params=feed_forward_match_params)

    encoder = num_layers * (_attention(source_len, source_len, False) + _positions(source_len) + _ffn(source_len))
    decoder = num_layers * (_attention(target_len, target_len, True) + _positions(target_len)
                            + _attention(target_len, source_len, False) + _ffn(target_len))
    logits = 2 * target_len * d_model * vocab_size
    return 3.0 * rows * (encoder + decoder + logits)


def _decoder_only_train_flops(*, rows: int, length: int, num_layers: int, d_model: int, d_ff: int,
                             num_heads: int, key_dim: int, value_dim: int, vocab_size: int,
                             attention_function: str = "scaled_dot_product", positional_encoding: str = "sinusoidal",
                             encoding_settings: Any = None, feed_forward: str = "relu",
                             feed_forward_match_params: bool = True) -> float:
    """FLOPs of one decoder-only training step, as :func:`transformer_train_flops` counts."""
    layer = (_multi_head_attention_flops(attention_function, length, length, d_model, num_heads, key_dim,
                                         value_dim, True)
             + _positional_encoding_flops(positional_encoding, query_len=length, key_len=length, num_heads=num_heads,
                                         key_dim=key_dim, value_dim=value_dim,
                                         encoding_settings=encoding_settings)
             + _feed_forward_flops(feed_forward, length=length, d_model=d_model, d_ff=d_ff,
                                  match_params=feed_forward_match_params))
    return 3.0 * rows * (num_layers * layer + 2 * length * d_model * vocab_size)


def training_flops(model_config: TransformerConfig, model_kind: str, target_tokens: float,
                   sequence_length: int) -> float:
    """Return the model FLOPs of training on ``target_tokens`` tokens (Table 3 cost).

    The encoder-decoder counts one source token per target token (Section 5.1); attention terms are counted
    at ``sequence_length``, an upper bound for length-bucketed batches.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    model_kind : str
        ``encoder_decoder`` or ``decoder_only``.
    target_tokens : float
        Target tokens trained on.
    sequence_length : int
        The training ``max_len`` (without the decoding margin).

    Returns
    -------
    float
        FLOPs, forward + backward.
    """
    length = int(sequence_length)
    shape: dict[str, Any] = dict(
        num_layers=model_config.num_layers, d_model=model_config.d_model, d_ff=model_config.d_ff,
        num_heads=model_config.num_heads, key_dim=model_config.key_dim, value_dim=model_config.value_dim,
        vocab_size=model_config.vocab_size, attention_function=model_config.attention_function,
        positional_encoding=model_config.positional_encoding,
        encoding_settings=model_config.positional_encoding_settings, feed_forward=model_config.feed_forward,
        feed_forward_match_params=model_config.feed_forward_match_params)
    if model_kind == ModelKind.DECODER_ONLY:
        per_row = _decoder_only_train_flops(rows=1, length=length, **shape)
    else:
        per_row = transformer_train_flops(rows=1, source_len=length, target_len=length, **shape)
    return per_row / length * float(target_tokens)


def paper_training_flops(hours: float, num_gpus: int, sustained_tflops_per_gpu: float) -> float:
    """Return the paper's training cost (Table 3, footnote 5): time x GPUs x sustained FLOP/s.

    Parameters
    ----------
    hours : float
        Training time.
    num_gpus : int
        GPUs.
    sustained_tflops_per_gpu : float
        K80 2.8, K40 3.7, M40 6.0, P100 9.5.

    Returns
    -------
    float
        FLOPs.
    """
    return hours * 3600.0 * num_gpus * sustained_tflops_per_gpu * 1e12
