"""Language-model data: documents packed into rows (attention never crosses them), txt: and TFDS text."""

from __future__ import annotations

import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_datasets as tfds

from attention_jax.checkpointing import resume_checks
from attention_jax.data import lm_data
from attention_jax.experiment.sections import DataConfig
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import model
from tests.support import fake_data
from tests.support.lm_corpus import write_txt_corpus


def _documents(seed: int, count: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(4, 50, size=rng.integers(1, 30)).tolist() + [model.EOS_ID] for _ in range(count)]


def _document_of_each_token(documents: list[list[int]]) -> np.ndarray:
    return np.concatenate([np.full(len(document), index) for index, document in enumerate(documents)])


def test_packed_rows_hold_the_token_stream_with_restarting_segments_and_positions() -> None:
    documents, length = _documents(0, 40), 16
    packed = lm_data._PackedRows(documents, length)
    stream = np.concatenate(documents)
    assert packed.num_tokens == len(stream) and packed.num_rows == -(-len(stream) // length)
    flat = packed.targets.ravel()
    np.testing.assert_array_equal(flat[:len(stream)], stream)
    assert not flat[len(stream):].any() and not packed.segmentation.ravel()[len(stream):].any()
    owner = _document_of_each_token(documents)
    for row in range(packed.num_rows):  # Independent: positions count tokens since the segment began.
        slots = np.arange(row * length, min((row + 1) * length, len(stream)))
        expected_position, expected_segment = [], []
        for slot in slots:
            new = slot == slots[0] or owner[slot] != owner[slot - 1]
            expected_position.append(0 if new else expected_position[-1] + 1)
            expected_segment.append((expected_segment[-1] if expected_segment else 0) + int(new))
        np.testing.assert_array_equal(packed.positions[row, :len(slots)], expected_position)
        np.testing.assert_array_equal(packed.segmentation[row, :len(slots)], expected_segment)


def test_packed_rows_never_attend_across_documents() -> None:
    documents, length = _documents(1, 30), 24
    packed = lm_data._PackedRows(documents, length)
    batch = packed.batch(np.arange(packed.num_rows))
    mask = np.asarray(model._make_segment_mask(jnp.asarray(batch["targets_segmentation"]),
                                              jnp.asarray(batch["targets_segmentation"])))[:, 0]
    owner = np.full(packed.num_rows * length, -1)
    owner[:packed.num_tokens] = _document_of_each_token(documents)
    owner = owner.reshape(packed.num_rows, length)
    same_document = (owner[:, :, None] == owner[:, None, :]) & (owner[:, :, None] >= 0)
    assert not (mask & ~same_document).any()  # Attention allowed only within one document.
    assert mask.sum() > 0


def test_packed_rows_give_back_each_document_whole() -> None:
    documents, length = _documents(2, 25), 8  # Most documents here run past a row's end.
    packed = lm_data._PackedRows(documents, length)
    recovered = packed.documents()
    assert [document.tolist() for document in recovered] == documents
    assert lm_data._PackedRows([], length).documents() == []


def _config(dataset: str, data_dir: pathlib.Path, **overrides: object) -> DataConfig:
    fields = dict(dataset=dataset, data_dir=str(data_dir), train_split="train", eval_split="validation",
                  test_split="test", vocab_size=300, max_len=32, tokens_per_batch=256, target_lang="de",
                  source_lang="en", data_threads=1)
    return fake_data.data_config(**{**fields, **overrides})


def test_txt_corpus_batches_resume_and_cover_every_row(tmp_path: pathlib.Path) -> None:
    texts = write_txt_corpus(tmp_path)
    data = lm_data.get_datasets(_config(f"txt:{tmp_path}", tmp_path / "cache"), rows_multiple=2)
    assert data.stats["examples"] == {split: len(docs) for split, docs in texts.items()}
    assert data.split_bytes["validation"] == sum(len(text.encode()) + 1 for text in texts["validation"])
    iterator = data.train_iterator(seed=3)
    next(iterator)
    state = iterator.get_state()
    expected = [next(iterator) for _ in range(3)]
    resumed = data.train_iterator(seed=3)
    resumed.set_state(state)
    for batch, again in zip(expected, [next(resumed) for _ in range(3)]):
        assert batch["targets"].shape == (8, 32)  # 256 tokens // 32 = 8 rows.
        np.testing.assert_array_equal(batch["targets"], again["targets"])
    dev = data.eval_batches("validation")
    real_tokens = sum(int(np.count_nonzero(batch["targets"])) for batch in dev)
    assert real_tokens == data.stats["tokens"]["validation"]
    decoded = data.tokenizer.decode([t for t in dev[0]["targets"][0] if t != model.EOS_ID][:5])
    assert decoded and texts["validation"][0].startswith(decoded.split()[0])
    whole = data.documents("validation")  # For evaluation: each document's tokens, not cut at row ends.
    assert data.row_length == 32 and data.rows_per_batch == 8
    assert [document.tolist() for document in whole] == data.tokenizer.encode_batch(texts["validation"], add_eos=True)


def test_language_model_data_has_no_sentence_pairs(tmp_path: pathlib.Path) -> None:
    write_txt_corpus(tmp_path)
    data = lm_data.get_datasets(_config(f"txt:{tmp_path}", tmp_path / "cache"), rows_multiple=2)
    assert data.text_pairs("validation") == [] and data.text_pairs("test", max_pairs=3) == []
    with pytest.raises(ValueError, match="Unknown split 'dev'"):
        data.text_pairs("dev")

def test_txt_corpus_errors_name_the_fix(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing: train.txt, dev.txt, test.txt"):
        lm_data.get_datasets(_config(f"txt:{tmp_path}", tmp_path / "cache"))
    write_txt_corpus(tmp_path, train_docs=60)
    with pytest.raises(ValueError, match="lower config.tokens_per_batch"):
        lm_data.get_datasets(_config(f"txt:{tmp_path}", tmp_path / "cache", vocab_size=200,
                                     tokens_per_batch=32 * 4096))


def test_tfds_text_dataset_on_mock_data(tmp_path: pathlib.Path) -> None:
    with tfds.testing.mock_data(num_examples=64):
        data = lm_data.get_datasets(_config("lm1b", tmp_path, vocab_size=200, tokens_per_batch=128))
        records = tfds.data_source("lm1b", split="validation")
        texts = [lm_data.data_sources._as_text(record["text"]) for record in records]
        tokens = sum(len(data.tokenizer.encode(text)) for text in texts if text.strip())
        assert data.stats["tokens"]["validation"] == tokens
        assert next(data.train_iterator(seed=0))["targets"].shape == (4, 32)
        with pytest.raises(ValueError, match="no feature 'body'"):
            lm_data.get_datasets(_config("lm1b", tmp_path, vocab_size=200, text_feature="body"))


def test_processes_read_disjoint_rows_that_make_up_the_global_batch(tmp_path: pathlib.Path) -> None:
    write_txt_corpus(tmp_path)
    config = _config(f"txt:{tmp_path}", tmp_path / "cache")
    whole = lm_data.get_datasets(config)
    parts = [lm_data.get_datasets(config, process_index=index, process_count=2) for index in range(2)]
    expected = next(whole.train_iterator(seed=1))["targets"]
    pieces = [next(part.train_iterator(seed=1))["targets"] for part in parts]
    np.testing.assert_array_equal(np.concatenate(pieces), expected)
    dev = [part.eval_batches("validation")[0]["targets"] for part in parts]
    np.testing.assert_array_equal(np.concatenate(dev), whole.eval_batches("validation")[0]["targets"])


def _rewrite(directory: pathlib.Path, name: str, documents: list[str]) -> None:
    (directory / name).write_text("\n".join(documents) + "\n", encoding="utf-8")


def test_a_replaced_dev_txt_changes_its_fingerprint_and_a_resume_on_it_is_refused(tmp_path: pathlib.Path) -> None:
    texts = write_txt_corpus(tmp_path)
    config = _config(f"txt:{tmp_path}", tmp_path / "cache")
    before = lm_data.get_datasets(config).split_fingerprints()
    assert before == {"validation": {"split": "validation", "documents": 40,
                                     "sha256": lm_data._documents_sha256(texts["validation"])},
                      "test": {"split": "test", "documents": 40, "sha256": lm_data._documents_sha256(texts["test"])}}
    assert before["validation"]["sha256"] != before["test"]["sha256"]
    _rewrite(tmp_path, "dev.txt", ["Ein neuer Satz."] + texts["validation"][1:])  # Same size, one document changed.
    after = lm_data.get_datasets(config).split_fingerprints()
    assert after["validation"]["sha256"] != before["validation"]["sha256"] and after["test"] == before["test"]
    workdir = str(tmp_path / "run")
    resume_checks.write_data_splits(workdir, before)
    resume_checks.check_data_splits(workdir, before)  # The same splits resume.
    with pytest.raises(UserInputError, match=r"another dev split: config\.eval_split='validation' now holds 40 "
                                             r"documents .* records 40 documents .* a txt: corpus's dev\.txt"):
        resume_checks.check_data_splits(workdir, after)


def test_dev_and_test_documents_that_occur_in_training_are_counted_in_one_warning(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(lm_data.logging, "warning", lambda message, *args: warnings.append(message % args))
    texts = write_txt_corpus(tmp_path)
    config = _config(f"txt:{tmp_path}", tmp_path / "cache")
    lm_data.get_datasets(config)
    assert not [warning for warning in warnings if "also occur" in warning]  # The generator's splits are disjoint.
    _rewrite(tmp_path, "dev.txt", texts["train"][:10] + texts["validation"][10:])
    _rewrite(tmp_path, "test.txt", texts["train"][5:8] + texts["test"][3:])
    lm_data.get_datasets(config)
    overlap = [warning for warning in warnings if "also occur in the training split" in warning]
    assert len(overlap) == 1, warnings
    assert overlap[0].startswith("10 of 40 dev documents (split 'validation') and 3 of 40 test documents "
                                 "(split 'test') also occur in the training split 'train'")
