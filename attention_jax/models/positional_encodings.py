"""The positional encodings (Section 3.5, Table 2 row E), one registry: name -> how the model applies it.

``config.positional_encoding`` names an entry of :data:`POSITIONAL_ENCODINGS`; validation
(``TransformerConfig``) and ``model.PositionalEncoding`` (the encoder-decoder's and the language model's
position layer) ask the entry instead of comparing names. Adding an encoding is one entry
(:func:`register_positional_encoding`) plus its tests.

Where an encoding acts (:class:`PositionTarget`): the paper's encodings are added to the embeddings
(``EMBEDDINGS``: ``sinusoidal``, ``learned``, and ``none``); ``rotary`` acts on each self-attention's
queries and keys, ``relative`` and ``alibi`` on its scores (:mod:`attention_jax.models.attention_positions`
holds their equations, references and decisions). What an entry needs of the attention function and its
implementation is data on the entry (``needs_dot_product``, ``target``, ``key_dim_multiple``), checked by
:func:`check_with_attention` in one line naming the fix.

A learned table has ``config.max_len`` rows. A position at or beyond it (decoding longer than the
table) gets a zero vector, never a wrapped or clipped row, and the log says so once per table size.

Shape glossary
--------------
B batch, L length, D d_model.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
from absl import logging

from attention_jax.models import attention_positions, attention_registry
from attention_jax.models.attention_positions import AttentionPositions
from attention_jax.models.registry import Registration, Registry

if TYPE_CHECKING:
    from attention_jax.models.transformer_config import TransformerConfig

Array = jax.Array


class PositionTarget(enum.Enum):
    """Where a positional encoding acts."""

    EMBEDDINGS = "added to the token embeddings before the first layer (Section 3.5)"
    QUERIES_AND_KEYS = "applied to each attention's queries and keys (rotary encodings)"
    ATTENTION_SCORES = "added to each attention's scores (relative encodings, ALiBi)"


Encoding = Callable[[nn.Module, Array, "TransformerConfig"], Array]
"""``encoding(module, positions, config) -> PE``: float32 ``[..., D]`` for integer ``positions`` ``[...]``;
``module`` is the bound ``model.PositionalEncoding`` (the entry's parameters live in its scope)."""

Rotate = Callable[[Array, Array], Array]
"""``rotate(x, positions) -> x``: queries or keys ``[B, T, H, K]`` at integer ``positions`` ``[B|1, T]``."""

ScoreBias = Callable[[nn.Module, AttentionPositions, Array, Array, Array], Array]
"""``score_bias(module, settings, query, query_positions, key_positions)``: float32, broadcastable to
``[B, H, T, S]``, added to the scores; ``module`` is the bound ``MultiHeadAttention``."""

ValueTerm = Callable[[nn.Module, AttentionPositions, Array, Array, Array], "Array | None"]
"""``value_term(module, settings, weights, query_positions, key_positions)``: ``[B, T, H, V]`` added to the
heads (or ``None``), from the ``[B, H, T, S]`` weights that multiply the values."""


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

    def __post_init__(self) -> None:
        hooks = {PositionTarget.EMBEDDINGS: ("encoding", self.encoding),
                 PositionTarget.QUERIES_AND_KEYS: ("rotate", self.rotate),
                 PositionTarget.ATTENTION_SCORES: ("score_bias", self.score_bias)}
        name, hook = hooks[self.target]
        if hook is None:
            raise ValueError(f"positional encoding {self.name!r} is {self.target.value}: give its {name}.")

    @property
    def adds_to_embeddings(self) -> bool:
        """Whether the model adds this encoding to the embeddings (rather than applying it in attention)."""
        return self.target is PositionTarget.EMBEDDINGS


def sinusoidal_positional_encoding(positions: Array, d_model: int) -> Array:
    """The paper's fixed encoding (Section 3.5).

    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)), PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model)).

    Parameters
    ----------
    positions : Array
        Integer positions of any shape ``[...]``.
    d_model : int
        Encoding width (even or odd).

    Returns
    -------
    Array
        float32 ``[..., d_model]``; even channels hold sines, odd channels cosines, interleaved.

    Notes
    -----
    Computed on the fly, so any position works (decoding beyond the training lengths included).
    """
    pair_index = jnp.arange(0, d_model, 2, dtype=jnp.float32)  # 2i
    inverse_timescale = jnp.power(10000.0, -pair_index / d_model)  # 10000^(-2i/d_model)
    angles = positions[..., None].astype(jnp.float32) * inverse_timescale  # [..., ceil(D/2)]
    encoding = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)  # [..., D/2, 2]
    return encoding.reshape(*positions.shape, -1)[..., :d_model]


