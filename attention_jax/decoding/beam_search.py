"""Beam search and greedy search over an abstract next-token function (Section 6.1; docs/design.md).

The search sees the model only through ``step_fn``, so it is tested against brute force and shared by
cached and uncached decoding. Scores follow GNMT (Wu et al., 2016, Eq. 14): ``log P(Y | X) / lp(Y)``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

# Shapes: B sentences, K beam size, N = B * K hypotheses, L maximum output length (static), V vocabulary.
Array = jax.Array
# step_fn(state, token_ids [N]) -> (logits [N, V], state); BOS is the first step's token. Array leaves of
# the state lead with N (the search reorders them with the beams); scalar leaves are shared counters.
StepFn = Callable[[Any, Array], tuple[Array, Any]]
# grow_state(state, num_steps) -> the state resized for the steps before num_steps (a staged search).
GrowState = Callable[[Any, int], Any]

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
NEG_INF = float("-inf")


class SearchResult(NamedTuple):
    """Finished hypotheses of a search, best first; ``-inf`` scores mark empty slots."""

    tokens: Array  # int32 [B, K, L], each row ending in EOS, then 0.
    scores: Array  # float32 [B, K]: log P / lp.
    log_probs: Array  # float32 [B, K]: log P(Y | X).
    lengths: Array  # int32 [B, K], EOS included.
    num_steps: Array  # int32 scalar: steps the loop ran for the whole batch.


def _length_penalty(length: Array | float, alpha: float) -> Array:
    """The GNMT length penalty ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Section 6.1), ``|Y|`` with EOS."""
    return jnp.power((5.0 + jnp.asarray(length, jnp.float32)) / 6.0, alpha)


def _best_possible_score(log_prob: Array, length: Array, max_length: Array, alpha: float) -> Array:
    """Bound the score of any finished extension of a live hypothesis of length ``t`` (docs/design.md)."""
    shortest = log_prob / _length_penalty(length + 1, alpha)
    longest = log_prob / _length_penalty(max_length, alpha)
    return jnp.maximum(shortest, longest)


def _restrict_next_tokens(log_probs: Array, step: Array, max_lengths: Array, banned_ids: tuple[int, ...],
                          eos_id: int) -> Array:
    """Mask ``[B, R, V]`` log-probs: banned ids always, all but EOS at the last position; not renormalized."""
    vocab_ids = jnp.arange(log_probs.shape[-1])
    allowed = jnp.ones(log_probs.shape[-1], dtype=bool)
    for banned in banned_ids:
        allowed = jnp.logical_and(allowed, vocab_ids != banned)
    last_position = (step + 1 >= max_lengths)[:, None, None]  # [B,1,1]: output must end here.
    allowed = jnp.where(last_position, (vocab_ids == eos_id)[None, None], allowed[None, None])
    return jnp.where(allowed, log_probs, NEG_INF)


def _gather_beams(state: Any, beam_indices: Array) -> Any:
    """Reorder leaves ``[B * K, ...]`` so new beam ``k`` continues old ``beam_indices[b, k]``; scalars kept."""
    num_sentences, beam_size = beam_indices.shape
    rows = (jnp.arange(num_sentences)[:, None] * beam_size + beam_indices).reshape(-1)  # [B*K]

    def _gather_leaf(leaf: Array) -> Array:
        if leaf.ndim == 0:
            return leaf
        return jnp.take(leaf, rows, axis=0, mode="clip")  # Indices are in range: no bounds handling.

    return jax.tree_util.tree_map(_gather_leaf, state)


def _take_beams(array: Array, indices: Array) -> Array:
    """``array[b, indices[b, j]]`` for ``array`` ``[B, R, ...]`` and ``indices`` ``[B, J]``."""
    return jax.vmap(lambda rows, index: rows[index])(array, indices)


def _last_tokens(tokens: Array, step: Array, bos_id: int) -> Array:
    """The previous output token of each row of ``tokens`` ``[B, R, L]`` (BOS at step 0)."""
    previous = jax.lax.dynamic_index_in_dim(tokens, jnp.maximum(step - 1, 0), axis=2, keepdims=False)
    return jnp.where(step == 0, bos_id, previous)


def _write_position(tokens: Array, step: Array, new_tokens: Array) -> Array:
    """Set ``tokens[..., step] = new_tokens`` for ``tokens`` ``[B, R, L]``."""
    return jax.lax.dynamic_update_index_in_dim(tokens, new_tokens, step, axis=2)


def _validate_stages(stage_ends: tuple[int, ...], max_decode_len: int, grow_state: GrowState | None) -> None:
    """Raise ``ValueError`` unless ``stage_ends`` rise strictly inside ``(0, max_decode_len)`` with a grower."""
    previous = 0
    for end in stage_ends:
        if not previous < end < max_decode_len:
            raise ValueError(f"stage_ends must rise strictly between 0 and max_decode_len={max_decode_len}; "
                             f"got {stage_ends}.")
        previous = end
    if stage_ends and grow_state is None:
        raise ValueError("stage_ends needs grow_state to resize the step function's state between stages.")


def _run_in_stages(search_step: Callable[[Any], Any], state: Any, *, stage_ends: tuple[int, ...],
                   max_decode_len: int, grow_state: GrowState | None, steps_per_iteration: int = 1) -> Any:
    """Run ``search_step`` to ``max_decode_len`` or all done, a loop per stage; a done search must not change."""
    if steps_per_iteration < 1:
        raise ValueError(f"steps_per_iteration must be at least 1; got {steps_per_iteration}.")

    def _repeated_step(state: Any) -> Any:
        for _ in range(steps_per_iteration):
            state = search_step(state)
        return state

    start = 0
    for index, end in enumerate((*stage_ends, max_decode_len)):
        if index > 0:
            assert grow_state is not None  # _validate_stages: stage_ends need grow_state.
            state = state._replace(model_state=grow_state(state.model_state, end))

        def _room_for(state: Any, steps: int, end: int = end) -> Array:
            """Whether ``steps`` more steps fit in the stage and some sentence is not done."""
            return jnp.logical_and(state.step + steps <= end, jnp.logical_not(jnp.all(state.done)))

        if end - start >= steps_per_iteration:
            state = jax.lax.while_loop(functools.partial(_room_for, steps=steps_per_iteration), _repeated_step,
                                       state)
        if (end - start) % steps_per_iteration:  # The stage's last steps, one at a time.
            state = jax.lax.while_loop(functools.partial(_room_for, steps=1), search_step, state)
        start = end
    return state


class _BeamState(NamedTuple):
    step: Array  # Scalar: the position being decoded.
    alive_tokens: Array  # [B,K,L]
    alive_log_probs: Array  # [B,K], sorted best first; -inf for dead beams.
    finished_tokens: Array  # [B,K,L]
    finished_scores: Array  # [B,K], sorted best first; -inf for empty slots.
    finished_log_probs: Array  # [B,K]
    finished_lengths: Array  # [B,K]
    done: Array  # [B] bool: nothing can change this sentence's result any more.
    model_state: Any  # step_fn state, leaves [B*K, ...].


class _Candidates(NamedTuple):
    log_probs: Array  # [B,2K] log P of each candidate, best first.
    parent_beams: Array  # [B,2K] the live beam each one extends.
    last_tokens: Array  # [B,2K] the token it adds.
    tokens: Array  # [B,2K,L] its whole output so far.


def _best_candidates(state: _BeamState, log_probs: Array, beam_size: int) -> _Candidates:
    """Return the ``2 K`` most probable one-token extensions of each sentence's live hypotheses."""
    num_sentences, _, vocab_size = log_probs.shape
    extended = (state.alive_log_probs[..., None] + log_probs).reshape(num_sentences, -1)  # [B,K*V]
    top_log_probs, top_indices = jax.lax.top_k(extended, 2 * beam_size)  # [B,2K]
    parent_beams = top_indices // vocab_size
    tokens = top_indices % vocab_size
    sequences = _write_position(_take_beams(state.alive_tokens, parent_beams), state.step, tokens)
    return _Candidates(top_log_probs, parent_beams, tokens, sequences)


