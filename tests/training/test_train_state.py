"""The paper's learning-rate schedule and Adam settings (Section 5.3), and the optional clipping and decay."""

from __future__ import annotations

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attention_jax.checkpointing import checkpoints, params_checkpoints, resume_checks
from attention_jax.experiment.sections import OptimizerConfig
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.training import train, train_state
from tests.support import fake_data, reference


def _config(**overrides: float | str) -> OptimizerConfig:
    fields = dict(d_model=512, warmup_steps=4000, learning_rate_scale=1.0, adam_b1=0.9, adam_b2=0.98,
                  adam_eps=1e-9, grad_accum_steps=1, label_smoothing=0.1, dropout_rng="threefry",
                  grad_clip_norm=0.0, weight_decay=0.0)
    fields.update(overrides)
    return OptimizerConfig(**fields)


@pytest.mark.reference
@pytest.mark.parametrize("step", [1, 2, 100, 3999, 4000, 4001, 10_000, 100_000])
def test_schedule_matches_equation_3(step: int) -> None:
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    schedule = train_state._make_schedule(_config())
    # optax counts updates from 0; the paper's step is count + 1.
    np.testing.assert_allclose(float(schedule(step - 1)), expected, rtol=1e-6)
    np.testing.assert_allclose(
        float(train_state._paper_learning_rate(step, d_model=512, warmup_steps=4000)), expected, rtol=1e-6)


def test_schedule_peaks_at_warmup_end_with_scale() -> None:
    schedule = train_state._make_schedule(_config(d_model=128, warmup_steps=400, learning_rate_scale=2.0))
    rates = np.array([float(schedule(count)) for count in range(1000)])
    assert int(np.argmax(rates)) + 1 == 400  # Peak at the paper's step == warmup_steps.
    np.testing.assert_allclose(rates.max(), 2.0 * (128 * 400) ** -0.5, rtol=1e-6)
    assert np.all(np.diff(rates[:399]) > 0) and np.all(np.diff(rates[400:]) < 0)


@pytest.mark.reference
@pytest.mark.parametrize("schedule", ["paper", "constant_then_inverse_sqrt"])
def test_both_schedules_match_the_numpy_oracle(schedule: str) -> None:
    config = _config(d_model=128, warmup_steps=300, learning_rate_scale=2.0, lr_schedule=schedule)
    rates = train_state._make_schedule(config)(jnp.arange(2000))  # optax's count: the paper's step - 1.
    expected = [reference.learning_rate(step, d_model=128, warmup_steps=300, scale=2.0, schedule=schedule)
                for step in range(1, 2001)]
    np.testing.assert_allclose(rates, expected, rtol=1e-6)


def test_the_constant_start_is_the_papers_peak_then_the_papers_decay() -> None:
    """No warm-up at the same peak (Xiong et al., 2020): never above the paper's peak, equal to it after."""
    fields = dict(d_model=128, warmup_steps=300, learning_rate_scale=2.0)
    counts = jnp.arange(1500)
    paper, constant = (np.asarray(train_state._make_schedule(_config(**fields, lr_schedule=schedule))(counts))
                       for schedule in ("paper", "constant_then_inverse_sqrt"))
    assert constant.max() <= paper.max() * (1 + 1e-6)
    np.testing.assert_allclose(constant[:300], paper[299], rtol=1e-6)  # Steps 1..300: the peak.
    np.testing.assert_array_equal(constant[299:], paper[299:])  # From the peak on: the paper's rates.
    assert constant[0] > 100 * paper[0]  # No ramp.


def test_a_run_resumes_only_with_its_own_schedule(tmp_path: pathlib.Path) -> None:
    workdir = str(tmp_path)
    constant = dict(lr_schedule="constant_then_inverse_sqrt")
    checkpoints.write_config(workdir, fake_data.tiny_experiment(**constant))
    params_checkpoints._save_params(str(tmp_path / run_files.CHECKPOINT_DIR), 2, {"w": np.zeros(2)}, {})
    with pytest.raises(UserInputError, match=r"another learning-rate schedule \(lr_schedule: "
                                             r"'constant_then_inverse_sqrt' in the workdir, 'paper' now\).*"
                                             r"--config.lr_schedule='constant_then_inverse_sqrt'"):
        resume_checks.check_resume_compatible(workdir, fake_data.tiny_experiment())
    resume_checks.check_resume_compatible(workdir, fake_data.tiny_experiment(**constant, warmup_steps=8))


def test_no_schedule_with_zero_warmup() -> None:
    """The optimizer section refuses ``warmup_steps=0`` (its declared range), so no schedule divides by it."""
    with pytest.raises(ValueError, match="warmup_steps must be positive"):
        _config(warmup_steps=0)


