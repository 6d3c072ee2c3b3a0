"""Step functions for the search: incremental decoding through the key/value cache, and without it.

:func:`make_cached_step_fn` decodes one position per call, reading earlier positions' keys and values
from the cache (``Transformer(config.replace(decode=True))``); :func:`init_cache` makes the empty cache
and :func:`grow_cache` lengthens it between the stages of a staged search (:func:`cache_stage_ends`).
:func:`make_uncached_step_fn` reruns the decoder over the whole prefix instead: the cost the cache
avoids, kept for the benchmark and as a cross-check.

Shape glossary
--------------
N decoder rows (sentences times beam size), S source length, L positions the cache (or prefix) holds,
H heads, K|V key|value size per head, D d_model, V vocabulary.
"""

from __future__ import annotations

from typing import Any, cast

import jax
import jax.numpy as jnp

from attention_jax.decoding import beam_search
from attention_jax.models.model import Transformer
from attention_jax.models.transformer_config import TransformerConfig

Array = jax.Array
POSITION_MULTIPLE = 16
"""Cache lengths and stage ends are multiples of this many positions, so few shapes are compiled."""


def init_cache(model_config: TransformerConfig, num_rows: int, max_decode_len: int) -> Any:
    """An empty key/value cache for ``num_rows`` hypotheses of up to ``max_decode_len`` tokens.

    Parameters
    ----------
    model_config : TransformerConfig
        The model (``decode`` is switched on here).
    num_rows : int
        ``N``, decoder rows (sentences times beam size).
    max_decode_len : int
        ``L``, positions the cache holds.

    Returns
    -------
    pytree
        The ``cache`` collection: zero keys/values ``[N, H, L, K|V]`` per decoder layer and zero
        ``cache_index``/``position`` counters.

    Notes
    -----
    Shapes come from ``jax.eval_shape`` of ``init``, so no parameters are allocated; ``init``'s cache
    is all zeros, which is what is returned.
    """
    model = Transformer(model_config.replace(decode=True))
    shapes = jax.eval_shape(lambda: model.init(
        jax.random.key(0), jnp.ones((num_rows, 1), jnp.int32), jnp.ones((num_rows, max_decode_len), jnp.int32)))
    return jax.tree_util.tree_map(lambda shape: jnp.zeros(shape.shape, shape.dtype), shapes["cache"])


