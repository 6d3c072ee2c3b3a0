"""Beam and greedy search on hand-built next-token distributions, checked against brute force.

The fake "model" scores the next token from a table indexed by the whole prefix (encoded as a base-V
number carried in the search state), so every sequence's probability is known and all sequences up
to a small length can be enumerated.
"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.decoding import beam_search

PAD, UNK, BOS, EOS, TOKEN_A, TOKEN_B = 0, 1, 2, 3, 4, 5
VOCAB_SIZE = 6
EMITTABLE = (UNK, EOS, TOKEN_A, TOKEN_B)  # Pad and bos are banned.
MAX_LEN = 5  # Longest output of every test; tables cover all prefixes up to it.
NUM_CODES = (BOS + 1) * VOCAB_SIZE ** (MAX_LEN - 1)  # prefix_code of any prefix shorter than MAX_LEN.


def prefix_code(prefix: tuple[int, ...]) -> int:
    """Index of the table row holding the next-token logits after ``[BOS] + prefix``."""
    code = BOS
    for token in prefix:
        code = code * VOCAB_SIZE + token
    return code


class PrefixModel:
    """Next-token logits ``tables[sentence, prefix_code(prefix)]`` for several sentences."""

    def __init__(self, tables: np.ndarray) -> None:
        self.tables = tables  # [B, codes, V]

    @classmethod
    def random(cls, seed: int, num_sentences: int, scale: float = 2.0) -> "PrefixModel":
        num_codes = NUM_CODES
        rng = np.random.default_rng(seed)
        return cls(scale * rng.standard_normal((num_sentences, num_codes, VOCAB_SIZE)).astype(np.float32))

    @classmethod
    def from_probabilities(cls, probabilities: dict[tuple[int, ...], dict[int, float]]) -> "PrefixModel":
        """One sentence; unlisted prefixes get a flat distribution over a, b, eos."""
        num_codes = NUM_CODES
        default = {TOKEN_A: 0.32, TOKEN_B: 0.32, EOS: 0.32}
        table = np.zeros((1, num_codes, VOCAB_SIZE), np.float32)
        for length in range(MAX_LEN):
            for prefix in itertools.product((UNK, TOKEN_A, TOKEN_B), repeat=length):
                table[0, prefix_code(prefix)] = _logits(probabilities.get(prefix, default))
        return cls(table)

    def log_probs(self, sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
        logits = self.tables[sentence, prefix_code(prefix)].astype(np.float64)
        return logits - np.log(np.sum(np.exp(logits)))

    def sequence_log_prob(self, sentence: int, tokens: tuple[int, ...]) -> float:
        return sum(self.log_probs(sentence, tokens[:i])[tokens[i]] for i in range(len(tokens)))

    def step_fn(self, rows_per_sentence: int):
        tables = jnp.asarray(self.tables)

        def step(state, token_ids):
            codes, calls = state
            codes = codes * VOCAB_SIZE + token_ids
            sentence = jnp.arange(codes.shape[0]) // rows_per_sentence
            return tables[sentence, codes], (codes, calls + 1)

        return step

    def initial_state(self, rows: int):
        # codes start at 0 so that the first token (BOS) makes them prefix_code(()).
        return jnp.zeros((rows,), jnp.int32), jnp.array(0, jnp.int32)


def _logits(probabilities: dict[int, float]) -> np.ndarray:
    """Logits whose softmax gives ``probabilities``; the rest of the mass (1e-3 each) to the others."""
    probs = np.full(VOCAB_SIZE, 1e-3)
    for token, probability in probabilities.items():
        probs[token] = probability
    return np.log(probs / probs.sum()).astype(np.float32)


@functools.partial(jax.jit, static_argnames=("beam_size", "max_decode_len", "early_stop", "num_best"))
def _jitted_beam(tables, max_lengths, alpha, *, beam_size, max_decode_len, early_stop, num_best=1):
    model = PrefixModel(tables)
    return beam_search.beam_search(
        model.step_fn(beam_size), model.initial_state(max_lengths.shape[0] * beam_size), max_lengths,
        beam_size=beam_size, alpha=alpha, max_decode_len=max_decode_len, early_stop=early_stop, num_best=num_best)


@functools.partial(jax.jit, static_argnames=("max_decode_len",))
def _jitted_greedy(tables, max_lengths, alpha, *, max_decode_len):
    model = PrefixModel(tables)
    return beam_search.greedy_search(model.step_fn(1), model.initial_state(max_lengths.shape[0]),
                                     max_lengths, alpha=alpha, max_decode_len=max_decode_len)


def run_beam(model: PrefixModel, max_lengths, *, beam_size: int, alpha: float, early_stop: bool = True,
             num_best: int = 1):
    result = _jitted_beam(jnp.asarray(model.tables), jnp.asarray(max_lengths, jnp.int32), jnp.float32(alpha),
                          beam_size=beam_size, max_decode_len=MAX_LEN, early_stop=early_stop, num_best=num_best)
    return jax.tree_util.tree_map(np.asarray, result)


def run_greedy(model: PrefixModel, max_lengths, *, alpha: float = 0.0):
    result = _jitted_greedy(jnp.asarray(model.tables), jnp.asarray(max_lengths, jnp.int32), jnp.float32(alpha),
                            max_decode_len=MAX_LEN)
    return jax.tree_util.tree_map(np.asarray, result)


def output_sequence(tokens: np.ndarray) -> tuple[int, ...]:
    """The ids up to and including EOS."""
    ids = tokens.tolist()
    return tuple(ids[: ids.index(EOS) + 1])


def lp(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


def brute_force_best(model: PrefixModel, sentence: int, max_length: int, alpha: float):
    """The best-scoring EOS-terminated sequence of length <= max_length, by enumeration."""
    best = None
    for length in range(1, max_length + 1):
        for body in itertools.product((UNK, TOKEN_A, TOKEN_B), repeat=length - 1):
            tokens = body + (EOS,)
            score = model.sequence_log_prob(sentence, tokens) / lp(length, alpha)
            if best is None or score > best[0]:
                best = (score, tokens)
    return best


def reference_beam_search(model: PrefixModel, sentence: int, max_length: int, beam_size: int, alpha: float):
    """A plain-Python statement of the same algorithm (see beam_search.beam_search Notes)."""
    alive = [((), 0.0)]
    finished = []  # (score, tokens)
    for step in range(max_length):
        candidates = []
        for tokens, log_prob in alive:
            next_log_probs = model.log_probs(sentence, tokens)
            for token in EMITTABLE:
                if step == max_length - 1 and token != EOS:
                    continue
                candidates.append((log_prob + next_log_probs[token], tokens + (token,)))
        candidates.sort(key=lambda candidate: -candidate[0])
        top = candidates[: 2 * beam_size]
        finished += [(log_prob / lp(step + 1, alpha), tokens)
                     for rank, (log_prob, tokens) in enumerate(top) if tokens[-1] == EOS and rank < beam_size]
        finished = sorted(finished, key=lambda item: -item[0])[:beam_size]
        alive = [(tokens, log_prob) for log_prob, tokens in top if tokens[-1] != EOS][:beam_size]
        if not alive:
            break
        bound = max(alive[0][1] / lp(step + 2, alpha), alive[0][1] / lp(max_length, alpha))
        if finished and finished[0][0] >= bound:
            break
    return finished[0]


@pytest.mark.reference
def test_length_penalty_matches_gnmt_formula():
    lengths = np.arange(0, 60)
    for alpha in (0.0, 0.6, 1.0):
        expected = ((5.0 + lengths) / 6.0) ** alpha
        np.testing.assert_allclose(beam_search._length_penalty(lengths, alpha), expected, rtol=1e-6)
    assert float(beam_search._length_penalty(1, 0.6)) == pytest.approx(1.0)


def test_beam_finds_optimum_where_greedy_does_not():
    # Greedy takes "a" (0.5) but every continuation of "a" is poor; "b eos" has probability 0.36.
    probabilities = {
        (): {TOKEN_A: 0.5, TOKEN_B: 0.4, EOS: 0.09},
        (TOKEN_A,): {TOKEN_A: 0.33, TOKEN_B: 0.33, EOS: 0.33},
        (TOKEN_B,): {EOS: 0.9, TOKEN_A: 0.05, TOKEN_B: 0.04},
    }
    model = PrefixModel.from_probabilities(probabilities)
    best_score, best_tokens = brute_force_best(model, 0, 4, alpha=0.0)
    assert best_tokens == (TOKEN_B, EOS)

    beam = run_beam(model, [4], beam_size=4, alpha=0.0)
    assert output_sequence(beam.tokens[0, 0]) == (TOKEN_B, EOS)
    assert beam.scores[0, 0] == pytest.approx(best_score, abs=1e-5)
    assert beam.lengths[0, 0] == 2

    greedy = run_greedy(model, [4])
    assert output_sequence(greedy.tokens[0, 0])[0] == TOKEN_A
    assert greedy.scores[0, 0] < best_score - 0.5


def test_length_penalty_changes_the_winner():
    probabilities = {
        (): {EOS: 0.42, TOKEN_A: 0.44, TOKEN_B: 0.13},
        (TOKEN_A,): {EOS: 0.93, TOKEN_A: 0.03, TOKEN_B: 0.03},
    }
    model = PrefixModel.from_probabilities(probabilities)
    winners = {}
    for alpha in (0.0, 0.6):
        best_score, best_tokens = brute_force_best(model, 0, 4, alpha)
        beam = run_beam(model, [4], beam_size=4, alpha=alpha)
        assert output_sequence(beam.tokens[0, 0]) == best_tokens
        assert beam.scores[0, 0] == pytest.approx(best_score, abs=1e-5)
        winners[alpha] = best_tokens
    assert winners == {0.0: (EOS,), 0.6: (TOKEN_A, EOS)}


@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("seed", range(4))
def test_matches_reference_algorithm_on_random_models(seed):
    max_lengths = [5, 3, 4, 1]
    model = PrefixModel.random(seed, num_sentences=len(max_lengths))
    for beam_size, alpha in ((4, 0.6), (2, 0.0), (3, 1.5), (2, -0.5)):
        result = run_beam(model, max_lengths, beam_size=beam_size, alpha=alpha)
        for sentence, max_length in enumerate(max_lengths):
            score, tokens = reference_beam_search(model, sentence, max_length, beam_size, alpha)
            assert output_sequence(result.tokens[sentence, 0]) == tokens
            assert result.scores[sentence, 0] == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_scores_and_lengths_are_consistent(seed):
    max_lengths = [5, 2, 4, 3]
    alpha = 0.6
    model = PrefixModel.random(seed, num_sentences=4, scale=1.0)
    result = run_beam(model, max_lengths, beam_size=4, alpha=alpha)
    for sentence, max_length in enumerate(max_lengths):
        for beam in range(4):
            if not np.isfinite(result.scores[sentence, beam]):
                continue
            tokens = output_sequence(result.tokens[sentence, beam])
            length = len(tokens)
            assert length == result.lengths[sentence, beam] <= max_length
            assert not result.tokens[sentence, beam, length:].any()
            log_prob = model.sequence_log_prob(sentence, tokens)
            assert result.log_probs[sentence, beam] == pytest.approx(log_prob, abs=1e-4)
            assert result.scores[sentence, beam] == pytest.approx(log_prob / lp(length, alpha), abs=1e-4)
        finite = result.scores[sentence][np.isfinite(result.scores[sentence])]
        assert np.all(np.diff(finite) <= 0)  # Best first.


@pytest.mark.parametrize("seed", range(4))
def test_early_termination_does_not_change_the_best(seed):
    max_lengths = [5, 5, 3, 4]
    model = PrefixModel.random(seed, num_sentences=4, scale=3.0)
    for alpha in (0.0, 0.6, 2.0):
        early = run_beam(model, max_lengths, beam_size=3, alpha=alpha, early_stop=True)
        full = run_beam(model, max_lengths, beam_size=3, alpha=alpha, early_stop=False)
        np.testing.assert_array_equal(early.tokens[:, 0], full.tokens[:, 0])
        np.testing.assert_array_equal(early.scores[:, 0], full.scores[:, 0])


def test_early_termination_stops_before_max_length():
    # EOS first has probability 0.9: nothing longer can beat it, so the search stops after one step.
    model = PrefixModel.from_probabilities({(): {EOS: 0.9, TOKEN_A: 0.05, TOKEN_B: 0.04}})
    early = run_beam(model, [5], beam_size=4, alpha=0.6, early_stop=True)
    full = run_beam(model, [5], beam_size=4, alpha=0.6, early_stop=False)
    assert output_sequence(early.tokens[0, 0]) == output_sequence(full.tokens[0, 0]) == (EOS,)
    assert int(early.num_steps) == 1
    assert int(full.num_steps) == 5


@pytest.mark.parametrize("seed", range(3))
def test_beam_one_without_length_penalty_is_greedy(seed):
    max_lengths = [5, 4, 2, 5]
    model = PrefixModel.random(seed, num_sentences=4)
    beam = run_beam(model, max_lengths, beam_size=1, alpha=0.0)
    greedy = run_greedy(model, max_lengths)
    np.testing.assert_array_equal(beam.tokens, greedy.tokens)
    np.testing.assert_allclose(beam.scores, greedy.scores, rtol=1e-6)
    np.testing.assert_array_equal(beam.lengths, greedy.lengths)


@pytest.mark.parametrize("seed", range(3))
def test_greedy_takes_the_most_probable_token(seed):
    max_lengths = [5, 3, 4, 2]
    model = PrefixModel.random(seed, num_sentences=4)
    greedy = run_greedy(model, max_lengths, alpha=0.6)
    for sentence, max_length in enumerate(max_lengths):
        tokens = ()
        while not tokens or tokens[-1] != EOS:
            log_probs = model.log_probs(sentence, tokens)
            allowed = (EOS,) if len(tokens) == max_length - 1 else EMITTABLE
            tokens += (max(allowed, key=lambda token: log_probs[token]),)
        assert output_sequence(greedy.tokens[sentence, 0]) == tokens
        log_prob = model.sequence_log_prob(sentence, tokens)
        assert greedy.scores[sentence, 0] == pytest.approx(log_prob / lp(len(tokens), 0.6), abs=1e-4)


def test_beam_one_with_length_penalty_scores_at_least_greedy():
    max_lengths = [5] * 4
    model = PrefixModel.random(7, num_sentences=4)
    beam = run_beam(model, max_lengths, beam_size=1, alpha=0.6)
    greedy = run_greedy(model, max_lengths, alpha=0.6)
    assert np.all(beam.scores[:, 0] >= greedy.scores[:, 0] - 1e-6)


def test_zero_max_length_gives_empty_output():
    model = PrefixModel.random(0, num_sentences=4)
    beam = run_beam(model, [0, 4, 5, 3], beam_size=3, alpha=0.6)
    assert not beam.tokens[0].any() and np.all(np.isneginf(beam.scores[0]))
    assert output_sequence(beam.tokens[1, 0])[-1] == EOS
    greedy = run_greedy(model, [0, 4, 5, 3])
    assert not greedy.tokens[0].any() and greedy.lengths[0, 0] == 0


def test_gather_beams_reorders_rows_within_each_sentence():
    state = {"rows": jnp.arange(6 * 2).reshape(6, 2), "counter": jnp.array(7)}
    indices = jnp.array([[2, 2, 0], [1, 0, 0]])
    gathered = beam_search._gather_beams(state, indices)
    expected_rows = np.array([2, 2, 0, 4, 3, 3])
    np.testing.assert_array_equal(gathered["rows"], np.arange(12).reshape(6, 2)[expected_rows])
    assert int(gathered["counter"]) == 7


def test_best_possible_score_bounds_every_extension():
    log_prob, length, max_length = -1.3, 3, 9
    for alpha in (-0.5, 0.0, 0.6, 2.0):
        bound = float(beam_search._best_possible_score(jnp.float32(log_prob), jnp.int32(length),
                                                      jnp.int32(max_length), alpha))
        attainable = [log_prob / lp(final, alpha) for final in range(length + 1, max_length + 1)]
        assert bound == pytest.approx(max(attainable), rel=1e-6)
    assert math.isclose(
        float(beam_search._best_possible_score(jnp.float32(-2.0), jnp.int32(1), jnp.int32(10), 0.6)),
        -2.0 / lp(10, 0.6), rel_tol=1e-6)


class HistoryModel(PrefixModel):
    """The prefix model read from a per-row history of tokens whose capacity a staged search grows.

    Each step writes its token at ``history[:, step]`` (``dynamic_update`` clamps an index past the
    capacity, which would overwrite the last slot and corrupt the prefix code) and computes the code
    from the history, so a stage whose state is too short, or a grown state that loses rows or their
    order, changes the results.
    """

    def step_fn(self, rows_per_sentence: int):
        tables = jnp.asarray(self.tables)

        def step(state, token_ids):
            history, calls = state  # [N, C], scalar
            history = jax.lax.dynamic_update_index_in_dim(history, token_ids, calls, axis=1)
            positions = jnp.arange(history.shape[1])
            powers = jnp.where(positions <= calls, VOCAB_SIZE ** jnp.maximum(calls - positions, 0), 0)
            codes = jnp.sum(history * powers, axis=1)
            sentence = jnp.arange(codes.shape[0]) // rows_per_sentence
            return tables[sentence, codes], (history, calls + 1)

        return step

    def initial_state(self, rows: int, capacity: int = MAX_LEN):
        return jnp.zeros((rows, capacity), jnp.int32), jnp.array(0, jnp.int32)


@pytest.mark.integration
def test_staged_search_equals_one_loop_and_grows_the_state_between_stages():
    grown = []  # (capacity before, capacity asked for), recorded while tracing.

    def grow_history(state, num_steps):
        history, calls = state
        grown.append((history.shape[1], num_steps))
        return jnp.pad(history, ((0, 0), (0, num_steps - history.shape[1]))), calls

    stage_ends = (2, 4)
    max_lengths = jnp.asarray([5, 5, 3, 4], jnp.int32)
    for seed in range(3):
        model = HistoryModel(PrefixModel.random(seed, num_sentences=4, scale=3.0).tables)
        for early_stop in (True, False):
            one_loop = beam_search.beam_search(
                model.step_fn(3), model.initial_state(12), max_lengths, beam_size=3, alpha=0.6,
                max_decode_len=MAX_LEN, early_stop=early_stop)
            grown.clear()
            staged = beam_search.beam_search(
                model.step_fn(3), model.initial_state(12, capacity=2), max_lengths, beam_size=3, alpha=0.6,
                max_decode_len=MAX_LEN, early_stop=early_stop, stage_ends=stage_ends, grow_state=grow_history)
            assert grown == [(2, 4), (4, 5)]
            reference = run_beam(model, max_lengths, beam_size=3, alpha=0.6, early_stop=early_stop)
            for result in (one_loop, staged):
                np.testing.assert_array_equal(result.tokens, reference.tokens)
                np.testing.assert_array_equal(result.scores, reference.scores)
                assert int(result.num_steps) == int(reference.num_steps)
        greedy_staged = beam_search.greedy_search(
            model.step_fn(1), model.initial_state(4, capacity=2), max_lengths, max_decode_len=MAX_LEN,
            stage_ends=stage_ends, grow_state=grow_history)
        np.testing.assert_array_equal(greedy_staged.tokens, run_greedy(model, max_lengths).tokens)


def test_too_short_a_stage_state_changes_the_result():
    # The check above can fail: without growing, steps past the capacity corrupt the prefix code.
    model = HistoryModel(PrefixModel.random(0, num_sentences=4, scale=3.0).tables)
    max_lengths = jnp.asarray([5, 5, 5, 5], jnp.int32)
    short = beam_search.beam_search(model.step_fn(3), model.initial_state(12, capacity=2), max_lengths, beam_size=3,
                                    alpha=0.6, max_decode_len=MAX_LEN, early_stop=False)
    reference = run_beam(model, max_lengths, beam_size=3, alpha=0.6, early_stop=False)
    assert not np.array_equal(short.scores, reference.scores)


@pytest.mark.parametrize("stage_ends,grow,message", [
    ((0, 3), True, "rise strictly"), ((3, 2), True, "rise strictly"), ((5,), True, "rise strictly"),
    ((2,), False, "grow_state"),
])
def test_staged_search_rejects_bad_stages(stage_ends, grow, message):
    model = PrefixModel.random(0, num_sentences=1)
    with pytest.raises(ValueError, match=message):
        beam_search.beam_search(model.step_fn(2), model.initial_state(2), jnp.asarray([5]), beam_size=2, alpha=0.6,
                                max_decode_len=MAX_LEN, stage_ends=stage_ends,
                                grow_state=(lambda state, steps: state) if grow else None)


@pytest.mark.integration
def test_several_steps_per_iteration_change_no_result():
    # Stage lengths 2, 2 and 1 (MAX_LEN = 5): with 2 or 3 steps per iteration some stages end with single
    # steps, and early termination can finish every sentence in the middle of an iteration.
    def grow_history(state, num_steps):
        history, calls = state
        return jnp.pad(history, ((0, 0), (0, num_steps - history.shape[1]))), calls

    # Seed 1's four sentences all end after step 4 with early termination: in the middle of an iteration
    # of 3 steps (asserted below). Without it the search runs to MAX_LEN, whose last iteration is partial.
    max_lengths = jnp.asarray([5, 5, 3, 4], jnp.int32)
    model = HistoryModel(PrefixModel.random(1, num_sentences=4, scale=3.0).tables)
    for early_stop, stage_ends in ((True, ()), (False, ()), (True, (2, 4)), (False, (2, 4))):
        results = [beam_search.beam_search(
            model.step_fn(3), model.initial_state(12, capacity=stage_ends[0] if stage_ends else MAX_LEN),
            max_lengths, beam_size=3, alpha=0.6, max_decode_len=MAX_LEN, early_stop=early_stop,
            stage_ends=stage_ends, grow_state=grow_history if stage_ends else None, steps_per_iteration=steps)
            for steps in (1, 2, 3)]
        assert int(results[0].num_steps) == (4 if early_stop else MAX_LEN)
        for result in results[1:]:
            for field, expected in zip(result._fields, results[0]):
                np.testing.assert_array_equal(getattr(result, field), expected, err_msg=field)


@pytest.mark.integration
def test_early_termination_in_the_middle_of_an_iteration_counts_only_the_steps_needed():
    # The search is over after one step; the second step of the iteration still runs but counts nothing.
    model = PrefixModel.from_probabilities({(): {EOS: 0.9, TOKEN_A: 0.05, TOKEN_B: 0.04}})
    for steps in (1, 2, 4):
        result = beam_search.beam_search(model.step_fn(4), model.initial_state(4), jnp.asarray([5]), beam_size=4,
                                         alpha=0.6, max_decode_len=MAX_LEN, steps_per_iteration=steps)
        assert int(result.num_steps) == 1
        assert output_sequence(np.asarray(result.tokens)[0, 0]) == (EOS,)


def test_steps_per_iteration_must_be_positive():
    model = PrefixModel.random(0, num_sentences=1)
    with pytest.raises(ValueError, match="steps_per_iteration"):
        beam_search.beam_search(model.step_fn(2), model.initial_state(2), jnp.asarray([5]), beam_size=2, alpha=0.6,
                                max_decode_len=MAX_LEN, steps_per_iteration=0)


def test_num_best_makes_the_first_n_hypotheses_those_of_a_search_run_to_the_end():
    # Early termination waits for the num_best-th finished hypothesis: the first num_best are then those of a
    # search without early termination, and the first is the 1-best whatever num_best is.
    max_lengths = jnp.asarray([5, 5, 4, 3], jnp.int32)
    later_ones_differed = False
    for seed in range(3):
        model = PrefixModel.random(seed, num_sentences=4)
        results = {name: run_beam(model, max_lengths, beam_size=3, alpha=0.6, **options)
                   for name, options in (("one", {"num_best": 1}), ("three", {"num_best": 3}),
                                         ("to_the_end", {"early_stop": False}))}
        for field in ("tokens", "scores", "log_probs", "lengths"):
            np.testing.assert_array_equal(getattr(results["three"], field), getattr(results["to_the_end"], field))
            np.testing.assert_array_equal(getattr(results["three"], field)[:, 0], getattr(results["one"], field)[:, 0])
        assert np.all(np.diff(results["three"].scores, axis=1) <= 0)
        later_ones_differed |= not np.array_equal(results["one"].tokens, results["to_the_end"].tokens)
    assert later_ones_differed  # Without num_best, early termination leaves the later hypotheses unfinished.
    with pytest.raises(ValueError, match="num_best"):
        beam_search.beam_search(model.step_fn(3), model.initial_state(12), max_lengths, beam_size=3, alpha=0.6,
                                max_decode_len=MAX_LEN, num_best=4)