def _merge_finished(state: _BeamState, candidates: _Candidates, scores: Array, length: Array) -> _BeamState:
    """Keep the best ``K`` of the finished and newly finished hypotheses; on ties the earlier ones."""
    merged_scores = jnp.concatenate([state.finished_scores, scores], axis=1)  # [B,3K]
    finished_scores, pick = jax.lax.top_k(merged_scores, state.finished_scores.shape[1])
    new_lengths = jnp.full(scores.shape, length, jnp.int32)
    return state._replace(
        finished_scores=finished_scores,
        finished_tokens=_take_beams(jnp.concatenate([state.finished_tokens, candidates.tokens], axis=1), pick),
        finished_log_probs=_take_beams(
            jnp.concatenate([state.finished_log_probs, candidates.log_probs], axis=1), pick),
        finished_lengths=_take_beams(jnp.concatenate([state.finished_lengths, new_lengths], axis=1), pick),
    )


def _initial_beam_state(initial_state: Any, max_lengths: Array, beam_size: int, max_decode_len: int) -> _BeamState:
    """The search state before the first step: beam 0 live per sentence (none when ``max_lengths`` is 0)."""
    num_sentences = max_lengths.shape[0]
    shape = (num_sentences, beam_size)
    # Only beam 0 is live at the start, so the first expansion does not repeat one token K times.
    initial_log_probs = jnp.tile(jnp.array([0.0] + [NEG_INF] * (beam_size - 1), jnp.float32),
                                 (num_sentences, 1))
    initial_log_probs = jnp.where((max_lengths <= 0)[:, None], NEG_INF, initial_log_probs)
    return _BeamState(
        step=jnp.array(0, jnp.int32),
        alive_tokens=jnp.zeros((*shape, max_decode_len), jnp.int32),
        alive_log_probs=initial_log_probs,
        finished_tokens=jnp.zeros((*shape, max_decode_len), jnp.int32),
        finished_scores=jnp.full(shape, NEG_INF, jnp.float32),
        finished_log_probs=jnp.full(shape, NEG_INF, jnp.float32),
        finished_lengths=jnp.zeros(shape, jnp.int32),
        done=max_lengths <= 0,
        model_state=initial_state,
    )