def _sinusoidal(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    return sinusoidal_positional_encoding(positions, config.d_model)


_TABLES_LOGGED: set[int] = set()
"""Sizes of learned tables whose overrun the log has reported (once per process and size)."""


def _log_beyond_table(last_position: Any, table_rows: int) -> None:
    if table_rows not in _TABLES_LOGGED:
        _TABLES_LOGGED.add(table_rows)
        logging.warning("positional_encoding='learned' was asked for position %d, beyond its table of %d "
                        "positions (max_len + max_decode_extra_len): such positions get a zero position "
                        "vector; raise max_decode_extra_len or decode shorter outputs.", int(last_position),
                        table_rows)


def _learned(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    table = cast(Array, module.param(  # Table 2 row E: one learned vector per position (param unboxes).
        "position_embedding",
        nn.with_logical_partitioning(nn.initializers.normal(stddev=0.02), (None, "embed")),
        (config.max_len, config.d_model),
    ))
    last = jnp.max(positions)
    log = functools.partial(_log_beyond_table, table_rows=config.max_len)
    jax.lax.cond(last >= config.max_len, lambda: jax.debug.callback(log, last), lambda: None)
    return jnp.take(table, positions, axis=0, mode="fill", fill_value=0.0)  # Beyond the table: zeros.


def _no_positions(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    return jnp.zeros((*positions.shape, config.d_model), jnp.float32)


POSITIONAL_ENCODINGS: Registry[PositionalEncodingScheme] = Registry("positional_encoding", (
    PositionalEncodingScheme(name="sinusoidal", summary="fixed sines and cosines of the position (Section 3.5)",
                             encoding=_sinusoidal),
    PositionalEncodingScheme(name="learned", summary="a learned vector per position (Table 2 row E)",
                             encoding=_learned, has_parameters=True, limited_to_max_len=True),
    PositionalEncodingScheme(name="none", summary="no position information (the encoder is then "
                                                  "permutation-equivariant)", encoding=_no_positions),
    PositionalEncodingScheme(name="relative", summary="learned embeddings of the clipped offset j - i added to "
                                                      "the keys and values (Shaw et al., 2018)",
                             target=PositionTarget.ATTENTION_SCORES, has_parameters=True,
                             score_bias=attention_positions.relative_key_bias,
                             value_term=attention_positions.relative_value_term, needs_dot_product=True),
    PositionalEncodingScheme(name="rotary", summary="queries and keys rotated by their positions (Su et al., 2021)",
                             target=PositionTarget.QUERIES_AND_KEYS, rotate=attention_positions.rotary_embedding,
                             needs_dot_product=True, key_dim_multiple=2),
    PositionalEncodingScheme(name="alibi", summary="per-head linear biases -m_h |i - j| on the scores (Press et "
                                                   "al., 2022)", target=PositionTarget.ATTENTION_SCORES,
                             score_bias=attention_positions.alibi_bias),
))
"""Every positional encoding by name (a ``Mapping``; :func:`register_positional_encoding` adds to it)."""


def positional_encoding(name: str) -> PositionalEncodingScheme:
    """The registry entry of ``name``; ``ValueError`` in one line, with a did-you-mean, for an unknown name.

    Parameters
    ----------
    name : str
        ``config.positional_encoding``.

    Returns
    -------
    PositionalEncodingScheme
        Its entry in :data:`POSITIONAL_ENCODINGS`.
    """
    return POSITIONAL_ENCODINGS.lookup(name)


def check_positional_encoding(name: str) -> None:
    """Raise ``ValueError`` (one line, with a did-you-mean) for an unknown encoding.

    Parameters
    ----------
    name : str
        ``config.positional_encoding``.
    """
    positional_encoding(name)


def check_with_attention(name: str, *, attention_function: str, implementation: str = "einsum",
                         key_dim: int = 2) -> None:
    """Raise ``ValueError`` (one line naming the fix) for an encoding the attention settings cannot apply.

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
    if needs_scores and implementation != "einsum":
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
        ``positional_encoding``, ``relative_max_distance`` and ``relative_values`` are read.

    Returns
    -------
    AttentionPositions or None
        The ``MultiHeadAttention.positional_encoding`` of every self-attention (cross-attention gets ``None``).
    """
    if positional_encoding(config.positional_encoding).adds_to_embeddings:
        return None
    return AttentionPositions(encoding=config.positional_encoding,
                              relative_max_distance=config.relative_max_distance,
                              relative_values=config.relative_values)


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

    Notes
    -----
    Register before building a ``TransformerConfig`` that names it (validation reads the registry).
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
