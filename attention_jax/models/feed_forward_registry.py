"""The position-wise feed-forward sublayer's variants (Section 3.3; Shazeer, 2020), one registry: name -> entry.

``config.feed_forward`` names an entry of :data:`FEED_FORWARDS`; ``feed_forward.FeedForward``, the parameter
count (:func:`feed_forward_params`), the FLOP count (``models/flops.py``) and the size estimate
(``experiment/size_limits.py``) ask the entry. Adding a variant is one entry (:func:`register_feed_forward`)
plus its tests.

An entry is an activation and whether it gates: ``act(x W1 + b1) W2 + b2`` (Eq. 2 with ``act = relu``), or
Shazeer's gated form ``(act(x W + b) * (x V + c)) W2 + b2``. A gated variant has three matrices; with
``config.feed_forward_match_params`` (the default) its hidden width is ``2/3 d_ff`` rounded to a multiple of
:data:`GATED_WIDTH_MULTIPLE` (:func:`hidden_width`), so its parameters stay within about 1% of Eq. 2's.

This module imports no framework: the built-in activations are JAX functions of
:mod:`attention_jax.models.feed_forward`, imported when first called.

Shape glossary
--------------
D d_model, F the hidden width.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from attention_jax.models.registry import Registration, Registry

GATED_WIDTH_MULTIPLE = 8
"""A matched gated variant's hidden width is a multiple of this (d_ff 2048 -> 1368, 512 -> 344)."""

Activation = Callable[[Any], Any]
"""``activation(h) -> h``: an elementwise JAX function of the ``[..., F]`` pre-activations."""


@dataclasses.dataclass(frozen=True)
class FeedForwardVariant:
    """One feed-forward sublayer: its name, its activation and whether it gates.

    Attributes
    ----------
    name : str
        The value of ``config.feed_forward``.
    summary : str
        What it computes, one line (error messages and docs quote it).
    activation : Activation or None
        Applied to ``x W1 + b1`` (ungated) or to the gate ``x W + b`` (gated); None: the identity.
    gated : bool
        Shazeer's form: a third matrix whose output multiplies the activated one.
    """

    name: str
    summary: str
    activation: Activation | None
    gated: bool = False

    def activate(self, hidden: Any) -> Any:
        """``activation(hidden)``, or ``hidden`` itself for an entry without one."""
        return hidden if self.activation is None else self.activation(hidden)


def _jax_activation(function: str) -> Activation:
    """An activation that imports :mod:`attention_jax.models.feed_forward` (JAX) when first called."""
    def activation(hidden: Any) -> Any:
        from attention_jax.models import feed_forward  # JAX; this module imports no framework.

        return getattr(feed_forward, function)(hidden)

    return activation


_RELU, _GELU, _SWISH, _SIGMOID = (_jax_activation(name) for name in ("relu", "gelu", "swish", "sigmoid"))

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
"""Every feed-forward variant by name (a ``Mapping``; :func:`register_feed_forward` adds to it)."""


def feed_forward(name: str) -> FeedForwardVariant:
    """The registry entry of ``name``; ``ValueError`` in one line, with a did-you-mean, for an unknown name.

    Parameters
    ----------
    name : str
        ``config.feed_forward``.

    Returns
    -------
    FeedForwardVariant
        Its entry in :data:`FEED_FORWARDS`.
    """
    return FEED_FORWARDS.lookup(name)


def hidden_width(name: str, d_ff: int, *, match_params: bool = True) -> int:
    """``F``, the hidden width of the sublayer ``name`` builds for ``d_ff``.

    Parameters
    ----------
    name : str
        ``config.feed_forward``.
    d_ff : int
        ``config.d_ff``.
    match_params : bool
        ``config.feed_forward_match_params``.

    Returns
    -------
    int
        ``d_ff``, or for a gated entry with ``match_params`` ``2/3 d_ff`` rounded to the nearest multiple of
        :data:`GATED_WIDTH_MULTIPLE` (at least one multiple): three ``D x F`` matrices then hold about
        what Eq. 2's two ``D x d_ff`` do.
    """
    if not (feed_forward(name).gated and match_params):
        return d_ff
    unit = 3 * GATED_WIDTH_MULTIPLE
    return max(1, (2 * d_ff + unit // 2) // unit) * GATED_WIDTH_MULTIPLE


def feed_forward_params(name: str, *, d_model: int, d_ff: int, match_params: bool = True, bias: bool = True) -> int:
    """Trained parameters of one feed-forward sublayer.

    Parameters
    ----------
    name : str
        ``config.feed_forward``.
    d_model, d_ff : int
        ``D`` and ``config.d_ff``.
    match_params, bias : bool
        ``config.feed_forward_match_params`` and ``config.feed_forward_bias``.

    Returns
    -------
    int
        Two (three gated) matrices of ``D x F`` and, with ``bias``, one bias of ``F`` per matrix into the
        hidden layer and one of ``D``.
    """
    width = hidden_width(name, d_ff, match_params=match_params)
    inputs = 2 if feed_forward(name).gated else 1  # Matrices into the hidden layer.
    return (inputs + 1) * d_model * width + (inputs * width + d_model if bias else 0)


def register_feed_forward(entry: FeedForwardVariant) -> Registration:
    """Add ``entry`` to :data:`FEED_FORWARDS`, so that ``config.feed_forward=entry.name`` runs it.

    Parameters
    ----------
    entry : FeedForwardVariant
        The new variant; its name must not be registered already.

    Returns
    -------
    Registration
        ``.undo()`` removes it; ``with register_feed_forward(entry): ...`` keeps it for the block.

    Notes
    -----
    Register before building a ``TransformerConfig`` that names it (validation reads the registry).
    """
    return FEED_FORWARDS.register(entry)