def _beam_search_step(state: _BeamState, *, step_fn: StepFn, max_lengths: Array, beam_size: int, alpha: float,
                      early_stop: bool, num_best: int, eos_id: int, bos_id: int,
                      banned_ids: tuple[int, ...]) -> _BeamState:
    """One step of :func:`beam_search`: expand, keep the best live hypotheses, merge the finished ones."""
    shape = state.alive_log_probs.shape  # [B,K]
    last_tokens = _last_tokens(state.alive_tokens, state.step, bos_id)  # [B,K]
    logits, model_state = step_fn(state.model_state, last_tokens.reshape(-1))  # [N,V]
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32)).reshape(*shape, -1)  # [B,K,V]
    log_probs = _restrict_next_tokens(log_probs, state.step, max_lengths, banned_ids, eos_id)
    candidates = _best_candidates(state, log_probs, beam_size)
    is_eos = candidates.last_tokens == eos_id  # [B,2K]

    # Live hypotheses: the best K candidates that do not end in EOS.
    alive_log_probs, alive_pick = jax.lax.top_k(jnp.where(is_eos, NEG_INF, candidates.log_probs), beam_size)
    model_state = _gather_beams(model_state, _take_beams(candidates.parent_beams, alive_pick))

    # Finished hypotheses: EOS candidates among the best K.
    length = state.step + 1
    finishing = jnp.logical_and(is_eos, jnp.arange(2 * beam_size)[None] < beam_size)
    new_scores = jnp.where(finishing, candidates.log_probs / _length_penalty(length, alpha), NEG_INF)
    state = _merge_finished(state, candidates, new_scores, length)

    done = jnp.logical_or(state.done, length >= max_lengths)
    if early_stop:
        bound = _best_possible_score(alive_log_probs[:, 0], length, max_lengths, alpha)
        # The num_best-th finished hypothesis (-inf until that many exist) must beat every extension.
        done = jnp.logical_or(done, state.finished_scores[:, num_best - 1] >= bound)
    # A done sentence keeps no live hypotheses, so later steps cannot change it; once all are done the
    # step count stops too (a loop of several steps per iteration may run steps after that).
    return state._replace(
        step=jnp.where(jnp.all(state.done), state.step, length),
        alive_tokens=_take_beams(candidates.tokens, alive_pick),
        alive_log_probs=jnp.where(done[:, None], NEG_INF, alive_log_probs),
        done=done,
        model_state=model_state,
    )


