"""benchmarks/gpu_step_changes.py: each candidate change computes what the code computes, and the
patches are undone after their block (no timing here; the timings are in benchmarks/results)."""

from __future__ import annotations

import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attention_jax.models import attention, masks, metrics
from attention_jax.training import train_state
from tests.support import train_support

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import gpu_step_changes  # noqa: E402


def test_select_and_sum_gives_each_gold_logit_exactly():
    logits = jax.random.normal(jax.random.PRNGKey(0), (3, 5, 37), jnp.float32) * 10.0
    targets = jax.random.randint(jax.random.PRNGKey(1), (3, 5), 0, 37)
    expected = np.asarray(logits)[np.arange(3)[:, None], np.arange(5)[None, :], np.asarray(targets)]
    np.testing.assert_array_equal(gpu_step_changes.select_sum_gold_logit(logits, targets), expected)
    np.testing.assert_array_equal(metrics.gold_token_logit(logits, targets), expected)


def test_select_and_sum_has_the_gathers_gradient():
    logits = jax.random.normal(jax.random.PRNGKey(2), (2, 4, 11), jnp.float32)
    targets = jnp.array([[1, 0, 10, 3], [7, 7, 2, 0]])
    weights = jnp.arange(1.0, 9.0).reshape(2, 4)

    def loss(function):
        return jax.grad(lambda values: jnp.sum(function(values, targets) * weights))(logits)

    gradient = np.asarray(loss(gpu_step_changes.select_sum_gold_logit))
    np.testing.assert_array_equal(gradient, loss(metrics.gold_token_logit))
    assert np.count_nonzero(gradient) == 8  # One entry per position: its weight at its gold id.


def test_input_dtype_scores_equal_the_code_in_float32_and_round_in_bfloat16():
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    query, key, value = (jax.random.normal(k, (2, 6, 2, 8), jnp.float32) for k in keys)
    mask = masks.make_causal_mask(6)
    reference = attention.scaled_dot_product_attention(query, key, value, mask)
    np.testing.assert_array_equal(
        gpu_step_changes.input_dtype_scores_attention(query, key, value, mask), reference)
    rounded = gpu_step_changes.input_dtype_scores_attention(
        *(x.astype(jnp.bfloat16) for x in (query, key, value)), mask)
    assert rounded.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(rounded, np.float32), reference, atol=0.1)


def test_one_reduction_norm_is_the_global_norm():
    tree = {"a": jnp.arange(6.0).reshape(2, 3), "b": [jnp.full((4,), -2.0), jnp.ones((1, 1, 5))]}
    expected = np.sqrt(sum(np.sum(np.square(np.asarray(leaf))) for leaf in jax.tree.leaves(tree)))
    np.testing.assert_allclose(gpu_step_changes.one_reduction_norm(tree), expected, rtol=1e-6)


def test_patches_apply_inside_the_block_and_are_undone_after():
    originals = (metrics.gold_token_logit, attention.scaled_dot_product_attention, train_state.train_step,
                 optax.tree.norm)
    for name, patches in gpu_step_changes.VARIANTS.items():
        with gpu_step_changes.patched(patches):
            for module, attribute, replacement in patches:
                assert getattr(module, attribute) is replacement, (name, attribute)
        assert (metrics.gold_token_logit, attention.scaled_dot_product_attention, train_state.train_step,
                optax.tree.norm) == originals, name
    with pytest.raises(RuntimeError):
        with gpu_step_changes.patched(gpu_step_changes.VARIANTS["both_changes"]):
            raise RuntimeError("a failing measurement")
    assert metrics.gold_token_logit is originals[0]
    assert attention.scaled_dot_product_attention is originals[1]


def test_smoke_run_times_each_variant_in_rounds_from_the_same_first_step(tmp_path):
    out = tmp_path / "step_changes.json"
    env = train_support.subprocess_env(str(tmp_path / "cache"))
    completed = train_support.run_python(
        ["benchmarks/gpu_step_changes.py", "--smoke", "--variants=current,select_sum_gold_logit", "--rounds=2",
         "--steps=2", f"--out={out}"], env, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["mode"] == "smoke" and report["rounds_done"] == 2
    variants = report["variants"]
    assert list(variants) == ["current", "select_sum_gold_logit"]
    for entry in variants.values():
        assert len(entry["round_median_step_time_s"]) == 2
        assert entry["step_time_s"] > 0 and entry["compile_s"] > 0 and np.isfinite(entry["first_step_loss"])
    assert variants["current"]["vs_current"] == 1.0
    # The select-and-sum is exact, so both variants' first steps give the same loss.
    assert variants["select_sum_gold_logit"]["first_step_loss"] == pytest.approx(
        variants["current"]["first_step_loss"], rel=1e-6)


def test_unknown_variant_is_one_line_and_exit_2(tmp_path):
    env = train_support.subprocess_env(str(tmp_path / "cache"))
    completed = train_support.run_python(["benchmarks/gpu_step_changes.py", "--smoke", "--variants=fastest"], env,
                                         timeout=300)
    assert completed.returncode == 2
    assert "fastest" in completed.stderr and "choose from" in completed.stderr
