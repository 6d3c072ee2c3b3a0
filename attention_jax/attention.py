"""Scaled dot-product and multi-head attention (Vaswani et al., 2017, Section 3.2).

Shape glossary
--------------
B batch, T query length, S key/value length, H heads, K key/query size per head (d_k),
V value size per head (d_v), D model width (d_model).

Masks are boolean and broadcastable to ``[B, H, T, S]``; ``True`` means "this query may attend to
this key". A query row with no allowed key gets zero output (and zero weights), never NaN.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

Array = jax.Array
DType = Any

ATTENTION_IMPLEMENTATIONS = ("einsum", "xla", "cudnn", "fused")
"""Allowed values of ``implementation``.

``einsum``: the reference path written out below; the only one that can return the weights and apply
attention dropout. ``xla`` / ``cudnn``: ``jax.nn.dot_product_attention`` with that backend.
``fused``: ``jax.nn.dot_product_attention`` choosing cuDNN flash attention on a GPU for half-precision
inputs, XLA otherwise.
"""


def make_padding_mask(query_valid: Array, key_valid: Array) -> Array:
    """Mask that lets valid queries attend to valid keys.

    Parameters
    ----------
    query_valid : Array
        Boolean ``[B, T]``: which query positions are real tokens.
    key_valid : Array
        Boolean ``[B, S]``: which key positions are real tokens.

    Returns
    -------
    Array
        Boolean ``[B, 1, T, S]``, ``True`` where both the query and the key are valid.

    Notes
    -----
    Padded queries get a fully masked row, hence zero output; the loss ignores them anyway.
    """
    return jnp.logical_and(query_valid[:, None, :, None], key_valid[:, None, None, :])


def make_causal_mask(length: int) -> Array:
    """Mask that lets position ``i`` attend to positions ``j <= i`` (decoder self-attention, 3.2.3).

    Parameters
    ----------
    length : int
        Sequence length ``T``.

    Returns
    -------
    Array
        Boolean ``[1, 1, T, T]``, lower triangular including the diagonal.

    Notes
    -----
    This is the paper's "masking out (setting to -inf) all values ... which correspond to illegal
    connections", expressed as a boolean mask.
    """
    positions = jnp.arange(length)
    return (positions[None, :] <= positions[:, None])[None, None]


def make_local_mask(query_positions: Array, key_positions: Array, window: int) -> Array:
    """Mask of restricted self-attention: a query attends to keys at most ``window`` positions away.

    Parameters
    ----------
    query_positions : Array
        Integer ``[T]`` positions of the queries.
    key_positions : Array
        Integer ``[S]`` positions of the keys.
    window : int
        The neighbourhood size ``r`` of Table 1's "self-attention (restricted)" row; must be > 0.

    Returns
    -------
    Array
        Boolean ``[1, 1, T, S]``, ``True`` where ``|query - key| <= window``.

    Notes
    -----
    Combined with :func:`make_causal_mask` it gives a causal window of ``window + 1`` keys.
    """
    distance = jnp.abs(query_positions[:, None] - key_positions[None, :])
    return (distance <= window)[None, None]


def combine_masks(*masks: Array | None) -> Array | None:
    """Merge boolean masks with a logical AND, ignoring ``None``.

    Parameters
    ----------
    *masks : Array or None
        Boolean masks broadcastable to a common shape.

    Returns
    -------
    Array or None
        Their conjunction, or ``None`` when every mask is ``None``.

    Notes
    -----
    Broadcasting follows NumPy rules, so a ``[1, 1, T, T]`` causal mask merges with a
    ``[B, 1, T, T]`` padding mask into ``[B, 1, T, T]``.
    """
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    return functools.reduce(jnp.logical_and, present)


def scaled_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    mask: Array | None = None,
    *,
    return_weights: bool = False,
    dropout_fn: Callable[[Array], Array] | None = None,
) -> Array | tuple[Array, Array]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, the paper's Equation (1).

    Parameters
    ----------
    query : Array
        ``[B, T, H, K]`` queries.
    key : Array
        ``[B, S, H, K]`` keys.
    value : Array
        ``[B, S, H, V]`` values; ``V`` may differ from ``K``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``; ``True`` = may attend.
    return_weights : bool
        Also return the attention weights.
    dropout_fn : callable, optional
        Applied to the weights before they multiply the values (attention dropout).

    Returns
    -------
    Array or (Array, Array)
        The output ``[B, T, H, V]``, and with ``return_weights`` the weights ``[B, H, T, S]``.

    Notes
    -----
    Scores and softmax are computed in float32 whatever the input dtype. Rows whose mask is all
    ``False`` get zero weights (and so zero output) instead of the NaN a plain ``-inf`` fill gives.
    """
    key_dim = query.shape[-1]
    scores = jnp.einsum("bthk,bshk->bhts", query, key, preferred_element_type=jnp.float32)
    scores = scores / jnp.sqrt(jnp.float32(key_dim))  # Scale by 1/sqrt(d_k) (Section 3.2.1).
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1)
    if mask is not None:
        weights = jnp.where(mask, weights, 0.0)  # Zero for fully masked rows, exact zeros elsewhere.
    weights = weights.astype(value.dtype)
    attended = dropout_fn(weights) if dropout_fn is not None else weights
    output = jnp.einsum("bhts,bshv->bthv", attended, value)
    return (output, weights) if return_weights else output