def beam_search(step_fn: StepFn, initial_state: Any, max_lengths: Array, *, beam_size: int, alpha: float,
                max_decode_len: int, early_stop: bool = True, num_best: int = 1, eos_id: int = EOS_ID,
                bos_id: int = BOS_ID, banned_ids: tuple[int, ...] = (PAD_ID, BOS_ID), stage_ends: tuple[int, ...] = (),
                grow_state: GrowState | None = None, steps_per_iteration: int = 2) -> SearchResult:
    """Beam search with the GNMT length penalty and early termination (traceable; call under jit).

    Of the ``2 K`` most probable extensions, EOS ones among the best ``K`` finish and the best ``K`` others
    stay live. A sentence is done at its maximum length or, with ``early_stop``, once its ``num_best``-th
    finished score reaches :func:`_best_possible_score` of its best live hypothesis.

    Parameters
    ----------
    step_fn : StepFn
        Next-token logits for the ``B * K`` hypotheses.
    initial_state : pytree
        ``step_fn``'s state, leaves ``[B * K, ...]`` or scalars.
    max_lengths : Array
        int ``[B]`` maximum output lengths, EOS included (forced there); 0 for padding rows.
    beam_size : int
        ``K`` (the paper: 4).
    alpha : float
        Length-penalty strength (the paper: 0.6); may be traced.
    max_decode_len : int
        ``L``, the static output length.
    early_stop : bool
        Stop a sentence once no live hypothesis can win; the best is the same either way.
    num_best, eos_id, bos_id : int
        Finished hypotheses early termination guarantees final (1 to ``K``); end and start tokens.
    banned_ids : tuple of int
        Ids never emitted (their mass removed, not renormalized).
    stage_ends : tuple of int
        Steps after which the state grows, rising inside ``(0, L)``.
    grow_state : GrowState, optional
        Resizes the state between stages.
    steps_per_iteration : int
        Steps per loop iteration; 2 spares a cache copy per step, 1 compiles faster.

    Returns
    -------
    SearchResult
        ``[B, K, ...]``, best first.

    Raises
    ------
    ValueError
        For ``stage_ends`` out of order or without ``grow_state``, or ``num_best`` out of range.
    """
    _validate_stages(stage_ends, max_decode_len, grow_state)
    if not 1 <= num_best <= beam_size:
        raise ValueError(f"num_best must be between 1 and beam_size={beam_size}; got {num_best}.")
    max_lengths = jnp.minimum(jnp.asarray(max_lengths, jnp.int32), max_decode_len)
    state = _initial_beam_state(initial_state, max_lengths, beam_size, max_decode_len)
    search_step = functools.partial(_beam_search_step, step_fn=step_fn, max_lengths=max_lengths, beam_size=beam_size,
                                    alpha=alpha, early_stop=early_stop, num_best=num_best, eos_id=eos_id,
                                    bos_id=bos_id, banned_ids=banned_ids)
    final = _run_in_stages(search_step, state, stage_ends=stage_ends, max_decode_len=max_decode_len,
                           grow_state=grow_state, steps_per_iteration=steps_per_iteration)
    return SearchResult(final.finished_tokens, final.finished_scores, final.finished_log_probs,
                        final.finished_lengths, final.step)


