"""Scaled dot-product and multi-head attention (Vaswani et al., 2017, Section 3.2); restricted and fused paths.

Shapes: B batch, T queries, S keys, H heads, K d_k, V d_v, D d_model. Masks are boolean, broadcastable to
``[B, H, T, S]``, True = may attend; a query with no allowed key gets zero output, never NaN.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, cast

import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.cpu_kernels import dense_dot_general, dropout_class
from attention_jax.models import (
    attention_functions,
    attention_positions,
    attention_registry,
    decode_attention,
    positional_encodings,
    softmax,
)
from attention_jax.models.attention_registry import AttentionFunction, AttentionImplementation
from attention_jax.models.masks import LocalMask, _check_window

Array = jax.Array
DType = Any

ATTENTION_IMPLEMENTATIONS = attention_registry.ATTENTION_IMPLEMENTATIONS
"""Allowed ``implementation`` values; only ``einsum`` returns weights and applies attention dropout."""


def scaled_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    mask: Array | None = None,
    *,
    return_weights: bool = False,
    dropout_fn: Callable[[Array], Array] | None = None,
) -> Array | tuple[Array, Array]:
    """Return softmax(Q K^T / sqrt(d_k)) V, Equation (1); scores and softmax in float32.

    Parameters
    ----------
    query, key, value : Array
        ``[B, T, H, K]``, ``[B, S, H, K]``, ``[B, S, H, V]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``.
    return_weights : bool
        Also return the weights ``[B, H, T, S]``.
    dropout_fn : callable, optional
        Attention dropout on the weights.

    Returns
    -------
    Array or (Array, Array)
        ``[B, T, H, V]`` (and the weights).
    """
    key_dim = query.shape[-1]
    scores = jnp.einsum("bthk,bshk->bhts", query, key, preferred_element_type=jnp.float32)
    scores = scores / jnp.sqrt(jnp.float32(key_dim))  # Scale by 1/sqrt(d_k) (Section 3.2.1).
    return softmax.attend(scores, value, mask, return_weights=return_weights, dropout_fn=dropout_fn)


def _local_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    window: int,
    *,
    valid: Array | None = None,
    causal: bool = False,
    dropout_fn: Callable[[Array], Array] | None = None,
) -> Array:
    """Return restricted self-attention (Table 1), ``|i - j| <= window``, in O(r n d).

    Each block of ``r`` queries is scored against its neighbour blocks' ``3r`` (causal ``2r``) keys; equal to
    :func:`scaled_dot_product_attention` with ``LocalMask(window, valid, causal).to_dense(L)``.

    ``query`` and ``key`` ``[B, L, H, K]``, ``value`` ``[B, L, H, V]``, to ``[B, L, H, V]``.
    """
    _check_window(window)
    batch, length, _, key_dim = query.shape
    _check_one_length(length, key, value)
    if window >= length - 1:  # The window covers the whole sequence: nothing to save.
        dense_mask = LocalMask(window=window, valid=valid, causal=causal).to_dense(length)
        return cast(Array, scaled_dot_product_attention(query, key, value, dense_mask, dropout_fn=dropout_fn))

    block = window
    num_blocks = -(-length // block)
    offsets = (-1, 0) if causal else (-1, 0, 1)  # Neighbour blocks holding every key within r.

    query_blocks = _to_blocks(query, block, num_blocks, margin=0)  # [B,nb,w,H,K]
    key_blocks = _to_blocks(key, block, num_blocks, margin=1)  # [B,nb+2,w,H,K]
    value_blocks = _to_blocks(value, block, num_blocks, margin=1)  # [B,nb+2,w,H,V]

    mask = _local_block_mask(length, window, num_blocks, offsets, valid, causal)  # [B or 1,1,nb,w,Cw]

    # Scores of each query block against its C neighbour blocks, side by side: [B,H,nb,w,Cw].
    scores = jnp.concatenate([
        jnp.einsum("bnqhk,bnshk->bhnqs", query_blocks, _neighbours(key_blocks, o, num_blocks),
                   preferred_element_type=jnp.float32)
        for o in offsets], axis=-1)
    scores = scores / jnp.sqrt(jnp.float32(key_dim))  # Scale by 1/sqrt(d_k) (Section 3.2.1).
    weights = softmax._masked_softmax(scores, mask).astype(value.dtype)
    if dropout_fn is not None:
        weights = dropout_fn(weights)
    output = cast(Array, sum(  # [B,nb,w,H,V]; offsets is never empty, so never the start value 0.
        jnp.einsum("bhnqs,bnshv->bnqhv", weights[..., c * block:(c + 1) * block],
                   _neighbours(value_blocks, o, num_blocks))
        for c, o in enumerate(offsets)))
    return output.reshape(batch, num_blocks * block, *output.shape[3:])[:, :length]


# The block layout of restricted self-attention: ``L`` positions cut into ``nb = ceil(L / r)`` blocks of
# ``w = r``; keys within ``r`` of block ``i`` lie in blocks ``i - 1 .. i + 1`` (``i - 1, i`` when causal).


def _to_blocks(sequence: Array, block: int, num_blocks: int, margin: int) -> Array:
    """Cut axis 1 into ``[B, margin + nb + margin, block, ...]`` zero-padded blocks."""
    edge = [(0, 0)] * sequence.ndim
    edge[1] = (margin * block, (num_blocks + margin) * block - sequence.shape[1])
    padded = jnp.pad(sequence, edge)
    return padded.reshape(sequence.shape[0], num_blocks + 2 * margin, block, *sequence.shape[2:])


def _neighbours(blocks: Array, offset: int, num_blocks: int) -> Array:
    """Block ``i + offset`` ``[B, nb, w, ...]`` for every block ``i`` of one-block-padded ``blocks``."""
    return blocks[:, 1 + offset:1 + offset + num_blocks]


def _local_block_mask(length: int, window: int, num_blocks: int, offsets: tuple[int, ...],
                      valid: Array | None, causal: bool) -> Array:
    """Which neighbour-block keys each query sees: ``|i - j| <= r``, in range, valid, causal; ``[B|1,1,nb,w,Cw]``."""
    block = window
    # Positions: queries [nb, w, 1], keys [nb, 1, Cw] (C = len(offsets)); keys outside [0, L) are padding.
    query_positions = jnp.arange(num_blocks * block).reshape(num_blocks, block, 1)
    block_starts = (jnp.arange(num_blocks)[:, None] + jnp.asarray(offsets)[None, :]) * block  # [nb,C]
    key_positions = (block_starts[:, :, None] + jnp.arange(block)).reshape(num_blocks, 1, -1)
    allowed = jnp.abs(query_positions - key_positions) <= window  # |i - j| <= r
    allowed &= (key_positions >= 0) & (key_positions < length)
    if causal:
        allowed &= key_positions <= query_positions
    allowed = allowed[None]  # [1,nb,w,Cw]
    if valid is not None:
        query_valid = _to_blocks(valid, block, num_blocks, margin=0)[..., None]  # [B,nb,w,1]
        valid_blocks = _to_blocks(valid, block, num_blocks, margin=1)  # [B,nb+2,w]
        key_valid = jnp.concatenate(  # [B,nb,Cw]
            [_neighbours(valid_blocks, o, num_blocks) for o in offsets], axis=2)
        allowed = allowed & query_valid & key_valid[:, :, None, :]
    return allowed[:, None]


def _check_one_length(length: int, key: Array, value: Array) -> None:
    """Raise ValueError unless keys and values have the queries' length (self-attention)."""
    if key.shape[1] != length or value.shape[1] != length:
        raise ValueError(f"local_dot_product_attention is self-attention: query, key and value need one length; "
                         f"got {length}, {key.shape[1]}, {value.shape[1]}. Use scaled_dot_product_attention "
                         "for cross-attention.")


