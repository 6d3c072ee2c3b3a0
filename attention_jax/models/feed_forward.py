"""The feed-forward sublayer (Section 3.3) and the activations of :mod:`attention_jax.models.feed_forward_registry`.

``inner`` ``[D, F]`` and ``outer`` ``[F, D]`` are the paper's W1 and W2; a gated variant adds ``gate``
``[D, F]`` (Shazeer's W).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import flax.linen as nn
import jax

from attention_jax.cpu_kernels import dense_dot_general
from attention_jax.models import feed_forward_registry

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

Array = jax.Array


def _relu(hidden: Array) -> Array:
    """Return ``max(0, h)`` (Eq. 2)."""
    return jax.nn.relu(hidden)


def _gelu(hidden: Array) -> Array:
    """Return exact GELU ``h (1 + erf(h / sqrt 2)) / 2``, not the tanh approximation."""
    return jax.nn.gelu(hidden, approximate=False)


def _swish(hidden: Array) -> Array:
    """Return Swish with beta 1 (SiLU): ``h sigmoid(h)``."""
    return jax.nn.silu(hidden)


def _sigmoid(hidden: Array) -> Array:
    """Return ``1 / (1 + exp(-h))``, GLU's gate."""
    return jax.nn.sigmoid(hidden)


def _dense(config: TransformerConfig, features: int, axes: tuple[str, str], name: str) -> nn.Dense:
    """A Xavier-uniform layer with logical kernel ``axes`` and a zero bias if any."""
    return nn.Dense(features, use_bias=config.feed_forward_bias, dtype=config.compute_dtype, name=name,
                    dot_general=dense_dot_general(config.cpu_kernels),
                    kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), axes),
                    bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), axes[1:]))


class FeedForward(nn.Module):
    """The sublayer ``config.feed_forward`` names, ``[B, L, D]`` to ``[B, L, D]``."""

    config: TransformerConfig

    @nn.compact
    def __call__(self, x: Array) -> Array:
        """``act(x W1 + b1) W2 + b2`` (Eq. 2: relu), or ``(act(x W + b) * (x V + c)) W2 + b2`` gated."""
        cfg = self.config
        entry = feed_forward_registry.feed_forward(cfg.feed_forward)
        width = feed_forward_registry._hidden_width(cfg.feed_forward, cfg.d_ff,
                                                   match_params=cfg.feed_forward_match_params)
        hidden = _dense(cfg, width, ("embed", "mlp"), "inner")(x)  # [B,L,F]
        if entry.gated:
            hidden = entry.activate(_dense(cfg, width, ("embed", "mlp"), "gate")(x)) * hidden  # [B,L,F]
        else:
            hidden = entry.activate(hidden)
        return _dense(cfg, cfg.d_model, ("mlp", "embed"), "outer")(hidden)  # [B,L,D]
