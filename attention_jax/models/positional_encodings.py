"""The positional encodings (Section 3.5, Table 2 row E): one registry, name -> how the model applies it.

An entry acts on the embeddings, on self-attention's queries and keys, or on its scores (docs/positions.md).
Imports no framework. Shapes: T queries, S keys, H heads, K d_k, V d_v, D d_model, R = 2k + 1.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pydantic

from attention_jax.foundation.registry import Registration, Registry
from attention_jax.models import attention_registry
from attention_jax.models.registry import jax_hook

if TYPE_CHECKING:
    import flax.linen as nn
    import jax

    from attention_jax.experiment.sections import TransformerConfig

    Array = jax.Array


class PositionTarget(enum.Enum):
    """Where a positional encoding acts."""

    EMBEDDINGS = "added to the token embeddings before the first layer (Section 3.5)"
    QUERIES_AND_KEYS = "applied to each attention's queries and keys (rotary encodings)"
    ATTENTION_SCORES = "added to each attention's scores (relative encodings, ALiBi)"


@pydantic.dataclasses.dataclass(frozen=True, config=pydantic.ConfigDict(strict=True))
class RelativeSettings:
    """The relative encoding's own settings (Shaw et al., 2018): ``positional_encoding_settings.relative``."""

    max_distance: int = pydantic.Field(16, description="Offsets j - i clipped to [-k, k] (Shaw et al., 2018: k = 16).",
                                       ge=1)
    add_to_values: bool = pydantic.Field(True, description="Also add the relative embeddings to the values (Shaw et "
                                         "al., Eq. 3).")


@dataclasses.dataclass(frozen=True)
class AttentionPositions:
    """What a self-attention needs of an in-attention encoding: its name and resolved entry settings."""

    encoding: str
    entry_settings: Any = None

    def __post_init__(self) -> None:
        settings = positional_encoding(self.encoding).settings
        if self.entry_settings is None and settings is not None:  # None: the entry's defaults.
            object.__setattr__(self, "entry_settings", settings())


Encoding = Callable[["nn.Module", "Array", "TransformerConfig"], "Array"]
"""``encoding(module, positions, config)``: float32 ``[..., D]``; ``module`` is the bound ``PositionalEncoding``."""

Rotate = Callable[["Array", "Array"], "Array"]

ScoreBias = Callable[["nn.Module", AttentionPositions, "Array", "Array", "Array"], "Array"]
"""``score_bias(module, settings, query, query_positions, key_positions)``: float32, added to ``[B, H, T, S]``."""

ValueTerm = Callable[["nn.Module", AttentionPositions, "Array", "Array", "Array"], "Array | None"]
"""``value_term(module, settings, weights, query_positions, key_positions)``: ``[B, T, H, V]`` or ``None``."""

PositionFlopCount = Callable[..., float]
"""``flops(settings, *, query_len, key_len, key_dim, value_dim)``: a head's added forward FLOPs (models/flops.py)."""


@dataclasses.dataclass(frozen=True)
class PositionalEncodingScheme:
    """One positional encoding: its name, where it acts, how it is computed (docs/extending.md).

    ``target`` picks the hook: ``encoding`` (embeddings), ``rotate`` (queries and keys) or ``score_bias`` (plus
    an optional ``value_term``); ``flops`` counts a self-attention head's added forward FLOPs (``None``: none).
    """

    name: str
    summary: str
    encoding: Encoding | None = None
    target: PositionTarget = PositionTarget.EMBEDDINGS
    has_parameters: bool = False
    rotate: Rotate | None = None
    score_bias: ScoreBias | None = None
    value_term: ValueTerm | None = None
    needs_dot_product: bool = False
    key_dim_multiple: int = 1
    flops: PositionFlopCount | None = None
    settings: type | None = None

    def __post_init__(self) -> None:
        hooks = {PositionTarget.EMBEDDINGS: ("encoding", self.encoding),
                 PositionTarget.QUERIES_AND_KEYS: ("rotate", self.rotate),
                 PositionTarget.ATTENTION_SCORES: ("score_bias", self.score_bias)}
        name, hook = hooks[self.target]
        if hook is None:
            raise ValueError(f"positional encoding {self.name!r} is {self.target.value}: give its {name}.")

    @property
    def adds_to_embeddings(self) -> bool:
        """Whether the model adds this encoding to the embeddings.

        Returns
        -------
        bool
            True for ``EMBEDDINGS`` entries.
        """
        return self.target is PositionTarget.EMBEDDINGS


