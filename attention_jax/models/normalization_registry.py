"""The sublayers' normalisations (Section 3.1's LayerNorm and alternatives), one registry: name -> entry.

An entry's ``build(config, name)`` returns a Flax module ``[B, L, D] -> [B, L, D]`` or ``None``; post- or
pre-LN is the sublayer's choice. Imports no framework.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attention_jax.foundation.registry import Registration, Registry
from attention_jax.models.registry import jax_hook
from attention_jax.models.variants import LayerNormPosition, ModelKind

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

NORM_POSITIONS = ("post", "pre")
"""Where a sublayer's norm can sit: after the residual sum, or on the sublayer's input."""

NORM_EPSILON = 1e-6
"""The ``epsilon`` of every built-in norm (inside the square root)."""

BATCH_NORM_MOMENTUM = 0.99
"""``m`` of batch_norm's running averages, bias-corrected by ``1 - m^t`` (PyTorch's ``momentum=0.01``)."""

STATISTICS_COLLECTION = "batch_stats"
"""The mutable collection a training forward pass writes batch_norm's batch statistics to."""

Build = Callable[["TransformerConfig", str], Any]
"""``build(config, name) -> module``: the Flax module of one norm named ``name`` (``None``: no norm)."""


@dataclasses.dataclass(frozen=True)
class Normalization:
    """One normalisation: its name, how to build it and what it needs (docs/normalization.md).

    ``params_per_norm(d_model)`` counts one norm's parameter leaves; ``per_token`` is False for batch statistics
    (batch_norm), whose packed rows and cached decode steps differ from the full pass in training.
    """

    name: str
    summary: str
    build: Build
    params_per_norm: Callable[[int], int]
    positions: tuple[str, ...] = NORM_POSITIONS
    per_token: bool = True
    settings: type | None = None

    def __post_init__(self) -> None:
        unknown = set(self.positions) - set(NORM_POSITIONS)
        if unknown or not self.positions:
            raise ValueError(f"normalization {self.name!r}: positions must be a non-empty subset of "
                             f"{NORM_POSITIONS}; got {self.positions}.")


def _no_norm(config: TransformerConfig, name: str) -> None:
    return None


NORMALIZATIONS: Registry[Normalization] = Registry("normalization", (
    Normalization(
        name="layer_norm", summary="(x - mean(x)) / sqrt(var(x) + eps) g + b over each token's features "
                                   "(Ba et al., 2016), the paper's",
        build=jax_hook("normalization", "_layer_norm"), params_per_norm=lambda d_model: 2 * d_model),
    Normalization(
        name="rms_norm", summary="x / sqrt(mean(x^2) + eps) g over each token's features (Zhang and Sennrich, "
                                 "2019)",
        build=jax_hook("normalization", "_rms_norm"), params_per_norm=lambda d_model: d_model),
    Normalization(
        name="batch_norm", summary="(x - mu_B) / sqrt(sigma_B^2 + eps) g + b per feature, mu_B and sigma_B^2 over "
                                   "the batch's real tokens (Ioffe and Szegedy, 2015); running averages at "
                                   "evaluation",
        build=jax_hook("normalization", "_batch_norm"), params_per_norm=lambda d_model: 4 * d_model + 1,
        per_token=False),
    Normalization(
        name="none", summary="no normalisation: the residual sum (or the sublayer's output) as it is",
        build=_no_norm, params_per_norm=lambda d_model: 0, positions=("post",)),
))
"""Every normalisation by name (``none`` is ``post`` only: without a norm, pre and post are one model)."""


def normalization(name: str) -> Normalization:
    """Return the registry entry of ``name``.

    Parameters
    ----------
    name : str
        ``config.normalization``.

    Returns
    -------
    Normalization
        Its entry.

    Raises
    ------
    ValueError
        Unknown name (one line, with a did-you-mean).
    """
    return NORMALIZATIONS.lookup(name)


def check_normalization(name: str, *, position: str = "post") -> None:
    """Check that the normalisation exists and is defined at ``position``.

    Parameters
    ----------
    name, position : str
        ``config.normalization`` and ``config.layer_norm_position``.

    Raises
    ------
    ValueError
        Unknown normalisation or position (one line).
    """
    entry = normalization(name)
    if position not in entry.positions:
        allowed = (f"layer_norm_position={entry.positions[0]!r}" if len(entry.positions) == 1
                   else f"layer_norm_position in {entry.positions}")
        raise ValueError(f"normalization={name!r} ({entry.summary}) needs {allowed}; got {position!r}.")


def _norm_params(name: str, *, d_model: int, num_layers: int, model_kind: str = "encoder_decoder",
                position: str = "post") -> int:
    """Parameters of all a model's norms (2 or 3 per layer, plus a final norm per stack when pre-LN)."""
    per_norm = normalization(name).params_per_norm(d_model)
    sublayers, stacks = (2 * num_layers, 1) if model_kind == ModelKind.DECODER_ONLY else (5 * num_layers, 2)
    return per_norm * (sublayers + (stacks if position == LayerNormPosition.PRE else 0))


def _register_normalization(entry: Normalization) -> Registration:
    """Add ``entry`` to :data:`NORMALIZATIONS` (before building a config that names it)."""
    return NORMALIZATIONS.register(entry)
