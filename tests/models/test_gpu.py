"""GPU paths: cuDNN attention and bfloat16 compute against the float32 einsum path (skipped without a GPU).

CI has no GPU, so these run where one exists (``pytest tests/models/test_gpu.py`` on a GPU machine) and are
skipped cleanly elsewhere. cuDNN's fused attention needs half-precision inputs and head sizes that are
multiples of 8, so the shapes here are those; the reference is the einsum path in float32 on the same
(bfloat16-rounded) inputs and parameters.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import attention, masks, metrics, model

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(jax.default_backend() != "gpu",
                                                  reason=f"needs a GPU (JAX backend here: {jax.default_backend()})")]

BATCH, LEN_Q, LEN_K, HEADS, D_MODEL = 2, 24, 40, 4, 64
GPU_SMALL = TransformerConfig(vocab_size=64, num_layers=2, d_model=64, d_ff=128, num_heads=4, key_dim=16,
                              value_dim=16, dropout_rate=0.0, max_len=64)


def _bfloat16_rounded(shape: tuple[int, ...], seed: int) -> jnp.ndarray:
    values = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return jnp.asarray(values, jnp.bfloat16)


def _padding_valid(lengths: list[int], total: int) -> jnp.ndarray:
    return jnp.asarray(np.arange(total)[None, :] < np.asarray(lengths)[:, None])


def _masks() -> dict[str, jnp.ndarray]:
    query_valid = _padding_valid([LEN_Q, 17], LEN_Q)
    return {
        "cross_padding": masks.make_padding_mask(query_valid, _padding_valid([LEN_K, 21], LEN_K)),
        "causal_padding": masks.make_padding_mask(query_valid, query_valid)
        & masks.make_causal_mask(LEN_Q),
    }


@pytest.mark.parametrize("mask_name", ["cross_padding", "causal_padding"])
@pytest.mark.parametrize("key_dim,value_dim", [(64, 64), (32, 64)])
def test_cudnn_attention_equals_float32_einsum(mask_name: str, key_dim: int, value_dim: int) -> None:
    mask = _masks()[mask_name]
    key_len = LEN_K if mask_name == "cross_padding" else LEN_Q
    query = _bfloat16_rounded((BATCH, LEN_Q, HEADS, key_dim), 0)
    key = _bfloat16_rounded((BATCH, key_len, HEADS, key_dim), 1)
    value = _bfloat16_rounded((BATCH, key_len, HEADS, value_dim), 2)
    cudnn_output = attention._fused_dot_product_attention(query, key, value, mask, implementation="cudnn")
    assert cudnn_output.dtype == jnp.bfloat16 and cudnn_output.shape == (BATCH, LEN_Q, HEADS, value_dim)
    expected = attention.scaled_dot_product_attention(query.astype(jnp.float32), key.astype(jnp.float32),
                                                      value.astype(jnp.float32), mask)
    np.testing.assert_allclose(np.asarray(cudnn_output, np.float32), np.asarray(expected), atol=3e-2)
    # Query rows that are padding see no key: zeros, as in the einsum path, not cuDNN's uniform average.
    np.testing.assert_array_equal(np.asarray(cudnn_output[1, 17:], np.float32), 0.0)


def test_fused_implementation_compiles_to_cudnn_for_bfloat16_only() -> None:
    query = _bfloat16_rounded((BATCH, LEN_Q, HEADS, 64), 3)
    mask = _masks()["causal_padding"]

    def compiled_text(inputs: jnp.ndarray) -> str:
        run = jax.jit(lambda q: attention._fused_dot_product_attention(q, q, q, mask, implementation="fused"))
        return run.lower(inputs).compile().as_text()

    cudnn_call = 'custom_call_target="__cudnn$fmha'  # cuDNN's fused multi-head attention kernels.
    assert cudnn_call in compiled_text(query)
    assert cudnn_call not in compiled_text(query.astype(jnp.float32))  # XLA's own path for float32.


def _model_batch() -> tuple[jnp.ndarray, jnp.ndarray]:
    generator = np.random.default_rng(7)
    inputs = generator.integers(4, GPU_SMALL.vocab_size, size=(4, 32))
    targets = generator.integers(4, GPU_SMALL.vocab_size, size=(4, 24))
    inputs[-1, 20:] = model.PAD_ID
    targets[-1, 15:] = model.PAD_ID
    return jnp.asarray(inputs, jnp.int32), jnp.asarray(targets, jnp.int32)


def test_bfloat16_cudnn_transformer_logits_match_float32_einsum() -> None:
    inputs, targets = _model_batch()
    params = nn.meta.unbox(model.Transformer(GPU_SMALL).init(jax.random.key(0), inputs, targets)["params"])
    fast = GPU_SMALL.replace(dtype="bfloat16", attention_implementation="fused")
    logits = model.Transformer(fast).apply({"params": params}, inputs, targets)
    reference_logits = model.Transformer(GPU_SMALL).apply({"params": params}, inputs, targets)
    assert logits.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(logits)))
    valid = np.asarray(targets != model.PAD_ID)
    np.testing.assert_allclose(np.asarray(logits)[valid], np.asarray(reference_logits)[valid], atol=0.15)


def _train(cfg: TransformerConfig, steps: int) -> tuple[list[float], dict]:
    inputs, targets = _model_batch()
    transformer = model.Transformer(cfg)
    params = nn.meta.unbox(transformer.init(jax.random.key(0), inputs, targets)["params"])
    optimizer = optax.adam(3e-3, b1=0.9, b2=0.98, eps=1e-9)

    def loss_fn(candidate: dict) -> jax.Array:
        logits = transformer.apply({"params": candidate}, inputs, targets)
        sums = metrics.token_loss_sums(logits, targets, label_smoothing=0.1)
        return sums["loss_sum"] / sums["tokens"]

    @jax.jit
    def step(params: dict, opt_state: optax.OptState) -> tuple[dict, optax.OptState, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    opt_state, losses = optimizer.init(params), []
    for _ in range(steps):
        params, opt_state, loss = step(params, opt_state)
        losses.append(float(loss))
    return losses, params


def test_bfloat16_cudnn_training_follows_float32_einsum_and_keeps_float32_params() -> None:
    fast_losses, fast_params = _train(GPU_SMALL.replace(dtype="bfloat16", attention_implementation="fused"), 30)
    reference_losses, _ = _train(GPU_SMALL, 30)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(fast_params))
    assert np.all(np.isfinite(fast_losses))
    assert fast_losses[-1] < 0.5 * fast_losses[0]  # Memorising one batch through cuDNN's backward pass.
    np.testing.assert_allclose(fast_losses, reference_losses, rtol=5e-2)
