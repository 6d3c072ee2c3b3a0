"""Label-smoothed cross-entropy, accuracy and perplexity against a NumPy computation."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.cpu_kernels import argmax
from attention_jax.models import metrics


def _numpy_sums(logits: np.ndarray, targets: np.ndarray, eps: float) -> dict[str, float]:
    """Explicit smoothed target distribution q = (1 - eps) one_hot + eps / N, dotted with -log p."""
    vocab = logits.shape[-1]
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    one_hot = np.eye(vocab)[targets]
    smoothed_target = (1 - eps) * one_hot + eps / vocab
    loss = -(smoothed_target * log_probs).sum(-1)
    nll = -(one_hot * log_probs).sum(-1)
    mask = targets != 0
    return {"loss_sum": loss[mask].sum(), "nll_sum": nll[mask].sum(),
            "correct": (log_probs.argmax(-1) == targets)[mask].sum(), "tokens": mask.sum()}


@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_token_loss_sums_match_numpy(eps: float) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 11)).astype(np.float32) * 3
    targets = rng.integers(1, 11, size=(3, 5))
    targets[0, 3:] = 0  # Padding is ignored.
    targets[2, 1:] = 0
    got = metrics.token_loss_sums(logits, targets, eps)
    expected = _numpy_sums(logits.astype(np.float64), targets, eps)
    for key, value in expected.items():
        np.testing.assert_allclose(float(got[key]), value, rtol=1e-5, err_msg=key)


def test_smoothed_loss_minimum_is_entropy_of_smoothed_target() -> None:
    """Logits equal to log q give the smallest smoothed loss: the entropy of q (not 0)."""
    vocab, eps = 7, 0.1
    targets = np.array([[4, 5]])
    q = np.full((1, 2, vocab), eps / vocab)
    q[0, 0, 4] += 1 - eps
    q[0, 1, 5] += 1 - eps
    got = metrics.token_loss_sums(np.log(q).astype(np.float32), targets, eps)
    entropy = -(q[0, 0] * np.log(q[0, 0])).sum()
    np.testing.assert_allclose(float(got["loss_sum"]) / 2, entropy, rtol=1e-5)


def test_summarize_gives_per_token_means_and_perplexity() -> None:
    summary = metrics.summarize({"loss_sum": 6.0, "nll_sum": 4.0, "correct": 3.0, "tokens": 4.0})
    assert summary["loss"] == 1.5 and summary["nll_loss"] == 1.0 and summary["accuracy"] == 0.75
    assert summary["perplexity"] == pytest.approx(math.e)
    assert math.isnan(metrics.summarize({"loss_sum": 0, "nll_sum": 0, "correct": 0,
                                         "tokens": 0})["loss"])


@pytest.mark.integration
def test_add_sums_is_exact_over_splits() -> None:
    """Sums over two halves of a batch add up to the sums over the whole batch."""
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4, 3, 9)).astype(np.float32)
    targets = rng.integers(0, 9, size=(4, 3))
    whole = metrics.token_loss_sums(logits, targets, 0.1)
    halves = metrics.add_sums(metrics.token_loss_sums(logits[:2], targets[:2], 0.1),
                              metrics.token_loss_sums(logits[2:], targets[2:], 0.1))
    for key in metrics.SUM_KEYS:
        np.testing.assert_allclose(float(halves[key]), float(whole[key]), rtol=1e-6)


def test_first_argmax_takes_the_lowest_index_on_ties_as_numpy() -> None:
    logits = np.random.default_rng(3).normal(size=(4, 6, 50)).astype(np.float32)
    logits[0, 0, [7, 9, 30]] = 10.0  # A three-way tie for the maximum: the lowest index wins.
    logits[1, 2, :] = 0.0  # All equal: index 0.
    for cpu_kernels in (True, False):
        np.testing.assert_array_equal(metrics.first_argmax(jnp.asarray(logits), cpu_kernels=cpu_kernels),
                                      logits.argmax(-1))


@pytest.mark.parametrize("num_classes", [8000, 37000, 50, 1031 * 2, 4099])
def test_first_argmax_blockwise_equals_numpy_with_ties_across_and_within_blocks(num_classes: int) -> None:
    """The CPU kernel's blocks (or its ``top_k`` fallback, for 4,099 and 2,062) against NumPy's argmax."""
    rng = np.random.default_rng(num_classes)
    logits = rng.normal(size=(12, num_classes)).astype(np.float32)
    width = argmax._argmax_block_width(num_classes) or num_classes
    last = num_classes - 1
    logits[0, [last, 3]] = 9.0  # Tie between the first block and the last: index 3.
    logits[1, [(width + 5) % num_classes, (width + 2) % num_classes]] = 9.0  # A tie within one block.
    logits[2, :] = -np.inf  # All equal (-inf): index 0.
    logits[3, last] = 9.0  # The very last position.
    logits[4, [min(2 * width - 1, last), width % num_classes]] = 9.0  # Block edges.
    logits[5, :] = 1.5  # All equal.
    np.testing.assert_array_equal(np.asarray(jax.jit(argmax.first_argmax)(jnp.asarray(logits))),
                                  logits.argmax(-1))


def test_argmax_block_width_is_the_largest_divisor_in_range() -> None:
    assert argmax._argmax_block_width(32000) == 1000
    assert argmax._argmax_block_width(37000) == 1000
    assert argmax._argmax_block_width(8192) == 1024
    assert argmax._argmax_block_width(50) == 50  # Short rows: one block.
    assert argmax._argmax_block_width(4099) is None  # Prime: top_k.
    assert argmax._argmax_block_width(2 * 1031) is None  # Divisors 2 and 1,031 only.
