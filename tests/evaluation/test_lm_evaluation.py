"""Language-model evaluation (issue 36 item 7): every token scored once, in its own document's context.

The strided evaluation is compared with a plain loop that, for each token, runs the model on exactly the
context it should see and takes ``-log p`` of the token in NumPy.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.data import lm_data
from attention_jax.evaluation import lm_evaluation
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import language_model, model

WINDOW = 8
SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4,
                          value_dim=6, dropout_rate=0.0, max_len=WINDOW, cpu_kernels=False)


class _SplitData:
    """The part of ``LanguageModelData`` evaluation reads, over given documents (split ``"validation"``)."""

    def __init__(self, documents: list[list[int]], rows_per_batch: int = 3, utf8_bytes: int = 1000) -> None:
        self._packed = lm_data._PackedRows(documents, WINDOW)
        self.row_length = WINDOW
        self.rows_per_batch = rows_per_batch
        self.split_bytes = {"validation": utf8_bytes}

    def documents(self, split: str) -> list[np.ndarray]:
        assert split == "validation"
        return self._packed.documents()

    def role_of(self, split: str) -> str:
        return split


def _documents(lengths: list[int], seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(4, SMALL.vocab_size, size=length - 1).tolist() + [model.EOS_ID] for length in lengths]


@pytest.fixture(scope="module")
def params() -> dict:
    """A randomly initialised tiny language model (no training: equality to the reference needs none)."""
    targets = jnp.ones((1, WINDOW), jnp.int32)
    return nn.meta.unbox(language_model.LanguageModel(SMALL).init(jax.random.key(7), targets)["params"])


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _intended_context_start(index: int, num_tokens: int, window: int, stride: int) -> int:
    """Where the inputs ``[BOS, t_0, ..]`` that token ``t_index`` is scored with begin (the recipe, written out)."""
    if index < window:
        return 0  # The first window: BOS and the whole history.
    later_window = (index - window) // stride  # Later windows score stride tokens each, the last fewer.
    window_end = min(window + (later_window + 1) * stride, num_tokens)
    return window_end - window


@jax.jit
def _plain_logits(params: dict, context: jnp.ndarray) -> jnp.ndarray:
    """The model on one unpacked row of inputs: no segments, positions ``0 .. len - 1``."""
    return language_model.LanguageModel(SMALL).apply({"params": params}, context,
                                                     method=language_model.LanguageModel.logits)


def _reference_nll(params: dict, documents: list[list[int]], window: int, stride: int) -> float:
    """Sum over every token of ``-log p(t_i | its intended context)``: one model run per token, no packing."""
    total = 0.0
    for tokens in documents:
        inputs = [model.BOS_ID] + tokens[:-1]  # inputs[i] predicts tokens[i].
        for index, token in enumerate(tokens):
            start = _intended_context_start(index, len(tokens), window, stride)
            context = jnp.asarray([inputs[start:index + 1]], jnp.int32)  # Positions 0 .. index - start.
            logits = np.asarray(_plain_logits(params, context))
            total -= float(_log_softmax(logits[0, -1].astype(np.float64))[token])
    return total


@pytest.mark.parametrize("num_tokens", [1, 5, 8, 9, 13, 30])
@pytest.mark.parametrize("stride", [1, 3, 4, 8])
def test_windows_score_every_token_once_with_the_intended_context(num_tokens: int, stride: int) -> None:
    windows = lm_evaluation._document_windows(2, num_tokens, WINDOW, stride)
    scored = [index for piece in windows for index in range(piece.start + piece.first_scored,
                                                            piece.start + piece.length)]
    assert scored == list(range(num_tokens))  # Each token once, in order.
    for piece in windows:
        assert piece.document == 2 and piece.length == min(WINDOW, num_tokens) and piece.start >= 0
        assert piece.start + piece.length <= num_tokens
        for index in range(piece.start + piece.first_scored, piece.start + piece.length):
            assert piece.start == _intended_context_start(index, num_tokens, WINDOW, stride)
            assert index - piece.start + 1 >= min(index + 1, WINDOW - stride + 1)  # Tokens seen before t_index.


def test_packed_windows_hold_each_documents_inputs_and_never_mix_documents() -> None:
    documents = _documents([3, 20, 2, 8, 11, 1, 5], seed=0)
    rows = lm_evaluation._pack_windows([np.asarray(tokens) for tokens in documents], WINDOW, stride=3)
    assert rows.inputs.shape == (rows.num_rows, WINDOW)
    seen = {}
    for row in range(rows.num_rows):
        for segment in range(1, rows.segmentation[row].max() + 1):
            slots = np.flatnonzero(rows.segmentation[row] == segment)
            assert np.array_equal(slots, np.arange(slots[0], slots[0] + len(slots)))  # One contiguous run.
            np.testing.assert_array_equal(rows.positions[row, slots], np.arange(len(slots)))
            seen[(row, segment)] = (rows.inputs[row, slots], rows.scored_targets[row, slots])
    assert len(seen) == len(rows.windows)
    for (inputs, scored), piece in zip(seen.values(), rows.windows):  # Packed in window order.
        tokens = documents[piece.document]
        document_inputs = [model.BOS_ID] + tokens[:-1]
        np.testing.assert_array_equal(inputs, document_inputs[piece.start:piece.start + piece.length])
        expected = [0] * piece.first_scored + tokens[piece.start + piece.first_scored:piece.start + piece.length]
        np.testing.assert_array_equal(scored, expected)
    assert (rows.scored_targets > 0).sum() == sum(map(len, documents))
    assert not rows.inputs[rows.segmentation == 0].any()


@pytest.mark.integration
@pytest.mark.parametrize("stride", [0, 1, 3, 8])
def test_strided_evaluation_equals_a_token_by_token_reference(params: dict, stride: int) -> None:
    documents = _documents([3, 8, 9, 21, 2, 30, 1], seed=1)  # Shorter than, equal to and longer than the window.
    data = _SplitData(documents, utf8_bytes=321)
    result = lm_evaluation.evaluate_split(SMALL, params, data, "validation", stride=stride)
    used_stride = stride or WINDOW // 2
    reference = _reference_nll(params, documents, WINDOW, used_stride)
    tokens = sum(map(len, documents))
    assert result["tokens"] == tokens
    assert result["nll_per_token"] == pytest.approx(reference / tokens, rel=2e-5)
    assert result["perplexity"] == pytest.approx(math.exp(reference / tokens), rel=2e-5)
    assert result["bits_per_byte"] == pytest.approx(reference / math.log(2) / 321, rel=2e-5)
    assert result["method"] == "strided_window" and result["window"] == WINDOW
    assert result["stride"] == used_stride and result["min_context"] == WINDOW - used_stride + 1
    assert result["documents"] == 7 and result["documents_longer_than_window"] == 3


@pytest.mark.integration
def test_short_documents_score_as_each_document_whole(params: dict) -> None:
    documents = _documents([3, 8, 5, 1, 7, 6, 2], seed=2)  # All fit a window; several share each row.
    result = lm_evaluation.evaluate_split(SMALL, params, _SplitData(documents, rows_per_batch=2), "validation")
    assert result["documents_longer_than_window"] == 0 and result["windows"] == len(documents)
    assert result["rows"] < len(documents)  # Packed for throughput.
    teacher_forced = jax.jit(language_model.LanguageModel(SMALL).apply)
    whole = 0.0
    for tokens in documents:  # The model's ordinary teacher-forced call on the document alone.
        logits = np.asarray(teacher_forced({"params": params}, jnp.asarray([tokens], jnp.int32)), np.float64)
        whole -= float(np.take_along_axis(_log_softmax(logits[0]), np.asarray(tokens)[:, None], axis=-1).sum())
    assert result["nll_per_token"] == pytest.approx(whole / sum(map(len, documents)), rel=2e-5)


def test_a_stride_outside_the_window_is_a_user_error() -> None:
    assert lm_evaluation.resolve_stride(0, 64) == 32 and lm_evaluation.resolve_stride(0, 1) == 1
    assert lm_evaluation.resolve_stride(64, 64) == 64
    for stride in (-1, 65):
        with pytest.raises(UserInputError, match=f"--eval_stride={stride} must lie in \\[1, 64\\]"):
            lm_evaluation.resolve_stride(stride, 64)


def test_an_empty_split_is_a_user_error_not_a_perfect_score(params: dict) -> None:
    with pytest.raises(UserInputError, match="the validation split holds no text"):
        lm_evaluation.evaluate_split(SMALL, params, _SplitData([], utf8_bytes=0), "validation")
