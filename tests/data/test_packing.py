"""Packing (``config.packing``): the packer's arrays, the model's segment masks, the pipeline, bad input.

The central check compares a packed batch with an independent computation: each pair run alone in an
ordinary (unpacked, padded) batch. Logits at every pair's positions, and the loss sums, must agree to
float tolerance with dropout off.
"""

from __future__ import annotations

import collections
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.data import batching, input_pipeline, packing
from attention_jax.experiment import sections
from attention_jax.models import metrics, model
from attention_jax.training import train, train_state
from configs import base
from tests.support import tsv_corpus
from tests.support.packed_pairs import (ROWS, SMALL, init_transformer, logits_of, packed_and_alone,
                                         random_pairs, tokenized_split)

EOS = model.EOS_ID


# --- The packer ------------------------------------------------------------------------------------

def test_packed_batch_arrays_on_a_hand_made_example() -> None:
    split = tokenized_split([([5, 6], [7]), ([8], [9, 10, 11]), ([12, 13, 14], [15, 16])])
    batch = packing._make_packed_batch(split, 8, np.array([[0, 1, -1], [2, -1, -1], [-1, -1, -1]]))
    np.testing.assert_array_equal(batch["inputs"], [[5, 6, EOS, 8, EOS, 0, 0, 0],
                                                    [12, 13, 14, EOS, 0, 0, 0, 0], [0] * 8])
    np.testing.assert_array_equal(batch["inputs_segmentation"], [[1, 1, 1, 2, 2, 0, 0, 0],
                                                                 [1, 1, 1, 1, 0, 0, 0, 0], [0] * 8])
    np.testing.assert_array_equal(batch["inputs_position"], [[0, 1, 2, 0, 1, 0, 0, 0],
                                                             [0, 1, 2, 3, 0, 0, 0, 0], [0] * 8])
    np.testing.assert_array_equal(batch["targets"], [[7, EOS, 9, 10, 11, EOS, 0, 0],
                                                     [15, 16, EOS, 0, 0, 0, 0, 0], [0] * 8])
    np.testing.assert_array_equal(batch["targets_segmentation"], [[1, 1, 2, 2, 2, 2, 0, 0],
                                                                  [1, 1, 1, 0, 0, 0, 0, 0], [0] * 8])
    np.testing.assert_array_equal(batch["targets_position"], [[0, 1, 0, 1, 2, 3, 0, 0],
                                                              [0, 1, 2, 0, 0, 0, 0, 0], [0] * 8])


def test_first_fit_decreasing_respects_both_sides_and_places_every_pair_once() -> None:
    rng = np.random.default_rng(0)
    source, target = rng.integers(1, 17, size=200), rng.integers(1, 17, size=200)
    rows, lengths = packing._first_fit_decreasing(source, target, 16)
    assert sorted(pair for row in rows for pair in row) == list(range(200))
    assert lengths == [16] * len(rows)
    assert all(source[row].sum() <= 16 and target[row].sum() <= 16 for row in rows)
    lower_bound = max(source.sum(), target.sum()) / 16
    assert len(rows) < 1.15 * lower_bound + 1  # Nearly full rows.


def test_first_fit_decreasing_hand_example() -> None:
    rows, _ = packing._first_fit_decreasing(np.array([3, 5, 2, 4]), np.array([1, 1, 4, 1]), 6)
    # By longest side: 1 (5), 2 (4), 3 (4), 0 (3). Pair 2 needs 2 source slots, row 0 has 1: new row.
    # Pair 3 (4, 1) fits row 1 (4 and 2 free); pair 0 (3, 1) fits neither (1 and 0 source slots free).
    assert rows == [[1], [2, 3], [0]]


def test_first_fit_decreasing_over_row_lengths_hand_example() -> None:
    source, target = np.array([7, 3, 2, 1, 3]), np.array([6, 2, 3, 1, 3])
    rows, lengths = packing._first_fit_decreasing(source, target, (4, 8))
    # Pair 0 (7, 6) opens a row of 8 (1 and 2 slots left). Pairs 1, 2, 4 (longer side 3) fit no open
    # row and each opens a row of 4. Pair 3 (1, 1) then tops up the row of 8 instead of opening one.
    assert rows == [[0, 3], [1], [2], [4]]
    assert lengths == [8, 4, 4, 4]