def _fused_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    mask: Array | None = None,
    *,
    implementation: str = "fused",
) -> Array:
    """Equation (1) by ``jax.nn.dot_product_attention`` (``fused``: cuDNN on GPU for 16-bit inputs, else XLA);
    ``d_k != d_v`` is zero-padded and sliced back, fully masked rows zeroed (the kernels average there)."""
    key_dim, value_dim = query.shape[-1], value.shape[-1]
    width = max(key_dim, value_dim)

    def _pad_last(array: Array) -> Array:
        extra = width - array.shape[-1]
        return array if extra == 0 else jnp.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, extra)])

    # "xla" or "cudnn" pass through unchanged; jax.nn.dot_product_attention rejects any other value.
    backend = cast(Literal["xla", "cudnn"], implementation)
    if implementation == AttentionImplementation.FUSED:
        on_gpu = jax.default_backend() == "gpu"
        backend = "cudnn" if on_gpu and query.dtype in (jnp.bfloat16, jnp.float16) else "xla"
    output = jax.nn.dot_product_attention(
        _pad_last(query),
        _pad_last(key),
        _pad_last(value),
        mask=mask,
        scale=1.0 / float(key_dim) ** 0.5,
        implementation=backend,
    )[..., :value_dim]
    if mask is not None:
        any_key = jnp.any(jnp.broadcast_to(mask, mask.shape[:-1] + (key.shape[1],)), axis=-1)
        output = output * jnp.swapaxes(any_key, 1, 2)[..., None].astype(output.dtype)  # [B,T,H,1]
    return output


