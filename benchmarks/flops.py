"""Matmul FLOPs of one Transformer training step, counted from the shapes (no framework imports).

Shared by ``benchmarks/train_step.py`` (JAX) and ``benchmarks/peer_torch.py`` (PyTorch, another venv),
so both report model FLOPs utilization from the same count.
"""

from __future__ import annotations


def transformer_train_flops(*, rows: int, source_len: int, target_len: int, num_layers: int, d_model: int,
                            d_ff: int, num_heads: int, key_dim: int, value_dim: int, vocab_size: int) -> float:
    """FLOPs of the matrix products of one training step (forward + backward = 3 x forward).

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

    def attention(query_len: int, key_len: int) -> float:  # Per sequence.
        projections = 2 * d_model * (query_len * heads_k + key_len * (heads_k + heads_v))
        scores_and_values = 2 * query_len * key_len * (heads_k + heads_v)
        output = 2 * query_len * heads_v * d_model
        return projections + scores_and_values + output

    def feed_forward(length: int) -> float:
        return 2 * 2 * length * d_model * d_ff

    encoder = num_layers * (attention(source_len, source_len) + feed_forward(source_len))
    decoder = num_layers * (attention(target_len, target_len) + attention(target_len, source_len)
                            + feed_forward(target_len))
    logits = 2 * target_len * d_model * vocab_size
    return 3.0 * rows * (encoder + decoder + logits)
