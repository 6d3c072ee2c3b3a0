"""The built-in normalisations of :mod:`attention_jax.models.normalization_registry`.

Each maps ``x`` ``[B, L, D]`` to float32, called as ``norm(x, valid, deterministic=...)``. ``batch_norm``
keeps bias-corrected running averages among the parameters (no gradient reaches them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.models.normalization_registry import BATCH_NORM_MOMENTUM, NORM_EPSILON, STATISTICS_COLLECTION

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

Array = jax.Array


def _feature_init(initializer: nn.initializers.Initializer) -> nn.initializers.Initializer:
    """``initializer`` with the logical axis ``embed``."""
    return nn.with_logical_partitioning(initializer, ("embed",))


class TokenLayerNorm(nn.LayerNorm):
    """Flax's LayerNorm (Ba et al., 2016) with every norm's call signature; ``valid`` is not read."""

    def __call__(self, x: Array, valid: Array | None = None, *, deterministic: bool = True) -> Array:  # type: ignore[override]
        """Normalise each token of ``x`` ``[B, L, D]``."""
        return super().__call__(x)


class TokenRMSNorm(nn.Module):
    """RMSNorm (Zhang and Sennrich, 2019): ``x / sqrt(mean(x^2) + eps) * scale``, no centring, float32."""

    epsilon: float = NORM_EPSILON

    @nn.compact
    def __call__(self, x: Array, valid: Array | None = None, *, deterministic: bool = True) -> Array:
        """Normalise each token of ``x`` ``[B, L, D]`` by its root mean square."""
        scale = self.param("scale", _feature_init(nn.initializers.ones_init()), (x.shape[-1],), jnp.float32)
        x = x.astype(jnp.float32)
        mean_square = jnp.mean(jnp.square(x), axis=-1, keepdims=True)  # [B,L,1]
        return x * jax.lax.rsqrt(mean_square + self.epsilon) * scale  # [B,L,D]


class SequenceBatchNorm(nn.Module):
    """BatchNorm (Ioffe and Szegedy, 2015) per feature over a batch's real tokens.

    Evaluation and decoding use the running averages, so a cached decode step equals the full pass.
    """

    epsilon: float = NORM_EPSILON

    @nn.compact
    def __call__(self, x: Array, valid: Array | None = None, *, deterministic: bool = True) -> Array:
        """Normalise ``x`` ``[B, L, D]`` by batch statistics (training) or running averages."""
        features = (x.shape[-1],)
        scale = self.param("scale", _feature_init(nn.initializers.ones_init()), features, jnp.float32)
        bias = self.param("bias", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_mean = self.param("running_mean", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_var = self.param("running_var", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_weight = self.param("running_weight", nn.initializers.zeros_init(), (), jnp.float32)
        x = x.astype(jnp.float32)
        if deterministic:
            mean, variance = _evaluation_statistics(running_mean, running_var, running_weight)
        else:
            tokens, mean, variance = _masked_statistics(x, valid)
            if self.is_mutable_collection(STATISTICS_COLLECTION):
                for name, value in (("tokens", tokens), ("mean", mean), ("variance", variance)):
                    self.put_variable(STATISTICS_COLLECTION, name, jax.lax.stop_gradient(value))
        return (x - mean) * jax.lax.rsqrt(variance + self.epsilon) * scale + bias  # [B,L,D]


def _masked_statistics(x: Array, valid: Array | None) -> tuple[Array, Array, Array]:
    """Real-token count, ``[D]`` mean and biased variance of ``x`` (0 without a real token)."""
    weights = (jnp.ones(x.shape[:-1], jnp.float32) if valid is None else valid.astype(jnp.float32))[..., None]
    tokens = jnp.sum(weights)
    mean = jnp.sum(x * weights, axis=(0, 1)) / jnp.maximum(tokens, 1.0)  # [D]
    variance = jnp.sum(jnp.square(x - mean) * weights, axis=(0, 1)) / jnp.maximum(tokens, 1.0)  # [D]
    return tokens, mean, variance


def _evaluation_statistics(running_mean: Array, running_var: Array, running_weight: Array) -> tuple[Array, Array]:
    """Evaluation's ``[D]`` mean and variance: running averages over their weight ``1 - m^t`` (0, 1 untrained)."""
    trained = running_weight > 0
    divisor = jnp.where(trained, running_weight, 1.0)
    return running_mean / divisor, jnp.where(trained, running_var / divisor, 1.0)


