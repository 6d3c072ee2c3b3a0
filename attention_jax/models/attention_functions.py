"""The JAX code of the attention functions of ``attention_registry.ATTENTION_FUNCTIONS`` (Section 3.2.1).

Each keeps the projections of Section 3.2.2 and changes how a head turns q, k, v into outputs:
``dot_product`` (via :func:`unscaled_query`), ``additive`` (Bahdanau et al., 2015) and ``linear``
(Katharopoulos et al., 2020, ``phi = elu + 1``). Shapes: B batch, T queries, S keys, L self-attention
length, H heads, K d_k, V d_v. Masks: dense boolean ``[B, H, T, S]``, ``masks.LocalMask`` or a
:class:`StructuredMask`; a query with no allowed key gets zero output.
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
    """``sqrt(d_k) q``: dot-product attention through the scaled paths (footnote 4).

    Parameters
    ----------
    query : Array
        ``[..., K]`` queries.

    Returns
    -------
    Array
        The queries times ``sqrt(K)``, in their dtype.

    Notes
    -----
    ``softmax((sqrt(d_k) q) k^T / sqrt(d_k)) = softmax(q k^T)``, so the unscaled function reuses every
    scaled path; the extra roundings move the scores by about one ulp.
    """
    return query * jnp.sqrt(jnp.asarray(query.shape[-1], jnp.float32)).astype(query.dtype)


@flax.struct.dataclass
class StructuredMask:
    """Padding, causal and packed-segment masks kept as their parts instead of a dense ``[B, 1, T, S]``.

    Attributes
    ----------
    query_valid : Array, optional
        Boolean ``[B, T]``: real query tokens (others get zero output). ``None``: all.
    key_valid : Array, optional
        Boolean ``[B or B', S]``: real key tokens. ``None``: all.
    query_segments, key_segments : Array, optional
        Integer ``[B, T]`` / ``[B, S]`` pair ids of packed rows (1, 2, ...; 0 = padding): a query attends
        only to keys of its own id. Give both or neither.
    causal : bool
        Also forbid keys after the query (self-attention, ``T == S``); static.

    Notes
    -----
    A pytree (``flax.struct``). Causal masking with segments assumes each segment is one contiguous run,
    as packing lays them out.
    """

    query_valid: Array | None = None
    key_valid: Array | None = None
    query_segments: Array | None = None
    key_segments: Array | None = None
    causal: bool = flax.struct.field(pytree_node=False, default=False)

    def to_dense(self, query_length: int, key_length: int) -> Array | None:
        """The equivalent boolean mask ``[B or 1, 1, T, S]`` (``None`` when nothing is masked).

        Parameters
        ----------
        query_length, key_length : int
            ``T`` and ``S``.

        Returns
        -------
        Array or None
            The conjunction of the padding, causal and segment masks.
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


def additive_scores(query: Array, key: Array, score_vector: Array) -> Array:
    """Bahdanau scores ``w_h^T tanh(q_t + k_s)`` of every query/key pair, per head.

    Parameters
    ----------
    query : Array
        ``[B, T, H, K]`` projected queries (the head's ``W^Q`` is Bahdanau's ``W_q``).
    key : Array
        ``[B, S, H, K]`` projected keys (the head's ``W^K`` is Bahdanau's ``W_k``).
    score_vector : Array
        ``[H, K]``: ``w_h`` of each head.

    Returns
    -------
    Array
        float32 ``[B, H, T, S]``.

    Notes
    -----
    Rematerialised (``jax.checkpoint``) so the backward pass recomputes the tanh instead of storing
    ``[B, T, S, H, K]``.
    """
    return jax.checkpoint(_additive_scores)(query, key, score_vector)


def _additive_scores(query: Array, key: Array, score_vector: Array) -> Array:
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
    """Additive attention ``softmax(w_h^T tanh(q + k)) v`` (Bahdanau et al., 2015), per head.

    Parameters
    ----------
    query : Array
        ``[B, T, H, K]`` queries.
    key : Array
        ``[B, S, H, K]`` keys.
    value : Array
        ``[B, S, H, V]`` values.
    score_vector : Array
        ``[H, K]``: ``w_h``, a learned vector per head.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``.
    return_weights : bool
        Also return the attention weights.
    dropout_fn : callable, optional
        Applied to the weights before they multiply the values.

    Returns
    -------
    Array or (Array, Array)
        ``[B, T, H, V]``, and with ``return_weights`` the weights ``[B, H, T, S]``.

    Notes
    -----
    Bahdanau's ``v^T tanh(W_q q + W_k k)`` with the head's projections as ``W_q``, ``W_k`` and hidden size
    ``d_k``; scores are bounded by ``|w_h|_1``, so no scaling is needed.
    """
    scores = additive_scores(query, key, score_vector)  # [B,H,T,S]
    return softmax.attend(scores, value, mask, return_weights=return_weights, dropout_fn=dropout_fn)


def _elu_feature_map(x: Array) -> Array:
    """``phi(x) = elu(x) + 1`` in float32: positive, so every similarity ``phi(q) . phi(k)`` is > 0."""
    return jax.nn.elu(x.astype(jnp.float32)) + 1.0


def linear_attention_quadratic(query: Array, key: Array, value: Array, mask: Array | None = None) -> Array:
    """Linear attention in its quadratic form: the masked matrix ``phi(Q) phi(K)^T``, normalised per row.

    Parameters
    ----------
    query : Array
        ``[B, T, H, K]`` queries.
    key : Array
        ``[B, S, H, K]`` keys.
    value : Array
        ``[B, S, H, V]`` values.
    mask : Array, optional
        Boolean, broadcastable to ``[B, H, T, S]``.

    Returns
    -------
    Array
        ``[B, T, H, V]``.
    """
    similarity = jnp.einsum("bthk,bshk->bhts", _elu_feature_map(query), _elu_feature_map(key))  # [B,H,T,S]
    if mask is not None:
        similarity = jnp.where(mask, similarity, 0.0)
    normaliser = jnp.sum(similarity, axis=-1, keepdims=True)
    weights = similarity / jnp.where(normaliser > 0, normaliser, 1.0)
    return jnp.einsum("bhts,bshv->bthv", weights, value.astype(jnp.float32)).astype(value.dtype)


def linear_attention(query: Array, key: Array, value: Array, mask: StructuredMask | Array | None = None, *,
                     chunk_size: int = LINEAR_CHUNK_SIZE) -> Array:
    """Linear attention ``phi(q) (sum_s phi(k_s) v_s^T) / (phi(q) sum_s phi(k_s))``, ``phi = elu + 1``.

    Parameters
    ----------
    query : Array
        ``[B, T, H, K]`` queries.
    key : Array
        ``[B', S, H, K]`` keys; ``B = B' R``, query rows ``b R .. b R + R - 1`` sharing key row ``b``.
    value : Array
        ``[B', S, H, V]`` values.
    mask : StructuredMask or Array, optional
        A :class:`StructuredMask` is applied in O(T + S); a dense mask takes
        :func:`linear_attention_quadratic`.
    chunk_size : int
        ``C``, positions per chunk of the causal form.

    Returns
    -------
    Array
        ``[B, T, H, V]``; zero for invalid queries and for queries with no allowed key.

    Notes
    -----
    Katharopoulos et al. (2020), Eq. (6). Causal: within a chunk the masked ``phi(q) phi(k)^T``, across
    chunks running sums (restarted at packed segment starts): O(L C d + L d_k d_v) time, linear in ``L``.
    """
    if mask is not None and not isinstance(mask, StructuredMask):
        return linear_attention_quadratic(query, key, value, mask)
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
    """Numerators ``[B, T, H, V]`` and denominators ``[B, T, H]`` over every key each query may see."""
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
    """Causal numerators ``[B, L, H, V]`` and denominators ``[B, L, H]``, chunk by chunk (see ``linear_attention``).

    Segments must be contiguous runs (packed rows); ``None`` is one segment per row.
    """
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
    """Inclusive sums over axis 1 of each ``[B, n, ...]`` leaf, restarted where ``restarts`` ``[B, n]`` is True."""
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
    """One decode step of causal linear attention: add this position to the running sums, read them.

    Parameters
    ----------
    query, key : Array
        ``[B, H, K]``: the new position's query and key.
    value : Array
        ``[B, H, V]``.
    state : Array
        float32 ``[B, H, K, V]``: ``sum_s phi(k_s) v_s^T`` over the earlier positions.
    normaliser : Array
        float32 ``[B, H, K]``: ``sum_s phi(k_s)`` over the earlier positions.

    Returns
    -------
    (Array, Array, Array)
        The output ``[B, H, V]`` and the updated ``state`` and ``normaliser``.

    Notes
    -----
    The recurrent form of Katharopoulos et al. (2020), Section 3.4: ``O(d_k d_v)`` per head and step,
    whatever the number of positions decoded, and no key/value cache.
    """
    phi_query, phi_key = _elu_feature_map(query), _elu_feature_map(key)
    state = state + jnp.einsum("bhk,bhv->bhkv", phi_key, value.astype(jnp.float32))
    normaliser = normaliser + phi_key
    numerator = jnp.einsum("bhk,bhkv->bhv", phi_query, state)
    denominator = jnp.sum(phi_query * normaliser, axis=-1, keepdims=True)  # > 0: this key is included.
    return (numerator / denominator).astype(value.dtype), state, normaliser


def additive_module_scores(module: nn.Module, query: Array, key: Array) -> Array:
    """The ``additive`` entry's scores inside ``MultiHeadAttention``: creates ``score_vector``, scores the pairs.

    Parameters
    ----------
    module : nn.Module
        The calling ``attention.MultiHeadAttention`` (bound): ``score_vector`` ``[H, K]`` is its parameter.
    query : Array
        ``[B, T, H, K]`` projected queries.
    key : Array
        ``[B, S, H, K]`` projected keys (the cache's, in decode mode).

    Returns
    -------
    Array
        float32 ``[B, H, T, S]`` scores (:func:`additive_scores`); the softmax path of
        ``MultiHeadAttention`` masks them, forms the weights and reads the values.
    """
    score_vector = cast(Array, module.param(  # param unboxes the LogicallyPartitioned its init returns.
        "score_vector",
        nn.with_logical_partitioning(nn.initializers.normal(stddev=query.shape[-1] ** -0.5), ("heads", "kv")),
        query.shape[2:]))  # w_h: [H,K]
    return additive_scores(query, key, score_vector)


def linear_module_attention(module: nn.Module, query: Array, key: Array, value: Array, mask: Any, *,
                            decode: bool) -> Array:
    """The ``linear`` entry inside ``MultiHeadAttention``: structured masks, shared rows, the decoding state.

    Parameters
    ----------
    module : nn.Module
        The calling ``attention.MultiHeadAttention`` (bound): the decoding state is in its ``cache``.
    query : Array
        ``[B, T, H, K]``.
    key : Array
        ``[B', S, H, K]``, ``B = B' R`` (a search's hypotheses sharing their sentence's encoder row).
    value : Array
        ``[B', S, H, V]``.
    mask : StructuredMask, Array or None
        As the model passes it (:func:`linear_attention`).
    decode : bool
        One causal decode step over the running sums (self-attention in decode mode).

    Returns
    -------
    Array
        ``[B, T, H, V]`` heads, before the output projection.
    """
    if decode:
        return _linear_decode(module, query, key, value, mask)
    key, value, mask = share_key_rows(query.shape[0], key, value, mask)
    return linear_attention(query, key, value, mask)


def as_dense_mask(mask: Any, query_length: int, key_length: int) -> Array | None:
    """A structured or window mask as a dense boolean mask (for functions that score every pair).

    Parameters
    ----------
    mask : StructuredMask, masks.LocalMask, Array or None
        As the model passes it.
    query_length, key_length : int
        ``T`` and ``S``.

    Returns
    -------
    Array or None
        Boolean, broadcastable to ``[B, H, T, S]``.
    """
    if isinstance(mask, StructuredMask):
        return mask.to_dense(query_length, key_length)
    if hasattr(mask, "to_dense"):  # masks.LocalMask (restricted self-attention).
        return mask.to_dense(key_length)
    return mask


def share_key_rows(query_rows: int, key: Array, value: Array, mask: Any) -> tuple[Array, Array, Any]:
    """Keys, values and key-side masks repeated to one row per query row (a search's shared rows).

    Parameters
    ----------
    query_rows : int
        ``B``, query rows.
    key, value : Array
        ``[B', S, H, K|V]`` with ``B = B' R``.
    mask : StructuredMask, Array or None
        Key-side parts (or a dense mask with ``B'`` rows) are repeated too.

    Returns
    -------
    (Array, Array, mask)
        Keys and values ``[B, S, H, K|V]`` and the mask, one row per query row.
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
    """Causal linear self-attention of one new position over the running sums in the ``cache``."""
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
