"""The JAX code of the built-in normalisations of :mod:`attention_jax.models.normalization_registry`.

Each norm maps ``x`` ``[B, L, D]`` to float32 ``[B, L, D]``, called as ``norm(x, valid, deterministic=...)``.
``batch_norm`` keeps its running averages among the parameters (no gradient reaches them), bias-corrected
as Adam's moments. Shapes: B batch, L length, D d_model.
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
    """``initializer`` with the logical axis ``embed`` (the norm's ``[D]`` parameters shard like the model's)."""
    return nn.with_logical_partitioning(initializer, ("embed",))


class TokenLayerNorm(nn.LayerNorm):
    """Flax's LayerNorm, called as every norm here is: ``norm(x, valid, deterministic=...)``.

    Notes
    -----
    ``(x - mean(x)) / sqrt(var(x) + eps) * scale + bias`` over the last axis (Ba et al., 2016), each token
    on its own, so ``valid`` and ``deterministic`` are not read.
    """

    def __call__(self, x: Array, valid: Array | None = None, *, deterministic: bool = True) -> Array:  # type: ignore[override]
        """Normalise each token of ``x`` ``[B, L, D]`` over its ``D`` features."""
        return super().__call__(x)


class TokenRMSNorm(nn.Module):
    """RMSNorm (Zhang and Sennrich, 2019): ``x / sqrt(mean(x^2) + eps) * scale`` over each token's features.

    Attributes
    ----------
    epsilon : float
        Added to the mean square inside the square root.

    Notes
    -----
    No centring and no bias: ``D`` parameters (``scale``, initialised to ones). Computed in float32.
    """

    epsilon: float = NORM_EPSILON

    @nn.compact
    def __call__(self, x: Array, valid: Array | None = None, *, deterministic: bool = True) -> Array:
        """Normalise each token of ``x`` ``[B, L, D]`` by its root mean square."""
        scale = self.param("scale", _feature_init(nn.initializers.ones_init()), (x.shape[-1],), jnp.float32)
        x = x.astype(jnp.float32)
        mean_square = jnp.mean(jnp.square(x), axis=-1, keepdims=True)  # [B,L,1]
        return x * jax.lax.rsqrt(mean_square + self.epsilon) * scale  # [B,L,D]


class SequenceBatchNorm(nn.Module):
    """BatchNorm (Ioffe and Szegedy, 2015) over the real tokens of a batch of sequences, per feature.

    Attributes
    ----------
    epsilon : float
        Added to the variance inside the square root.

    Notes
    -----
    Training: mean and biased variance over the real tokens (``valid``) of the whole ``[B, L]`` batch (the
    global batch under data-parallel ``jit``). Evaluation and decoding use :func:`evaluation_statistics`,
    so a cached decode step equals the full pass.
    """

    epsilon: float = NORM_EPSILON

    @nn.compact
    def __call__(self, x: Array, valid: Array | None = None, *, deterministic: bool = True) -> Array:
        """Normalise ``x`` ``[B, L, D]`` per feature by batch statistics (training) or running averages."""
        features = (x.shape[-1],)
        scale = self.param("scale", _feature_init(nn.initializers.ones_init()), features, jnp.float32)
        bias = self.param("bias", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_mean = self.param("running_mean", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_var = self.param("running_var", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_weight = self.param("running_weight", nn.initializers.zeros_init(), (), jnp.float32)
        x = x.astype(jnp.float32)
        if deterministic:
            mean, variance = evaluation_statistics(running_mean, running_var, running_weight)
        else:
            tokens, mean, variance = masked_statistics(x, valid)
            if self.is_mutable_collection(STATISTICS_COLLECTION):
                for name, value in (("tokens", tokens), ("mean", mean), ("variance", variance)):
                    self.put_variable(STATISTICS_COLLECTION, name, jax.lax.stop_gradient(value))
        return (x - mean) * jax.lax.rsqrt(variance + self.epsilon) * scale + bias  # [B,L,D]


def masked_statistics(x: Array, valid: Array | None) -> tuple[Array, Array, Array]:
    """Real tokens, per-feature mean and (biased) variance of ``x`` ``[B, L, D]`` over those ``valid`` marks.

    Parameters
    ----------
    x : Array
        float32 activations.
    valid : Array or None
        Boolean ``[B, L]`` real-token mask; ``None`` counts every token.

    Returns
    -------
    (Array, Array, Array)
        Real tokens (float32), ``[D]`` mean and variance (0 and 0 without a real token).
    """
    weights = (jnp.ones(x.shape[:-1], jnp.float32) if valid is None else valid.astype(jnp.float32))[..., None]
    tokens = jnp.sum(weights)
    mean = jnp.sum(x * weights, axis=(0, 1)) / jnp.maximum(tokens, 1.0)  # [D]
    variance = jnp.sum(jnp.square(x - mean) * weights, axis=(0, 1)) / jnp.maximum(tokens, 1.0)  # [D]
    return tokens, mean, variance


def evaluation_statistics(running_mean: Array, running_var: Array, running_weight: Array) -> tuple[Array, Array]:
    """Return evaluation's mean and variance: the running averages divided by their weight ``1 - m^t``.

    Parameters
    ----------
    running_mean, running_var, running_weight : Array
        ``[D]``, ``[D]`` and a scalar, as :class:`SequenceBatchNorm` keeps them.

    Returns
    -------
    (Array, Array)
        ``[D]`` mean and variance; 0 and 1 before any step (weight 0).
    """
    trained = running_weight > 0
    divisor = jnp.where(trained, running_weight, 1.0)
    return running_mean / divisor, jnp.where(trained, running_var / divisor, 1.0)


def _by_norm(statistics: Any) -> dict[tuple[str, ...], dict[str, Array]]:
    """The collection's leaves grouped by norm: module path -> ``{"tokens", "mean", "variance"}``."""
    grouped: dict[tuple[str, ...], dict[str, Array]] = {}
    for path, value in flax.traverse_util.flatten_dict(flax.core.unfreeze(statistics)).items():
        grouped.setdefault(path[:-1], {})[path[-1]] = value
    return grouped


