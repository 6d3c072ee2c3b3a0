"""The paper's learning-rate schedule and Adam settings (Section 5.3)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.experiment.sections import OptimizerConfig
from attention_jax.training import optim


def _config(**overrides: float) -> OptimizerConfig:
    fields = dict(d_model=512, warmup_steps=4000, learning_rate_scale=1.0, adam_b1=0.9, adam_b2=0.98,
                  adam_eps=1e-9, grad_accum_steps=1, label_smoothing=0.1, dropout_rng="threefry")
    fields.update(overrides)
    return OptimizerConfig(**fields)


@pytest.mark.reference
@pytest.mark.parametrize("step", [1, 2, 100, 3999, 4000, 4001, 10_000, 100_000])
def test_schedule_matches_equation_3(step: int) -> None:
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    schedule = optim.make_schedule(_config())
    # optax counts updates from 0; the paper's step is count + 1.
    np.testing.assert_allclose(float(schedule(step - 1)), expected, rtol=1e-6)
    np.testing.assert_allclose(
        float(optim.paper_learning_rate(step, d_model=512, warmup_steps=4000)), expected, rtol=1e-6)


def test_schedule_peaks_at_warmup_end_with_scale() -> None:
    schedule = optim.make_schedule(_config(d_model=128, warmup_steps=400, learning_rate_scale=2.0))
    rates = np.array([float(schedule(count)) for count in range(1000)])
    assert int(np.argmax(rates)) + 1 == 400  # Peak at the paper's step == warmup_steps.
    np.testing.assert_allclose(rates.max(), 2.0 * (128 * 400) ** -0.5, rtol=1e-6)
    assert np.all(np.diff(rates[:399]) > 0) and np.all(np.diff(rates[400:]) < 0)


def test_schedule_rejects_zero_warmup() -> None:
    with pytest.raises(ValueError, match="warmup_steps"):
        optim.make_schedule(_config(warmup_steps=0))


def test_optimizer_is_adam_with_paper_betas() -> None:
    """Two updates of the optimizer equal a NumPy Adam with b1=0.9, b2=0.98, eps=1e-9."""
    config = _config(d_model=16, warmup_steps=10, learning_rate_scale=3.0)
    optimizer = optim.make_optimizer(config)
    params = {"w": jnp.array([0.5, -1.0, 2.0])}
    grads = [np.array([0.1, -0.2, 0.3]), np.array([-0.4, 0.05, 0.3])]
    state = optimizer.init(params)
    for grad in grads:
        updates, state = optimizer.update({"w": jnp.asarray(grad)}, state, params)
        params = jax.tree.map(jnp.add, params, updates)

    weights, first, second = np.array([0.5, -1.0, 2.0]), np.zeros(3), np.zeros(3)
    for step, grad in enumerate(grads, start=1):
        first = 0.9 * first + 0.1 * grad
        second = 0.98 * second + 0.02 * grad**2
        corrected = (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.98**step)) + 1e-9)
        rate = 3.0 * 16**-0.5 * min(step**-0.5, step * 10**-1.5)
        weights = weights - rate * corrected
    np.testing.assert_allclose(np.asarray(params["w"]), weights, rtol=1e-5)
