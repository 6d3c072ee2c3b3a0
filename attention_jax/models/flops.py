"""Matmul FLOPs of Transformer training, counted from the shapes (no framework imports).

The one FLOP count of the project: ``benchmarks/flops.py`` re-exports it for the step benchmarks (JAX
and, in another virtual environment, PyTorch), and every run's ``results.json`` records
:func:`training_flops`. Table 3's other cost estimate, the paper's, is :func:`paper_training_flops`.
"""

from __future__ import annotations

from typing import Any


def _attention_flops(query_len: int, key_len: int, d_model: int, heads_k: int, heads_v: int) -> float:
    """Forward FLOPs of one multi-head attention over one sequence (projections, scores, output)."""
    projections = 2 * d_model * (query_len * heads_k + key_len * (heads_k + heads_v))
    scores_and_values = 2 * query_len * key_len * (heads_k + heads_v)
    output = 2 * query_len * heads_v * d_model
    return projections + scores_and_values + output


def transformer_train_flops(*, rows: int, source_len: int, target_len: int, num_layers: int, d_model: int,
                            d_ff: int, num_heads: int, key_dim: int, value_dim: int, vocab_size: int) -> float:
    """FLOPs of the matrix products of one encoder-decoder training step (forward + backward = 3 x forward).

    Parameters
    ----------
    rows, source_len, target_len : int
        Batch shape (every position counted, padding included: it is computed).
    num_layers, d_model, d_ff, num_heads, key_dim, value_dim, vocab_size : int
        Model shape (Section 3; ``key_dim``/``value_dim`` per head).

    Returns
    -------
    float
        ``3 * forward``, a multiply-add counted as 2 FLOPs. Attention scores and weighted sums are
        counted over all ``T x S`` pairs (as computed, the causal mask included); embedding lookups,
        softmax, layer norms and the optimizer are left out (standard MFU accounting).
    """
    heads_k, heads_v = num_heads * key_dim, num_heads * value_dim

    def feed_forward(length: int) -> float:
        return 2 * 2 * length * d_model * d_ff

    encoder = num_layers * (_attention_flops(source_len, source_len, d_model, heads_k, heads_v)
                            + feed_forward(source_len))
    decoder = num_layers * (_attention_flops(target_len, target_len, d_model, heads_k, heads_v)
                            + _attention_flops(target_len, source_len, d_model, heads_k, heads_v)
                            + feed_forward(target_len))
    logits = 2 * target_len * d_model * vocab_size
    return 3.0 * rows * (encoder + decoder + logits)


def decoder_only_train_flops(*, rows: int, length: int, num_layers: int, d_model: int, d_ff: int,
                             num_heads: int, key_dim: int, value_dim: int, vocab_size: int) -> float:
    """FLOPs of one training step of the decoder-only language model (same accounting as above).

    Parameters
    ----------
    rows, length : int
        Batch shape ``[rows, length]`` (packed rows: every position is computed).
    num_layers, d_model, d_ff, num_heads, key_dim, value_dim, vocab_size : int
        Model shape.

    Returns
    -------
    float
        ``3 * forward``: per layer one causal self-attention (all ``L x L`` pairs) and the feed-forward,
        then the output projection.
    """
    heads_k, heads_v = num_heads * key_dim, num_heads * value_dim
    layer = _attention_flops(length, length, d_model, heads_k, heads_v) + 2 * 2 * length * d_model * d_ff
    return 3.0 * rows * (num_layers * layer + 2 * length * d_model * vocab_size)


def training_flops(config: Any, target_tokens: float, sequence_length: int | None = None) -> float:
    """Model FLOPs of training on ``target_tokens`` tokens: FLOPs per token times tokens (Table 3 cost).

    Parameters
    ----------
    config : ml_collections.ConfigDict
        Experiment config (``model_kind``, widths, ``vocab_size``, ``max_len``); ``key_dim``/``value_dim``
        of 0 mean ``d_model // num_heads``.
    target_tokens : float
        Target-side tokens trained on (``results.json``'s ``train_target_tokens``).
    sequence_length : int, optional
        Length the attention terms are counted at (default ``config.max_len``).

    Returns
    -------
    float
        FLOPs (forward + backward). For the encoder-decoder each target token is taken to come with one
        source token (the paper's batches hold about as many of each, Section 5.1); the attention score
        terms are counted at ``sequence_length``, an upper bound for length-bucketed batches (a few
        percent of the total at base width and length 256).
    """
    length = int(sequence_length or config.max_len)
    heads = int(config.num_heads)
    shape = dict(num_layers=int(config.num_layers), d_model=int(config.d_model), d_ff=int(config.d_ff),
                 num_heads=heads, key_dim=int(config.key_dim) or int(config.d_model) // heads,
                 value_dim=int(config.value_dim) or int(config.d_model) // heads,
                 vocab_size=int(config.vocab_size))
    if config.get("model_kind", "encoder_decoder") == "decoder_only":
        per_row = decoder_only_train_flops(rows=1, length=length, **shape)
    else:
        per_row = transformer_train_flops(rows=1, source_len=length, target_len=length, **shape)
    return per_row / length * float(target_tokens)


def paper_training_flops(hours: float, num_gpus: int, sustained_tflops_per_gpu: float) -> float:
    """The paper's training-cost estimate (Table 3, footnote 5): time x GPUs x sustained FLOP/s.

    Parameters
    ----------
    hours : float
        Training time.
    num_gpus : int
        GPUs used.
    sustained_tflops_per_gpu : float
        The paper's sustained single-precision figure per GPU (K80 2.8, K40 3.7, M40 6.0, P100 9.5).

    Returns
    -------
    float
        FLOPs.
    """
    return hours * 3600.0 * num_gpus * sustained_tflops_per_gpu * 1e12