def combined_statistics(first: Any, second: Any) -> Any:
    """Two forward passes' statistics collections combined per norm: those of all their real tokens.

    Parameters
    ----------
    first, second : pytree
        :data:`normalization_registry.STATISTICS_COLLECTION` collections (empty without batch_norm).

    Returns
    -------
    pytree
        Real tokens, mean and biased variance of the union (Chan et al., 1979).
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
    """``params`` with batch_norm's running averages moved by one step's statistics.

    Parameters
    ----------
    params : pytree
        Parameters (after the optimizer's update).
    statistics : pytree
        The step's :data:`normalization_registry.STATISTICS_COLLECTION` collection (empty without batch_norm).
    momentum : float
        ``running = m running + (1 - m) batch``; ``running_weight`` likewise with ``batch = 1``.

    Returns
    -------
    pytree
        ``params``; a norm whose batch had no real token keeps its averages.

    Raises
    ------
    ValueError
        Statistics of a norm without running averages in ``params``.
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


def layer_norm(config: TransformerConfig, name: str) -> TokenLayerNorm:
    """The ``layer_norm`` entry's module: the paper's LayerNorm (epsilon 1e-6, float32).

    Parameters
    ----------
    config : TransformerConfig
        Not read (the norm has no setting of its own).
    name : str
        The module's name (``layer_norm`` in a sublayer, ``encoder_norm`` and the like for final norms).

    Returns
    -------
    TokenLayerNorm
        The module.
    """
    return TokenLayerNorm(epsilon=NORM_EPSILON, dtype=jnp.float32,
                          scale_init=_feature_init(nn.initializers.ones_init()),
                          bias_init=_feature_init(nn.initializers.zeros_init()), name=name)


def rms_norm(config: TransformerConfig, name: str) -> TokenRMSNorm:
    """The ``rms_norm`` entry's module (epsilon 1e-6, float32).

    Parameters
    ----------
    config : TransformerConfig
        Not read.
    name : str
        The module's name.

    Returns
    -------
    TokenRMSNorm
        The module.
    """
    return TokenRMSNorm(epsilon=NORM_EPSILON, name=name)


def batch_norm(config: TransformerConfig, name: str) -> SequenceBatchNorm:
    """The ``batch_norm`` entry's module (epsilon 1e-6, float32; momentum: :func:`with_running_statistics`).

    Parameters
    ----------
    config : TransformerConfig
        Not read.
    name : str
        The module's name.

    Returns
    -------
    SequenceBatchNorm
        The module.
    """
    return SequenceBatchNorm(epsilon=NORM_EPSILON, name=name)