def _by_norm(statistics: Any) -> dict[tuple[str, ...], dict[str, Array]]:
    """Group the collection's leaves by norm: module path -> ``{tokens, mean, variance}``."""
    grouped: dict[tuple[str, ...], dict[str, Array]] = {}
    for path, value in flax.traverse_util.flatten_dict(flax.core.unfreeze(statistics)).items():
        grouped.setdefault(path[:-1], {})[path[-1]] = value
    return grouped


def combined_statistics(first: Any, second: Any) -> Any:
    """Return two passes' batch statistics combined per norm (Chan et al., 1979).

    Parameters
    ----------
    first, second : Any
        ``STATISTICS_COLLECTION`` collections.

    Returns
    -------
    Any
        Tokens, mean and biased variance of the union.
    """
    left, right = _by_norm(first), _by_norm(second)
    combined = {}
    for path, a in left.items():
        b = right[path]
        tokens = a["tokens"] + b["tokens"]
        share = b["tokens"] / jnp.maximum(tokens, 1.0)  # 0 when neither has a real token.
        delta = b["mean"] - a["mean"]
        combined.update({(*path, "tokens"): tokens, (*path, "mean"): a["mean"] + share * delta,
                         (*path, "variance"): (1 - share) * a["variance"] + share * b["variance"]
                         + share * (1 - share) * jnp.square(delta)})
    return flax.traverse_util.unflatten_dict(combined) if combined else second


def with_running_statistics(params: Any, statistics: Any, momentum: float = BATCH_NORM_MOMENTUM) -> Any:
    """Return ``params`` with batch_norm's running averages moved by one step's statistics.

    Parameters
    ----------
    params, statistics : Any
        Parameters after the update; the step's ``STATISTICS_COLLECTION`` (empty without batch_norm).
    momentum : float
        ``running = m running + (1 - m) batch``.

    Returns
    -------
    Any
        ``params``; a norm whose batch had no real token keeps its averages.

    Raises
    ------
    ValueError
        Statistics of a norm without running averages.
    """
    grouped = _by_norm(statistics)
    if not grouped:
        return params
    flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(params))
    unknown = [path for path in grouped if (*path, "running_weight") not in flat]
    if unknown:
        raise ValueError(f"running statistics without a parameter to hold them: {sorted(unknown)[:3]}.")
    for path, batch in grouped.items():
        for name, value in (("running_mean", batch["mean"]), ("running_var", batch["variance"]),
                            ("running_weight", 1.0)):
            old = flat[(*path, name)]
            flat[(*path, name)] = jnp.where(batch["tokens"] > 0, momentum * old + (1 - momentum) * value, old)
    return flax.traverse_util.unflatten_dict(flat)


def _layer_norm(config: TransformerConfig, name: str) -> TokenLayerNorm:
    """Return the ``layer_norm`` entry's module: the paper's LayerNorm (epsilon 1e-6, float32)."""
    return TokenLayerNorm(epsilon=NORM_EPSILON, dtype=jnp.float32,
                          scale_init=_feature_init(nn.initializers.ones_init()),
                          bias_init=_feature_init(nn.initializers.zeros_init()), name=name)


def _rms_norm(config: TransformerConfig, name: str) -> TokenRMSNorm:
    """Return the ``rms_norm`` entry's module."""
    return TokenRMSNorm(epsilon=NORM_EPSILON, name=name)


def _batch_norm(config: TransformerConfig, name: str) -> SequenceBatchNorm:
    """Return the ``batch_norm`` entry's module."""
    return SequenceBatchNorm(epsilon=NORM_EPSILON, name=name)