def test_first_fit_decreasing_over_row_lengths_fills_rows_and_shortens_them() -> None:
    rng = np.random.default_rng(4)
    source, target = rng.integers(1, 20, size=600), rng.integers(1, 20, size=600)
    source[:20], target[:20] = 60, 50  # A few long pairs.
    rows, lengths = packing._first_fit_decreasing(source, target, (16, 32, 64))
    assert sorted(pair for row in rows for pair in row) == list(range(600))
    for row, length in zip(rows, lengths):
        assert source[row].sum() <= length and target[row].sum() <= length
        # The row's first (longest) pair opened it: the shortest length holding that pair.
        assert length == min(cap for cap in (16, 32, 64) if cap >= max(source[row[0]], target[row[0]]))
    slots = sum(lengths)
    assert max(source.sum(), target.sum()) / slots > 0.9  # Nearly full rows.
    only_longest, _ = packing._first_fit_decreasing(source, target, 64)
    attended = sum(length * length for length in lengths) / slots  # Keys per query position.
    assert attended < 0.75 * 64 and len(only_longest) * 64 >= 0.9 * slots


def test_row_lengths_default_and_bad_values_are_named() -> None:
    assert packing._default_row_lengths(64) == (24, 48, 64)
    assert packing._default_row_lengths(256) == (96, 192, 256)
    assert packing._default_row_lengths(16) == (12, 16)  # Lengths below MIN_BUCKET_LEN are left out.
    assert packing.check_row_lengths((), 64) == (24, 48, 64)
    assert packing.check_row_lengths([24, 64], 64) == (24, 64)
    for bad in ((32, 48), (64, 32), (0, 64), (32, 32, 64)):
        with pytest.raises(ValueError, match=r"packing_row_lengths=.*ending in config.max_len=64"):
            packing.check_row_lengths(bad, 64)
    config = base.get_config()
    config.packing, config.packing_row_lengths = True, (32, 128)
    with pytest.raises(ValueError, match=r"packing_row_lengths=\(32, 128\).*max_len=256"):
        sections.build_experiment(config, "config")
    config.packing_row_lengths = (32, 256)
    sections.build_experiment(config, "config")


def test_packed_plan_covers_every_kept_pair_once_per_epoch_in_row_length_shapes() -> None:
    rng = np.random.default_rng(1)
    source, target = rng.integers(1, 12, size=500), rng.integers(1, 12, size=500)
    source[:60], target[:60] = rng.integers(1, 40, size=60), rng.integers(1, 40, size=60)  # Some long pairs.
    shapes = packing._make_packed_shapes(32, 32 * 10, 2)
    assert shapes == batching._BucketShapes(lengths=(12, 24, 32), global_rows=(26, 12, 10))
    plan = packing._PackedPlan(source, target, shapes, window=64)
    kept = np.flatnonzero(np.maximum(source, target) <= 32)
    assert plan.num_dropped == 500 - len(kept)
    assert sum(plan._rows_per_length()) == plan.num_rows and len(plan.used_buckets()) >= 2
    for epoch in (0, 1):
        batches = plan.shuffled_batches(seed=3, epoch=epoch)
        assert len(batches) == plan.num_batches
        assert {b.bucket for b in batches} == set(plan.used_buckets())
        partial = [b.bucket for b in batches if (b.sentence_indices < 0).all(axis=1).any()]
        assert partial in ([], [2])  # Shorter lengths' leftover rows move up: one partial batch at most.
        for b in batches:
            assert b.sentence_indices.shape[0] == shapes.global_rows[b.bucket]
            for row in b.sentence_indices:
                members = row[row >= 0]
                assert source[members].sum() <= shapes.lengths[b.bucket] >= target[members].sum()
        members = np.concatenate([b.sentence_indices.ravel() for b in batches])
        np.testing.assert_array_equal(np.sort(members[members >= 0]), kept)
    epochs = [plan.shuffled_batches(3, epoch) for epoch in (0, 1)]
    assert not all(np.array_equal(a.sentence_indices, b.sentence_indices) for a, b in zip(*epochs))
    padding = plan.padding_fraction()
    bucketed = batching._BatchPlan(source, target, batching.make_bucket_shapes(32, 320, 2)).padding_fraction()
    assert padding["targets"] < bucketed["targets"]
    one_length = packing._PackedPlan(source, target, packing._make_packed_shapes(32, 320, 2, (32,)), window=64)

    assert {b.sentence_indices.shape[0] for b in one_length.shuffled_batches(3, 0)} == {10}


# --- The model -------------------------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("changes", [{}, {"positional_encoding": "learned"},
                                     {"layer_norm_position": "pre", "share_embeddings": False},
                                     {"attention_implementation": "xla"}])
def test_packed_logits_and_loss_equal_each_pair_alone(changes: dict) -> None:
    cfg = SMALL.replace(**changes)
    params = init_transformer(cfg)
    pairs = random_pairs(5, seed=0, max_words=4)
    packed, alone = packed_and_alone(pairs, ROWS)
    packed_logits = logits_of(cfg, params, packed)
    segments = np.asarray(packed["targets_segmentation"])
    for row, members in enumerate(ROWS.tolist()):
        for segment, pair in enumerate((p for p in members if p >= 0), start=1):
            positions = np.flatnonzero(segments[row] == segment)
            reference = logits_of(cfg, params, alone[pair])[0, :len(positions)]
            np.testing.assert_allclose(packed_logits[row, positions], reference, atol=2e-5, rtol=2e-5)