class _GreedyState(NamedTuple):
    step: Array
    tokens: Array  # [B,L]
    log_probs: Array  # [B]
    lengths: Array  # [B]
    done: Array  # [B]
    model_state: Any


def greedy_search(step_fn: StepFn, initial_state: Any, max_lengths: Array, *, alpha: float = 0.0,
                  max_decode_len: int, eos_id: int = EOS_ID, bos_id: int = BOS_ID,
                  banned_ids: tuple[int, ...] = (PAD_ID, BOS_ID), stage_ends: tuple[int, ...] = (),
                  grow_state: GrowState | None = None) -> SearchResult:
    """Greedy decoding (traceable): :func:`beam_search` with ``K = 1`` and ``alpha = 0``.

    Parameters
    ----------
    step_fn, initial_state, max_lengths : Any
        As for :func:`beam_search`, with ``B`` rows.
    alpha : float
        Used only for ``scores``.
    max_decode_len, eos_id, bos_id, banned_ids, stage_ends, grow_state : Any
        As for :func:`beam_search`.

    Returns
    -------
    SearchResult
        With ``K = 1``.

    Raises
    ------
    ValueError
        For ``stage_ends`` out of order or without ``grow_state``.
    """
    _validate_stages(stage_ends, max_decode_len, grow_state)
    max_lengths = jnp.minimum(jnp.asarray(max_lengths, jnp.int32), max_decode_len)
    num_sentences = max_lengths.shape[0]
    state = _GreedyState(
        step=jnp.array(0, jnp.int32),
        tokens=jnp.zeros((num_sentences, max_decode_len), jnp.int32),
        log_probs=jnp.zeros((num_sentences,), jnp.float32),
        lengths=jnp.zeros((num_sentences,), jnp.int32),
        done=max_lengths <= 0,
        model_state=initial_state,
    )

    def _greedy_step(state: _GreedyState) -> _GreedyState:
        step = state.step
        last_tokens = _last_tokens(state.tokens[:, None], step, bos_id)[:, 0]  # [B]
        logits, model_state = step_fn(state.model_state, last_tokens)
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))[:, None]  # [B,1,V]
        log_probs = _restrict_next_tokens(log_probs, step, max_lengths, banned_ids, eos_id)[:, 0]
        next_tokens = jnp.argmax(log_probs, axis=-1).astype(jnp.int32)  # [B]
        next_log_probs = jnp.take_along_axis(log_probs, next_tokens[:, None], axis=-1)[:, 0]
        live = jnp.logical_not(state.done)
        tokens = _write_position(state.tokens[:, None], step, jnp.where(live, next_tokens, 0)[:, None])[:, 0]
        ended = jnp.logical_and(live, next_tokens == eos_id)
        return _GreedyState(
            step=step + 1,
            tokens=tokens,
            log_probs=state.log_probs + jnp.where(live, next_log_probs, 0.0),
            lengths=jnp.where(ended, step + 1, state.lengths),
            done=jnp.logical_or(state.done, ended),
            model_state=model_state,
        )

    final = _run_in_stages(_greedy_step, state, stage_ends=stage_ends, max_decode_len=max_decode_len,
                           grow_state=grow_state)
    empty = max_lengths <= 0
    log_probs = jnp.where(empty, NEG_INF, final.log_probs)
    scores = log_probs / _length_penalty(final.lengths, alpha)
    return SearchResult(final.tokens[:, None], scores[:, None], log_probs[:, None], final.lengths[:, None],
                        final.step)
