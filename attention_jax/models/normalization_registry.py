"""The sublayers' normalisations (Section 3.1's LayerNorm and its alternatives), one registry: name -> entry.

An entry's ``build(config, name)`` returns a Flax module ``[B, L, D] -> [B, L, D]`` or ``None``; where the
norm sits (post- or pre-LN) is the sublayer's choice. Imports no framework. Shapes: B batch, L length,
D d_model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attention_jax.models.registry import Registration, Registry, jax_hook
from attention_jax.models.variants import LayerNormPosition, ModelKind

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

NORM_POSITIONS = ("post", "pre")
"""Where a sublayer's norm can sit (``config.layer_norm_position``): after the residual sum, or on the
sublayer's input."""

NORM_EPSILON = 1e-6
"""The ``epsilon`` of every built-in norm (inside the square root)."""

BATCH_NORM_MOMENTUM = 0.99
"""``m`` of batch_norm's running averages: ``running = m running + (1 - m) batch`` each training step with a real
token, bias-corrected by ``1 - m^t`` (Flax's and Keras's default; PyTorch's ``momentum=0.01``)."""

STATISTICS_COLLECTION = "batch_stats"
"""The mutable collection a training forward pass writes batch_norm's batch statistics to; the train step
moves the running averages among the parameters by them
(:func:`attention_jax.models.normalization.with_running_statistics`)."""

Build = Callable[["TransformerConfig", str], Any]
"""``build(config, name) -> module``: the Flax module of one norm named ``name`` (``None``: no norm)."""


@dataclasses.dataclass(frozen=True)
class Normalization:
    """One normalisation: its name, what it computes and what it needs.

    Attributes
    ----------
    name : str
        The value of ``config.normalization``.
    summary : str
        What it computes, one line (error messages and docs quote it).
    build : Build
        The JAX hook (:data:`Build`).
    params_per_norm : callable
        ``d_model -> int``: trained parameters of one norm (2 D for LayerNorm's gain and bias).
    positions : tuple[str, ...]
        The ``layer_norm_position`` values it is defined at (a subset of :data:`NORM_POSITIONS`).
    per_token : bool
        Each token is normalised from its own features alone: a packed row's pairs then equal each pair
        alone, and a cached decode step equals the full pass. False (batch_norm): training normalises
        with statistics over the batch's real tokens, evaluation and decoding with running averages.
    settings : type, optional
        The entry's own settings: a frozen pydantic dataclass,
        set in a config as ``normalization_settings.<name>.<setting>``; ``build`` reads the chosen values
        as ``config.normalization_settings`` (None: it has none).
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
    """No module: the sublayer passes its input through."""
    return None


NORMALIZATIONS: Registry[Normalization] = Registry("normalization", (
    Normalization(
        name="layer_norm", summary="(x - mean(x)) / sqrt(var(x) + eps) g + b over each token's features "
                                   "(Ba et al., 2016), the paper's",
        build=jax_hook("normalization", "layer_norm"), params_per_norm=lambda d_model: 2 * d_model),
    Normalization(
        name="rms_norm", summary="x / sqrt(mean(x^2) + eps) g over each token's features (Zhang and Sennrich, "
                                 "2019)",
        build=jax_hook("normalization", "rms_norm"), params_per_norm=lambda d_model: d_model),
    Normalization(
        name="batch_norm", summary="(x - mu_B) / sqrt(sigma_B^2 + eps) g + b per feature, mu_B and sigma_B^2 over "
                                   "the batch's real tokens (Ioffe and Szegedy, 2015); running averages at "
                                   "evaluation",
        build=jax_hook("normalization", "batch_norm"), params_per_norm=lambda d_model: 4 * d_model + 1,
        per_token=False),
    Normalization(
        name="none", summary="no normalisation: the residual sum (or the sublayer's output) as it is",
        build=_no_norm, params_per_norm=lambda d_model: 0, positions=("post",)),
))
"""Every normalisation by name (a ``Mapping``; :func:`register_normalization` adds to it).

``layer_norm`` (the paper's), ``rms_norm`` (no centring, no bias), ``batch_norm`` (statistics over the batch;
its ``params_per_norm`` counts the running mean, variance and weight it keeps among the parameters
beside its gain and bias) and ``none`` (defined at ``post`` only: without a norm, pre and post are the same model).
"""


def normalization(name: str) -> Normalization:
    """Return the registry entry of ``name``.

    Parameters
    ----------
    name : str
        ``config.normalization``.

    Returns
    -------
    Normalization
        Its entry in :data:`NORMALIZATIONS`.

    Raises
    ------
    ValueError
        One line with a did-you-mean, for an unknown name.
    """
    return NORMALIZATIONS.lookup(name)


def check_normalization(name: str, *, position: str = "post") -> None:
    """Check that the normalisation exists and is defined at the given position.

    Parameters
    ----------
    name : str
        ``config.normalization``.
    position : str
        ``config.layer_norm_position``.

    Raises
    ------
    ValueError
        One line, for an unknown normalisation or position.
    """
    entry = normalization(name)
    if position not in entry.positions:
        allowed = (f"layer_norm_position={entry.positions[0]!r}" if len(entry.positions) == 1
                   else f"layer_norm_position in {entry.positions}")
        raise ValueError(f"normalization={name!r} ({entry.summary}) needs {allowed}; got {position!r}.")


def norm_params(name: str, *, d_model: int, num_layers: int, model_kind: str = "encoder_decoder",
                position: str = "post") -> int:
    """Trained parameters of all the norms of a model (the rest of the parameter count does not change).

    Parameters
    ----------
    name : str
        ``config.normalization``.
    d_model, num_layers : int
        Width and layers per stack.
    model_kind : str
        ``"encoder_decoder"`` (2 norms per encoder layer, 3 per decoder layer) or ``"decoder_only"``
        (2 per layer).
    position : str
        ``config.layer_norm_position``: ``"pre"`` adds a final norm per stack.

    Returns
    -------
    int
        The norms' parameters (batch_norm's running averages included: they are leaves of the parameters).
    """
    per_norm = normalization(name).params_per_norm(d_model)
    sublayers, stacks = (2 * num_layers, 1) if model_kind == ModelKind.DECODER_ONLY else (5 * num_layers, 2)
    return per_norm * (sublayers + (stacks if position == LayerNormPosition.PRE else 0))


def register_normalization(entry: Normalization) -> Registration:
    """Add ``entry`` to :data:`NORMALIZATIONS`, so that ``config.normalization=entry.name`` runs it.

    Parameters
    ----------
    entry : Normalization
        The new normalisation; its name must not be registered already.

    Returns
    -------
    Registration
        ``.undo()`` removes it; ``with register_normalization(entry): ...`` keeps it for the block.

    Notes
    -----
    Register before building a ``TransformerConfig`` that names it (validation reads the registry).
    """
    return NORMALIZATIONS.register(entry)
