"""How to decode: beam size, length penalty, output margin and cache staging (the decoding section).

Training's BLEU, :mod:`attention_jax.decoding.inference` (``translate``, ``evaluate``) and ``plot_attention``
all decode with the :class:`DecodeSettings` that :func:`attention_jax.experiment.sections.build_experiment`
builds once from a checked config; the model's position table is sized with the same margin
(``Experiment.model.max_len``).
"""

from __future__ import annotations

import dataclasses
import numbers


@dataclasses.dataclass(frozen=True)
class DecodeSettings:
    """Decoding settings of Section 6.1: beam 4, length penalty alpha 0.6, at most input + 50 tokens.

    Parameters
    ----------
    beam_size : int
        ``K``, the beams kept per sentence; ``1`` means greedy decoding.
    length_penalty_alpha : float
        Strength of the GNMT length penalty ``((5 + |Y|) / 6) ** alpha``.
    max_decode_extra_len : int
        Outputs hold at most ``input length + max_decode_extra_len`` tokens, EOS included.
    cache_stages : int
        The key/value cache grows in this many stages (:func:`attention_jax.decoding.decode_steps.cache_stage_ends`);
        1 sizes it for the longest allowed output from the first step. Translations are the same
        either way; more stages decode faster but compile a loop body per stage.

    Notes
    -----
    Raises ``ValueError`` for a non-positive ``beam_size``, ``max_decode_extra_len`` or ``cache_stages``.

    Staging pays where most outputs end long before the input + 50 tokens the cache is sized for,
    at the cost of one loop compilation per stage: ``benchmarks/translate.py`` measures both on a
    trained run (figures in its docstring). Two stages (the default) pay for their compile time from
    about a thousand sentences on there.
    """

    beam_size: int = 4
    length_penalty_alpha: float = 0.6
    max_decode_extra_len: int = 50
    cache_stages: int = 2

    def __post_init__(self) -> None:
        """Check the values (positive beam size, margin and number of cache stages)."""
        for name in ("beam_size", "max_decode_extra_len", "cache_stages"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}.")

    @property
    def method(self) -> str:
        """``"greedy"`` for a beam of one, else ``"beam"``."""
        return "greedy" if self.beam_size == 1 else "beam"