# --- FLOP counts of the built-in encodings (models/flops.py's convention) ---------------------------

def relative_flops(settings: AttentionPositions, *, query_len: int, key_len: int, key_dim: int,
                   value_dim: int) -> float:
    """Return Shaw et al.'s per-head FLOPs: ``2 T R K + T S``, plus ``2 T S R + 2 T R V + T V`` for values.

    Parameters
    ----------
    settings : AttentionPositions
        Holds :class:`RelativeSettings`.
    query_len, key_len, key_dim, value_dim : int
        ``T``, ``S``, ``K``, ``V``.

    Returns
    -------
    float
        FLOPs of one head.
    """
    distances = 2 * settings.entry_settings.max_distance + 1
    keys = 2 * query_len * distances * key_dim + query_len * key_len
    values = 0
    if settings.entry_settings.add_to_values:
        values = 2 * query_len * key_len * distances + 2 * query_len * distances * value_dim + query_len * value_dim
    return float(keys + values)


def _rotary_flops(settings: AttentionPositions, *, query_len: int, key_len: int, key_dim: int,
                 value_dim: int) -> float:
    """Per-head FLOPs of rotating queries and keys, ``3 (T + S) K``."""
    return float(3 * (query_len + key_len) * key_dim)


def _alibi_flops(settings: AttentionPositions, *, query_len: int, key_len: int, key_dim: int,
                value_dim: int) -> float:
    """Per-head FLOPs of adding ``-m_h |i - j|`` to every score, ``2 T S``."""
    return float(2 * query_len * key_len)


# --- Hooks of the built-in encodings: JAX code, imported on first use ---------------------------------

def sinusoidal_positional_encoding(positions: Array, d_model: int) -> Array:
    """Return the paper's fixed encoding (Section 3.5), imported on first call.

    Parameters
    ----------
    positions : Array
        Integer positions ``[...]``.
    d_model : int
        Encoding width.

    Returns
    -------
    Array
        float32 ``[..., d_model]``.
    """
    return _SINUSOIDAL(positions, d_model)


_SINUSOIDAL = jax_hook("model", "sinusoidal_positional_encoding")

POSITIONAL_ENCODINGS: Registry[PositionalEncodingScheme] = Registry("positional_encoding", (
    PositionalEncodingScheme(name="sinusoidal", summary="fixed sines and cosines of the position (Section 3.5)",
                             encoding=jax_hook("model", "_sinusoidal")),
    PositionalEncodingScheme(name="learned", summary="a learned vector per position (Table 2 row E)",
                             encoding=jax_hook("model", "_learned"), has_parameters=True),
    PositionalEncodingScheme(name="none", summary="no position information (the encoder is then "
                                                  "permutation-equivariant)",
                             encoding=jax_hook("model", "_no_positions")),
    PositionalEncodingScheme(name="relative", summary="learned embeddings of the clipped offset j - i added to "
                                                      "the keys and values (Shaw et al., 2018)",
                             target=PositionTarget.ATTENTION_SCORES, has_parameters=True,
                             score_bias=jax_hook("attention_positions", "_relative_key_bias"),
                             value_term=jax_hook("attention_positions", "_relative_value_term"),
                             needs_dot_product=True, flops=relative_flops, settings=RelativeSettings),
    PositionalEncodingScheme(name="rotary", summary="queries and keys rotated by their positions (Su et al., 2021)",
                             target=PositionTarget.QUERIES_AND_KEYS,
                             rotate=jax_hook("attention_positions", "_rotary_embedding"),
                             needs_dot_product=True, key_dim_multiple=2, flops=_rotary_flops),
    PositionalEncodingScheme(name="alibi", summary="per-head linear biases -m_h |i - j| on the scores (Press et "
                                                   "al., 2022)", target=PositionTarget.ATTENTION_SCORES,
                             score_bias=jax_hook("attention_positions", "_alibi_bias"), flops=_alibi_flops),
))
"""Every positional encoding by name (:func:`register_positional_encoding` adds to it)."""


