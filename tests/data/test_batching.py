"""What ``tokens_per_batch`` counts: padded slots, or real tokens as the paper does (Section 5.1).

The real-token budget is checked against an independent count: the non-pad ids of the batches the
plans deliver, built with :func:`batching._make_batch` / :func:`packing._make_packed_batch`.
"""

import numpy as np
import pytest

from attention_jax.data import batching, input_pipeline, packing
from attention_jax.experiment import sections
from tests.support import tsv_corpus
from tests.support.packed_pairs import tokenized_split

BUDGET = 640
MAX_LEN = 32
ROW_MULTIPLE = 2


def _lengths(seed: int = 0, count: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Source and target lengths (EOS included) of a corpus of short and long pairs, targets longer."""
    rng = np.random.default_rng(seed)
    source = rng.integers(2, 28, size=count)
    return source, np.minimum(source + rng.integers(0, 6, size=count), MAX_LEN + 4)


def _full_batch_real_tokens(plan, sizes: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, int]]:
    """Real (source, target) tokens of every batch of an epoch without an all-pad row."""
    totals = []
    for batch in plan.shuffled_batches(seed=1, epoch=0):
        indices = batch.sentence_indices
        if (indices.reshape(len(indices), -1) == batching.PADDING_ROW).all(axis=1).any():
            continue  # A bucket's last, partial batch.
        members = indices[indices != batching.PADDING_ROW]
        totals.append((int(sizes[0][members].sum()), int(sizes[1][members].sum())))
    return totals


def test_slots_budget_bounds_rows_times_length():
    source, target = _lengths()
    shapes = batching.make_bucket_shapes(MAX_LEN, BUDGET, ROW_MULTIPLE)
    for rows, length in zip(shapes.global_rows, shapes.lengths):
        assert rows * length <= BUDGET < (rows + ROW_MULTIPLE) * length
    real = _full_batch_real_tokens(batching._BatchPlan(source, target, shapes), (source, target))
    # Counting slots, the padding leaves the real tokens well below the budget.
    assert np.mean([max(pair) for pair in real]) < 0.85 * BUDGET


def test_real_budget_puts_about_the_budget_of_real_tokens_in_every_bucket():
    source, target = _lengths()
    slot_shapes = batching.make_bucket_shapes(MAX_LEN, BUDGET, ROW_MULTIPLE)
    means = batching._mean_longer_side_per_bucket(source, target, slot_shapes.lengths)
    shapes = batching._real_token_shapes(slot_shapes, means, BUDGET, ROW_MULTIPLE)
    assert shapes.lengths == slot_shapes.lengths
    assert all(real >= slots and real % ROW_MULTIPLE == 0
               for real, slots in zip(shapes.global_rows, slot_shapes.global_rows))
    plan = batching._BatchPlan(source, target, shapes)
    real_by_bucket: dict[int, list[int]] = {}
    for batch in plan.shuffled_batches(seed=1, epoch=0):
        members = batch.sentence_indices[batch.sentence_indices != batching.PADDING_ROW]
        if len(members) == len(batch.sentence_indices):  # Full batches only.
            longer = max(source[members].sum(), target[members].sum())
            real_by_bucket.setdefault(batch.bucket, []).append(int(longer))
    assert len(real_by_bucket) >= 3
    for bucket, totals in real_by_bucket.items():
        # Each bucket's batches average the budget, give or take one row multiple of that bucket's pairs.
        assert BUDGET - ROW_MULTIPLE * shapes.lengths[bucket] <= np.mean(totals) <= BUDGET * 1.05, bucket


def test_real_budget_in_packed_rows_counts_what_the_rows_hold():
    source, target = _lengths(seed=2, count=1500)
    plan = packing._PackedPlan(source, target, packing._make_packed_shapes(MAX_LEN, BUDGET, ROW_MULTIPLE), window=256)
    resized = plan.with_shapes(batching._real_token_shapes(
        plan.shapes, plan.mean_tokens_per_row(), BUDGET, ROW_MULTIPLE))
    assert resized.num_rows == plan.num_rows  # The same packing, cut into other batches.
    assert resized.shapes.global_rows[0] >= plan.shapes.global_rows[0]
    totals = _full_batch_real_tokens(resized, (source, target))
    assert BUDGET - ROW_MULTIPLE * MAX_LEN <= np.mean([max(pair) for pair in totals]) <= BUDGET * 1.05
    with pytest.raises(ValueError, match="do not match"):
        plan.with_shapes(batching._BucketShapes(lengths=(16,), global_rows=(4,)))


def test_packed_real_budget_counts_the_ids_of_built_batches():
    rng = np.random.default_rng(3)
    pairs = [(list(rng.integers(4, 50, size=rng.integers(1, 9))), list(rng.integers(4, 50, size=rng.integers(1, 9))))
             for _ in range(60)]
    split = tokenized_split(pairs)
    lengths = (split.source.lengths_with_eos(), split.target.lengths_with_eos())
    plan = packing._PackedPlan(*lengths, packing._make_packed_shapes(16, 64, 1), window=64)
    resized = plan.with_shapes(batching._real_token_shapes(plan.shapes, plan.mean_tokens_per_row(), 64, 1))
    for batch in resized.ordered_batches()[:-1]:
        built = packing._make_packed_batch(split, resized.shapes.lengths[batch.bucket], batch.sentence_indices)
        longer = max(np.count_nonzero(built["inputs"]), np.count_nonzero(built["targets"]))
        assert longer <= 64 + 16  # At most one row's worth over the budget.



def test_pipeline_sizes_training_and_evaluation_batches_alike(tmp_path):
    directory = tmp_path / "tsv"
    tsv_corpus.make_corpus(directory)
    shapes = {}
    for unit in ("slots", "real"):
        config = tsv_corpus.pipeline_config(f"tsv:{directory}", tmp_path / "tfds", tokens_per_batch_unit=unit)
        data = input_pipeline.get_datasets(config, rows_multiple=ROW_MULTIPLE)
        shapes[unit] = set(data._batch_shapes)
        eval_shapes = {batch["inputs"].shape for batch in data.eval_batches("validation")}
        assert eval_shapes <= shapes[unit]  # Evaluation compiles no shape training did not.
    slot_rows, real_rows = dict((length, rows) for rows, length in shapes["slots"]), dict(
        (length, rows) for rows, length in shapes["real"])
    assert all(real_rows[length] >= slot_rows[length] for length in slot_rows)
    assert any(real_rows[length] > slot_rows[length] for length in slot_rows)


def test_training_refuses_an_unknown_unit_before_touching_the_workdir():
    from configs import tiny

    config = tiny.get_config()
    config.tokens_per_batch_unit = "sentences"
    with pytest.raises(ValueError, match="tokens_per_batch_unit must be one of slots, real; got 'sentences'"):
        sections.build_experiment(config, "config")