def _as_dense_mask(mask: Any, query_length: int, key_length: int) -> Array | None:
    """A structured or window mask as a dense boolean one, broadcastable to ``[B, H, T, S]``."""
    if isinstance(mask, attention_functions.StructuredMask):
        return mask.to_dense(query_length, key_length)
    if hasattr(mask, "to_dense"):  # masks.LocalMask (restricted self-attention).
        return mask.to_dense(key_length)
    return mask


def _position_scores(module: nn.Module, entry: AttentionFunction, scheme: Any, query: Array, key: Array,
                     query_positions: Array, key_positions: Array) -> Array:
    """The attention function's float32 scores ``[B, H, T, S]`` plus the encoding entry's ``score_bias``."""
    if entry.score is not None:
        scores = entry.score(module, query, key)  # float32 [B,H,T,S]
    else:
        query = entry.query_transform(query) if entry.query_transform is not None else query
        scores = jnp.einsum("bthk,bshk->bhts", query, key, preferred_element_type=jnp.float32)
        scores = scores / jnp.sqrt(jnp.float32(query.shape[-1]))  # Equation (1)
    return scores + scheme.score_bias(module, module.positional_encoding, query, query_positions, key_positions)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, Section 3.2.2: Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, ...).

    ``positional_encoding``: an in-attention encoding (self-attention only); ``decode`` keeps keys and values
    in ``cache``, the last ``decode_window`` of them when > 0; a :class:`LocalMask` selects restricted attention.
    """

    num_heads: int
    key_dim: int
    value_dim: int
    out_dim: int
    attention_dropout_rate: float = 0.0
    implementation: str = "einsum"
    attention_function: str = "scaled_dot_product"
    attention_settings: Any = None
    decode: bool = False
    decode_window: int = 0
    dtype: DType = jnp.float32
    cpu_kernels: bool = True
    positional_encoding: attention_positions.AttentionPositions | None = None
    kernel_init: Callable[..., Array] = nn.initializers.xavier_uniform()

    def _projection(self, features: tuple[int, int], name: str) -> nn.DenseGeneral:
        return nn.DenseGeneral(
            features=features,
            axis=-1,
            dtype=self.dtype,
            dot_general=dense_dot_general(self.cpu_kernels),
            kernel_init=nn.with_logical_partitioning(self.kernel_init, ("embed", "heads", "kv")),
            bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("heads", "kv")),
            name=name,
        )

    @nn.compact
    def __call__(
        self,
        inputs_q: Array,
        inputs_kv: Array,
        mask: Array | LocalMask | attention_functions.StructuredMask | None = None,
        *,
        deterministic: bool = True,
        sow_weights: bool = False,
        positions: Array | None = None,
    ) -> Array:
        """Attend from ``inputs_q`` ``[B, T, D]`` to ``inputs_kv`` ``[B, S, D]``; return ``[B, T, out_dim]``.

        In decode mode ``T`` is 1 and ``init`` sizes the cache from ``inputs_kv``'s length. ``positions``
        (``[B, T]``) reach an in-attention encoding; ``sow_weights`` stores the weights in ``intermediates``.
        """
        entry = self._entry(decode=self.decode, sow_weights=sow_weights)
        query = self._projection((self.num_heads, self.key_dim), "query")(inputs_q)  # [B,T,H,K]
        key = self._projection((self.num_heads, self.key_dim), "key")(inputs_kv)  # [B,S,H,K]
        value = self._projection((self.num_heads, self.value_dim), "value")(inputs_kv)  # [B,S,H,V]
        scheme = positional_encodings._attention_scheme(self.positional_encoding)  # Relative, rotary, ALiBi.
        if scheme is not None:
            positions = self._call_positions(query.shape[1], positions)  # [B|1,T]
            if scheme.rotate is not None:  # Rotary: queries and keys turned by their positions.
                query, key = scheme.rotate(query, positions), scheme.rotate(key, positions)
        if scheme is not None and scheme.score_bias is not None:  # Biased scores: relative, ALiBi.
            assert positions is not None  # Set by _call_positions above (scheme is not None).
            heads = self._position_score_attention(entry, scheme, query, key, value, mask, positions,
                                                   dropout_fn=self._weight_dropout(deterministic),
                                                   sow_weights=sow_weights)
        elif entry.attend is not None:  # The function computes its heads itself (linear attention).
            heads = entry.attend(self, query, key, value, mask, decode=self.decode)
        elif entry.score is not None:  # Its own scores, then the shared softmax (additive attention).
            heads = self._score_attention(entry, query, key, value, mask, deterministic=deterministic,
                                          sow_weights=sow_weights)
        else:  # softmax(q' k^T / sqrt(d_k)) v on every implementation (the paper's; unscaled).
            heads = self._dot_product_attention(entry, query, key, value, mask, deterministic=deterministic,
                                                sow_weights=sow_weights)
        return self._output_projection(heads)  # [B,T,D]

    def _call_positions(self, length: int, positions: Array | None) -> Array:
        """Integer ``[B|1, T]`` positions of this call's queries (in decode mode, from the cache index)."""
        if self.decode:
            start = self.get_variable("cache", "cache_index") if self.has_variable("cache", "cache_index") else 0
            return (start + jnp.arange(length))[None]
        return jnp.arange(length)[None] if positions is None else positions

    def _entry(self, *, decode: bool, sow_weights: bool) -> AttentionFunction:
        """The registry entry of ``attention_function``, checked against this layer's settings."""
        attention_registry.check_attention_function(
            self.attention_function, implementation=self.implementation, window=self.decode_window,
            attention_dropout_rate=self.attention_dropout_rate)
        entry = attention_registry.attention_function(self.attention_function)
        if sow_weights:
            attention_registry.require_weights(self.attention_function)
        if self.positional_encoding is not None:
            positional_encodings.check_with_attention(
                self.positional_encoding.encoding, attention_function=self.attention_function,
                implementation=self.implementation, key_dim=self.key_dim)
        if decode and not entry.supports_decode_cache:
            raise ValueError(f"attention_function={self.attention_function!r} has no incremental decode step: "
                             "decode with the uncached forward pass or another function.")
        return entry

    def _dot_product_attention(self, entry: AttentionFunction, query: Array, key: Array, value: Array,
                               mask: Any, *, deterministic: bool, sow_weights: bool) -> Array:
        """``softmax(q' k^T / sqrt(d_k)) v`` heads; keys may have ``B / R`` rows (a beam's hypotheses)."""
        if entry.query_transform is not None:
            query = entry.query_transform(query)  # dot_product: sqrt(d_k) q, undoing the scale (footnote 4).
        if isinstance(mask, LocalMask):
            mask = self._local_or_dense(mask, query.shape[1], key.shape[1], sow_weights)
        single_query = (self.implementation == AttentionImplementation.EINSUM and query.shape[1] == 1
                        and not (sow_weights or self._drops_weights(deterministic) or isinstance(mask, LocalMask)))
        if self.decode:
            key, value, mask = self._update_key_value_cache(  # [B,H,L,K|V]: heads first.
                key, value, mask, window=self.decode_window)
            if single_query:  # A decode step: products over the cache as stored.
                return decode_attention.cached_single_query_attention(query, key, value, mask)
            key, value = jnp.swapaxes(key, 1, 2), jnp.swapaxes(value, 1, 2)  # [B,L,H,K|V]
        if not single_query:  # A search's hypotheses share a sentence's key/value row: one row per query row.
            key, value, mask = attention_functions._share_key_rows(query.shape[0], key, value, mask)  # [B,S,H,K|V]
        if self.implementation == AttentionImplementation.EINSUM:
            return self._einsum_attention(query, key, value, mask, single_query=single_query,
                                          deterministic=deterministic, sow_weights=sow_weights)
        return self._kernel_attention(query, key, value, mask, deterministic=deterministic)

    def _einsum_attention(self, query: Array, key: Array, value: Array, mask: Any, *, single_query: bool,
                          deterministic: bool, sow_weights: bool) -> Array:
        """The einsum paths: one query per row, blockwise window, or full scores."""
        if single_query:  # One query position per row (cross-attention of a decode step): no transposes.
            return decode_attention.single_query_attention(query, key, value, mask)
        dropout_fn = self._weight_dropout(deterministic)
        if isinstance(mask, LocalMask):  # Restricted self-attention, blockwise (Table 1).
            return _local_dot_product_attention(query, key, value, mask.window, valid=mask.valid,
                                               causal=mask.causal, dropout_fn=dropout_fn)
        attended, weights = scaled_dot_product_attention(query, key, value, mask, return_weights=True,
                                                         dropout_fn=dropout_fn)
        if sow_weights:
            self.sow("intermediates", "attention_weights", weights)
        return attended

    def _kernel_attention(self, query: Array, key: Array, value: Array, mask: Array | None, *,
                          deterministic: bool) -> Array:
        """Equation (1) through ``jax.nn.dot_product_attention``: no dropout."""
        if self._drops_weights(deterministic):
            raise ValueError(f"attention_dropout_rate={self.attention_dropout_rate} needs "
                             f"implementation='einsum'; got implementation={self.implementation!r}.")
        return _fused_dot_product_attention(query, key, value, mask, implementation=self.implementation)

    def _score_attention(self, entry: AttentionFunction, query: Array, key: Array, value: Array, mask: Any, *,
                         deterministic: bool, sow_weights: bool) -> Array:
        """``softmax(entry.score(q, k)) v`` heads, over the cache in decode mode."""
        key, value, mask = attention_functions._share_key_rows(query.shape[0], key, value, mask)
        mask = _as_dense_mask(mask, query.shape[1], key.shape[1])
        if self.decode:
            key, value, mask = self._update_key_value_cache(  # [B,H,L,K|V]: heads first.
                key, value, mask, window=self.decode_window)
            key, value = jnp.swapaxes(key, 1, 2), jnp.swapaxes(value, 1, 2)  # [B,L,H,K|V]
        assert entry.score is not None  # Called only for entries with a score (__call__).
        scores = entry.score(self, query, key)  # float32 [B,H,T,S]
        attended, weights = softmax.attend(scores, value, mask, return_weights=True,
                                           dropout_fn=self._weight_dropout(deterministic))
        if sow_weights:
            self.sow("intermediates", "attention_weights", weights)
        return attended

    def _position_score_attention(self, entry: AttentionFunction, scheme: Any, query: Array, key: Array,
                                  value: Array, mask: Any, query_positions: Array, *, dropout_fn: Any,
                                  sow_weights: bool) -> Array:
        """``softmax(scores + bias) (V + value term)`` heads: relative and ALiBi attention's einsum path.

        Keys share ``query_positions`` ``[B|1, T]``, or in decode mode sit at their cache slots.
        """
        mask = _as_dense_mask(mask, query.shape[1], key.shape[1])
        key_positions = query_positions
        if self.decode:
            key, value, mask = self._update_key_value_cache(  # [B,H,L,K|V]: heads first.
                key, value, mask, window=self.decode_window)
            key, value = jnp.swapaxes(key, 1, 2), jnp.swapaxes(value, 1, 2)  # [B,L,H,K|V]
            key_positions = jnp.arange(key.shape[1])[None]  # Slot s holds position s.
        scores = _position_scores(self, entry, scheme, query, key, query_positions, key_positions)
        weights = softmax._masked_softmax(scores, mask).astype(value.dtype)
        if sow_weights:
            self.sow("intermediates", "attention_weights", weights)
        attended = dropout_fn(weights) if dropout_fn is not None else weights
        heads = jnp.einsum("bhts,bshv->bthv", attended, value)
        if scheme.value_term is not None:
            term = scheme.value_term(self, self.positional_encoding, attended, query_positions, key_positions)
            heads = heads if term is None else heads + term.astype(heads.dtype)
        return heads

    def _update_key_value_cache(self, key: Array, value: Array, mask: Array | None, *,
                                window: int = 0) -> tuple[Array, Array, Array | None]:
        """Write a step's ``[B, 1, H, K|V]`` into ``cache``; return the cache, heads first, and its mask.

        ``init`` passes ``[B, L, H, K|V]``, sizing the cache ``[B, H, L, K|V]``; ``window`` > 0 keeps the last
        ``window`` positions.
        """
        key, value = jnp.swapaxes(key, 1, 2), jnp.swapaxes(value, 1, 2)  # [B,H,T,K|V]
        initializing = not self.has_variable("cache", "cached_key")
        cached_key = self.variable("cache", "cached_key", jnp.zeros, key.shape, key.dtype)
        cached_value = self.variable("cache", "cached_value", jnp.zeros, value.shape, value.dtype)
        cache_index = self.variable("cache", "cache_index", lambda: jnp.array(0, jnp.int32))
        if initializing:
            return key, value, mask
        if key.shape[2] != 1:
            raise ValueError(f"decode mode processes one position per call; got {key.shape[2]}.")
        index = cache_index.value
        cached_key.value = jax.lax.dynamic_update_slice_in_dim(cached_key.value, key, index, axis=2)
        cached_value.value = jax.lax.dynamic_update_slice_in_dim(cached_value.value, value, index, axis=2)
        cache_index.value = index + 1
        key_positions = jnp.arange(cached_key.value.shape[2])
        filled = key_positions <= index
        if window > 0:  # Restricted self-attention: only the last r positions.
            filled = jnp.logical_and(filled, index - key_positions <= window)
        filled = filled[None, None, None, :]  # [1,1,1,L]
        return cached_key.value, cached_value.value, filled if mask is None else jnp.logical_and(mask, filled)

    def _drops_weights(self, deterministic: bool) -> bool:
        return self.attention_dropout_rate > 0.0 and not deterministic

    def _weight_dropout(self, deterministic: bool) -> Callable[[Array], Array] | None:
        if not self._drops_weights(deterministic):
            return None
        return dropout_class(self.cpu_kernels)(self.attention_dropout_rate, deterministic=False)

    def _output_projection(self, attended: Array) -> Array:
        """Concat(heads) W^O: ``[B, T, H, V]`` -> ``[B, T, out_dim]``."""
        return nn.DenseGeneral(
            features=self.out_dim,
            axis=(-2, -1),
            dtype=self.dtype,
            dot_general=dense_dot_general(self.cpu_kernels),
            kernel_init=nn.with_logical_partitioning(self.kernel_init, ("heads", "kv", "embed")),
            bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("embed",)),
            name="out",
        )(attended)

    def _local_or_dense(self, mask: LocalMask, query_length: int, key_length: int,
                        sow_weights: bool) -> Array | LocalMask:
        """Keep ``mask`` for the blockwise einsum path, else make it dense."""
        if self.decode or query_length != key_length:
            raise ValueError(
                f"A LocalMask describes self-attention over one whole sequence (query length "
                f"{query_length}, key length {key_length}, decode={self.decode}); in decode mode set "
                "decode_window instead and pass a dense mask or None."
            )
        if self.implementation == AttentionImplementation.EINSUM and not sow_weights:
            return mask
        return mask.to_dense(key_length)
