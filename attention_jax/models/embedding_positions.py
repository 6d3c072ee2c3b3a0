"""The positional encodings added to the embeddings: sinusoidal (Section 3.5), learned (Table 2 row E), none.

A learned table's position at or beyond ``config.max_len`` gets a zero vector (logged once per size).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
from absl import logging

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

Array = jax.Array


def sinusoidal_positional_encoding(positions: Array, d_model: int) -> Array:
    """Return the paper's fixed encoding (Section 3.5), computed on the fly for any position.

    ``PE(pos, 2i) = sin(pos / 10000^(2i / d))``, ``PE(pos, 2i + 1) = cos(pos / 10000^(2i / d))``.

    Parameters
    ----------
    positions : Array
        Integer ``[...]``.
    d_model : int
        Encoding width (even or odd).

    Returns
    -------
    Array
        float32 ``[..., d_model]``.
    """
    pair_index = jnp.arange(0, d_model, 2, dtype=jnp.float32)  # 2i
    inverse_timescale = jnp.power(10000.0, -pair_index / d_model)  # 10000^(-2i/d_model)
    angles = positions[..., None].astype(jnp.float32) * inverse_timescale  # [..., ceil(D/2)]
    encoding = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)  # [..., D/2, 2]
    return encoding.reshape(*positions.shape, -1)[..., :d_model]


def _sinusoidal(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    """Return the ``sinusoidal`` entry's encoding."""
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
    """Return the ``learned`` entry's encoding: row ``p`` of a learned ``[max_len, D]`` table, zeros beyond."""
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
    """Return the ``none`` entry's encoding: zeros."""
    return jnp.zeros((*positions.shape, config.d_model), jnp.float32)
