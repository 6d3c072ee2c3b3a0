"""The attention functions of ``attention_registry.ATTENTION_FUNCTIONS`` (Section 3.2.1).

Shapes: B batch, T queries, S keys, H heads, K d_k, V d_v. A query with no allowed key gets zero output.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, cast

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from attention_jax.models import attention_registry, softmax

Array = jax.Array

LINEAR_CHUNK_SIZE = attention_registry.LINEAR_CHUNK_SIZE
"""Positions per chunk of causal linear attention (:func:`linear_attention`); defined in the registry."""


def unscaled_query(query: Array) -> Array:
    """Return ``sqrt(d_k) q``, so scaled paths compute unscaled dot-product attention (footnote 4).

    Parameters
    ----------
    query : Array
        ``[..., K]`` queries.

    Returns
    -------
    Array
        ``sqrt(K) query`` in its dtype.
    """
    return query * jnp.sqrt(jnp.asarray(query.shape[-1], jnp.float32)).astype(query.dtype)


@flax.struct.dataclass
class StructuredMask:
    """Padding, causal and packed-segment masks kept as parts instead of a dense ``[B, 1, T, S]``.

    ``query_valid`` ``[B, T]`` and ``key_valid`` ``[B or B', S]`` mark real tokens (``None``: all);
    ``query_segments``/``key_segments`` are pair ids (0 = pad; contiguous runs); ``causal`` is static.
    """

    query_valid: Array | None = None
    key_valid: Array | None = None
    query_segments: Array | None = None
    key_segments: Array | None = None
    causal: bool = flax.struct.field(pytree_node=False, default=False)

    def to_dense(self, query_length: int, key_length: int) -> Array | None:
        """Return the equivalent boolean mask ``[B or 1, 1, T, S]`` (``None`` when nothing is masked).

        Parameters
        ----------
        query_length, key_length : int
            ``T`` and ``S``.

        Returns
        -------
        Array or None
            The dense mask.
        """
        parts = []
        if self.query_valid is not None or self.key_valid is not None:
            query_valid = _all_valid(self.query_valid, query_length)
            key_valid = _all_valid(self.key_valid, key_length)
            parts.append(query_valid[:, None, :, None] & key_valid[:, None, None, :])
        if self.causal:
            parts.append(jnp.tril(jnp.ones((query_length, key_length), bool))[None, None])
        if self.query_segments is not None:
            assert self.key_segments is not None  # Given together with query_segments.
            same = self.query_segments[:, None, :, None] == self.key_segments[:, None, None, :]
            parts.append(same & (self.query_segments != 0)[:, None, :, None])
        if not parts:
            return None
        dense = parts[0]
        for part in parts[1:]:
            dense = dense & part
        return dense


def _all_valid(valid: Array | None, length: int) -> Array:
    return jnp.ones((1, length), bool) if valid is None else valid


def _additive_scores(query: Array, key: Array, score_vector: Array) -> Array:
    """Return Bahdanau scores ``w_h^T tanh(q + k)`` float32 ``[B, H, T, S]``, rematerialised."""
    return jax.checkpoint(_additive_scores_body)(query, key, score_vector)


def _additive_scores_body(query: Array, key: Array, score_vector: Array) -> Array:
    hidden = jnp.tanh(query.astype(jnp.float32)[:, :, None] + key.astype(jnp.float32)[:, None])  # [B,T,S,H,K]
    scores = jnp.sum(hidden * score_vector.astype(jnp.float32), axis=-1)  # [B,T,S,H]
    return jnp.transpose(scores, (0, 3, 1, 2))  # [B,H,T,S]


def additive_attention(
    query: Array,
    key: Array,
    value: Array,
    score_vector: Array,
    mask: Array | None = None,
    *,
    return_weights: bool = False,
    dropout_fn: Callable[[Array], Array] | None = None,
) -> Array | tuple[Array, Array]:
    """Return additive attention ``softmax(w_h^T tanh(q + k)) v`` (Bahdanau et al., 2015), per head.

    The head's ``W^Q``/``W^K`` play Bahdanau's ``W_q``/``W_k``; scores are bounded by ``|w_h|_1``, so unscaled.

    Parameters
    ----------
    query, key, value, score_vector : Array
        ``[B, T, H, K]``, ``[B, S, H, K]``, ``[B, S, H, V]``; ``w_h`` per head, ``[H, K]``.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``.
    return_weights : bool
        Also return the weights ``[B, H, T, S]``.
    dropout_fn : callable, optional
        Applied to the weights.

    Returns
    -------
    Array or (Array, Array)
        ``[B, T, H, V]`` (and the weights).
    """
    scores = _additive_scores(query, key, score_vector)  # [B,H,T,S]
    return softmax.attend(scores, value, mask, return_weights=return_weights, dropout_fn=dropout_fn)


def _elu_feature_map(x: Array) -> Array:
    """``phi(x) = elu(x) + 1`` in float32 (positive, so similarities are > 0)."""
    return jax.nn.elu(x.astype(jnp.float32)) + 1.0


def _linear_attention_quadratic(query: Array, key: Array, value: Array, mask: Array | None = None) -> Array:
    """Linear attention in quadratic form: masked ``phi(Q) phi(K)^T``, row-normalised (dense masks)."""
    similarity = jnp.einsum("bthk,bshk->bhts", _elu_feature_map(query), _elu_feature_map(key))  # [B,H,T,S]
    if mask is not None:
        similarity = jnp.where(mask, similarity, 0.0)
    normaliser = jnp.sum(similarity, axis=-1, keepdims=True)
    weights = similarity / jnp.where(normaliser > 0, normaliser, 1.0)
    return jnp.einsum("bhts,bshv->bthv", weights, value.astype(jnp.float32)).astype(value.dtype)


def linear_attention(query: Array, key: Array, value: Array, mask: StructuredMask | Array | None = None, *,
                     chunk_size: int = LINEAR_CHUNK_SIZE) -> Array:
    """Return linear attention, Katharopoulos et al. (2020) Eq. (6), ``phi = elu + 1``.

    Causal: masked ``phi(q) phi(k)^T`` within a chunk, running sums across chunks (restarted per segment).

    Parameters
    ----------
    query, key, value : Array
        ``[B, T, H, K]``, ``[B', S, H, K]``, ``[B', S, H, V]`` with ``B = B' R``.
    mask : StructuredMask or Array, optional
        Structured: O(T + S); dense: quadratic.
    chunk_size : int
        Positions per chunk of the causal form.

    Returns
    -------
    Array
        ``[B, T, H, V]``.

    Raises
    ------
    ValueError
        Causal with queries and keys of different batch or length.
    """
    if mask is not None and not isinstance(mask, StructuredMask):
        return _linear_attention_quadratic(query, key, value, mask)
    mask = StructuredMask() if mask is None else mask
    phi_query, phi_key, value_f32 = _elu_feature_map(query), _elu_feature_map(key), value.astype(jnp.float32)
    key_valid = mask.key_valid
    if mask.key_segments is not None:
        key_valid = _all_valid(key_valid, key.shape[1]) & (mask.key_segments != 0)
    if key_valid is not None:
        phi_key = phi_key * key_valid[:, :, None, None]  # Masked keys add nothing to either sum.
    if mask.causal:
        if query.shape[:2] != key.shape[:2]:
            raise ValueError(f"causal linear attention is self-attention: queries {query.shape[:2]} and keys "
                             f"{key.shape[:2]} need one batch and length.")
        numerator, denominator = _causal_sums(phi_query, phi_key, value_f32, mask.key_segments, chunk_size)
    else:
        numerator, denominator = _noncausal_sums(phi_query, phi_key, value_f32, mask)
    denominator = denominator[..., None]  # [B,T,H,1]; > 0 exactly when the query has an allowed key.
    output = jnp.where(denominator > 0, numerator / jnp.where(denominator > 0, denominator, 1.0), 0.0)
    query_valid = mask.query_valid
    if mask.query_segments is not None:
        query_valid = _all_valid(query_valid, query.shape[1]) & (mask.query_segments != 0)
    if query_valid is not None:
        output = output * query_valid[:, :, None, None]
    return output.astype(value.dtype)


def _noncausal_sums(phi_query: Array, phi_key: Array, value: Array, mask: StructuredMask) -> tuple[Array, Array]:
    """Numerators ``[B, T, H, V]`` and denominators ``[B, T, H]`` over each query's keys."""
    repeats = phi_query.shape[0] // phi_key.shape[0]  # Query rows sharing a key row (beam search).
    if mask.key_segments is None:
        state = jnp.repeat(jnp.einsum("bshk,bshv->bhkv", phi_key, value), repeats, axis=0)  # [B,H,K,V]
        normaliser = jnp.repeat(jnp.sum(phi_key, axis=1), repeats, axis=0)  # [B,H,K]
        return (jnp.einsum("bthk,bhkv->bthv", phi_query, state),
                jnp.einsum("bthk,bhk->bth", phi_query, normaliser))
    num_segments = phi_key.shape[1] + 1  # Ids 0 .. S.
    segment_sum = jax.vmap(lambda data, ids: jax.ops.segment_sum(data, ids, num_segments))
    key_values = jnp.einsum("bshk,bshv->bshkv", phi_key, value)  # phi(k_s) v_s^T
    states = jnp.repeat(segment_sum(key_values, mask.key_segments), repeats, axis=0)  # [B,G,H,K,V]
    normalisers = jnp.repeat(segment_sum(phi_key, mask.key_segments), repeats, axis=0)  # [B,G,H,K]
    pick = jax.vmap(lambda table, ids: table[ids])  # Each query's own segment: [B,T,...].
    return (jnp.einsum("bthk,bthkv->bthv", phi_query, pick(states, mask.query_segments)),
            jnp.einsum("bthk,bthk->bth", phi_query, pick(normalisers, mask.query_segments)))


def _causal_sums(phi_query: Array, phi_key: Array, value: Array, segments: Array | None,
                 chunk_size: int) -> tuple[Array, Array]:
    """Causal numerators and denominators, chunk by chunk (segments are contiguous runs)."""
    batch, length = phi_query.shape[:2]
    chunk = min(chunk_size, length)
    num_chunks = -(-length // chunk)
    if segments is None:
        segments = jnp.zeros((batch, length), jnp.int32)

    def chunks(array: Array, fill: int = 0) -> Array:  # [B,L,...] -> [B,n,C,...], padded at the end.
        edge = [(0, 0)] * array.ndim
        edge[1] = (0, num_chunks * chunk - length)
        padded = jnp.pad(array, edge, constant_values=fill)
        return padded.reshape(batch, num_chunks, chunk, *array.shape[2:])

    query, key, value = chunks(phi_query), chunks(phi_key), chunks(value)  # [B,n,C,H,K|V]
    segment = chunks(segments, fill=-1)  # [B,n,C]; padding keys have phi(k) = 0 anyway.
    # Within a chunk: the masked quadratic form (causal, same segment).
    allowed = jnp.tril(jnp.ones((chunk, chunk), bool)) & (segment[..., :, None] == segment[..., None, :])
    similarity = jnp.einsum("bnchk,bnshk->bnhcs", query, key) * allowed[:, :, None]  # [B,n,H,C,C]
    numerator = jnp.einsum("bnhcs,bnshv->bnchv", similarity, value)
    denominator = jnp.swapaxes(jnp.sum(similarity, axis=-1), 2, 3)  # [B,n,C,H]
    # Across chunks: the sums of the segment still open at a chunk's end, carried into the next chunk.
    first, last = segment[:, :, 0], segment[:, :, -1]  # [B,n]
    open_before = jnp.pad(last[:, :-1], ((0, 0), (1, 0)), constant_values=-2)  # Segment entering chunk n.
    tail = (segment == last[..., None]).astype(jnp.float32)  # [B,n,C]: keys of the chunk's last segment.
    tail_states = jnp.einsum("bnc,bnchk,bnchv->bnhkv", tail, key, value)  # [B,n,H,K,V]
    tail_normalisers = jnp.einsum("bnc,bnchk->bnhk", tail, key)  # [B,n,H,K]
    restarts = (first != last) | (open_before != first)  # Chunk n does not continue the entering segment.
    carried = _segmented_cumsum((tail_states, tail_normalisers), restarts)  # Leaving chunk n.
    entering = jax.tree.map(lambda sums: jnp.pad(sums[:, :-1], [(0, 0), (1, 0)] + [(0, 0)] * (sums.ndim - 2)),
                            carried)  # Entering chunk n: [B,n,H,K,V], [B,n,H,K].
    continues = (segment == open_before[..., None]).astype(jnp.float32)[..., None]  # [B,n,C,1]
    numerator += jnp.einsum("bnchk,bnhkv->bnchv", query, entering[0]) * continues[..., None]
    denominator += jnp.einsum("bnchk,bnhk->bnch", query, entering[1]) * continues
    numerator = numerator.reshape(batch, num_chunks * chunk, *numerator.shape[3:])[:, :length]
    return numerator, denominator.reshape(batch, num_chunks * chunk, -1)[:, :length]


def _segmented_cumsum(values: Any, restarts: Array) -> Any:
    """Inclusive sums over axis 1 of each leaf, restarted where ``restarts`` ``[B, n]`` holds."""
    def combine(left: tuple[Any, Array], right: tuple[Any, Array]) -> tuple[Any, Array]:
        # A right operand that restarts discards everything on its left.
        (left_sums, left_restart), (right_sums, right_restart) = left, right
        summed = jax.tree.map(
            lambda a, b: jnp.where(right_restart.reshape(right_restart.shape + (1,) * (b.ndim - 2)), b, a + b),
            left_sums, right_sums)
        return summed, left_restart | right_restart

    return jax.lax.associative_scan(combine, (values, restarts), axis=1)[0]


def linear_attention_step(query: Array, key: Array, value: Array, state: Array,
                          normaliser: Array) -> tuple[Array, Array, Array]:
    """Return one decode step of causal linear attention (Katharopoulos et al., 2020, Section 3.4).

    Parameters
    ----------
    query, key, value : Array
        ``[B, H, K]``, ``[B, H, K]``, ``[B, H, V]`` of the new position.
    state, normaliser : Array
        float32 ``sum phi(k) v^T`` ``[B, H, K, V]`` and ``sum phi(k)`` ``[B, H, K]`` so far.

    Returns
    -------
    (Array, Array, Array)
        Output ``[B, H, V]``, updated ``state`` and ``normaliser``.
    """
    phi_query, phi_key = _elu_feature_map(query), _elu_feature_map(key)
    state = state + jnp.einsum("bhk,bhv->bhkv", phi_key, value.astype(jnp.float32))
    normaliser = normaliser + phi_key
    numerator = jnp.einsum("bhk,bhkv->bhv", phi_query, state)
    denominator = jnp.sum(phi_query * normaliser, axis=-1, keepdims=True)  # > 0: this key is included.
    return (numerator / denominator).astype(value.dtype), state, normaliser


def _additive_module_scores(module: nn.Module, query: Array, key: Array) -> Array:
    """The ``additive`` entry's float32 scores ``[B, H, T, S]``; creates ``score_vector`` ``[H, K]`` in ``module``."""
    score_vector = cast(Array, module.param(  # param unboxes the LogicallyPartitioned its init returns.
        "score_vector",
        nn.with_logical_partitioning(nn.initializers.normal(stddev=query.shape[-1] ** -0.5), ("heads", "kv")),
        query.shape[2:]))  # w_h: [H,K]
    return _additive_scores(query, key, score_vector)


def _linear_module_attention(module: nn.Module, query: Array, key: Array, value: Array, mask: Any, *,
                             decode: bool) -> Array:
    """The ``linear`` entry's heads ``[B, T, H, V]`` inside ``MultiHeadAttention`` (decode: one cached step)."""
    if decode:
        return _linear_decode(module, query, key, value, mask)
    key, value, mask = _share_key_rows(query.shape[0], key, value, mask)
    return linear_attention(query, key, value, mask)


def _share_key_rows(query_rows: int, key: Array, value: Array, mask: Any) -> tuple[Array, Array, Any]:
    """Return keys, values and key-side masks repeated to one row per query row.

    ``[B', S, H, K|V]`` keys and values, with ``B = B' R``, to ``[B, S, H, K|V]``; the mask's key-side parts are
    repeated too.
    """
    repeats = query_rows // key.shape[0]
    if repeats == 1:
        return key, value, mask

    def _repeat(array: Array) -> Array:
        return array if array.shape[0] == 1 else jnp.repeat(array, repeats, axis=0)

    def _repeat_optional(array: Array | None) -> Array | None:
        return None if array is None else _repeat(array)

    if isinstance(mask, StructuredMask):  # dataclasses.replace: what flax.struct's replace does.
        mask = dataclasses.replace(mask, key_valid=_repeat_optional(mask.key_valid),
                                   key_segments=_repeat_optional(mask.key_segments))
    elif mask is not None and mask.shape[0] == key.shape[0]:
        mask = _repeat(mask)
    return _repeat(key), _repeat(value), mask


def _linear_decode(module: nn.Module, query: Array, key: Array, value: Array, mask: Any) -> Array:
    """Causal linear self-attention of one new position over the cached running sums."""
    batch, _, num_heads, key_dim = key.shape
    initializing = not module.has_variable("cache", "linear_state")
    state = module.variable("cache", "linear_state", jnp.zeros, (batch, num_heads, key_dim, value.shape[-1]),
                            jnp.float32)
    normaliser = module.variable("cache", "linear_normaliser", jnp.zeros, (batch, num_heads, key_dim),
                                 jnp.float32)
    if initializing:  # init sizes the state; the output only needs the right shape.
        return linear_attention(query, key, value)
    if query.shape[1] != 1 or mask is not None:
        raise ValueError(f"decode-mode linear attention takes one position per call and no mask (causality is "
                         f"its running sums); got {query.shape[1]} positions and mask={type(mask).__name__}.")
    output, state.value, normaliser.value = linear_attention_step(
        query[:, 0], key[:, 0], value[:, 0], state.value, normaliser.value)
    return output[:, None]  # [B,1,H,V]