def cache_stage_ends(max_decode_len: int, num_stages: int, multiple: int = POSITION_MULTIPLE) -> tuple[int, ...]:
    """Where a staged cached search grows its key/value cache: the ends of all stages but the last.

    Parameters
    ----------
    max_decode_len : int
        ``L``, the decode length.
    num_stages : int
        Stages wanted (at least 1); fewer are used when ``L`` is short.
    multiple : int
        Every stage ends at a multiple of this many steps.

    Returns
    -------
    tuple of int
        Rising ends inside ``(0, L)`` (see :func:`attention_jax.decoding.beam_search.beam_search`'s
        ``stage_ends``); empty for one stage.

    Notes
    -----
    Each decode step attends over, and beam search reorders, every position of the cache, so its
    cost grows with the cache's length. A stage ending at ``e`` uses a cache of ``e`` positions, so
    with ``s`` equal stages the steps see on average ``(s + 1) / (2 s)`` of ``L`` (5/8 for 4 stages)
    instead of all of it. The price is compile time: each stage is its own loop body.
    """
    if num_stages < 1:
        raise ValueError(f"num_stages must be at least 1; got {num_stages}.")
    stage_length = max(multiple, -(-max_decode_len // (num_stages * multiple)) * multiple)
    return tuple(range(stage_length, max_decode_len, stage_length))


def grow_cache(cache: Any, num_positions: int) -> Any:
    """The key/value cache zero-padded to hold ``num_positions`` positions (a staged search's ``grow_state``).

    Parameters
    ----------
    cache : pytree
        The ``cache`` collection (:func:`init_cache`), keys/values ``[N, H, L', K|V]``.
    num_positions : int
        New length, at least ``L'``.

    Returns
    -------
    pytree
        The same cache with ``cached_key``/``cached_value`` (``[N, H, L', K|V]``) padded along positions;
        counters unchanged.
        Attention masks cache positions past its counter, so the padding is never attended to.
    """
    def grow(path: tuple, leaf: Array) -> Array:
        if getattr(path[-1], "key", None) not in ("cached_key", "cached_value"):
            return leaf
        padding = [(0, 0)] * leaf.ndim
        padding[2] = (0, num_positions - leaf.shape[2])
        return jnp.pad(leaf, padding)

    return jax.tree_util.tree_map_with_path(grow, cache)


def make_cached_step_fn(model_config: TransformerConfig, params: Any, encoded: Array,
                        inputs: Array) -> beam_search.StepFn:
    """Step function that decodes one position with the key/value cache.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Its parameters.
    encoded : Array
        ``[B, S, D]`` encoder output, one row per sentence; the ``N = B R`` hypotheses in rows
        ``b R .. b R + R - 1`` share row ``b`` (or ``B = N``: one row each).
    inputs : Array
        ``[B, S]`` source ids (for the cross-attention padding mask).

    Returns
    -------
    beam_search.StepFn
        ``(cache, token_ids [N]) -> (logits [N, V], cache)``; start from :func:`init_cache`.
    """
    model = Transformer(model_config.replace(decode=True))

    def step(cache: Any, token_ids: Array) -> tuple[Array, Any]:
        logits, updates = model.apply(
            {"params": params, "cache": cache}, encoded, inputs, token_ids[:, None],
            method=Transformer.decode, mutable=["cache"])  # [N,1,V]
        return logits[:, 0], updates["cache"]

    return step


def init_prefix_state(num_rows: int, max_decode_len: int) -> tuple[Array, Array]:
    """Initial state of :func:`make_uncached_step_fn`: an empty prefix ``[N, L]`` and position 0."""
    return jnp.zeros((num_rows, max_decode_len), jnp.int32), jnp.array(0, jnp.int32)


def make_uncached_step_fn(model_config: TransformerConfig, params: Any, encoded: Array,
                          inputs: Array) -> beam_search.StepFn:
    """Step function that reruns the decoder over the whole prefix (no cache), for comparison.

    Parameters
    ----------
    model_config, params
        As for :func:`make_cached_step_fn`.
    encoded, inputs : Array
        ``[N, S, D]`` encoder output and ``[N, S]`` source ids, one row per hypothesis.

    Returns
    -------
    beam_search.StepFn
        ``((prefix [N, L], position), token_ids [N]) -> (logits [N, V], state)``; start from
        :func:`init_prefix_state`.

    Notes
    -----
    Shapes are static, so each step runs the decoder on all ``L`` positions (the causal mask keeps
    later positions from affecting the one read out); this is the cost the cache avoids.
    """
    model = Transformer(model_config.replace(decode=False))

    def step(state: tuple[Array, Array], token_ids: Array) -> tuple[Array, Any]:
        prefix, position = state
        prefix = jax.lax.dynamic_update_index_in_dim(prefix, token_ids, position, axis=1)  # [N,L]
        logits = model.apply({"params": params}, encoded, inputs, prefix, method=Transformer.decode)  # [N,L,V]
        return jax.lax.dynamic_index_in_dim(logits, position, axis=1, keepdims=False), (prefix, position + 1)

    return step


def search_setup(model_config: TransformerConfig, params: Any, inputs: Array, *, rows_per_sentence: int,
                 max_decode_len: int, use_cache: bool,
                 cache_stages: int) -> tuple[beam_search.StepFn, Any, dict[str, Any]]:
    """Encode the sources once; the step function, initial state and staging of a search over them.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Its parameters.
    inputs : Array
        ``[B, S]`` source ids.
    rows_per_sentence : int
        Hypotheses per sentence (the beam size; 1 for greedy search): ``N = B * rows_per_sentence``,
        hypothesis ``k`` of sentence ``b`` in row ``b * rows_per_sentence + k``.
    max_decode_len : int
        ``L``.
    use_cache : bool
        Cached (:func:`make_cached_step_fn`) or uncached (:func:`make_uncached_step_fn`) steps.
    cache_stages : int
        Stages in which the cache grows (:func:`cache_stage_ends`); ignored without the cache.

    Returns
    -------
    step_fn : beam_search.StepFn
        The step function over the ``N`` hypotheses.
    initial_state : pytree
        Its state before the first step (a cache sized for the first stage).
    stages : dict
        Keyword arguments ``stage_ends`` and ``grow_state`` for
        :func:`attention_jax.decoding.beam_search.beam_search` or ``greedy_search`` (empty without the cache).

    Notes
    -----
    The encoder runs once per sentence. The cached steps keep one row of its output per sentence, which
    the sentence's hypotheses share (so the cross-attention keys and values are projected, and read at
    every step, once per sentence, not once per hypothesis); the uncached steps repeat it per hypothesis.
    """
    encoded = cast(Array, Transformer(model_config.replace(decode=False)).apply(
        {"params": params}, inputs, method=Transformer.encode))  # [B,S,D]
    num_rows = encoded.shape[0] * rows_per_sentence  # N
    if not use_cache:
        encoded = jnp.repeat(encoded, rows_per_sentence, axis=0)  # [N,S,D]
        inputs = jnp.repeat(inputs, rows_per_sentence, axis=0)  # [N,S]
        return (make_uncached_step_fn(model_config, params, encoded, inputs),
                init_prefix_state(num_rows, max_decode_len), {})
    stage_ends = cache_stage_ends(max_decode_len, cache_stages)
    first_length = stage_ends[0] if stage_ends else max_decode_len
    cache = init_cache(model_config, num_rows, first_length)
    return (make_cached_step_fn(model_config, params, encoded, inputs), cache,
            {"stage_ends": stage_ends, "grow_state": grow_cache})
