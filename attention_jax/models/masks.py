"""The model's attention masks: padding, causal, packed segments, restricted windows, per attention function.

Shapes: B decoder rows, B' encoder rows (B = B' R when R hypotheses share a sentence), S source, T target,
L self-attention length.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, overload

import flax.struct
import jax
import jax.numpy as jnp

from attention_jax.models import attention_functions, attention_registry

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

Array = jax.Array


def make_padding_mask(query_valid: Array, key_valid: Array) -> Array:
    """Return the mask letting valid queries attend to valid keys.

    Parameters
    ----------
    query_valid, key_valid : Array
        Boolean ``[B, T]`` and ``[B, S]`` real tokens.

    Returns
    -------
    Array
        Boolean ``[B, 1, T, S]``.
    """
    return jnp.logical_and(query_valid[:, None, :, None], key_valid[:, None, None, :])


def make_causal_mask(length: int) -> Array:
    """Return the mask letting position ``i`` attend to ``j <= i`` (3.2.3).

    Parameters
    ----------
    length : int
        ``T``.

    Returns
    -------
    Array
        Boolean lower-triangular ``[1, 1, T, T]``.
    """
    positions = jnp.arange(length)
    return (positions[None, :] <= positions[:, None])[None, None]


def _make_local_mask(query_positions: Array, key_positions: Array, window: int) -> Array:
    """Boolean ``[1, 1, T, S]``: ``|query - key| <= window`` (Table 1)."""
    distance = jnp.abs(query_positions[:, None] - key_positions[None, :])
    return (distance <= window)[None, None]


@overload
def combine_masks(first: Array, /, *masks: Array | None) -> Array: ...  # numpydoc ignore=GL08
@overload
def combine_masks(*masks: Array | None) -> Array | None: ...  # numpydoc ignore=GL08
def combine_masks(*masks: Array | None) -> Array | None:
    """Return the logical AND of the masks that are not ``None``.

    Parameters
    ----------
    *masks : Array or None
        Broadcastable boolean masks.

    Returns
    -------
    Array or None
        The conjunction; ``None`` when all are ``None``.
    """
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    return functools.reduce(jnp.logical_and, present)


def _check_window(window: int) -> None:
    """Check that a restricted-attention window is a positive ``int`` (not ``bool``).

    Raises ``ValueError``: any other value (one line).
    """
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(
            f"window must be a positive integer r (keys at most r positions away); got {window!r}. "
            "Use full attention (no window) for r = 0."
        )


@flax.struct.dataclass
class LocalMask:
    """Restricted self-attention mask (Table 1) in O(L) memory: ``|i - j| <= window``, valid, causal.

    A pytree; ``window`` and ``causal`` are static, ``valid`` is boolean ``[B, L]`` or ``None`` (all).
    """

    window: int = flax.struct.field(pytree_node=False)
    valid: Array | None = None
    causal: bool = flax.struct.field(pytree_node=False, default=False)

    def to_dense(self, length: int) -> Array:
        """Return the equivalent boolean mask ``[B or 1, 1, L, L]``.

        Parameters
        ----------
        length : int
            ``L``.

        Returns
        -------
        Array
            The dense mask.
        """
        _check_window(self.window)
        positions = jnp.arange(length)
        padding = make_padding_mask(self.valid, self.valid) if self.valid is not None else None
        causal = make_causal_mask(length) if self.causal else None
        return combine_masks(_make_local_mask(positions, positions, self.window), padding, causal)


def _make_segment_mask(query_segmentation: Array, key_segmentation: Array) -> Array:
    """Return the mask keeping attention within a packed pair (equal, non-zero ids; contains padding).

    Integer pair ids ``[B, T]`` and ``[B, S]`` (0 = pad) to a boolean ``[B, 1, T, S]``.
    """
    same = query_segmentation[:, None, :, None] == key_segmentation[:, None, None, :]  # [B,1,T,S]
    return jnp.logical_and(same, (query_segmentation != 0)[:, None, :, None])


def _self_attention_mask(config: TransformerConfig, valid: Array, *, causal: bool,
                        segmentation: Array | None = None
                        ) -> Array | LocalMask | attention_functions.StructuredMask:
    """Return the self-attention mask: padding, causal if asked, segments.

    Dense ``[B, 1, L, L]``; a ``LocalMask`` when ``attention_window > 0``; parts for ``structured_masks`` entries.

    Raises ``ValueError``: packed rows with a window or an entry without packing.
    """
    entry = attention_registry.attention_function(config.attention_function)
    if segmentation is not None and not entry.supports_packing:
        raise ValueError(f"attention_function={config.attention_function!r} takes no packed rows (segment ids): "
                         "set packing=False.")
    window = config.attention_window
    if window > 0:
        if segmentation is not None:
            raise ValueError(f"Packed batches (segment ids) need full attention; attention_window="
                             f"{window} has no segment mask. Set attention_window=0 or packing=False.")
        return LocalMask(window=window, valid=valid, causal=causal)
    if entry.structured_masks:  # Kept as parts: linear attention applies them in O(L).
        return attention_functions.StructuredMask(query_valid=valid, key_valid=valid, query_segments=segmentation,
                                                  key_segments=segmentation, causal=causal)
    causal_mask = make_causal_mask(valid.shape[1]) if causal else None
    segment_mask = None if segmentation is None else _make_segment_mask(segmentation, segmentation)
    return combine_masks(make_padding_mask(valid, valid), causal_mask, segment_mask)


def _cross_attention_mask(config: TransformerConfig, targets_valid: Array, inputs_valid: Array, *,
                         targets_segmentation: Array | None = None, inputs_segmentation: Array | None = None
                         ) -> Array | attention_functions.StructuredMask:
    """Return the encoder-decoder mask: real target queries to real source keys of the same pair.

    Valid flags ``[B, T]`` and ``[B, S]`` (``[B', S]`` for shared rows) to a boolean ``[B, 1, T, S]``
    (``[B', 1, 1, S]``) or its parts.

    Raises ``ValueError``: only one of the segmentations given.
    """
    if (inputs_segmentation is None) != (targets_segmentation is None):
        raise ValueError("Packed batches need both inputs_segmentation and targets_segmentation.")
    if attention_registry.attention_function(config.attention_function).structured_masks:  # Parts: O(S).
        return attention_functions.StructuredMask(
            query_valid=targets_valid, key_valid=inputs_valid, query_segments=targets_segmentation,
            key_segments=inputs_segmentation)
    if targets_valid.shape[0] == inputs_valid.shape[0]:
        mask = make_padding_mask(targets_valid, inputs_valid)  # [B,1,T,S]
    else:  # A search's hypotheses share their sentence's row of encoded (decode mode only).
        mask = inputs_valid[:, None, None, :]  # [B',1,1,S]
    if targets_segmentation is None:
        return mask
    assert inputs_segmentation is not None  # Both or neither (checked above).
    return combine_masks(mask, _make_segment_mask(targets_segmentation, inputs_segmentation))