def fused_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    mask: Array | None = None,
    *,
    implementation: str = "fused",
) -> Array:
    """Attention through ``jax.nn.dot_product_attention`` (XLA, or cuDNN flash attention on GPU).

    Parameters
    ----------
    query, key, value : Array
        As in :func:`scaled_dot_product_attention`; ``K != V`` is allowed.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``.
    implementation : str
        ``"xla"``, ``"cudnn"`` or ``"fused"`` (cuDNN on GPU for bfloat16/float16 inputs, else XLA).

    Returns
    -------
    Array
        ``[B, T, H, V]``; equal to :func:`scaled_dot_product_attention` up to float rounding.

    Notes
    -----
    ``jax.nn.dot_product_attention`` needs keys and values of one width. When ``d_k != d_v`` the
    narrower of (query, key) and value is zero-padded to the wider width: zero columns add nothing to
    ``Q K^T`` and the padded output columns are sliced away. The scale stays ``1/sqrt(d_k)``.
    Fully masked rows are zeroed afterwards (the fused kernels return a uniform average there).
    """
    key_dim, value_dim = query.shape[-1], value.shape[-1]
    width = max(key_dim, value_dim)

    def pad_last(array: Array) -> Array:
        extra = width - array.shape[-1]
        return array if extra == 0 else jnp.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, extra)])

    backend = implementation
    if implementation == "fused":
        on_gpu = jax.default_backend() == "gpu"
        backend = "cudnn" if on_gpu and query.dtype in (jnp.bfloat16, jnp.float16) else "xla"
    output = jax.nn.dot_product_attention(
        pad_last(query),
        pad_last(key),
        pad_last(value),
        mask=mask,
        scale=1.0 / float(key_dim) ** 0.5,
        implementation=backend,
    )[..., :value_dim]
    if mask is not None:
        any_key = jnp.any(jnp.broadcast_to(mask, mask.shape[:-1] + (key.shape[1],)), axis=-1)
        output = output * jnp.swapaxes(any_key, 1, 2)[..., None].astype(output.dtype)  # [B,T,H,1]
    return output


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate per-head key and value sizes (Section 3.2.2).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O with
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), W^Q, W^K in R^{D x K}, W^V in R^{D x V},
    W^O in R^{hV x D}.

    Attributes
    ----------
    num_heads : int
        ``h``.
    key_dim : int
        ``d_k``, the query/key size of each head.
    value_dim : int
        ``d_v``, the value size of each head.
    out_dim : int
        Output width, ``d_model``.
    attention_dropout_rate : float
        Dropout on the attention weights (einsum implementation only).
    implementation : str
        One of :data:`ATTENTION_IMPLEMENTATIONS`.
    decode : bool
        Autoregressive mode: keys and values of earlier steps are kept in the ``cache`` collection
        and each call processes one new query position.
    decode_window : int
        In decode mode, attend only to cached keys at most this many positions back (0: all).
    dtype : DType
        Computation dtype; parameters stay float32.

    Notes
    -----
    Self-attention: call with ``inputs_q is inputs_kv``. Cross-attention (encoder-decoder, 3.2.3): queries
    from the decoder, keys/values from the encoder output. With ``sow_weights`` the einsum path stores the
    weights in the ``intermediates`` collection as ``attention_weights`` (``[B, H, T, S]``).
    """

    num_heads: int
    key_dim: int
    value_dim: int
    out_dim: int
    attention_dropout_rate: float = 0.0
    implementation: str = "einsum"
    decode: bool = False
    decode_window: int = 0
    dtype: DType = jnp.float32
    kernel_init: Callable[..., Array] = nn.initializers.xavier_uniform()

    def _projection(self, features: tuple[int, int], name: str) -> nn.DenseGeneral:
        return nn.DenseGeneral(
            features=features,
            axis=-1,
            dtype=self.dtype,
            kernel_init=nn.with_logical_partitioning(self.kernel_init, ("embed", "heads", "kv")),
            bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("heads", "kv")),
            name=name,
        )

    @nn.compact
    def __call__(
        self,
        inputs_q: Array,
        inputs_kv: Array,
        mask: Array | None = None,
        *,
        deterministic: bool = True,
        sow_weights: bool = False,
    ) -> Array:
        """Attend from ``inputs_q`` [B, T, D] to ``inputs_kv`` [B, S, D]; returns [B, T, out_dim].

        Parameters
        ----------
        inputs_q : Array
            ``[B, T, D]`` query-side inputs.
        inputs_kv : Array
            ``[B, S, D]`` key/value-side inputs.
        mask : Array, optional
            Boolean, broadcastable to ``[B, H, T, S]``. In decode mode the cache-position mask is
            added here, so pass only the padding / window mask.
        deterministic : bool
            Disable attention dropout.
        sow_weights : bool
            Store the attention weights in the ``intermediates`` collection (einsum path).

        Returns
        -------
        Array
            ``[B, T, out_dim]``.

        Notes
        -----
        In decode mode ``T`` must be 1 and the first call (during ``init``) sizes the cache from
        ``inputs_kv``'s length, the maximum decode length.
        """
        query = self._projection((self.num_heads, self.key_dim), "query")(inputs_q)  # [B,T,H,K]
        key = self._projection((self.num_heads, self.key_dim), "key")(inputs_kv)  # [B,S,H,K]
        value = self._projection((self.num_heads, self.value_dim), "value")(inputs_kv)  # [B,S,H,V]
        if self.decode:
            key, value, mask = self._update_cache(key, value, mask)

        use_dropout = self.attention_dropout_rate > 0.0 and not deterministic
        if self.implementation == "einsum":
            dropout_fn = None
            if use_dropout:
                dropout_fn = nn.Dropout(self.attention_dropout_rate, deterministic=False)
            attended, weights = scaled_dot_product_attention(
                query, key, value, mask, return_weights=True, dropout_fn=dropout_fn
            )
            if sow_weights:
                self.sow("intermediates", "attention_weights", weights)
        else:
            if use_dropout:
                raise ValueError(
                    f"attention_dropout_rate={self.attention_dropout_rate} needs "
                    f"implementation='einsum'; got implementation={self.implementation!r}."
                )
            attended = fused_dot_product_attention(
                query, key, value, mask, implementation=self.implementation
            )
        return nn.DenseGeneral(  # Concat(heads) W^O: [B,T,H,V] -> [B,T,D]
            features=self.out_dim,
            axis=(-2, -1),
            dtype=self.dtype,
            kernel_init=nn.with_logical_partitioning(self.kernel_init, ("heads", "kv", "embed")),
            bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("embed",)),
            name="out",
        )(attended)

    def _update_cache(
        self, key: Array, value: Array, mask: Array | None
    ) -> tuple[Array, Array, Array | None]:
        """Write this step's key/value into the cache and return the whole cache with its mask."""
        initializing = not self.has_variable("cache", "cached_key")
        cached_key = self.variable("cache", "cached_key", jnp.zeros, key.shape, key.dtype)
        cached_value = self.variable("cache", "cached_value", jnp.zeros, value.shape, value.dtype)
        cache_index = self.variable("cache", "cache_index", lambda: jnp.array(0, jnp.int32))
        if initializing:
            return key, value, mask
        if key.shape[1] != 1:
            raise ValueError(f"decode mode processes one position per call; got {key.shape[1]}.")
        index = cache_index.value
        cached_key.value = jax.lax.dynamic_update_slice_in_dim(cached_key.value, key, index, axis=1)
        cached_value.value = jax.lax.dynamic_update_slice_in_dim(
            cached_value.value, value, index, axis=1
        )
        cache_index.value = index + 1
        max_length = cached_key.value.shape[1]
        key_positions = jnp.arange(max_length)
        filled = key_positions <= index
        if self.decode_window > 0:  # Restricted self-attention: only the last r positions.
            filled = jnp.logical_and(filled, index - key_positions <= self.decode_window)
        filled = filled[None, None, None, :]  # [1,1,1,S]
        return cached_key.value, cached_value.value, combine_masks(mask, filled)
