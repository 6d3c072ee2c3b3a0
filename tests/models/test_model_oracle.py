"""Whole models against the NumPy oracle (``tests/support/reference_model.py``): every norm, position and residual
combination and every positional encoding, the encoder-decoder's and the language model's logits.

The parameters are drawn so that the activations entering the norms have a variance near 2.5e-5, where an
epsilon of 1e-5 instead of 1e-6 moves the logits by percents (each case checks that the oracle itself sees it);
the queries' and keys' projections are scaled up so that attention still sees O(1) scores. The mutations
these tests kill are listed in docs/testing.md ("Mutations the oracle kills").
"""

from __future__ import annotations

from collections.abc import Callable

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import language_model, normalization_registry, positional_encodings
from tests.support import reference_model as oracle

SMALL = TransformerConfig(vocab_size=50, num_layers=2, d_model=16, d_ff=32, num_heads=2, key_dim=8, value_dim=6,
                          dropout_rate=0.0, max_len=16, positional_encoding="learned")
ACTIVATION_SCALE = 5e-3
"""The standard deviation of the activations entering the norms (variance 2.5e-5)."""
TOLERANCE = 2e-5
"""Largest logit error allowed, relative to the largest logit (float32 against float64)."""
NORM_COMBINATIONS = [(norm, position, residual) for norm in ("layer_norm", "rms_norm", "batch_norm")
                     for position in ("post", "pre") for residual in (True, False)]
NORM_COMBINATIONS += [("none", "post", True), ("none", "post", False)]
"""Every defined (normalization, layer_norm_position, residual_connections)."""
ENCODINGS = ("sinusoidal", "learned", "none", "relative", "rotary", "alibi")
KINDS = tuple(language_model.MODEL_KINDS)
NORM_NAMES = ("layer_norm", "encoder_norm", "decoder_norm", "final_norm")
"""The names a norm's parameters sit under: a sublayer's, then each pre-LN stack's final one."""


def _combination_id(combination: tuple[str, str, bool]) -> str:
    norm, position, residual = combination
    return f"{norm}-{position}-{'residual' if residual else 'no_residual'}"


def _draw(path: tuple[str, ...], shape: tuple[int, ...], scale: float, rng: np.random.Generator) -> np.ndarray:
    """One parameter of ``path``, drawn so that every norm's input has standard deviation about ``scale``."""
    name, owner = path[-1], path[-2] if len(path) > 1 else ""
    normal = rng.normal(size=shape)
    if owner in NORM_NAMES:  # Gains of order scale, so that the next norm's input is of order scale.
        return {"scale": scale * (1 + 0.3 * normal), "bias": 0.3 * scale * normal, "running_mean": scale * normal,
                "running_var": scale ** 2 * rng.uniform(0.5, 2.0, size=shape),
                "running_weight": rng.uniform(0.3, 0.9, size=shape)}[name]
    attention_scores = 1 / scale if owner in ("query", "key") else 1.0  # q k^T of order 1.
    if name == "kernel":
        fan_in = np.prod(shape[:-1]) if owner == "out" else shape[0]
        return normal / np.sqrt(fan_in) * attention_scores
    draws = {"bias": 0.3 * scale * attention_scores, "embedding": scale / np.sqrt(shape[-1]),
             "position_embedding": scale, "relative_key_embedding": 1.0, "relative_value_embedding": scale}
    if name not in draws:
        raise KeyError(f"no rule to draw the parameter {'/'.join(path)}: add one to _draw.")
    return draws[name] * normal


def _params(config: TransformerConfig, kind: str, seed: int, scale: float) -> dict:
    """A parameter pytree of the model ``kind`` of ``config``, as float64 NumPy arrays."""
    shapes = flax.traverse_util.flatten_dict(flax.linen.meta.unbox(language_model.abstract_params(config, kind)))
    rng = np.random.default_rng(seed)
    return flax.traverse_util.unflatten_dict({path: _draw(path, leaf.shape, scale, rng)
                                              for path, leaf in sorted(shapes.items())})


def _ids(rng: np.random.Generator, lengths: list[int], width: int, vocab_size: int) -> np.ndarray:
    """``[B, width]`` rows of random tokens ending in EOS (3), each of its length, padded with 0."""
    ids = np.zeros((len(lengths), width), np.int32)
    for row, length in enumerate(lengths):
        ids[row, :length - 1] = rng.integers(4, vocab_size, size=length - 1)
        ids[row, length - 1] = 3
    return ids


