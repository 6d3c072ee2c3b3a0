"""Tests for the input pipeline: TSV and TFDS (mocked WMT) corpora, batching, resumption, sharding.

Batches are checked against an independent computation: every training/eval pair tokenized directly
with the pipeline's tokenizer from the raw TSV text, filtered by ``max_len``, compared as a multiset
with the rows the pipeline delivers.
"""

import collections
import json
import os
import unicodedata

import numpy as np
import pytest
import tensorflow_datasets as tfds

from attention_jax.data import batching, input_pipeline
from attention_jax.data import tokenizer as tokenizer_lib
from tests.support import REPO_ROOT
from tests.support.tsv_corpus import (MAX_LEN, ROWS_MULTIPLE, TOKENS_PER_BATCH, expected_rows, make_corpus,
                                       pipeline_config, take_batches)

def shared_data_dir() -> str | None:
    """Return the messages_en_de directory when ../shared (or $ATTENTION_JAX_SHARED) has it."""
    shared = os.environ.get("ATTENTION_JAX_SHARED") or os.path.join(REPO_ROOT, "..", "shared")
    path = os.path.join(shared, "data", "messages_en_de")
    return path if os.path.isfile(os.path.join(path, "train.tsv")) else None


def _batch_rows(batches) -> collections.Counter:
    """Multiset of (source ids, target ids) of the non-padding rows of batches."""
    rows = collections.Counter()
    for batch in batches:
        for source_row, target_row in zip(batch["inputs"], batch["targets"]):
            if source_row.any():
                rows[(tuple(source_row[source_row != 0]), tuple(target_row[target_row != 0]))] += 1
    return rows


def _assert_batches_equal(first: list[dict], second: list[dict]) -> None:
    assert len(first) == len(second)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a["inputs"], b["inputs"])
        np.testing.assert_array_equal(a["targets"], b["targets"])


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    pairs = make_corpus(directory / "tsv")
    config = pipeline_config(f"tsv:{directory / 'tsv'}", directory / "tfds")
    data = input_pipeline.get_datasets(config, rows_multiple=ROWS_MULTIPLE)
    return config, pairs, data


