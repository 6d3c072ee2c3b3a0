"""The named variants that are no registry of implementations: model kinds and layer-norm positions.

Each is a ``StrEnum`` whose members compare equal to the config's plain strings. Imports no framework.
"""

from __future__ import annotations

import enum


class ModelKind(enum.StrEnum):
    """What is trained: the paper's encoder-decoder Transformer, or a decoder-only language model.

    Attributes
    ----------
    ENCODER_DECODER
        :class:`attention_jax.models.model.Transformer`: source sentences translated (the paper).
    DECODER_ONLY
        :class:`attention_jax.models.language_model.LanguageModel`: documents packed into rows, no source.
    """

    ENCODER_DECODER = "encoder_decoder"
    DECODER_ONLY = "decoder_only"


class LayerNormPosition(enum.StrEnum):
    """Where each sublayer's layer normalisation sits.

    Attributes
    ----------
    POST
        ``LayerNorm(x + Dropout(Sublayer(x)))``: the paper's (Section 3.1).
    PRE
        ``x + Dropout(Sublayer(LayerNorm(x)))``, with a final LayerNorm per stack.
    """

    POST = "post"
    PRE = "pre"


def values(variant: type[enum.StrEnum]) -> tuple[str, ...]:
    """The members' values: a config field's choices.

    Parameters
    ----------
    variant : type[enum.StrEnum]
        E.g. :class:`ModelKind`.

    Returns
    -------
    tuple[str, ...]
        E.g. ``("encoder_decoder", "decoder_only")``.
    """
    return tuple(member.value for member in variant)
