"""Tests for attention_jax.data.tokenizer: fixed special ids, round trips, caching, clear errors."""

import io
import os

import numpy as np
import pytest
import sentencepiece as spm

from attention_jax.data import tokenizer as tokenizer_lib

ENGLISH_WORDS = "the small house is near a green tree and an old car drives over the long road".split()
GERMAN_WORDS = (
    "über Schöne Grüße, Mädchen Straße Bäume fährt das kleine Haus größer als die Tür! Übung macht".split()
)


def _corpus(num_sentences: int = 400) -> list[str]:
    rng = np.random.default_rng(1)
    words = ENGLISH_WORDS + GERMAN_WORDS
    return [" ".join(rng.choice(words, size=rng.integers(1, 15))) for _ in range(num_sentences)]


@pytest.fixture(scope="module")
def trained() -> tokenizer_lib.Tokenizer:
    return tokenizer_lib.train_tokenizer(_corpus(), vocab_size=300)


def test_special_ids_are_fixed(trained):
    assert (trained.pad_id, trained.unk_id, trained.bos_id, trained.eos_id) == (0, 1, 2, 3)
    assert [trained.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


def test_vocab_size_never_exceeds_request(trained):
    assert 4 < trained.vocab_size <= 300
    tiny = tokenizer_lib.train_tokenizer(["a b", "b c"], vocab_size=1000)  # Far fewer pieces possible.
    assert tiny.vocab_size <= 1000


@pytest.mark.parametrize(
    "text",
    [
        "the small house is near a green tree",
        "Schöne Grüße über die Straße, größer als die Tür!",
        "Übung macht das Mädchen größer",
        "das kleine Haus fährt über Bäume",
    ],
)
def test_round_trip(trained, text):
    assert trained.decode(trained.encode(text)) == text


def test_encode_ends_with_eos_and_has_no_bos(trained):
    ids = trained.encode("the old car")
    assert ids[-1] == tokenizer_lib.EOS_ID
    assert tokenizer_lib.EOS_ID not in ids[:-1] and tokenizer_lib.BOS_ID not in ids
    assert trained.encode("the old car", add_eos=False) == ids[:-1]
    assert trained.encode_batch(["the old car", "über"]) == [ids, trained.encode("über")]


def test_decode_stops_at_eos_and_skips_pad_bos_and_out_of_vocab(trained):
    ids = trained.encode("the green tree", add_eos=False)
    noisy = [tokenizer_lib.BOS_ID, *ids[:2], tokenizer_lib.PAD_ID, trained.vocab_size + 5, *ids[2:]]
    noisy += [tokenizer_lib.EOS_ID, *trained.encode("car", add_eos=False), 0, 0]
    assert trained.decode(np.asarray(noisy)) == "the green tree"


def test_unknown_characters_map_to_unk(trained):
    assert tokenizer_lib.UNK_ID in trained.encode("字")


def test_cached_model_is_reused_not_retrained(tmp_path, monkeypatch):
    model_path = str(tmp_path / "cache" / "spm.model")
    first = tokenizer_lib.load_or_train_tokenizer(model_path, _corpus, vocab_size=300)
    modified_time = os.path.getmtime(model_path)

    def fail_training(*args, **kwargs):
        raise AssertionError("the tokenizer was trained again")

    monkeypatch.setattr(tokenizer_lib, "train_tokenizer", fail_training)
    second = tokenizer_lib.load_or_train_tokenizer(model_path, fail_training, vocab_size=300)
    assert os.path.getmtime(model_path) == modified_time
    assert second.model_proto == first.model_proto
    assert second.encode("schöne Grüße") == first.encode("schöne Grüße")


def test_training_is_deterministic():
    first = tokenizer_lib.train_tokenizer(_corpus(), vocab_size=300)
    second = tokenizer_lib.train_tokenizer(_corpus(), vocab_size=300)
    assert first.model_proto == second.model_proto


def test_too_many_characters_for_vocab_is_a_clear_error():
    many_characters = ["".join(chr(0x4E00 + (7 * i + j) % 600) for j in range(10)) for i in range(300)]
    with pytest.raises(ValueError, match="vocab_size"):
        tokenizer_lib.train_tokenizer(many_characters, vocab_size=300)


def test_no_text_is_a_clear_error():
    with pytest.raises(ValueError, match="no non-empty sentences"):
        tokenizer_lib.train_tokenizer(["", ""], vocab_size=300)


def test_model_with_other_special_ids_is_rejected():
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_corpus()), model_writer=model, vocab_size=100, hard_vocab_limit=False, minloglevel=2
    )  # SentencePiece's defaults: unk=0, bos=1, eos=2, no pad.
    with pytest.raises(ValueError, match="pad/unk/bos/eos"):
        tokenizer_lib.Tokenizer(model.getvalue())


def test_load_missing_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.model"):
        tokenizer_lib.Tokenizer.load(str(tmp_path / "nothing.model"))