def test_bucket_lengths_are_powers_of_two_and_one_and_a_half():
    assert batching._bucket_lengths(256) == (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
    assert batching._bucket_lengths(100) == (8, 12, 16, 24, 32, 48, 64, 96, 100)
    assert batching._bucket_lengths(5) == (5,)


def test_token_budget_too_small_for_row_multiple_is_a_clear_error():
    with pytest.raises(ValueError, match="tokens_per_batch"):
        batching.make_bucket_shapes(max_len=256, tokens_per_batch=1000, row_multiple=8)


def test_train_epoch_delivers_every_kept_pair_once(small_corpus):
    config, pairs, data = small_corpus
    num_batches = data.stats["batches_per_epoch"]["train"]
    epoch = take_batches(data.train_iterator(seed=0), num_batches)
    assert _batch_rows(epoch) == expected_rows(data.tokenizer, pairs["train"], MAX_LEN)


def test_batches_respect_budget_shapes_and_format(small_corpus):
    config, _, data = small_corpus
    batches = take_batches(data.train_iterator(seed=3), 2 * data.stats["batches_per_epoch"]["train"])
    shapes = set()
    for batch in batches:
        inputs, targets = batch["inputs"], batch["targets"]
        assert inputs.dtype == targets.dtype == np.int32
        assert inputs.shape == targets.shape
        rows, padded_len = inputs.shape
        assert rows * padded_len <= TOKENS_PER_BATCH and rows % ROWS_MULTIPLE == 0
        assert padded_len <= MAX_LEN
        for side in (inputs, targets):
            lengths = (side != 0).sum(axis=1)
            real = lengths > 0
            # Each real row: a run of non-pad ids ending in the only EOS, then padding.
            assert np.all(side[real, lengths[real] - 1] == tokenizer_lib.EOS_ID)
            assert np.all((side == tokenizer_lib.EOS_ID).sum(axis=1) == real)
            assert np.all((side != 0) == (np.arange(padded_len) < lengths[:, None]))
            assert not np.any(side == tokenizer_lib.BOS_ID)
        assert np.array_equal(inputs.any(axis=1), targets.any(axis=1))
        shapes.add(inputs.shape)
    assert shapes <= {tuple(shape) for shape in data.stats["local_batch_shapes"]}
    assert len(shapes) <= len(batching._bucket_lengths(MAX_LEN))


def test_too_long_pairs_are_dropped_and_counted(small_corpus):
    _, pairs, data = small_corpus
    for role, name in (("train", "train"), ("validation", "dev"), ("test", "test")):
        too_long = sum(
            max(len(data.tokenizer.encode(source)), len(data.tokenizer.encode(target))) > MAX_LEN
            for source, target in pairs[name]
        )
        assert data.stats["examples"][role] == len(pairs[name])
        assert data.stats["dropped_too_long"][role] == too_long
    assert data.stats["dropped_too_long"]["train"] > 0


def test_padding_fraction_matches_delivered_batches(small_corpus):
    _, _, data = small_corpus
    epoch = take_batches(data.train_iterator(seed=0), data.stats["batches_per_epoch"]["train"])
    for side, key in (("inputs", "inputs"), ("targets", "targets")):
        padding = sum(int((batch[side] == 0).sum()) for batch in epoch)
        total = sum(batch[side].size for batch in epoch)
        assert data.stats["train_padding_fraction"][key] == pytest.approx(padding / total)
    assert 0.0 < data.stats["train_padding_fraction"]["total"] < 0.6


def test_round_trip_on_corpus_text(small_corpus):
    _, pairs, data = small_corpus
    for source, target in pairs["test"]:
        assert data.tokenizer.decode(data.tokenizer.encode(source)) == source
        assert data.tokenizer.decode(data.tokenizer.encode(target)) == target


def test_same_seed_same_batches_and_epochs_reshuffled(small_corpus):
    _, _, data = small_corpus
    num_batches = data.stats["batches_per_epoch"]["train"]
    first = take_batches(data.train_iterator(seed=7), 2 * num_batches)
    _assert_batches_equal(first, take_batches(data.train_iterator(seed=7), 2 * num_batches))
    other_seed = take_batches(data.train_iterator(seed=8), num_batches)
    assert any(a["inputs"].shape != b["inputs"].shape or np.any(a["inputs"] != b["inputs"])
               for a, b in zip(first, other_seed))
    epoch_0, epoch_1 = first[:num_batches], first[num_batches:]
    assert _batch_rows(epoch_0) == _batch_rows(epoch_1)  # Same pairs ...
    assert any(a["inputs"].shape != b["inputs"].shape or np.any(a["inputs"] != b["inputs"])
               for a, b in zip(epoch_0, epoch_1))  # ... in another order.


@pytest.mark.parametrize("consumed", [5, "epoch_end"])
def test_restored_iterator_continues_exactly(small_corpus, consumed):
    _, _, data = small_corpus
    num_batches = data.stats["batches_per_epoch"]["train"]
    consumed = num_batches - 2 if consumed == "epoch_end" else consumed  # Resume across an epoch boundary.
    uninterrupted = data.train_iterator(seed=1)
    take_batches(uninterrupted, consumed)
    state = json.loads(json.dumps(uninterrupted.get_state()))  # As a checkpoint would store it.
    expected = take_batches(uninterrupted, 6)
    restored = data.train_iterator(seed=1)
    restored.set_state(state)
    _assert_batches_equal(take_batches(restored, 6), expected)


def test_two_processes_split_each_global_batch(small_corpus):
    config, _, _ = small_corpus
    single = input_pipeline.get_datasets(config, rows_multiple=ROWS_MULTIPLE)
    shards = [
        input_pipeline.get_datasets(config, process_index=index, process_count=2, rows_multiple=ROWS_MULTIPLE)
        for index in range(2)
    ]
    num_batches = single.stats["batches_per_epoch"]["train"]
    assert all(shard.stats["batches_per_epoch"]["train"] == num_batches for shard in shards)
    whole = take_batches(single.train_iterator(seed=0), num_batches)
    parts = [take_batches(shard.train_iterator(seed=0), num_batches) for shard in shards]
    for step, batch in enumerate(whole):
        first, second = parts[0][step], parts[1][step]
        assert first["inputs"].shape == second["inputs"].shape  # Shapes agree step by step.
        for side in ("inputs", "targets"):
            np.testing.assert_array_equal(np.concatenate([first[side], second[side]]), batch[side])
    # Together the shards' rows are exactly the split's kept pairs.
    assert _batch_rows(parts[0]) + _batch_rows(parts[1]) == _batch_rows(whole)


def test_plan_shards_are_disjoint_and_cover_every_kept_pair():
    rng = np.random.default_rng(0)
    source_lengths, target_lengths = rng.integers(1, 40, size=500), rng.integers(1, 40, size=500)
    shapes = batching.make_bucket_shapes(max_len=32, tokens_per_batch=256, row_multiple=4)
    plan = batching._BatchPlan(source_lengths, target_lengths, shapes)
    kept = np.flatnonzero(np.maximum(source_lengths, target_lengths) <= 32)
    assert plan.num_dropped == 500 - len(kept)
    for batches in (plan.shuffled_batches(seed=0, epoch=3), plan.ordered_batches()):
        shards = [np.concatenate([batch.local_indices(index, 4) for batch in batches]) for index in range(4)]
        assert len({len(shard) for shard in shards}) == 1  # Equal shares.
        every_row = np.concatenate(shards)
        real_rows = every_row[every_row != batching.PADDING_ROW]
        np.testing.assert_array_equal(np.sort(real_rows), kept)  # Each kept pair exactly once, none dropped.
        for batch in batches:
            length = shapes.lengths[batch.bucket]
            real = batch.sentence_indices[batch.sentence_indices >= 0]
            assert np.all(np.maximum(source_lengths[real], target_lengths[real]) <= length)


def test_eval_batches_cover_split_once_deterministically(small_corpus):
    config, pairs, data = small_corpus
    batches = list(data.eval_batches("validation"))
    assert _batch_rows(batches) == expected_rows(data.tokenizer, pairs["dev"], MAX_LEN)
    _assert_batches_equal(batches, list(data.eval_batches(config.eval_split)))
    assert len(data.eval_batches("validation")) == data.stats["batches_per_epoch"]["validation"]
    _assert_batches_equal(list(data.eval_batches("validation", max_batches=2)), batches[:2])
    all_shapes = {(rows, length) for rows, length in zip(data.stats["global_rows"], data.stats["bucket_lengths"])}
    assert {batch["inputs"].shape for batch in batches} <= all_shapes
    assert _batch_rows(data.eval_batches("test")) == expected_rows(data.tokenizer, pairs["test"], MAX_LEN)


def test_text_pairs_are_the_raw_pairs_in_order(small_corpus):
    _, pairs, data = small_corpus
    assert data.text_pairs("test") == pairs["test"]
    assert data.text_pairs("validation") == pairs["dev"]  # Too-long pairs included.
    assert data.text_pairs("train", max_pairs=5) == pairs["train"][:5]
    with pytest.raises(ValueError, match="Unknown split"):
        data.text_pairs("dev2013")


def test_second_get_datasets_reuses_tokenizer_and_tokens(small_corpus, monkeypatch):
    config, _, data = small_corpus
    model_files = [
        os.path.join(data.stats["cache_dir"], name)
        for name in os.listdir(data.stats["cache_dir"])
        if name.endswith(".model")
    ]
    assert len(model_files) == 1
    modified_time = os.path.getmtime(model_files[0])

    def fail(*args, **kwargs):
        raise AssertionError("retrained or retokenized")

    monkeypatch.setattr(tokenizer_lib, "train_tokenizer", fail)
    monkeypatch.setattr(input_pipeline.token_cache, "_tokenize_split", fail)
    again = input_pipeline.get_datasets(config, rows_multiple=ROWS_MULTIPLE)
    assert again.tokenizer.model_proto == data.tokenizer.model_proto
    assert os.path.getmtime(model_files[0]) == modified_time
    assert again.stats == data.stats


def test_missing_directory_and_file_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        input_pipeline.get_datasets(pipeline_config(f"tsv:{tmp_path / 'nowhere'}", tmp_path / "tfds"))
    make_corpus(tmp_path / "tsv")
    os.remove(tmp_path / "tsv" / "dev.tsv")
    with pytest.raises(FileNotFoundError, match="dev.tsv"):
        input_pipeline.get_datasets(pipeline_config(f"tsv:{tmp_path / 'tsv'}", tmp_path / "tfds"))


@pytest.mark.parametrize("bad_line", ["one\ttwo\tthree", "no tab here", ""])
def test_malformed_line_names_file_and_line(tmp_path, bad_line):
    make_corpus(tmp_path / "tsv")
    path = tmp_path / "tsv" / "train.tsv"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(4, bad_line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"train\.tsv:5:"):
        input_pipeline.get_datasets(pipeline_config(f"tsv:{tmp_path / 'tsv'}", tmp_path / "tfds"))


def test_empty_split_is_an_error(tmp_path):
    make_corpus(tmp_path / "tsv")
    (tmp_path / "tsv" / "test.tsv").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=r"test\.tsv holds no sentence pairs"):
        input_pipeline.get_datasets(pipeline_config(f"tsv:{tmp_path / 'tsv'}", tmp_path / "tfds"))


