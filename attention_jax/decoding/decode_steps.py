"""Step functions for the search: one position per call through the key/value cache, or the whole prefix again."""

from __future__ import annotations

from typing import Any, cast

import jax
import jax.numpy as jnp

from attention_jax.decoding import beam_search
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models.model import Transformer

# Shapes: N decoder rows (sentences x beam), S source length, L cache positions, H heads, K|V key|value size
# per head, D d_model, V vocabulary.
Array = jax.Array
POSITION_MULTIPLE = 16  # Cache lengths and stage ends are multiples of this: few shapes to compile.


def _init_cache(model_config: TransformerConfig, num_rows: int, max_decode_len: int) -> Any:
    """Return the zero ``cache`` collection: keys/values ``[N, H, L, K|V]`` per layer, and the counters."""
    model = Transformer(model_config.replace(decode=True))
    shapes = jax.eval_shape(lambda: model.init(
        jax.random.key(0), jnp.ones((num_rows, 1), jnp.int32), jnp.ones((num_rows, max_decode_len), jnp.int32)))
    return jax.tree_util.tree_map(lambda shape: jnp.zeros(shape.shape, shape.dtype), shapes["cache"])


def _cache_stage_ends(max_decode_len: int, num_stages: int, multiple: int = POSITION_MULTIPLE) -> tuple[int, ...]:
    """Return where a staged cached search grows its cache: the ends of all stages but the last.

    Rising ends inside ``(0, L)``, each a multiple of ``multiple``; empty for one stage.

    Raises ``ValueError``: for ``num_stages`` below 1.
    """
    if num_stages < 1:
        raise ValueError(f"num_stages must be at least 1; got {num_stages}.")
    stage_length = max(multiple, -(-max_decode_len // (num_stages * multiple)) * multiple)
    return tuple(range(stage_length, max_decode_len, stage_length))


def _grow_cache(cache: Any, num_positions: int) -> Any:
    """Zero-pad cached keys/values ``[N, H, L', K|V]`` to ``num_positions``; past the counter, never attended."""
    def _grow(path: tuple, leaf: Array) -> Array:
        if getattr(path[-1], "key", None) not in ("cached_key", "cached_value"):
            return leaf
        padding = [(0, 0)] * leaf.ndim
        padding[2] = (0, num_positions - leaf.shape[2])
        return jnp.pad(leaf, padding)

    return jax.tree_util.tree_map_with_path(_grow, cache)


def _make_cached_step_fn(model_config: TransformerConfig, params: Any, encoded: Array,
                         inputs: Array) -> beam_search.StepFn:
    """Return ``(cache, token_ids [N]) -> (logits [N, V], cache)``; ``encoded`` row ``b`` serves rows ``b R + k``."""
    model = Transformer(model_config.replace(decode=True))

    def _step(cache: Any, token_ids: Array) -> tuple[Array, Any]:
        logits, updates = model.apply(
            {"params": params, "cache": cache}, encoded, inputs, token_ids[:, None],
            method=Transformer.decode, mutable=["cache"])  # [N,1,V]
        return logits[:, 0], updates["cache"]

    return _step


def _init_prefix_state(num_rows: int, max_decode_len: int) -> tuple[Array, Array]:
    """Return the initial state of :func:`_make_uncached_step_fn`: an empty prefix ``[N, L]`` and position 0."""
    return jnp.zeros((num_rows, max_decode_len), jnp.int32), jnp.array(0, jnp.int32)


def _make_uncached_step_fn(model_config: TransformerConfig, params: Any, encoded: Array,
                           inputs: Array) -> beam_search.StepFn:
    """Return a step function that reruns the decoder over all ``L`` prefix positions: the cost the cache avoids."""
    model = Transformer(model_config.replace(decode=False))

    def _step(state: tuple[Array, Array], token_ids: Array) -> tuple[Array, Any]:
        prefix, position = state
        prefix = jax.lax.dynamic_update_index_in_dim(prefix, token_ids, position, axis=1)  # [N,L]
        logits = model.apply({"params": params}, encoded, inputs, prefix, method=Transformer.decode)  # [N,L,V]
        return jax.lax.dynamic_index_in_dim(logits, position, axis=1, keepdims=False), (prefix, position + 1)

    return _step


def search_setup(model_config: TransformerConfig, params: Any, inputs: Array, *, rows_per_sentence: int,
                 max_decode_len: int, use_cache: bool,
                 cache_stages: int) -> tuple[beam_search.StepFn, Any, dict[str, Any]]:
    """Encode the sources once; return the step function, initial state and staging of a search over them.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Its parameters.
    inputs : Array
        ``[B, S]`` source ids.
    rows_per_sentence, max_decode_len : int
        ``R``, hypotheses per sentence (1 for greedy; hypothesis ``k`` of ``b`` in row ``b R + k``); ``L``.
    use_cache : bool
        Cached or uncached steps.
    cache_stages : int
        Stages in which the cache grows.

    Returns
    -------
    step_fn : beam_search.StepFn
        The step function over the ``N`` hypotheses.
    initial_state : pytree
        Its state before the first step.
    stages : dict
        ``stage_ends`` and ``grow_state`` for the search (empty without the cache).
    """
    encoded = cast(Array, Transformer(model_config.replace(decode=False)).apply(
        {"params": params}, inputs, method=Transformer.encode))  # [B,S,D]
    num_rows = encoded.shape[0] * rows_per_sentence  # N
    if not use_cache:
        encoded = jnp.repeat(encoded, rows_per_sentence, axis=0)  # [N,S,D]
        inputs = jnp.repeat(inputs, rows_per_sentence, axis=0)  # [N,S]
        return (_make_uncached_step_fn(model_config, params, encoded, inputs),
                _init_prefix_state(num_rows, max_decode_len), {})
    stage_ends = _cache_stage_ends(max_decode_len, cache_stages)
    first_length = stage_ends[0] if stage_ends else max_decode_len
    cache = _init_cache(model_config, num_rows, first_length)
    return (_make_cached_step_fn(model_config, params, encoded, inputs), cache,
            {"stage_ends": stage_ends, "grow_state": _grow_cache})
