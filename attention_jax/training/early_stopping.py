"""Early stopping on dev perplexity (rules: docs/checkpoints.md); its state travels in every checkpoint.

Evaluations before ``early_stopping_min_steps`` never count: deep post-LN stacks plateau until the peak rate.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from attention_jax.experiment.sections import RunConfig
from attention_jax.foundation.user_errors import UserInputError

MIN_DEV_PAIRS = 100
"""Fewer dev pairs make early stopping an error: a handful's perplexity is noisier than the improvements."""

STOPPED_EARLY = "early_stopping"
"""``results.json``'s ``stop_reason`` when patience ran out."""
REACHED_NUM_STEPS = "num_train_steps"
"""``results.json``'s ``stop_reason`` when training ran all its steps."""


@dataclasses.dataclass
class _EarlyStopping:
    """The best dev perplexity so far and the evaluations since it."""

    patience: int  # Evaluations without improvement before stopping; 0 never stops.
    min_improvement: float = 0.0  # Relative decrease that resets the count, in [0, 1).
    best_perplexity: float = math.inf
    best_step: int | None = None
    evaluations_since_best: int = 0  # Counted from min_steps on.
    min_steps: int = 0  # Evaluations of earlier steps do not count toward patience.

    def __post_init__(self) -> None:
        if self.patience < 0:
            raise ValueError(f"early_stopping_patience must be >= 0 (0: never stop early); got {self.patience}.")
        if not 0.0 <= self.min_improvement < 1.0:
            raise ValueError("early_stopping_min_improvement must be a fraction in [0, 1) (0.01: dev perplexity "
                             f"must fall by 1% to count as an improvement); got {self.min_improvement}.")
        if self.min_steps < 0:
            raise ValueError(f"early_stopping_min_steps must be >= 0 (0: every evaluation counts toward "
                             f"patience); got {self.min_steps}.")

    @classmethod
    def from_config(cls, config: RunConfig, progress: Mapping[str, Any] | None = None) -> "_EarlyStopping":
        """Return the tracker ``config`` asks for, restored from a checkpoint's bookkeeping when given."""
        return cls._from_progress(config.early_stopping_patience, progress or {},
                                  min_improvement=float(config.early_stopping_min_improvement),
                                  min_steps=config.early_stopping_min_steps)

    def update(self, step: int, perplexity: float) -> bool:
        """Record an evaluation and return whether it is the lowest so far (even by less than ``min_improvement``)."""
        counts = int(step >= self.min_steps)
        if perplexity < self.best_perplexity:
            enough = perplexity < self.best_perplexity * (1.0 - self.min_improvement)  # Always true at the first.
            self.best_perplexity, self.best_step = float(perplexity), step
            self.evaluations_since_best = 0 if enough else self.evaluations_since_best + counts
            return True
        self.evaluations_since_best += counts
        return False

    def stop_description(self) -> str:
        """Return why patience ran out, for the log."""
        by = f" by {100 * self.min_improvement:.1f}%" if self.min_improvement > 0 else ""
        return (f"{self.evaluations_since_best} evaluations without lowering dev perplexity{by} "
                f"(best {self.best_perplexity:.3f} at step {self.best_step})")

    def check_dev_split(self, dev_pairs: int) -> None:
        """Refuse a dev split of ``dev_pairs`` pairs, too small for early stopping, when it is on.

        Raises ``UserInputError``: when ``dev_pairs`` is under :data:`MIN_DEV_PAIRS`.
        """
        if self.patience > 0 and dev_pairs < MIN_DEV_PAIRS:
            raise UserInputError(
                f"early_stopping_patience={self.patience} needs a dev split of at least {MIN_DEV_PAIRS} pairs to "
                f"compare evaluations; this one has {dev_pairs}. Use a larger dev split (config.eval_split), or "
                "set early_stopping_patience=0 and a fixed num_train_steps.")

    @property
    def should_stop(self) -> bool:
        """Whether patience has run out (never when ``patience`` is 0)."""
        return self.patience > 0 and self.evaluations_since_best >= self.patience

    def to_progress(self) -> dict[str, Any]:
        """Return the state as JSON-able checkpoint bookkeeping (``inf`` as ``None``)."""
        finite = math.isfinite(self.best_perplexity)
        return {"best_eval_ppl": self.best_perplexity if finite else None, "best_step": self.best_step,
                "evaluations_since_best": self.evaluations_since_best}

    @classmethod
    def _from_progress(cls, patience: int, progress: Mapping[str, Any], min_improvement: float = 0.0,
                       min_steps: int = 0) -> "_EarlyStopping":
        """Rebuild the tracker from a checkpoint's bookkeeping (``{}``: fresh); ``patience`` may be new."""
        best = progress.get("best_eval_ppl")
        return cls(patience=patience, min_improvement=min_improvement,
                   best_perplexity=math.inf if best is None else float(best),
                   best_step=progress.get("best_step"),
                   evaluations_since_best=int(progress.get("evaluations_since_best", 0)), min_steps=min_steps)