def positional_encoding(name: str) -> PositionalEncodingScheme:
    """Return the registry entry of ``name``.

    Parameters
    ----------
    name : str
        ``config.positional_encoding``.

    Returns
    -------
    PositionalEncodingScheme
        Its entry.

    Raises
    ------
    ValueError
        Unknown name (one line, with a did-you-mean).
    """
    return POSITIONAL_ENCODINGS.lookup(name)


def check_with_attention(name: str, *, attention_function: str, implementation: str = "einsum",
                         key_dim: int = 2) -> None:
    """Check that the attention settings can apply the encoding.

    Parameters
    ----------
    name, attention_function, implementation : str
        ``config.positional_encoding``, ``config.attention_function`` and ``config.attention_implementation``.
    key_dim : int
        ``d_k``.

    Raises
    ------
    ValueError
        One line naming the fix.
    """
    scheme = positional_encoding(name)
    if scheme.adds_to_embeddings:
        return
    entry = attention_registry.attention_function(attention_function)
    if scheme.needs_dot_product and not entry.uses_dot_product_paths:
        usable = [n for n, e in attention_registry.ATTENTION_FUNCTIONS.items() if e.uses_dot_product_paths]
        raise ValueError(f"positional_encoding={name!r} acts on the dot products q k^T, which attention_function="
                         f"{attention_function!r} does not form: set attention_function to one of {tuple(usable)}.")
    needs_scores = scheme.target is PositionTarget.ATTENTION_SCORES
    if needs_scores and entry.attend is not None:
        usable = [n for n, e in attention_registry.ATTENTION_FUNCTIONS.items() if e.attend is None]
        raise ValueError(f"positional_encoding={name!r} adds to each attention's scores, and attention_function="
                         f"{attention_function!r} forms no scores: set attention_function to one of "
                         f"{tuple(usable)}, or positional_encoding='sinusoidal'.")
    if needs_scores and implementation != attention_registry.AttentionImplementation.EINSUM:
        raise ValueError(f"positional_encoding={name!r} adds to each attention's scores, which the "
                         f"{implementation} kernels do not take: set attention_implementation='einsum' (or use "
                         "positional_encoding='rotary', which runs on every implementation).")
    if key_dim % scheme.key_dim_multiple:
        raise ValueError(f"positional_encoding={name!r} needs key_dim to be a multiple of "
                         f"{scheme.key_dim_multiple} (it turns pairs of components); got key_dim={key_dim}: "
                         "set an even key_dim.")


def _self_attention_positions(config: TransformerConfig) -> AttentionPositions | None:
    """Return what each self-attention gets of the encoding (``None`` unless it acts in attention)."""
    if positional_encoding(config.positional_encoding).adds_to_embeddings:
        return None
    return AttentionPositions(encoding=config.positional_encoding,
                              entry_settings=config.positional_encoding_settings)


def _attention_scheme(settings: AttentionPositions | None) -> PositionalEncodingScheme | None:
    """Return the entry a ``MultiHeadAttention`` applies (``None`` when given none).

    Raises ``ValueError``: an embedding encoding.
    """
    if settings is None:
        return None
    scheme = positional_encoding(settings.encoding)
    if scheme.adds_to_embeddings:
        raise ValueError(f"positional_encoding={settings.encoding!r} is {scheme.target.value}, not applied by "
                         "attention: give MultiHeadAttention positional_encoding=None.")
    return scheme


def register_positional_encoding(scheme: PositionalEncodingScheme) -> Registration:
    """Add ``scheme`` to :data:`POSITIONAL_ENCODINGS`.

    Parameters
    ----------
    scheme : PositionalEncodingScheme
        A new, unregistered name.

    Returns
    -------
    Registration
        ``.undo()`` removes it; usable as a context manager.
    """
    return POSITIONAL_ENCODINGS.register(scheme)