def test_optimizer_is_adam_with_paper_betas() -> None:
    """Two updates of the optimizer equal a NumPy Adam with b1=0.9, b2=0.98, eps=1e-9."""
    config = _config(d_model=16, warmup_steps=10, learning_rate_scale=3.0)
    optimizer = train_state.make_optimizer(config)
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


def _numpy_adam(weights: dict[str, np.ndarray], grads: list[dict[str, np.ndarray]], *, rate: float,
                clip_norm: float = 0.0, weight_decay: float = 0.0) -> dict[str, np.ndarray]:
    """Adam(0.9, 0.98, 1e-9) at a constant rate, with global-norm clipping and decoupled decay on matrices."""
    weights = {name: value.copy() for name, value in weights.items()}
    first = {name: np.zeros_like(value) for name, value in weights.items()}
    second = {name: np.zeros_like(value) for name, value in weights.items()}
    for step, grad in enumerate(grads, start=1):
        norm = np.sqrt(sum(float(np.sum(value**2)) for value in grad.values()))
        factor = min(1.0, clip_norm / norm) if clip_norm > 0 else 1.0
        for name in weights:
            g = grad[name] * factor
            first[name] = 0.9 * first[name] + 0.1 * g
            second[name] = 0.98 * second[name] + 0.02 * g**2
            update = (first[name] / (1 - 0.9**step)) / (np.sqrt(second[name] / (1 - 0.98**step)) + 1e-9)
            decay = weight_decay * weights[name] if weights[name].ndim >= 2 else 0.0
            weights[name] = weights[name] - rate * (update + decay)
    return weights


@pytest.mark.integration
@pytest.mark.reference
@pytest.mark.parametrize("clip_norm,weight_decay", [(0.25, 0.0), (0.0, 0.1), (0.25, 0.1), (100.0, 0.0)])
def test_clipping_and_decoupled_decay_match_numpy(clip_norm: float, weight_decay: float) -> None:
    """Clipping rescales the whole gradient to the norm; decay shrinks matrices only, scaled by the rate."""
    config = _config(d_model=16, warmup_steps=10, grad_clip_norm=clip_norm, weight_decay=weight_decay)
    optimizer = train_state.make_optimizer(config, schedule=lambda count: 0.01)
    start = {"kernel": np.array([[0.5, -1.0], [2.0, 0.25]]), "bias": np.array([0.3, -0.6])}
    rng = np.random.default_rng(0)
    grads = [{name: rng.normal(size=value.shape) for name, value in start.items()} for _ in range(3)]
    params = jax.tree.map(jnp.asarray, start)
    state = optimizer.init(params)
    for grad in grads:
        updates, state = optimizer.update(jax.tree.map(jnp.asarray, grad), state, params)
        params = jax.tree.map(jnp.add, params, updates)
    expected = _numpy_adam(start, grads, rate=0.01, clip_norm=clip_norm, weight_decay=weight_decay)
    for name in start:
        np.testing.assert_allclose(np.asarray(params[name]), expected[name], rtol=1e-5, atol=1e-7)


def test_defaults_keep_the_papers_plain_adam_state() -> None:
    """With both knobs off the optimizer state is Adam's alone, so runs from before the knobs resume."""
    params = {"w": jnp.ones((2, 2))}
    plain = optax.adam(lambda count: 1e-3, b1=0.9, b2=0.98, eps=1e-9).init(params)
    ours = train_state.make_optimizer(_config(), schedule=lambda count: 1e-3).init(params)
    assert jax.tree.structure(ours) == jax.tree.structure(plain)
    clipped = train_state.make_optimizer(_config(grad_clip_norm=1.0), schedule=lambda count: 1e-3).init(params)
    assert jax.tree.structure(clipped) != jax.tree.structure(plain)


@pytest.mark.slow
def test_a_run_with_clipping_and_decay_records_them_and_resumes_only_with_them(tmp_path: pathlib.Path) -> None:
    """Two steps with both knobs on: config.json records them; switching one off on resume is refused."""
    workdir = str(tmp_path / "run")
    knobs = dict(grad_clip_norm=0.5, weight_decay=0.01, num_train_steps=2, checkpoint_every_steps=2, eval_every_steps=0)
    results = train.train_and_evaluate(fake_data.tiny_experiment(**knobs), workdir, data=fake_data.FakeData())
    assert results["finished"] and np.isfinite(results["train_loss"])
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["grad_clip_norm"] == 0.5 and saved["weight_decay"] == 0.01
    with pytest.raises(UserInputError, match=r"cannot resume with weight_decay: 0\.01 in the workdir, 0\.0 now: "
                                             r"switching it on or off changes the optimizer state"):
        resume_checks.check_resume_compatible(workdir, fake_data.tiny_experiment(**{**knobs, "weight_decay": 0.0}))
    resume_checks.check_resume_compatible(workdir, fake_data.tiny_experiment(**{**knobs, "grad_clip_norm": 1.0}))
