"""The JAX code of the built-in normalisations of :mod:`attention_jax.models.normalization_registry`.

Every norm module here maps ``x`` ``[B, L, D]`` to ``[B, L, D]`` in float32 and is called as
``norm(x, valid, deterministic=...)``: ``valid`` (boolean ``[B, L]`` or ``None``) marks the real tokens and
``deterministic`` is evaluation or decoding; a per-token norm reads neither. The parameter layout of
``layer_norm`` is Flax's ``LayerNorm`` (``scale`` and ``bias``, each ``[D]``) under the norm's name, as
every run before the normalisation axis has it; ``rms_norm`` holds ``scale`` only.

``batch_norm`` (:class:`SequenceBatchNorm`) keeps its running mean and variance among the parameters
(``running_mean``, ``running_var``, each ``[D]``; no gradient reaches them, and Adam moves a parameter
whose gradient is always zero by nothing), so that checkpoints, ``average_checkpoints``, the export and
every evaluation and decoding path that reads ``{"params": params}`` carry them unchanged. A training
forward pass (``deterministic=False``) writes the updated averages to the mutable collection
:data:`normalization_registry.STATISTICS_COLLECTION`; the train step copies them into the new parameters
(:func:`with_running_statistics`).

Shape glossary
--------------
B batch, L length, D d_model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.models.normalization_registry import BATCH_NORM_MOMENTUM, NORM_EPSILON, STATISTICS_COLLECTION

if TYPE_CHECKING:
    from attention_jax.models.transformer_config import TransformerConfig

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
    momentum : float
        ``m`` of the running averages (:data:`normalization_registry.BATCH_NORM_MOMENTUM`).

    Notes
    -----
    Training (``deterministic=False``): ``mu_B = sum_{b,l} v x / sum v`` and ``sigma_B^2 = sum v (x -
    mu_B)^2 / sum v`` per feature, ``v`` the ``valid`` mask (padding, and so the padding between a packed
    row's pairs, counts for nothing; ``None``: every token), and ``y = (x - mu_B) / sqrt(sigma_B^2 + eps) g +
    b``. The sums run over the whole ``[B, L]`` batch: under a data-parallel ``jit`` whose batch is sharded
    over devices they are the global batch's (XLA adds the all-reduce). The running averages
    ``running = m running + (1 - m) stat`` are written to the mutable collection when it is mutable.
    Evaluation and decoding (``deterministic=True``) normalise with the running averages alone, each token
    on its own, so a cached decode step equals the full pass. The variance is the biased one in both.
    """

    epsilon: float = NORM_EPSILON
    momentum: float = BATCH_NORM_MOMENTUM

    @nn.compact
    def __call__(self, x: Array, valid: Array | None = None, *, deterministic: bool = True) -> Array:
        """Normalise ``x`` ``[B, L, D]`` per feature by batch statistics (training) or running averages."""
        features = (x.shape[-1],)
        scale = self.param("scale", _feature_init(nn.initializers.ones_init()), features, jnp.float32)
        bias = self.param("bias", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_mean = self.param("running_mean", _feature_init(nn.initializers.zeros_init()), features, jnp.float32)
        running_var = self.param("running_var", _feature_init(nn.initializers.ones_init()), features, jnp.float32)
        x = x.astype(jnp.float32)
        if deterministic:
            mean, variance = running_mean, running_var
        else:
            mean, variance = masked_statistics(x, valid)
            if self.is_mutable_collection(STATISTICS_COLLECTION):
                def average(running: Array, batch: Array) -> Array:
                    return self.momentum * running + (1.0 - self.momentum) * jax.lax.stop_gradient(batch)

                self.put_variable(STATISTICS_COLLECTION, "running_mean", average(running_mean, mean))
                self.put_variable(STATISTICS_COLLECTION, "running_var", average(running_var, variance))
        return (x - mean) * jax.lax.rsqrt(variance + self.epsilon) * scale + bias  # [B,L,D]


def masked_statistics(x: Array, valid: Array | None) -> tuple[Array, Array]:
    """Per-feature mean and (biased) variance of ``x`` ``[B, L, D]`` over the tokens ``valid`` ``[B, L]`` marks.

    Parameters
    ----------
    x : Array
        float32 activations.
    valid : Array or None
        Boolean real-token mask; ``None`` counts every token.

    Returns
    -------
    (Array, Array)
        ``[D]`` mean and variance (a batch without a real token gives mean 0 and variance 0).
    """
    weights = (jnp.ones(x.shape[:-1], jnp.float32) if valid is None else valid.astype(jnp.float32))[..., None]
    count = jnp.maximum(jnp.sum(weights), 1.0)
    mean = jnp.sum(x * weights, axis=(0, 1)) / count  # [D]
    variance = jnp.sum(jnp.square(x - mean) * weights, axis=(0, 1)) / count  # [D]
    return mean, variance


def with_running_statistics(params: Any, statistics: Any) -> Any:
    """``params`` with batch_norm's running averages replaced by those a training forward pass wrote.

    Parameters
    ----------
    params : pytree
        Parameters (after the optimizer's update).
    statistics : pytree
        The :data:`normalization_registry.STATISTICS_COLLECTION` collection ``apply`` returned (the same
        module paths as ``params``); empty when the model has no batch_norm.

    Returns
    -------
    pytree
        ``params``, the same structure, the running averages new.
    """
    updates = flax.traverse_util.flatten_dict(flax.core.unfreeze(statistics))
    if not updates:
        return params
    flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(params))
    unknown = set(updates) - set(flat)
    if unknown:
        raise ValueError(f"running statistics without a parameter to hold them: {sorted(unknown)[:3]}.")
    flat.update(updates)
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
    """The ``batch_norm`` entry's module (epsilon 1e-6, momentum 0.99, float32).

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
    return SequenceBatchNorm(epsilon=NORM_EPSILON, momentum=BATCH_NORM_MOMENTUM, name=name)