def test_invalid_utf8_and_huge_line_do_not_crash(tmp_path):
    pairs = make_corpus(tmp_path / "tsv")
    huge_source = " ".join(["house"] * 20_000)[:100_000]
    with open(tmp_path / "tsv" / "train.tsv", "ab") as train_file:
        train_file.write(b"bad \xff\xfe bytes\tkaputte \xc3\x28 Bytes\r\n")
        train_file.write(huge_source.encode() + b"\tHaus\n")
    data = input_pipeline.get_datasets(pipeline_config(f"tsv:{tmp_path / 'tsv'}", tmp_path / "tfds"))
    text = data.text_pairs("train")
    assert text[-2] == ("bad \ufffd\ufffd bytes", "kaputte \ufffd( Bytes")
    assert text[-1] == (huge_source, "Haus")
    expected = expected_rows(data.tokenizer, text, MAX_LEN)
    too_long = len(text) - sum(expected.values())
    assert len(data.tokenizer.encode(huge_source)) > MAX_LEN
    assert data.stats["dropped_too_long"]["train"] == too_long >= 1
    epoch = take_batches(data.train_iterator(seed=0), data.stats["batches_per_epoch"]["train"])
    assert _batch_rows(epoch) == expected
    assert len(text) == len(pairs["train"]) + 2


