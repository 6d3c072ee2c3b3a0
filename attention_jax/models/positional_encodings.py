"""The positional encodings (Section 3.5, Table 2 row E), one registry: name -> how the model applies it.

An entry acts on the embeddings (``sinusoidal``, ``learned``, ``none``), on self-attention's queries and
keys (``rotary``) or on its scores (``relative``, ``alibi``); see docs/positions.md. Imports no framework.
Shapes: B batch, L length, D d_model, T queries, S keys, H heads, K d_k, V d_v, R = 2k + 1.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pydantic

from attention_jax.models import attention_registry
from attention_jax.models.registry import Registration, Registry, jax_hook

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
    """The relative encoding's own settings (Shaw et al., 2018): ``positional_encoding_settings.relative``.

    Attributes
    ----------
    max_distance : int
        ``k``: offsets ``j - i`` are clipped to ``[-k, k]`` (``2k + 1`` learned embeddings per table).
    add_to_values : bool
        Also add the relative embeddings ``a^V`` to the values (their Eq. 3); False is their Table 3
        ablation, keys only.

    Notes
    -----
    Old runs' top-level ``relative_max_distance`` and ``relative_values`` are read as these
    (:data:`attention_jax.experiment.schema.RENAMED_FIELDS`).
    """

    max_distance: int = pydantic.Field(16, description="Offsets j - i clipped to [-k, k] (Shaw et al., 2018: k = 16).",
                                       ge=1)
    add_to_values: bool = pydantic.Field(True, description="Also add the relative embeddings to the values (Shaw et "
                                         "al., Eq. 3).")


@dataclasses.dataclass(frozen=True)
class AttentionPositions:
    """What a self-attention needs of an encoding that acts inside attention (a module attribute).

    Attributes
    ----------
    encoding : str
        ``config.positional_encoding``, a name in :data:`POSITIONAL_ENCODINGS`.
    entry_settings : Any
        The entry's own settings dataclass (:class:`RelativeSettings` for ``relative``), or None for an
        entry without settings; None given for an entry with settings means its defaults.
    """

    encoding: str
    entry_settings: Any = None

    def __post_init__(self) -> None:
        settings = positional_encoding(self.encoding).settings
        if self.entry_settings is None and settings is not None:  # None: the entry's defaults.
            object.__setattr__(self, "entry_settings", settings())


Encoding = Callable[["nn.Module", "Array", "TransformerConfig"], "Array"]
"""``encoding(module, positions, config) -> PE``: float32 ``[..., D]`` for integer ``positions`` ``[...]``;
``module`` is the bound ``model.PositionalEncoding`` (the entry's parameters live in its scope)."""

Rotate = Callable[["Array", "Array"], "Array"]
"""``rotate(x, positions) -> x``: queries or keys ``[B, T, H, K]`` at integer ``positions`` ``[B|1, T]``."""

ScoreBias = Callable[["nn.Module", AttentionPositions, "Array", "Array", "Array"], "Array"]
"""``score_bias(module, settings, query, query_positions, key_positions)``: float32, broadcastable to
``[B, H, T, S]``, added to the scores; ``module`` is the bound ``MultiHeadAttention``."""

ValueTerm = Callable[["nn.Module", AttentionPositions, "Array", "Array", "Array"], "Array | None"]
"""``value_term(module, settings, weights, query_positions, key_positions)``: ``[B, T, H, V]`` added to the
heads (or ``None``), from the ``[B, H, T, S]`` weights that multiply the values."""

PositionFlopCount = Callable[..., float]
"""Forward FLOPs the encoding adds to one head of one self-attention, by ``models/flops.py``'s convention:
``flops(settings, *, query_len, key_len, key_dim, value_dim) -> float`` (``settings``: :class:`AttentionPositions`)."""


@dataclasses.dataclass(frozen=True)
class PositionalEncodingScheme:
    """One positional encoding: its name, where it acts, how it is computed.

    Attributes
    ----------
    name : str
        The value of ``config.positional_encoding``.
    summary : str
        What it is, one line.
    target : PositionTarget
        Where it acts; ``EMBEDDINGS``: ``model.PositionalEncoding`` adds ``encoding`` to the embeddings;
        the others act in each self-attention (cross-attention has no common position frame).
    encoding : Encoding, optional
        ``EMBEDDINGS``: the encoding of integer positions (:data:`Encoding`).
    has_parameters : bool
        It is learned: under the position layer (``position_embedding``) or each self-attention (relative).
    limited_to_max_len : bool
        A table of ``config.max_len`` rows: positions at or beyond it have no encoding.
    rotate : Rotate, optional
        ``QUERIES_AND_KEYS``: applied to the queries and keys (:data:`Rotate`); any implementation.
    score_bias : ScoreBias, optional
        ``ATTENTION_SCORES``: added to the ``[T, S]`` scores (:data:`ScoreBias`): einsum only, and an
        attention function that forms scores (no ``attend``).
    value_term : ValueTerm, optional
        ``ATTENTION_SCORES``: added to the heads (:data:`ValueTerm`).
    needs_dot_product : bool
        It acts on ``q k^T`` (rotary, relative keys): only the dot-product attention functions.
    key_dim_multiple : int
        ``key_dim`` must be a multiple of this (rotary: 2, it turns pairs of components).
    flops : PositionFlopCount, optional
        What it adds to each self-attention head's forward FLOPs (:data:`PositionFlopCount`); ``None``
        counts nothing (the embedding encodings: an add per embedding component, once per sequence, is
        left out as the other elementwise terms are).
    settings : type, optional
        The entry's own settings: a frozen :func:`pydantic.dataclasses.dataclass`
        (``relative``: :class:`RelativeSettings`), set in a config as
        ``positional_encoding_settings.<name>.<setting>`` and given to the hooks as
        ``AttentionPositions.entry_settings``; None: it has none.
    """

    name: str
    summary: str
    encoding: Encoding | None = None
    target: PositionTarget = PositionTarget.EMBEDDINGS
    has_parameters: bool = False
    limited_to_max_len: bool = False
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
        """Whether the model adds this encoding to the embeddings (rather than applying it in attention).

        Returns
        -------
        bool
            True for ``EMBEDDINGS`` entries.
        """
        return self.target is PositionTarget.EMBEDDINGS


# --- FLOP counts of the built-in encodings (models/flops.py's convention) ---------------------------

def relative_flops(settings: AttentionPositions, *, query_len: int, key_len: int, key_dim: int,
                   value_dim: int) -> float:
    """Shaw et al.'s terms as ``attention_positions`` computes them, per head: ``2 T R K + T S`` (+ values).

    Parameters
    ----------
    settings : AttentionPositions
        ``entry_settings.max_distance`` (``k``, ``R = 2k + 1``) and ``entry_settings.add_to_values``
        (:class:`RelativeSettings`).
    query_len, key_len, key_dim, value_dim : int
        ``T``, ``S``, ``K``, ``V``.

    Returns
    -------
    float
        FLOPs of one head.

    Notes
    -----
    Values add ``2 T S R`` (the one-hot ``[T, S, R]`` product, zeros included) ``+ 2 T R V + T V``.
    """
    distances = 2 * settings.entry_settings.max_distance + 1
    keys = 2 * query_len * distances * key_dim + query_len * key_len
    values = 0
    if settings.entry_settings.add_to_values:
        values = 2 * query_len * key_len * distances + 2 * query_len * distances * value_dim + query_len * value_dim
    return float(keys + values)


def rotary_flops(settings: AttentionPositions, *, query_len: int, key_len: int, key_dim: int,
                 value_dim: int) -> float:
    """Rotating the queries and keys, per head: 4 multiplies and 2 adds a pair, ``3 (T + S) K``.

    Parameters
    ----------
    settings : AttentionPositions
        Not used.
    query_len, key_len, key_dim, value_dim : int
        ``T``, ``S``, ``K``, ``V`` (``V`` not used).

    Returns
    -------
    float
        FLOPs of one head.
    """
    return float(3 * (query_len + key_len) * key_dim)


def alibi_flops(settings: AttentionPositions, *, query_len: int, key_len: int, key_dim: int,
                value_dim: int) -> float:
    """``-m_h |i - j|`` formed and added to every score, per head: ``2 T S``.

    Parameters
    ----------
    settings : AttentionPositions
        Not used.
    query_len, key_len, key_dim, value_dim : int
        ``T``, ``S`` (``K`` and ``V`` not used).

    Returns
    -------
    float
        FLOPs of one head.
    """
    return float(2 * query_len * key_len)


# --- Hooks of the built-in encodings: JAX code, imported on first use ---------------------------------

def sinusoidal_positional_encoding(positions: Array, d_model: int) -> Array:
    """The paper's fixed encoding (Section 3.5), float32 ``[..., d_model]`` of integer ``positions`` ``[...]``.

    Parameters
    ----------
    positions : Array
        Integer positions of any shape.
    d_model : int
        Encoding width.

    Returns
    -------
    Array
        :func:`attention_jax.models.embedding_positions.sinusoidal_positional_encoding` (its docstring has
        the equations), imported on the first call.
    """
    return _SINUSOIDAL(positions, d_model)


_SINUSOIDAL = jax_hook("embedding_positions", "sinusoidal_positional_encoding")

POSITIONAL_ENCODINGS: Registry[PositionalEncodingScheme] = Registry("positional_encoding", (
    PositionalEncodingScheme(name="sinusoidal", summary="fixed sines and cosines of the position (Section 3.5)",
                             encoding=jax_hook("embedding_positions", "sinusoidal")),
    PositionalEncodingScheme(name="learned", summary="a learned vector per position (Table 2 row E)",
                             encoding=jax_hook("embedding_positions", "learned"), has_parameters=True,
                             limited_to_max_len=True),
    PositionalEncodingScheme(name="none", summary="no position information (the encoder is then "
                                                  "permutation-equivariant)",
                             encoding=jax_hook("embedding_positions", "no_positions")),
    PositionalEncodingScheme(name="relative", summary="learned embeddings of the clipped offset j - i added to "
                                                      "the keys and values (Shaw et al., 2018)",
                             target=PositionTarget.ATTENTION_SCORES, has_parameters=True,
                             score_bias=jax_hook("attention_positions", "relative_key_bias"),
                             value_term=jax_hook("attention_positions", "relative_value_term"),
                             needs_dot_product=True, flops=relative_flops, settings=RelativeSettings),
    PositionalEncodingScheme(name="rotary", summary="queries and keys rotated by their positions (Su et al., 2021)",
                             target=PositionTarget.QUERIES_AND_KEYS,
                             rotate=jax_hook("attention_positions", "rotary_embedding"),
                             needs_dot_product=True, key_dim_multiple=2, flops=rotary_flops),
    PositionalEncodingScheme(name="alibi", summary="per-head linear biases -m_h |i - j| on the scores (Press et "
                                                   "al., 2022)", target=PositionTarget.ATTENTION_SCORES,
                             score_bias=jax_hook("attention_positions", "alibi_bias"), flops=alibi_flops),
))
"""Every positional encoding by name (a ``Mapping``; :func:`register_positional_encoding` adds to it)."""


def positional_encoding(name: str) -> PositionalEncodingScheme:
    """Return the registry entry of ``name``.

    Parameters
    ----------
    name : str
        ``config.positional_encoding``.

    Returns
    -------
    PositionalEncodingScheme
        Its entry in :data:`POSITIONAL_ENCODINGS`.

    Raises
    ------
    ValueError
        One line with a did-you-mean, for an unknown name.
    """
    return POSITIONAL_ENCODINGS.lookup(name)


def check_positional_encoding(name: str) -> None:
    """Check that the encoding exists.

    Parameters
    ----------
    name : str
        ``config.positional_encoding``.

    Raises
    ------
    ValueError
        One line with a did-you-mean, for an unknown encoding.
    """
    positional_encoding(name)


def check_with_attention(name: str, *, attention_function: str, implementation: str = "einsum",
                         key_dim: int = 2) -> None:
    """Check that the attention settings can apply the encoding.

    Parameters
    ----------
    name : str
        ``config.positional_encoding``.
    attention_function : str
        ``config.attention_function``: ``needs_dot_product`` entries need a dot-product function;
        ``ATTENTION_SCORES`` entries one that forms scores (no ``attend``, so not ``linear``).
    implementation : str
        ``config.attention_implementation``: ``ATTENTION_SCORES`` entries need ``einsum``.
    key_dim : int
        ``d_k``: a multiple of the entry's ``key_dim_multiple``.

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


def self_attention_positions(config: TransformerConfig) -> AttentionPositions | None:
    """What each self-attention is given of ``config``'s encoding: ``None`` unless it acts inside attention.

    Parameters
    ----------
    config : TransformerConfig
        ``positional_encoding`` and ``positional_encoding_settings`` (the entry's settings) are read.

    Returns
    -------
    AttentionPositions or None
        The ``MultiHeadAttention.positional_encoding`` of every self-attention (cross-attention gets ``None``).
    """
    if positional_encoding(config.positional_encoding).adds_to_embeddings:
        return None
    return AttentionPositions(encoding=config.positional_encoding,
                              entry_settings=config.positional_encoding_settings)


def attention_scheme(settings: AttentionPositions | None) -> PositionalEncodingScheme | None:
    """The registry entry a ``MultiHeadAttention`` applies, or ``None`` when it is given no encoding.

    Parameters
    ----------
    settings : AttentionPositions or None
        ``MultiHeadAttention.positional_encoding``.

    Returns
    -------
    PositionalEncodingScheme or None
        An entry that acts inside attention (an embedding encoding is refused in one line).
    """
    if settings is None:
        return None
    scheme = positional_encoding(settings.encoding)
    if scheme.adds_to_embeddings:
        raise ValueError(f"positional_encoding={settings.encoding!r} is {scheme.target.value}, not applied by "
                         "attention: give MultiHeadAttention positional_encoding=None.")
    return scheme


def register_positional_encoding(scheme: PositionalEncodingScheme) -> Registration:
    """Add ``scheme`` to :data:`POSITIONAL_ENCODINGS`, so that ``config.positional_encoding=scheme.name`` runs it.

    Parameters
    ----------
    scheme : PositionalEncodingScheme
        The new encoding; its name must not be registered already.

    Returns
    -------
    Registration
        ``.undo()`` removes it; as a context manager, ``with register_positional_encoding(scheme): ...``
        keeps it for the block only.
    """
    return POSITIONAL_ENCODINGS.register(scheme)


def encode_positions(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    """The encoding ``[..., D]`` of integer ``positions`` under ``config.positional_encoding``.

    Parameters
    ----------
    module : nn.Module
        The bound ``model.PositionalEncoding`` calling it.
    positions : Array
        Integer positions ``[...]``.
    config : TransformerConfig
        ``positional_encoding``, ``d_model`` and ``max_len`` are read.

    Returns
    -------
    Array
        float32 ``[..., D]``.
    """
    encoding = positional_encoding(config.positional_encoding).encoding
    assert encoding is not None  # Called for EMBEDDINGS schemes only, which __post_init__ gives an encoding.
    return encoding(module, positions, config)
