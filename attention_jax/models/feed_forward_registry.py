"""The feed-forward sublayer's variants (Section 3.3, Eq. 2; Shazeer, 2020), one registry: name -> entry.

An entry is an activation and whether it gates: ``act(x W1 + b1) W2 + b2`` or
``(act(x W + b) * (x V + c)) W2 + b2``. Imports no framework.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from attention_jax.foundation.registry import Registration, Registry
from attention_jax.models.registry import jax_hook

GATED_WIDTH_MULTIPLE = 8  # A matched gated variant's hidden width is a multiple of this.
Activation = Callable[[Any], Any]  # Elementwise JAX function of the [..., F] pre-activations.


@dataclasses.dataclass(frozen=True)
class FeedForwardVariant:
    """One feed-forward sublayer: ``name``, ``summary``, ``activation`` (None: identity), ``gated``."""

    name: str
    summary: str
    activation: Activation | None
    gated: bool = False

    def activate(self, hidden: Any) -> Any:
        """Apply the entry's activation.

        Parameters
        ----------
        hidden : Any
            Pre-activations.

        Returns
        -------
        Any
            The activations.
        """
        return hidden if self.activation is None else self.activation(hidden)


_RELU, _GELU, _SWISH, _SIGMOID = (jax_hook("feed_forward", name) for name in ("_relu", "_gelu", "_swish", "_sigmoid"))

FEED_FORWARDS: Registry[FeedForwardVariant] = Registry("feed_forward", (
    FeedForwardVariant("relu", "max(0, x W1 + b1) W2 + b2, the paper's (Eq. 2)", _RELU),
    FeedForwardVariant("gelu", "gelu(x W1 + b1) W2 + b2, GELU exact (erf; Hendrycks and Gimpel, 2016)", _GELU),
    FeedForwardVariant("swish", "swish(x W1 + b1) W2 + b2, swish(h) = h sigmoid(h) (SiLU)", _SWISH),
    FeedForwardVariant("glu", "(sigmoid(x W + b) * (x V + c)) W2 + b2 (Dauphin et al., 2017; Shazeer, 2020)",
                       _SIGMOID, gated=True),
    FeedForwardVariant("bilinear", "((x W + b) * (x V + c)) W2 + b2 (Shazeer, 2020)", None, gated=True),
    FeedForwardVariant("reglu", "(relu(x W + b) * (x V + c)) W2 + b2 (Shazeer, 2020)", _RELU, gated=True),
    FeedForwardVariant("geglu", "(gelu(x W + b) * (x V + c)) W2 + b2, GELU exact (Shazeer, 2020)", _GELU,
                       gated=True),
    FeedForwardVariant("swiglu", "(swish(x W + b) * (x V + c)) W2 + b2 (Shazeer, 2020; LLaMA)", _SWISH,
                       gated=True),
))


def feed_forward(name: str) -> FeedForwardVariant:
    """Return the registry entry of ``name``.

    Parameters
    ----------
    name : str
        ``config.feed_forward``.

    Returns
    -------
    FeedForwardVariant
        Its entry.

    Raises
    ------
    ValueError
        Unknown name (one line, with a did-you-mean).
    """
    return FEED_FORWARDS.lookup(name)


def _hidden_width(name: str, d_ff: int, *, match_params: bool = True) -> int:
    """Return ``F``: ``d_ff``, or for a matched gated entry ``2/3 d_ff`` rounded to :data:`GATED_WIDTH_MULTIPLE`.

    Three ``D x F`` matrices then hold about what Eq. 2's two ``D x d_ff`` do.
    """
    if not (feed_forward(name).gated and match_params):
        return d_ff
    unit = 3 * GATED_WIDTH_MULTIPLE
    return max(1, (2 * d_ff + unit // 2) // unit) * GATED_WIDTH_MULTIPLE


def _feed_forward_params(name: str, *, d_model: int, d_ff: int, match_params: bool = True, bias: bool = True) -> int:
    """Return the trained parameters of one feed-forward sublayer."""
    width = _hidden_width(name, d_ff, match_params=match_params)
    inputs = 2 if feed_forward(name).gated else 1  # Matrices into the hidden layer.
    return (inputs + 1) * d_model * width + (inputs * width + d_model if bias else 0)


def register_feed_forward(entry: FeedForwardVariant) -> Registration:
    """Add ``entry`` to :data:`FEED_FORWARDS` (before a config names it).

    Parameters
    ----------
    entry : FeedForwardVariant
        A new, unregistered name.

    Returns
    -------
    Registration
        ``.undo()`` removes it; usable as a context manager.
    """
    return FEED_FORWARDS.register(entry)
