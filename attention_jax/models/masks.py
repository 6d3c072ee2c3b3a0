"""The model's attention masks: padding, causal, packed segments, restricted windows, per attention function.

:class:`attention_jax.models.model.Transformer` and :class:`attention_jax.models.language_model.LanguageModel`
build their masks here from token validity and the segment ids of packed rows; the mask helpers
themselves (:func:`attention.make_padding_mask`, :func:`attention.make_causal_mask`,
:class:`attention.LocalMask`) live in :mod:`attention_jax.models.attention`. For an attention function
whose registry entry asks for ``structured_masks`` (linear attention) the same masks are returned as an
:class:`attention_functions.StructuredMask` (their parts), which it applies without a ``[T, S]`` matrix.

Shape glossary
--------------
B batch (decoder rows), B' encoder rows (B = B' R when a search's R hypotheses share a sentence's row),
S source length, T target length, L length of a self-attention sequence.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attention_jax.models import attention, attention_functions, attention_registry
from attention_jax.models.transformer_config import TransformerConfig

Array = jax.Array


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
    Padding (id 0) attends nowhere and is attended by nothing, so this mask also contains the
    padding mask. Cross-attention uses it with target queries and source keys: a target pair
    attends only to the source sentence with its own segment id.
    """
    same = query_segmentation[:, None, :, None] == key_segmentation[:, None, None, :]  # [B,1,T,S]
    return jnp.logical_and(same, (query_segmentation != 0)[:, None, :, None])


def self_attention_mask(config: TransformerConfig, valid: Array, *, causal: bool,
                        segmentation: Array | None = None
                        ) -> Array | attention.LocalMask | attention_functions.StructuredMask:
    """Self-attention mask from the ``[B, L]`` token validity: padding, causal if asked, segments.

    Parameters
    ----------
    config : TransformerConfig
        ``attention_window`` and ``attention_function`` are read.
    valid : Array
        Boolean ``[B, L]``: real tokens. ``causal`` forbids later keys (decoder self-attention, 3.2.3);
        ``segmentation`` (packed rows, ``[B, L]``) restricts keys to the query's own segment.

    Returns
    -------
    Array, attention.LocalMask or attention_functions.StructuredMask
        Boolean ``[B, 1, L, L]``; with ``attention_window = r > 0`` a :class:`attention.LocalMask`
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
        return attention.LocalMask(window=window, valid=valid, causal=causal)
    if entry.structured_masks:  # Kept as parts: linear attention applies them in O(L).
        return attention_functions.StructuredMask(query_valid=valid, key_valid=valid, query_segments=segmentation,
                                                  key_segments=segmentation, causal=causal)
    causal_mask = attention.make_causal_mask(valid.shape[1]) if causal else None
    segment_mask = None if segmentation is None else make_segment_mask(segmentation, segmentation)
    return attention.combine_masks(attention.make_padding_mask(valid, valid), causal_mask, segment_mask)


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
        mask = attention.make_padding_mask(targets_valid, inputs_valid)  # [B,1,T,S]
    else:  # A search's hypotheses share their sentence's row of encoded (decode mode only).
        mask = inputs_valid[:, None, None, :]  # [B',1,1,S]
    if targets_segmentation is None:
        return mask
    assert inputs_segmentation is not None  # Both or neither (checked above).
    return attention.combine_masks(mask, make_segment_mask(targets_segmentation, inputs_segmentation))