def test_unknown_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="Unknown config.dataset 'no_such_corpus'"):
        input_pipeline.get_datasets(pipeline_config("no_such_corpus", tmp_path))


def test_wmt_end_to_end_on_mock_data(tmp_path):
    config = pipeline_config("wmt14_translate/de-en", tmp_path, max_len=64, tokens_per_batch=512)
    with tfds.testing.mock_data(num_examples=48):
        data = input_pipeline.get_datasets(config, rows_multiple=ROWS_MULTIPLE)
        records = tfds.data_source("wmt14_translate/de-en", split="train")
        english_german = [(record["en"], record["de"]) for record in records]
        assert data.text_pairs("train") == english_german  # en -> de, as config.source_lang/target_lang say.
        epoch = take_batches(data.train_iterator(seed=0), data.stats["batches_per_epoch"]["train"])
        assert _batch_rows(epoch) == expected_rows(data.tokenizer, english_german, 64)
        assert len(list(data.eval_batches("validation"))) == data.stats["batches_per_epoch"]["validation"] > 0
        assert len(data.text_pairs("test")) == data.stats["examples"]["test"] == 48
        reversed_data = input_pipeline.get_datasets(pipeline_config("wmt14_translate/de-en", tmp_path, source_lang="de",
                                                             target_lang="en", max_len=64, tokens_per_batch=512))
        assert reversed_data.text_pairs("train") == [(german, english) for english, german in english_german]
        with pytest.raises(ValueError, match="config.source_lang='fr'"):
            input_pipeline.get_datasets(pipeline_config("wmt14_translate/de-en", tmp_path, source_lang="fr"))


