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
import flax.struct
import jax
import jax.numpy as jnp

from attention_jax.cpu_kernels import dense_dot_general, dropout_class
from attention_jax.models import attention_functions, decode_attention
from attention_jax.models.fused_attention import fused_dot_product_attention

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


def _check_window(window: int) -> None:
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(
            f"window must be a positive integer r (keys at most r positions away); got {window!r}. "
            "Use full attention (no window) for r = 0."
        )


@flax.struct.dataclass
class LocalMask:
    """Mask of restricted self-attention (Table 1), kept in O(L) memory instead of a dense ``[L, L]``.

    Position ``i`` may attend to position ``j`` when ``|i - j| <= window``, both are valid tokens,
    and (if ``causal``) ``j <= i``.

    Attributes
    ----------
    window : int
        The neighbourhood size ``r`` (> 0); static (not traced).
    valid : Array, optional
        Boolean ``[B, L]``: which positions are real tokens (padding mask of both queries and keys).
        ``None`` means all.
    causal : bool
        Also forbid attending to later positions (decoder self-attention); static.

    Notes
    -----
    A pytree (``flax.struct``), so it can pass through ``jax.jit`` and Flax transforms. Passed as
    ``mask`` to :class:`MultiHeadAttention`, it selects :func:`local_dot_product_attention` on the einsum
    path; other paths use :meth:`to_dense`.
    """

    window: int = flax.struct.field(pytree_node=False)
    valid: Array | None = None
    causal: bool = flax.struct.field(pytree_node=False, default=False)

    def to_dense(self, length: int) -> Array:
        """The equivalent boolean mask ``[B or 1, 1, L, L]`` for a sequence of ``length`` positions.

        Parameters
        ----------
        length : int
            Sequence length ``L`` (must match ``valid``'s second axis when given).

        Returns
        -------
        Array
            The conjunction of the window, padding and causal masks.
        """
        _check_window(self.window)
        positions = jnp.arange(length)
        padding = make_padding_mask(self.valid, self.valid) if self.valid is not None else None
        causal = make_causal_mask(length) if self.causal else None
        return combine_masks(make_local_mask(positions, positions, self.window), padding, causal)


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
    Scores and softmax are computed in float32 whatever the input dtype (a ``Q K^T`` result in
    bfloat16, as cuDNN's attention and the Flax WMT example have, made an H100's base step no faster
    beyond the run-to-run spread: ``benchmarks/gpu_step_changes.py``). Rows whose mask is all
    ``False`` get zero weights (and so zero output) instead of the NaN a plain ``-inf`` fill gives.
    """
    key_dim = query.shape[-1]
    scores = jnp.einsum("bthk,bshk->bhts", query, key, preferred_element_type=jnp.float32)
    scores = scores / jnp.sqrt(jnp.float32(key_dim))  # Scale by 1/sqrt(d_k) (Section 3.2.1).
    return decode_attention.attend(scores, value, mask, return_weights=return_weights, dropout_fn=dropout_fn)


def _to_blocks(sequence: Array, block: int, num_blocks: int, margin: int) -> Array:
    """Cut axis 1 into blocks: ``[B, L, ...]`` -> ``[B, margin + num_blocks + margin, block, ...]``.

    The sequence is zero-padded (``False`` for booleans): ``margin`` empty blocks in front; the remainder
    ``num_blocks * block - L`` and ``margin`` empty blocks at the end.
    """
    edge = [(0, 0)] * sequence.ndim
    edge[1] = (margin * block, (num_blocks + margin) * block - sequence.shape[1])
    padded = jnp.pad(sequence, edge)
    return padded.reshape(sequence.shape[0], num_blocks + 2 * margin, block, *sequence.shape[2:])


def _neighbours(blocks: Array, offset: int, num_blocks: int) -> Array:
    """Block ``i + offset`` for every block ``i`` of blocks padded with one block on each side."""
    return blocks[:, 1 + offset:1 + offset + num_blocks]


def _local_block_mask(length: int, window: int, num_blocks: int, offsets: tuple[int, ...],
                      valid: Array | None, causal: bool) -> Array:
    """Boolean ``[B or 1, 1, nb, w, C w]``: the neighbour blocks' keys each query may see (blocks of ``window``)."""
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
    """Raise ``ValueError`` unless keys and values have the queries' length (self-attention)."""
    if key.shape[1] != length or value.shape[1] != length:
        raise ValueError(f"local_dot_product_attention is self-attention: query, key and value need one length; "
                         f"got {length}, {key.shape[1]}, {value.shape[1]}. Use scaled_dot_product_attention "
                         "for cross-attention.")


