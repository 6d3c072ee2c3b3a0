"""Beam search and greedy search over an abstract next-token function (Section 6.1).

The search never sees the model: it calls a ``step_fn(state, token_ids) -> (logits, state)`` that
scores the next token of every hypothesis and carries whatever the model needs between steps (a
key/value cache, or the whole prefix). That keeps the algorithm testable against brute force on
hand-built distributions, and lets cached and uncached decoding share it.

Shape glossary
--------------
B sentences, K beam size, L maximum output length (static), N = B * K hypotheses, V vocabulary.

Scoring (the paper's Section 6.1, following GNMT, Wu et al. 2016, Eq. 14)::

    lp(Y)    = ((5 + |Y|) / 6) ** alpha
    score(Y) = log P(Y | X) / lp(Y)

where ``|Y|`` counts the output tokens including the final EOS. Every output ends in EOS: at a
sentence's maximum length only EOS may be chosen, so the limit is never exceeded.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array
StepFn = Callable[[Any, Array], tuple[Array, Any]]
"""``step_fn(state, token_ids) -> (logits, new_state)``.

``token_ids`` is ``[N]`` (the last token of each hypothesis, BOS at the first step); ``logits`` is
``[N, V]``, the unnormalized next-token scores. Every array leaf of ``state`` has ``N`` as its leading
dimension (the search reorders it when beams are reselected), except scalar leaves, which are shared
by all hypotheses (step counters) and left alone.
"""
GrowState = Callable[[Any, int], Any]
"""``grow_state(state, num_steps) -> state``: ``step_fn``'s state resized to serve the steps before ``num_steps``.