def test_unprepared_wmt_names_what_is_missing_and_how_to_prepare(tmp_path):
    with pytest.raises(FileNotFoundError) as raised:
        input_pipeline.get_datasets(pipeline_config("wmt14_translate/de-en", tmp_path))
    message = str(raised.value)
    assert "wmt14_translate/de-en" in message and str(tmp_path) in message
    assert "download_and_prepare()" in message and "array_record" in message


@pytest.fixture(scope="module")
def messages_data(tmp_path_factory):
    directory = shared_data_dir()
    if directory is None:
        pytest.skip("../shared/data/messages_en_de not present (set ATTENTION_JAX_SHARED)")
    config = pipeline_config(f"tsv:{directory}", tmp_path_factory.mktemp("messages"), vocab_size=1000, max_len=64,
                     tokens_per_batch=4096)
    return config, input_pipeline.get_datasets(config, rows_multiple=8)


@pytest.mark.integration
@pytest.mark.shared_data
def test_messages_batches_budget_and_round_trip(messages_data):
    config, data = messages_data
    assert data.stats["examples"] == {"train": 37759, "validation": 2000, "test": 2000}
    assert 0 < data.stats["dropped_too_long"]["train"] < 37759 // 10
    assert data.tokenizer.vocab_size <= 1000
    shapes = set()
    for batch in take_batches(data.train_iterator(seed=0), 100):
        rows, padded_len = batch["inputs"].shape
        assert batch["targets"].shape == (rows, padded_len)
        assert rows * padded_len <= 4096 and rows % 8 == 0
        shapes.add((rows, padded_len))
    assert len(shapes) <= len(batching._bucket_lengths(64))
    assert 0.0 < data.stats["train_padding_fraction"]["total"] < 0.5
    printable = [
        text
        for pair in data.text_pairs("train", max_pairs=2000)
        for text in pair
        if text.isprintable() and text == " ".join(text.split()) and unicodedata.normalize("NFKC", text) == text
    ]
    assert sum(any(character in text for character in "äöüß") for text in printable) > 50
    for text in printable:
        assert data.tokenizer.decode(data.tokenizer.encode(text)) == text


@pytest.mark.shared_data
def test_messages_tokenizer_reused(messages_data, monkeypatch):
    config, data = messages_data

    def fail(*args, **kwargs):
        raise AssertionError("the tokenizer was trained again")

    monkeypatch.setattr(tokenizer_lib, "train_tokenizer", fail)
    assert input_pipeline.get_datasets(config, rows_multiple=8).tokenizer.model_proto == data.tokenizer.model_proto


def test_synthetic_dataset_when_present(tmp_path):
    pytest.importorskip("attention_jax.data.synthetic_en_de")
    config = pipeline_config("synthetic_en_de/small", tmp_path, max_len=64, tokens_per_batch=1024, vocab_size=1000)
    data = input_pipeline.get_datasets(config, rows_multiple=ROWS_MULTIPLE)
    assert data.stats["examples"] == {"train": 10_000, "validation": 100, "test": 100}
    english_german = data.text_pairs("validation")
    assert _batch_rows(data.eval_batches("validation")) == expected_rows(data.tokenizer, english_german, 64)
    for _, german in english_german[:20]:
        assert data.tokenizer.decode(data.tokenizer.encode(german)) == german
    batch = next(data.train_iterator(seed=0))
    assert batch["inputs"].shape == batch["targets"].shape


def test_vocabulary_larger_than_the_corpus_supports_names_the_setting(tmp_path):
    make_corpus(tmp_path / "tsv")
    with pytest.raises(ValueError, match=r"too small for config.vocab_size=20000.*--config.vocab_size=\d+ or less"):
        input_pipeline.get_datasets(pipeline_config(f"tsv:{tmp_path / 'tsv'}", tmp_path / "tfds", vocab_size=20000))


def test_empty_dataset_says_how_to_name_a_corpus(tmp_path):
    with pytest.raises(ValueError, match=r"No corpus given.*--config.dataset=tsv:"):
        input_pipeline.get_datasets(pipeline_config("", tmp_path / "tfds"))