@pytest.mark.integration
def test_packed_loss_sums_equal_unpacked_batch_of_the_same_pairs() -> None:
    params = init_transformer(SMALL)
    pairs = random_pairs(5, seed=1, max_words=4)
    split = tokenized_split(pairs)
    packed = packing._make_packed_batch(split, 16, ROWS)
    unpacked = batching._make_batch(split, 16, np.arange(5))
    transformer = model.Transformer(SMALL)
    sums = [jax.device_get(train_state._eval_step(params, {k: jnp.asarray(v) for k, v in batch.items()},
                                                 transformer=transformer, label_smoothing=0.1))
            for batch in (packed, unpacked)]
    assert sums[0]["tokens"] == sums[1]["tokens"] == sum(len(target) + 1 for _, target in pairs)
    for key in ("loss_sum", "nll_sum", "correct"):
        np.testing.assert_allclose(sums[0][key], sums[1][key], rtol=1e-5)


def test_attention_never_crosses_pairs() -> None:
    params = init_transformer(SMALL)
    pairs = random_pairs(3, seed=2, max_words=4)
    packed, _ = packed_and_alone(pairs, np.array([[0, 1, 2]]))
    changed = [list(pairs[0][0]), list(pairs[0][1])]
    changed[0] = [(token + 7) % 36 + 4 for token in changed[0]]  # Perturb pair 0's source and target.
    changed[1] = [(token + 3) % 36 + 4 for token in changed[1]]
    perturbed, _ = packed_and_alone([tuple(changed)] + pairs[1:], np.array([[0, 1, 2]]))
    before, after = logits_of(SMALL, params, packed), logits_of(SMALL, params, perturbed)
    others = np.asarray(packed["targets_segmentation"])[0] >= 2
    np.testing.assert_allclose(after[0, others], before[0, others], atol=1e-6)
    assert not np.allclose(after[0, ~others], before[0, ~others])  # The perturbation is visible.


def test_decoder_is_causal_within_a_pair() -> None:
    params = init_transformer(SMALL)
    pairs = [([5, 6, 7], [8, 9, 10, 11]), ([12], [13, 14])]
    packed, _ = packed_and_alone(pairs, np.array([[0, 1]]))
    later = {key: np.array(value) for key, value in packed.items()}
    later["targets"][0, 2] = 30  # Pair 1's third target token.
    before, after = logits_of(SMALL, params, packed), logits_of(SMALL, params, later)
    np.testing.assert_allclose(after[0, :3], before[0, :3], atol=1e-6)  # Positions up to it see no change.
    np.testing.assert_allclose(after[0, 5:], before[0, 5:], atol=1e-6)  # Nor does the next pair.
    assert not np.allclose(after[0, 3], before[0, 3])  # The next position of the pair does.


def test_decoder_inputs_restart_with_bos_at_every_pair() -> None:
    targets = jnp.array([[7, EOS, 9, 10, EOS, 0]])
    positions = jnp.array([[0, 1, 0, 1, 2, 0]])
    np.testing.assert_array_equal(model._shift_right_packed(targets, positions),
                                  [[model.BOS_ID, 7, model.BOS_ID, 9, 10, model.BOS_ID]])


# --- Bad input -------------------------------------------------------------------------------------

def test_packing_with_an_attention_window_is_refused_when_the_config_is_validated() -> None:
    config = base.get_config()
    config.packing, config.attention_window = True, 4
    with pytest.raises(ValueError, match=r"packing=True.*attention_window=4.*attention_window=0.*packing=False"):
        sections.build_experiment(config, "config")
    config.attention_window = 0
    sections.build_experiment(config, "config")  # Full attention: accepted.


def test_model_with_a_window_refuses_segment_ids() -> None:
    cfg = SMALL.replace(attention_window=2)
    params = init_transformer(cfg)
    packed, _ = packed_and_alone(random_pairs(2, seed=3), np.array([[0, 1]]))
    with pytest.raises(ValueError, match="attention_window=2"):
        logits_of(cfg, params, packed)


# --- The pipeline and the logged padding ---------------------------------------------------------

@pytest.fixture(scope="module")
def packed_corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    pairs = tsv_corpus.make_corpus(directory / "tsv")
    config = tsv_corpus.pipeline_config(f"tsv:{directory / 'tsv'}", directory / "tfds", packing=True)
    data = input_pipeline.get_datasets(config, rows_multiple=tsv_corpus.ROWS_MULTIPLE)
    return config, pairs, data