def local_dot_product_attention(
    query: Array,
    key: Array,
    value: Array,
    window: int,
    *,
    valid: Array | None = None,
    causal: bool = False,
    dropout_fn: Callable[[Array], Array] | None = None,
) -> Array:
    """Restricted self-attention (Table 1, fourth row) in O(r n d) time and memory.

    Equal to :func:`scaled_dot_product_attention` with the mask ``LocalMask(window, valid,
    causal).to_dense(L)``, i.e. position ``i`` attends to positions ``j`` with ``|i - j| <= window``.

    Parameters
    ----------
    query : Array
        ``[B, L, H, K]`` queries.
    key : Array
        ``[B, L, H, K]`` keys of the same sequence (self-attention: one length ``L``).
    value : Array
        ``[B, L, H, V]`` values; ``V`` may differ from ``K``.
    window : int
        The neighbourhood size ``r`` > 0.
    valid : Array, optional
        Boolean ``[B, L]``: real tokens. Padded keys get no weight; padded queries get zero output.
    causal : bool
        Also forbid ``j > i`` (decoder self-attention).
    dropout_fn : callable, optional
        Applied to the (blocked) weights before they multiply the values.

    Returns
    -------
    Array
        ``[B, L, H, V]``.

    Notes
    -----
    The sequence is cut into ``nb = ceil(L / r)`` blocks of ``w = r`` positions (zero-padded at the end).
    Every key within ``r`` of a query in block ``i`` lies in blocks ``i - 1``, ``i``, ``i + 1`` (only
    ``i - 1``, ``i`` when causal), so each block of queries is scored against those ``3w`` (``2w``)
    keys and masked to ``|i - j| <= r``: ``nb * w * 3w = 3 L r`` scores instead of ``L^2``. The
    neighbour blocks are slices of one padded copy of the keys (values), never concatenated.
    Scores and softmax are in float32, and masking follows :func:`scaled_dot_product_attention`
    exactly. When ``window >= L - 1`` every pair is in the window and the dense computation is used.
    """
    _check_window(window)
    batch, length, _, key_dim = query.shape
    _check_one_length(length, key, value)
    if window >= length - 1:  # The window covers the whole sequence: nothing to save.
        dense_mask = LocalMask(window=window, valid=valid, causal=causal).to_dense(length)
        return scaled_dot_product_attention(query, key, value, dense_mask, dropout_fn=dropout_fn)

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
    weights = decode_attention.masked_softmax(scores, mask).astype(value.dtype)
    if dropout_fn is not None:
        weights = dropout_fn(weights)
    output = sum(  # [B,nb,w,H,V]
        jnp.einsum("bhnqs,bnshv->bnqhv", weights[..., c * block:(c + 1) * block],
                   _neighbours(value_blocks, o, num_blocks))
        for c, o in enumerate(offsets))
    return output.reshape(batch, num_blocks * block, *output.shape[3:])[:, :length]


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
    attention_function : str
        One of :data:`attention_jax.models.attention_functions.ATTENTION_FUNCTIONS` (Section 3.2.1).
    decode : bool
        Autoregressive mode: keys and values of earlier steps are kept in the ``cache`` collection
        and each call processes one new query position.
    decode_window : int
        In decode mode, attend only to cached keys at most this many positions back (0: all).
    dtype : DType
        Computation dtype; parameters stay float32.
    cpu_kernels : bool
        ``config.cpu_kernels``: on a CPU, the projections' products and the attention dropout come from
        :mod:`attention_jax.cpu_kernels`; off (or on another backend), plain Flax.

    Notes
    -----
    Self-attention: call with ``inputs_q is inputs_kv``. Cross-attention (encoder-decoder, 3.2.3): queries
    from the decoder, keys/values from the encoder output. With ``sow_weights`` the einsum path stores the
    weights in the ``intermediates`` collection as ``attention_weights`` (``[B, H, T, S]``).
    Restricted self-attention: pass a :class:`LocalMask` as ``mask``; the einsum path then computes it
    blockwise with :func:`local_dot_product_attention` (O(r n d)); with ``sow_weights`` or another
    implementation the mask is made dense (same result, O(n^2 d)).
    """

    num_heads: int
    key_dim: int
    value_dim: int
    out_dim: int
    attention_dropout_rate: float = 0.0
    implementation: str = "einsum"
    attention_function: str = "scaled_dot_product"
    decode: bool = False
    decode_window: int = 0
    dtype: DType = jnp.float32
    cpu_kernels: bool = True
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
        mask: Array | LocalMask | None = None,
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
        mask : Array or LocalMask, optional
            Boolean, broadcastable to ``[B, H, T, S]``. In decode mode the cache-position mask is
            added here, so pass only the padding / window mask. A :class:`LocalMask` (self-attention,
            ``T == S``, not in decode mode) selects restricted self-attention.
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
        if self.attention_function == "dot_product":  # Footnote 4: no 1/sqrt(d_k), through the paths below.
            query = attention_functions.unscaled_query(query)
        elif self.attention_function in attention_functions.NOT_DOT_PRODUCT:  # Additive or linear attention.
            return self._output_projection(attention_functions.attend(
                self, query, key, value, mask, update_cache=self._update_cache if self.decode else None,
                deterministic=deterministic, sow_weights=sow_weights))
        if isinstance(mask, LocalMask):
            mask = self._local_or_dense(mask, query.shape[1], key.shape[1], sow_weights)
        use_dropout = self.attention_dropout_rate > 0.0 and not deterministic
        single_query = (self.implementation == "einsum" and query.shape[1] == 1
                        and not (sow_weights or use_dropout or isinstance(mask, LocalMask)))
        if self.decode:
            key, value, mask = self._update_cache(key, value, mask)  # [B,H,L,K|V]: heads first.
            if single_query:  # A decode step: products over the cache as stored.
                attended = decode_attention.cached_single_query_attention(query, key, value, mask)
                return self._output_projection(attended)
            key, value = jnp.swapaxes(key, 1, 2), jnp.swapaxes(value, 1, 2)  # [B,L,H,K|V]

        if self.implementation == "einsum":
            dropout_fn = None
            if use_dropout:
                dropout_fn = dropout_class(self.cpu_kernels)(self.attention_dropout_rate, deterministic=False)
            if single_query:  # One query position per row (cross-attention of a decode step):
                attended = decode_attention.single_query_attention(query, key, value, mask)  # No transposes.
            elif isinstance(mask, LocalMask):  # Restricted self-attention, blockwise (Table 1).
                attended = local_dot_product_attention(
                    query, key, value, mask.window, valid=mask.valid, causal=mask.causal,
                    dropout_fn=dropout_fn,
                )
            else:
                attended, weights = scaled_dot_product_attention(
                    query, key, value, mask, return_weights=True, dropout_fn=dropout_fn
                )
                if sow_weights:
                    self.sow("intermediates", "attention_weights", weights)
        else:
            if use_dropout:
                raise ValueError(f"attention_dropout_rate={self.attention_dropout_rate} needs "
                                 f"implementation='einsum'; got implementation={self.implementation!r}.")
            attended = fused_dot_product_attention(query, key, value, mask, implementation=self.implementation)
        return self._output_projection(attended)

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
        """Keep ``mask`` for the blockwise einsum path, else return its dense equivalent."""
        if self.decode or query_length != key_length:
            raise ValueError(
                f"A LocalMask describes self-attention over one whole sequence (query length "
                f"{query_length}, key length {key_length}, decode={self.decode}); in decode mode set "
                "decode_window instead and pass a dense mask or None."
            )
        if self.implementation == "einsum" and not sow_weights:
            return mask
        return mask.to_dense(key_length)

    def _update_cache(
        self, key: Array, value: Array, mask: Array | None
    ) -> tuple[Array, Array, Array | None]:
        """Write this step's key/value into the cache; return the whole cache, heads first, and its mask.

        ``key``/``value`` are ``[B, T, H, K|V]``; the cache holds ``[B, H, L, K|V]`` (see
        :func:`attention_jax.models.decode_attention.cached_single_query_attention` for why heads come first).
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
        cached_value.value = jax.lax.dynamic_update_slice_in_dim(
            cached_value.value, value, index, axis=2
        )
        cache_index.value = index + 1
        max_length = cached_key.value.shape[2]
        key_positions = jnp.arange(max_length)
        filled = key_positions <= index
        if self.decode_window > 0:  # Restricted self-attention: only the last r positions.
            filled = jnp.logical_and(filled, index - key_positions <= self.decode_window)
        filled = filled[None, None, None, :]  # [1,1,1,S]
        return cached_key.value, cached_value.value, combine_masks(mask, filled)