Used between the stages of a staged search (``stage_ends``): a key/value cache that holds only the
positions decoded so far is cheaper to attend over and to reorder than one sized for the longest output.
"""

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3
NEG_INF = float("-inf")


class SearchResult(NamedTuple):
    """Finished hypotheses of a search, best first.

    Attributes
    ----------
    tokens : Array
        int32 ``[B, K, L]`` output ids, each row ending in EOS and 0-padded after it (all 0 for a
        sentence with maximum length 0).
    scores : Array
        float32 ``[B, K]`` length-normalized scores ``log P / lp``; ``-inf`` where no hypothesis.
    log_probs : Array
        float32 ``[B, K]`` ``log P(Y | X)`` of each hypothesis.
    lengths : Array
        int32 ``[B, K]`` output lengths, EOS included.
    num_steps : Array
        int32 scalar: decoding steps run (one loop serves the whole batch).
    """

    tokens: Array
    scores: Array
    log_probs: Array
    lengths: Array
    num_steps: Array


def length_penalty(length: Array | float, alpha: float) -> Array:
    """GNMT length penalty ``lp(Y) = ((5 + |Y|) / 6) ** alpha``.

    Parameters
    ----------
    length : Array or float
        ``|Y|``, output tokens including EOS.
    alpha : float
        Strength; 0 disables normalization (lp = 1), the paper uses 0.6.

    Returns
    -------
    Array
        float32 penalty of the same shape as ``length``.
    """
    return jnp.power((5.0 + jnp.asarray(length, jnp.float32)) / 6.0, alpha)


def best_possible_score(log_prob: Array, length: Array, max_length: Array, alpha: float) -> Array:
    """Upper bound on the score of any finished extension of a live hypothesis.

    Parameters
    ----------
    log_prob : Array
        ``log P`` of the live hypothesis (``<= 0``).
    length : Array
        Its current length ``t`` (tokens so far, no EOS yet).
    max_length : Array
        The sentence's maximum output length ``M``.
    alpha : float
        Length-penalty strength.

    Returns
    -------
    Array
        ``max(log_prob / lp(t + 1), log_prob / lp(M))``.

    Notes
    -----
    Any finished extension has length ``l`` in ``[t + 1, M]`` and ``log P' <= log_prob`` (every
    further token multiplies the probability by at most 1), so its score is
    ``log P' / lp(l) <= log_prob / lp(l)`` (``lp > 0``). As ``lp`` is monotone in ``l`` and
    ``log_prob <= 0``, ``log_prob / lp(l)`` is monotone in ``l`` and its maximum over the range lies
    at an end: for ``alpha >= 0`` (the paper's case) ``lp`` grows, so the bound is
    ``log_prob / lp(M)`` -- dividing a negative number by the largest penalty -- and for
    ``alpha < 0`` it is ``log_prob / lp(t + 1)``. Taking the larger of the two covers both.
    """
    shortest = log_prob / length_penalty(length + 1, alpha)
    longest = log_prob / length_penalty(max_length, alpha)
    return jnp.maximum(shortest, longest)


def _restrict_next_tokens(log_probs: Array, step: Array, max_lengths: Array, banned_ids: tuple[int, ...],
                          eos_id: int) -> Array:
    """Remove tokens a hypothesis may not emit at ``step``: banned ids always, all but EOS at the end.

    ``log_probs`` is ``[B, R, V]`` (R hypotheses per sentence), ``max_lengths`` ``[B]``. The
    probabilities are not renormalized, so scores stay the model's ``log P``.
    """
    vocab_ids = jnp.arange(log_probs.shape[-1])
    allowed = jnp.ones(log_probs.shape[-1], dtype=bool)
    for banned in banned_ids:
        allowed = jnp.logical_and(allowed, vocab_ids != banned)
    last_position = (step + 1 >= max_lengths)[:, None, None]  # [B,1,1]: output must end here.
    allowed = jnp.where(last_position, (vocab_ids == eos_id)[None, None], allowed[None, None])
    return jnp.where(allowed, log_probs, NEG_INF)


def gather_beams(state: Any, beam_indices: Array) -> Any:
    """Reorder every per-hypothesis leaf of ``state`` by beam index within each sentence.

    Parameters
    ----------
    state : pytree
        Leaves ``[B * K, ...]`` (hypothesis ``k`` of sentence ``b`` at row ``b * K + k``) or scalars.
    beam_indices : Array
        int32 ``[B, K]``: new beam ``k`` of sentence ``b`` continues old beam ``beam_indices[b, k]``.

    Returns
    -------
    pytree
        ``state`` with rows reordered; scalar leaves unchanged.

    Notes
    -----
    One gather per leaf along its leading axis, from row ``b * K + beam_indices[b, k]``: a sentence
    reads only its own rows, so where sentences are split over devices (:func:`attention_jax.decoding.decode.
    decode_batch` runs the search under ``shard_map``) no row crosses a device boundary. A gather per
    sentence (a ``vmap`` over ``B``) does the same work: the same thread time in a profile of a
    base-shape beam search.
    """
    num_sentences, beam_size = beam_indices.shape
    rows = (jnp.arange(num_sentences)[:, None] * beam_size + beam_indices).reshape(-1)  # [B*K]

    def gather_leaf(leaf: Array) -> Array:
        if leaf.ndim == 0:
            return leaf
        return jnp.take(leaf, rows, axis=0, mode="clip")  # Indices are in range: no bounds handling.

    return jax.tree_util.tree_map(gather_leaf, state)


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
    """Run ``search_step`` until every sentence is done or ``max_decode_len`` steps, in stages.

    Parameters
    ----------
    search_step : callable
        One step of the search; ``state`` has ``step``, ``done`` and ``model_state`` fields.
    state : NamedTuple
        The search state before the first step; its ``model_state`` serves the first stage.
    stage_ends : tuple of int
        Step counts at which a stage ends (validated by :func:`_validate_stages`); the last stage ends
        at ``max_decode_len``.
    max_decode_len : int
        ``L``.
    grow_state : GrowState, optional
        Resizes ``model_state`` for the next stage (needed when ``stage_ends`` is not empty).
    steps_per_iteration : int
        Steps in one iteration of the loop (the body is ``search_step`` repeated); a stage whose length
        is not a multiple of it ends with a loop of single steps.

    Returns
    -------
    NamedTuple
        The final search state.

    Notes
    -----
    Each stage is its own ``lax.while_loop`` (so its state may have its own static shapes) that stops as
    soon as every sentence is done; a later stage then runs no step. Splitting the loop changes no
    result: the steps run, and their order, are those of one loop over ``[0, L)``.

    With several steps per iteration, the steps after the one that finishes every sentence still run
    (within the stage). ``search_step`` must change no result of a finished search, nor its ``step``,
    so that those steps change nothing that is returned.
    """
    if steps_per_iteration < 1:
        raise ValueError(f"steps_per_iteration must be at least 1; got {steps_per_iteration}.")

    def repeated_step(state: Any) -> Any:
        for _ in range(steps_per_iteration):
            state = search_step(state)
        return state

    start = 0
    for index, end in enumerate((*stage_ends, max_decode_len)):
        if index > 0:
            assert grow_state is not None  # _validate_stages: stage_ends need grow_state.
            state = state._replace(model_state=grow_state(state.model_state, end))

        def room_for(state: Any, steps: int, end: int = end) -> Array:
            """Whether ``steps`` more steps fit in the stage and some sentence is not done."""
            return jnp.logical_and(state.step + steps <= end, jnp.logical_not(jnp.all(state.done)))

        if end - start >= steps_per_iteration:
            state = jax.lax.while_loop(functools.partial(room_for, steps=steps_per_iteration), repeated_step,
                                       state)
        if (end - start) % steps_per_iteration:  # The stage's last steps, one at a time.
            state = jax.lax.while_loop(functools.partial(room_for, steps=1), search_step, state)
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
    """The ``2 K`` most probable one-token extensions of each sentence's live hypotheses.

    ``log_probs`` ``[B, K, V]`` are the next-token log-probabilities of the live hypotheses.
    """
    num_sentences, _, vocab_size = log_probs.shape
    extended = (state.alive_log_probs[..., None] + log_probs).reshape(num_sentences, -1)  # [B,K*V]
    top_log_probs, top_indices = jax.lax.top_k(extended, 2 * beam_size)  # [B,2K]
    parent_beams = top_indices // vocab_size
    tokens = top_indices % vocab_size
    sequences = _write_position(_take_beams(state.alive_tokens, parent_beams), state.step, tokens)
    return _Candidates(top_log_probs, parent_beams, tokens, sequences)


def _merge_finished(state: _BeamState, candidates: _Candidates, scores: Array, length: Array) -> _BeamState:
    """Keep the best ``K`` of the finished hypotheses and the newly finished ``candidates``.

    ``scores`` ``[B, 2K]`` are the candidates' normalized scores (``-inf`` for those not finishing).
    Earlier hypotheses come first, so ``top_k`` keeps them on ties.
    """
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
    model_state = gather_beams(model_state, _take_beams(candidates.parent_beams, alive_pick))

    # Finished hypotheses: EOS candidates among the best K.
    length = state.step + 1
    finishing = jnp.logical_and(is_eos, jnp.arange(2 * beam_size)[None] < beam_size)
    new_scores = jnp.where(finishing, candidates.log_probs / length_penalty(length, alpha), NEG_INF)
    state = _merge_finished(state, candidates, new_scores, length)

    done = jnp.logical_or(state.done, length >= max_lengths)
    if early_stop:
        bound = best_possible_score(alive_log_probs[:, 0], length, max_lengths, alpha)
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

    Parameters
    ----------
    step_fn : StepFn
        Next-token logits for ``B * K`` hypotheses (see :data:`StepFn`).
    initial_state : pytree
        ``step_fn``'s state before the first step, leaves ``[B * K, ...]`` or scalars.
    max_lengths : Array
        int ``[B]``: each sentence's maximum output length (EOS included), at most
        ``max_decode_len``; 0 gives an empty result (use it for padding rows).
    beam_size : int
        ``K`` (the paper: 4).
    alpha : float
        Length-penalty strength (the paper: 0.6); may be a traced scalar.
    max_decode_len : int
        ``L``, the static length of the output arrays.
    early_stop : bool
        Stop a sentence as soon as no live hypothesis can beat its best finished one. Disabling it
        runs every sentence to its maximum length; the best hypothesis is the same either way.
    num_best : int
        How many of the finished hypotheses early termination guarantees (1 to ``beam_size``): a
        sentence stops once its ``num_best``-th best finished score beats every live hypothesis's
        bound, so the first ``num_best`` are final. 1 (default) guarantees the first alone; a larger
        value may run more steps but never changes the first hypothesis.
    eos_id, bos_id : int
        End and start tokens.
    banned_ids : tuple of int
        Ids never emitted (pad and bos). Their probability mass is removed, not renormalized.
    stage_ends : tuple of int
        Run the loop in stages ending after these step counts (rising, inside ``(0, L)``; the last
        stage ends at ``L``). ``initial_state`` serves the first stage and ``grow_state`` resizes the
        state before each later one. Empty (default): one loop.
    grow_state : GrowState, optional
        Needed with ``stage_ends``.
    steps_per_iteration : int
        Search steps in one iteration of the compiled loop (see Notes); 1 compiles the smallest program.

    Returns
    -------
    SearchResult
        ``[B, K, ...]`` finished hypotheses, best first. Hypotheses after the first ``num_best`` are the
        best found before the search stopped (early termination guarantees only the first ``num_best``).

    Notes
    -----
    Each step expands the ``K`` live hypotheses of a sentence by every token and ranks the
    ``K * V`` candidates by ``log P`` (all have the same length, so this is also the score order).
    Of the best ``2 K`` candidates:

    * those ending in EOS *among the best K* become finished hypotheses, scored
      ``log P / lp(t + 1)`` and merged with the finished set (the best ``K`` are kept);
    * the best ``K`` not ending in EOS stay live (``2 K`` guarantees ``K`` of them exist).

    Taking EOS candidates only from the best ``K`` (as fairseq does) makes ``beam_size=1``
    with ``alpha=0`` exactly greedy decoding; tensor2tensor also keeps EOS candidates ranked
    ``K+1 .. 2K``. A sentence is done when its maximum length is reached or (``early_stop``) when its
    ``num_best``-th finished score is at least :func:`best_possible_score` of its best live hypothesis
    (live hypotheses all have the same length, so the best one's bound covers them all).
    The model state is reordered with :func:`gather_beams` after each selection.

    That reorder cannot write into the buffer it reads, so in a loop of one step per iteration XLA
    copies its result back into the loop's state buffer at the end of every step: on a CPU, a
    base-shape search (8 sentences, beam 4, 64 steps) spent as long on those copies of the key/value
    cache as on the reorder itself. With two steps per iteration (the default) the second step's
    reorder writes back into the state buffer the first one read, and the copies are gone, for a
    longer compilation (timings: ``docs/benchmarks.md``, "How beam search got there").
    Results do not depend on it: a step after the one that finishes every sentence changes nothing.
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
    """Greedy decoding: the most probable token at every step, until EOS (traceable; call under jit).

    Parameters
    ----------
    step_fn : StepFn
        Next-token logits for ``B`` hypotheses.
    initial_state : pytree
        ``step_fn``'s initial state, leaves ``[B, ...]`` or scalars.
    max_lengths : Array
        int ``[B]`` maximum output lengths, EOS included (EOS is forced at that length); 0 gives an
        empty output.
    alpha : float
        Only used to report ``scores`` (``log P / lp``); the search itself ignores it.
    max_decode_len : int
        ``L``, the static output length.
    eos_id, bos_id : int
        End and start tokens.
    banned_ids : tuple of int
        Ids never emitted.
    stage_ends, grow_state
        A staged loop, as for :func:`beam_search`.

    Returns
    -------
    SearchResult
        With ``K = 1``.

    Notes
    -----
    Equals :func:`beam_search` with ``beam_size=1`` and ``alpha=0``; with ``alpha > 0`` beam
    search may keep going after the greedy EOS when a longer hypothesis could still score better.
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

    def greedy_step(state: _GreedyState) -> _GreedyState:
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

    final = _run_in_stages(greedy_step, state, stage_ends=stage_ends, max_decode_len=max_decode_len,
                           grow_state=grow_state)
    empty = max_lengths <= 0
    log_probs = jnp.where(empty, NEG_INF, final.log_probs)
    scores = log_probs / length_penalty(final.lengths, alpha)
    return SearchResult(final.tokens[:, None], scores[:, None], log_probs[:, None], final.lengths[:, None],
                        final.step)