def _logits(config: TransformerConfig, kind: str, scale: float = ACTIVATION_SCALE,
            seed: int = 0) -> tuple[np.ndarray, Callable[[float], np.ndarray]]:
    """The model's float32 logits on a padded batch, and the oracle's as a function of epsilon."""
    params = _params(config, kind, seed, scale)
    rng = np.random.default_rng(seed + 1)
    targets = _ids(rng, [6, 3], 6, config.vocab_size)
    module = language_model.build_model(config, kind)
    as_float32 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), params)
    if kind == "decoder_only":
        ours = module.apply({"params": as_float32}, targets, deterministic=True)
        return np.asarray(ours), lambda epsilon: oracle.language_model_logits(params, config, targets, epsilon=epsilon)
    inputs = _ids(rng, [7, 4], 7, config.vocab_size)
    ours = module.apply({"params": as_float32}, inputs, targets, deterministic=True)
    return np.asarray(ours), lambda epsilon: oracle.transformer_logits(params, config, inputs, targets,
                                                                        epsilon=epsilon)


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.abs(actual - expected).max() / np.abs(expected).max())


def _assert_matches(actual: np.ndarray, expected: np.ndarray) -> None:
    error = _relative_error(actual, expected)
    assert error <= TOLERANCE, f"logits differ from the oracle's by {error:.2e} of the largest (> {TOLERANCE})"


@pytest.mark.reference
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("combination", NORM_COMBINATIONS, ids=_combination_id)
def test_every_norm_combination_equals_the_oracle_at_small_variance(combination: tuple[str, str, bool],
                                                                     kind: str) -> None:
    norm, position, residual = combination
    config = SMALL.replace(normalization=norm, layer_norm_position=position, residual_connections=residual)
    ours, theirs = _logits(config, kind)
    expected = theirs(oracle.EPSILON)
    _assert_matches(ours, expected)
    if norm != "none":  # The test sees the norms' epsilon: 1e-5 instead would fail it.
        assert _relative_error(theirs(1e-5), expected) > 50 * TOLERANCE


@pytest.mark.reference
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_positional_encoding_equals_the_oracle(encoding: str, kind: str) -> None:
    # The sinusoids are of order 1 whatever the parameters: that model runs at the usual scale.
    scale = 1.0 if encoding == "sinusoidal" else ACTIVATION_SCALE
    settings = {"relative": {"max_distance": 3}}  # Offsets up to 6 in 7 positions: some are clipped.
    config = SMALL.replace(positional_encoding=encoding, positional_encoding_settings=settings)
    ours, theirs = _logits(config, kind, scale=scale)
    _assert_matches(ours, theirs(oracle.EPSILON))


@pytest.mark.reference
@pytest.mark.parametrize("kind", KINDS)
def test_separate_embeddings_and_output_projection_equal_the_oracle(kind: str) -> None:
    ours, theirs = _logits(SMALL.replace(share_embeddings=False, layer_norm_position="pre"), kind)
    _assert_matches(ours, theirs(oracle.EPSILON))


def test_the_oracle_covers_every_registered_norm_and_encoding() -> None:
    assert {norm for norm, _, _ in NORM_COMBINATIONS} == set(normalization_registry.NORMALIZATIONS)
    assert set(ENCODINGS) == set(positional_encodings.POSITIONAL_ENCODINGS)
    defined = {(norm, position) for norm, entry in normalization_registry.NORMALIZATIONS.items()
               for position in entry.positions}
    assert {(norm, position) for norm, position, _ in NORM_COMBINATIONS} == defined


@pytest.mark.reference
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("changes", [dict(feed_forward="swiglu"), dict(feed_forward="geglu", feed_forward_bias=False),
                                     dict(feed_forward="swiglu", feed_forward_bias=False, layer_norm_position="pre",
                                          normalization="rms_norm", positional_encoding="rotary")],
                         ids=["swiglu", "geglu-no_bias", "modern_block"])
def test_gated_feed_forwards_equal_the_oracle_in_the_whole_model(changes: dict, kind: str) -> None:
    ours, theirs = _logits(SMALL.replace(**changes), kind)
    _assert_matches(ours, theirs(oracle.EPSILON))
