"""How to decode: beam size, length penalty, output margin and cache staging (the decoding section).

Training's BLEU, :mod:`attention_jax.decoding.inference` (``translate``, ``evaluate``) and ``plot_attention``
all decode with the :class:`DecodeSettings` that :func:`attention_jax.experiment.sections.build_experiment`
builds once from a checked config; the model's position table is sized with the same margin
(``Experiment.model.max_len``).
"""

from __future__ import annotations

import dataclasses

from attention_jax.foundation.field_declarations import NON_NEGATIVE, POSITIVE, ResumeRule, check_declared, setting


@dataclasses.dataclass(frozen=True)
class DecodeSettings:
    """Decoding settings of Section 6.1: beam 4, length penalty alpha 0.6, at most input + 50 tokens.

    Attributes
    ----------
    beam_size : int
        Beams kept per sentence (1: greedy).
    length_penalty_alpha : float
        GNMT length penalty exponent.
    max_decode_extra_len : int
        Outputs hold at most input length + this.
    cache_stages : int
        Stages in which the key/value cache grows.

    Raises
    ------
    ValueError
        For a value its declaration refuses (a non-positive ``beam_size``, say).

    Notes
    -----
    ``cache_stages``: the key/value cache grows in this many stages
    (:func:`attention_jax.decoding.decode_steps.cache_stage_ends`); 1 sizes it for the longest allowed
    output from the first step. Translations are the same either way; more stages decode faster but
    compile a loop body per stage. Staging pays where most outputs end long before the input + 50 tokens
    the cache is sized for, at the cost of one loop compilation per stage: ``docs/benchmarks.md``
    measures both on a trained run ("History: growing the cache in stages"). Two stages (the default) pay for their
    compile time from about a thousand sentences on there.
    """

    beam_size: int = setting(4, "Beams kept per sentence (1: greedy).", **POSITIVE)
    length_penalty_alpha: float = setting(0.6, "GNMT length penalty ((5 + |Y|) / 6) ** alpha.", **NON_NEGATIVE)
    max_decode_extra_len: int = setting(50, "Outputs hold at most input length + this.", **POSITIVE,
                                        resume=ResumeRule.POSITIONS)
    cache_stages: int = setting(2, "Stages in which the key/value cache grows.", **POSITIVE, old_run_value=2)

    def __post_init__(self) -> None:
        """Check every declared field (:func:`attention_jax.foundation.field_declarations.check_declared`)."""
        check_declared(self, "decoding")

    @property
    def method(self) -> str:
        """Name the search.

        Returns
        -------
        str
            ``"greedy"`` for a beam of one, else ``"beam"``.
        """
        return "greedy" if self.beam_size == 1 else "beam"