def _unpacked_rows(batches) -> collections.Counter:
    """Multiset of (source ids, target ids) pairs read back from packed rows through the segment ids."""
    rows = collections.Counter()
    for batch in batches:
        for row in range(len(batch["inputs"])):
            for segment in range(1, batch["inputs_segmentation"][row].max() + 1):
                source = batch["inputs"][row][batch["inputs_segmentation"][row] == segment]
                target = batch["targets"][row][batch["targets_segmentation"][row] == segment]
                rows[(tuple(source), tuple(target))] += 1
    return rows


def test_packed_epoch_delivers_every_kept_pair_once_in_its_row_length_shapes(packed_corpus) -> None:
    config, pairs, data = packed_corpus
    num_batches = data.stats["batches_per_epoch"]["train"]
    batches = tsv_corpus.take_batches(data.train_iterator(seed=0), num_batches)
    expected = tsv_corpus.expected_rows(data.tokenizer, pairs["train"], config.max_len)
    assert _unpacked_rows(batches) == expected
    multiple = tsv_corpus.ROWS_MULTIPLE
    shapes = {(config.tokens_per_batch // length // multiple * multiple, length)
              for length in packing._default_row_lengths(config.max_len)}
    assert {batch[key].shape for batch in batches for key in batch} <= shapes
    assert data.stats["packing"] and set(data._batch_shapes) <= shapes
    unpacked_padding = input_pipeline.get_datasets(
        tsv_corpus.pipeline_config(config.dataset, config.data_dir),
        rows_multiple=tsv_corpus.ROWS_MULTIPLE).stats["train_padding_fraction"]
    assert data.stats["train_padding_fraction"]["targets"] < unpacked_padding["targets"]


def test_packed_iterator_restores_exactly(packed_corpus) -> None:
    _, _, data = packed_corpus
    consumed = data.stats["batches_per_epoch"]["train"] - 1  # Resume across the epoch boundary.
    uninterrupted = data.train_iterator(seed=1)
    tsv_corpus.take_batches(uninterrupted, consumed)
    state = json.loads(json.dumps(uninterrupted.get_state()))
    expected = tsv_corpus.take_batches(uninterrupted, 4)
    restored = data.train_iterator(seed=1)
    restored.set_state(state)
    for got, want in zip(tsv_corpus.take_batches(restored, 4), expected):
        assert got.keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])


def test_packed_rows_split_over_two_processes(packed_corpus) -> None:
    config, _, data = packed_corpus
    shards = [input_pipeline.get_datasets(config, process_index=index, process_count=2,
                                          rows_multiple=tsv_corpus.ROWS_MULTIPLE) for index in range(2)]
    whole = next(data.train_iterator(seed=0))
    parts = [next(shard.train_iterator(seed=0)) for shard in shards]
    for key in whole:
        np.testing.assert_array_equal(np.concatenate([parts[0][key], parts[1][key]]), whole[key])


def test_eval_batches_stay_bucketed(packed_corpus) -> None:
    _, _, data = packed_corpus
    batch = next(iter(data.eval_batches("validation")))
    assert set(batch) == {"inputs", "targets"}


def test_padding_fractions_count_real_tokens_and_slots() -> None:
    counts = batching.count_tokens({"inputs": np.array([[5, 3, 0, 0]]), "targets": np.array([[5, 6, 7, 3]])})
    assert counts == {"inputs_tokens": 2, "inputs_slots": 4, "targets_tokens": 4, "targets_slots": 4}
    assert metrics.padding_fractions(counts) == {"inputs_padding_fraction": 0.5, "targets_padding_fraction": 0.0}


@pytest.mark.slow
def test_packed_training_runs_and_logs_the_padding_it_trained_on(packed_corpus, tmp_path) -> None:
    from tests.support import fake_data

    config, _, data = packed_corpus
    run_config = fake_data.tiny_experiment(vocab_size=config.vocab_size, max_len=config.max_len,
                                       tokens_per_batch=config.tokens_per_batch, packing=True,
                                       num_train_steps=4, eval_every_steps=0, checkpoint_every_steps=0,
                                       compilation_cache_dir="")
    results = train.train_and_evaluate(run_config, str(tmp_path), data=data)
    assert results["finished"] and results["step"] == 4 and math.isfinite(results["eval_loss"])
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train_lines = [line for line in logged if "train/loss" in line]
    assert train_lines and all(0 <= line["train/targets_padding_fraction"] < 0.5 for line in train_lines)
    assert all(0 <= line["train/inputs_padding_fraction"] < 0.5 for line in train_lines)
