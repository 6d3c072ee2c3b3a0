"""The model's attention masks: padding, causal, packed segments, restricted windows, per attention function.

For an entry with ``structured_masks`` (linear attention) the masks come as an
``attention_functions.StructuredMask``. Shapes: B decoder rows, B' encoder rows (B = B' R when R
hypotheses share a sentence), S source length, T target length, L self-attention length.
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
    """Mask that lets valid queries attend to valid keys.

    Parameters
    ----------
    query_valid : Array
        Boolean ``[B, T]``: which query positions are real tokens.
    key_valid : Array
        Boolean ``[B, S]``: which key positions are real tokens.

    Returns
    -------
    Array
        Boolean ``[B, 1, T, S]``, ``True`` where both the query and the key are valid.
    """
    return jnp.logical_and(query_valid[:, None, :, None], key_valid[:, None, None, :])


def make_causal_mask(length: int) -> Array:
    """Mask that lets position ``i`` attend to positions ``j <= i`` (decoder self-attention, 3.2.3).

    Parameters
    ----------
    length : int
        Sequence length ``T``.

    Returns
    -------
    Array
        Boolean ``[1, 1, T, T]``, lower triangular including the diagonal.
    """
    positions = jnp.arange(length)
    return (positions[None, :] <= positions[:, None])[None, None]


def make_local_mask(query_positions: Array, key_positions: Array, window: int) -> Array:
    """Mask of restricted self-attention: a query attends to keys at most ``window`` positions away.

    Parameters
    ----------
    query_positions : Array
        Integer ``[T]`` positions of the queries.
    key_positions : Array
        Integer ``[S]`` positions of the keys.
    window : int
        The neighbourhood size ``r`` of Table 1's "self-attention (restricted)" row; must be > 0.

    Returns
    -------
    Array
        Boolean ``[1, 1, T, S]``, ``True`` where ``|query - key| <= window``.

    Notes
    -----
    Combined with :func:`make_causal_mask` it gives a causal window of ``window + 1`` keys.
    """
    distance = jnp.abs(query_positions[:, None] - key_positions[None, :])
    return (distance <= window)[None, None]


@overload
def combine_masks(first: Array, /, *masks: Array | None) -> Array: ...  # numpydoc ignore=GL08
@overload
def combine_masks(*masks: Array | None) -> Array | None: ...  # numpydoc ignore=GL08
def combine_masks(*masks: Array | None) -> Array | None:
    """Merge boolean masks with a logical AND, ignoring ``None``.

    Parameters
    ----------
    *masks : Array or None
        Boolean masks broadcastable to a common shape.

    Returns
    -------
    Array or None
        Their conjunction, or ``None`` when every mask is ``None``.
    """
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    return functools.reduce(jnp.logical_and, present)


def check_window(window: int) -> None:
    """Refuse a restricted-attention window that is not a positive integer.

    Parameters
    ----------
    window : int
        The neighbourhood size ``r`` of restricted self-attention.

    Raises
    ------
    ValueError
        One line naming the value, when ``window`` is not an ``int`` (``bool`` included) or is ``<= 0``.
    """
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(
            f"window must be a positive integer r (keys at most r positions away); got {window!r}. "
            "Use full attention (no window) for r = 0."
        )


@flax.struct.dataclass
class LocalMask:
    """Mask of restricted self-attention (Table 1), kept in O(L) memory instead of a dense ``[L, L]``.

    Position ``i`` may attend to position ``j`` when ``|i - j| <= window``, both are valid tokens,
    and (if ``causal``) ``j <= i``.

    Attributes
    ----------
    window : int
        The neighbourhood size ``r`` (> 0); static (not traced).
    valid : Array, optional
        Boolean ``[B, L]``: which positions are real tokens (padding mask of both queries and keys).
        ``None`` means all.
    causal : bool
        Also forbid attending to later positions (decoder self-attention); static.

    Notes
    -----
    A pytree (``flax.struct``); the einsum path computes it blockwise, others use :meth:`to_dense`.
    """

    window: int = flax.struct.field(pytree_node=False)
    valid: Array | None = None
    causal: bool = flax.struct.field(pytree_node=False, default=False)

    def to_dense(self, length: int) -> Array:
        """The equivalent boolean mask ``[B or 1, 1, L, L]`` for a sequence of ``length`` positions.

        Parameters
        ----------
        length : int
            Sequence length ``L`` (must match ``valid``'s second axis when given).

        Returns
        -------
        Array
            The conjunction of the window, padding and causal masks.
        """
        check_window(self.window)
        positions = jnp.arange(length)
        padding = make_padding_mask(self.valid, self.valid) if self.valid is not None else None
        causal = make_causal_mask(length) if self.causal else None
        return combine_masks(make_local_mask(positions, positions, self.window), padding, causal)


def make_segment_mask(query_segmentation: Array, key_segmentation: Array) -> Array:
    """Mask that keeps attention within one packed pair: query and key carry the same segment id.

    Parameters
    ----------
    query_segmentation : Array
        Integer ``[B, T]`` segment ids of the queries (1, 2, ... per pair; 0 = padding).
    key_segmentation : Array
        Integer ``[B, S]`` segment ids of the keys.

    Returns
    -------
    Array
        Boolean ``[B, 1, T, S]``, ``True`` where both ids are equal and non-zero.

    Notes
    -----
    Padding (id 0) attends nowhere and is attended by nothing, so this mask contains the padding mask.
    """
    same = query_segmentation[:, None, :, None] == key_segmentation[:, None, None, :]  # [B,1,T,S]
    return jnp.logical_and(same, (query_segmentation != 0)[:, None, :, None])


def self_attention_mask(config: TransformerConfig, valid: Array, *, causal: bool,
                        segmentation: Array | None = None
                        ) -> Array | LocalMask | attention_functions.StructuredMask:
    """Self-attention mask from the ``[B, L]`` token validity: padding, causal if asked, segments.

    Parameters
    ----------
    config : TransformerConfig
        ``attention_window`` and ``attention_function`` are read.
    valid : Array
        Boolean ``[B, L]``: real tokens.
    causal : bool
        Forbid later keys (decoder self-attention, 3.2.3).
    segmentation : Array, optional
        ``[B, L]`` segment ids of packed rows: keys restricted to the query's own segment.

    Returns
    -------
    Array, LocalMask or attention_functions.StructuredMask
        Boolean ``[B, 1, L, L]``; with ``attention_window = r > 0`` a :class:`LocalMask`
        (``|i - j| <= r``), computed blockwise in O(r n d) by the einsum attention (Table 1); with
        an attention function with ``structured_masks`` (linear) the same mask as an
        ``attention_functions.StructuredMask``.
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
    segment_mask = None if segmentation is None else make_segment_mask(segmentation, segmentation)
    return combine_masks(make_padding_mask(valid, valid), causal_mask, segment_mask)


def cross_attention_mask(config: TransformerConfig, targets_valid: Array, inputs_valid: Array, *,
                         targets_segmentation: Array | None = None, inputs_segmentation: Array | None = None
                         ) -> Array | attention_functions.StructuredMask:
    """Encoder-decoder attention mask: real target queries to real source keys of the same pair (3.2.3).

    Parameters
    ----------
    config : TransformerConfig
        ``attention_function`` is read.
    targets_valid : Array
        Boolean ``[B, T]``: decoder positions holding real tokens.
    inputs_valid : Array
        Boolean ``[B, S]``: real source tokens; in decode mode ``[B', S]`` with ``B = B' R`` (a search's
        hypotheses share their sentence's row of the encoder output).
    targets_segmentation, inputs_segmentation : Array, optional
        Integer ``[B, T]`` and ``[B, S]`` pair ids of packed rows (give both or neither).

    Returns
    -------
    Array or attention_functions.StructuredMask
        Boolean ``[B, 1, T, S]`` (``[B', 1, 1, S]`` for shared rows: the source padding only), or the
        same mask as parts for linear attention.
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
    return combine_masks(mask, make_segment_mask(targets_segmentation, inputs_segmentation))
