"""The JAX code of the built-in normalisations of :mod:`attention_jax.models.normalization_registry`.

Every norm module here maps ``x`` ``[B, L, D]`` to ``[B, L, D]`` in float32 and is called as
``norm(x, valid, deterministic=...)``: ``valid`` (boolean ``[B, L]`` or ``None``) marks the real tokens and
``deterministic`` is evaluation or decoding; a per-token norm reads neither. The parameter layout of
``layer_norm`` is Flax's ``LayerNorm`` (``scale`` and ``bias``, each ``[D]``) under the norm's name, as
every run before the normalisation axis has it; ``rms_norm`` holds ``scale`` only.

Shape glossary
--------------
B batch, L length, D d_model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.models.normalization_registry import NORM_EPSILON

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
