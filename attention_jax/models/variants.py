"""Named variants without a registry: model kinds and layer-norm positions (``StrEnum``, equal to config strings)."""

from __future__ import annotations

import enum


class ModelKind(enum.StrEnum):
    """What is trained: the paper's encoder-decoder, or a decoder-only language model."""

    ENCODER_DECODER = "encoder_decoder"
    DECODER_ONLY = "decoder_only"


class LayerNormPosition(enum.StrEnum):
    """Where each sublayer's norm sits: ``post`` (the paper's, 3.1) or ``pre`` (with a final norm per stack)."""

    POST = "post"
    PRE = "pre"


def values(variant: type[enum.StrEnum]) -> tuple[str, ...]:
    """Return the members' values, a config field's choices.

    Parameters
    ----------
    variant : type[enum.StrEnum]
        E.g. :class:`ModelKind`.

    Returns
    -------
    tuple[str, ...]
        The values.
    """
    return tuple(member.value for member in variant)
