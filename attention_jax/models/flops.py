"""Matmul FLOPs of Transformer training, counted from the shapes (no framework imports).

A multiply-add is 2 FLOPs, a lone add or multiply 1, counted as the code computes them (padding and
masked pairs included). Elementwise functions of one tensor (softmax, scales, activations), masks,
norms, embedding lookups and the optimizer are left out, as is usual for model FLOPs.
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
    """Forward FLOPs of one attention function over one sequence's projected heads (no projections).

    Parameters
    ----------
    attention_function : str
        A name in :data:`attention_registry.ATTENTION_FUNCTIONS` (``config.attention_function``).
    query_len, key_len : int
        ``T`` queries and ``S`` keys and values (``T == S`` for self-attention).
    num_heads, key_dim, value_dim : int
        ``H`` heads of ``K`` (d_k) and ``V`` (d_v) components.
    causal : bool
        Causal self-attention (``T == S``). Only linear attention computes less for it; the softmax
        functions score all ``T x S`` pairs and mask them.
    linear_chunk_size : int
        ``C``, positions per chunk of causal linear attention.

    Returns
    -------
    float
        FLOPs of the forward pass, by the module's convention (2 per multiply-add).

    Notes
    -----
    The softmax functions score all ``T x S`` pairs whether causal or not.
    """
    entry = attention_registry.attention_function(attention_function)
    per_head = entry.flops(query_len=query_len, key_len=key_len, key_dim=key_dim, value_dim=value_dim,
                           causal=causal, chunk_size=linear_chunk_size)
    return float(num_heads * per_head)


def positional_encoding_flops(positional_encoding: str, *, query_len: int, key_len: int, num_heads: int,
                              key_dim: int, value_dim: int, encoding_settings: Any = None) -> float:
    """Forward FLOPs a positional encoding adds to one self-attention over one sequence (0 for most).

    Parameters
    ----------
    positional_encoding : str
        A name in :data:`positional_encodings.POSITIONAL_ENCODINGS` (``config.positional_encoding``).
    query_len, key_len : int
        ``T`` queries and ``S`` keys.
    num_heads, key_dim, value_dim : int
        ``H`` heads of ``K`` (d_k) and ``V`` (d_v) components.
    encoding_settings : Any
        ``config.positional_encoding_settings``: the entry's own settings dataclass (None: its defaults).

    Returns
    -------
    float
        ``H`` times the entry's ``flops`` (``positional_encodings.relative_flops``, ``rotary_flops``,
        ``alibi_flops`` for the built-in encodings, each with its derivation); 0 for an entry without one
        (the encodings added to the embeddings).
    """
    entry = positional_encodings.positional_encoding(positional_encoding)
    if entry.flops is None:
        return 0.0
    settings = positional_encodings.AttentionPositions(positional_encoding, encoding_settings)
    return float(num_heads * entry.flops(settings, query_len=query_len, key_len=key_len, key_dim=key_dim,
                                         value_dim=value_dim))


def feed_forward_flops(feed_forward: str, *, length: int, d_model: int, d_ff: int, match_params: bool = True) -> float:
    """Forward FLOPs of one feed-forward sublayer over ``length`` positions.

    Parameters
    ----------
    feed_forward : str
        A name in :data:`feed_forward_registry.FEED_FORWARDS` (``config.feed_forward``).
    length : int
        Positions.
    d_model, d_ff : int
        ``D`` and ``config.d_ff`` (the hidden width ``F`` is :func:`feed_forward_registry.hidden_width`'s).
    match_params : bool
        ``config.feed_forward_match_params``.

    Returns
    -------
    float
        ``2 L D F`` per matrix (two, or three gated), plus ``L F`` for a gated entry's product.
    """
    gated = feed_forward_registry.feed_forward(feed_forward).gated
    width = feed_forward_registry.hidden_width(feed_forward, d_ff, match_params=match_params)
    return float((3 if gated else 2) * 2 * length * d_model * width + (length * width if gated else 0))


def _multi_head_attention_flops(attention_function: str, query_len: int, key_len: int, d_model: int,
                                num_heads: int, key_dim: int, value_dim: int, causal: bool) -> float:
    """Forward FLOPs of one multi-head attention over one sequence: projections, the function, output."""
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
    """Count the matmul FLOPs of one encoder-decoder training step (forward + backward = 3 x forward).

    Parameters
    ----------
    rows, source_len, target_len : int
        Batch shape (every position counted, padding included: it is computed).
    num_layers, d_model, d_ff, num_heads, key_dim, value_dim, vocab_size : int
        Model shape (Section 3; ``key_dim``/``value_dim`` per head).
    attention_function : str
        ``config.attention_function``, counted by :func:`attention_function_flops` (the decoder's
        self-attention causal, the encoder's and the cross-attention not).
    positional_encoding : str
        ``config.positional_encoding``, counted in both stacks' self-attentions.
    encoding_settings : Any
        Its ``positional_encoding_settings``.
    feed_forward : str
        ``config.feed_forward`` (:func:`feed_forward_flops`).
    feed_forward_match_params : bool
        ``config.feed_forward_match_params``.

    Returns
    -------
    float
        ``3 * forward``; all ``T x S`` pairs counted (as computed), the backward pass's recomputation of
        additive scores not (hardware FLOPs, not model FLOPs).
    """
    def _attention(query_len: int, key_len: int, causal: bool) -> float:
        return _multi_head_attention_flops(attention_function, query_len, key_len, d_model, num_heads, key_dim,
                                           value_dim, causal)

    def _positions(length: int) -> float:  # A self-attention's; cross-attention sees no positions.
        return positional_encoding_flops(positional_encoding, query_len=length, key_len=length, num_heads=num_heads,
                                         key_dim=key_dim, value_dim=value_dim,
                                         encoding_settings=encoding_settings)

    def _ffn(length: int) -> float:
        return feed_forward_flops(feed_forward, length=length, d_model=d_model, d_ff=d_ff,
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
    """Count the FLOPs of one decoder-only training step, as :func:`transformer_train_flops` does.

    Per layer one causal self-attention and the feed-forward, then the output projection; ``3 * forward``.
    """
    layer = (_multi_head_attention_flops(attention_function, length, length, d_model, num_heads, key_dim,
                                         value_dim, True)
             + positional_encoding_flops(positional_encoding, query_len=length, key_len=length, num_heads=num_heads,
                                         key_dim=key_dim, value_dim=value_dim,
                                         encoding_settings=encoding_settings)
             + feed_forward_flops(feed_forward, length=length, d_model=d_model, d_ff=d_ff,
                                  match_params=feed_forward_match_params))
    return 3.0 * rows * (num_layers * layer + 2 * length * d_model * vocab_size)


def training_flops(model_config: TransformerConfig, model_kind: str, target_tokens: float,
                   sequence_length: int) -> float:
    """Model FLOPs of training on ``target_tokens`` tokens: FLOPs per token times tokens (Table 3 cost).

    Parameters
    ----------
    model_config : TransformerConfig
        The model (widths, ``vocab_size``, ``attention_function``, ``positional_encoding`` and the
        encoding's own settings, ``feed_forward``).
    model_kind : str
        ``"encoder_decoder"`` or ``"decoder_only"``.
    target_tokens : float
        Target-side tokens trained on (``results.json``'s ``train_target_tokens``).
    sequence_length : int
        Length the attention terms are counted at: the training ``max_len`` (``DataConfig.max_len``,
        without the decoding margin that ``TransformerConfig.max_len`` adds).

    Returns
    -------
    float
        FLOPs (forward + backward). For the encoder-decoder each target token is taken to come with one
        source token (the paper's batches hold about as many of each, Section 5.1); the attention score
        terms are counted at ``sequence_length``, an upper bound for length-bucketed batches (a few
        percent of the total at base width and length 256).
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
