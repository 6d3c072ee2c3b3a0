"""Early stopping on dev perplexity: the best evaluation so far, and when to give up.

Training evaluates every ``eval_every_steps``. An evaluation improves when its dev perplexity is below
every earlier one; after ``early_stopping_patience`` evaluations in a row without an improvement the
run stops, with the reason in ``results.json``. The parameters of each improving evaluation are kept in
``WORKDIR/best/`` (the newest ``average_last_checkpoints`` of them): since each improvement beats all
evaluations before it, the newest k kept are exactly the k best evaluations of the run, which is what
averaging "the best k" needs.

The tracker's state travels in every training checkpoint, so a resumed run keeps counting where the
stopped one left off, and a run that stopped early stays stopped when its command is run again.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

MIN_DEV_PAIRS = 100
"""Fewer dev pairs than this make early stopping an error: the perplexity of a handful of sentences
moves by more between evaluations than the improvements that patience waits for."""

STOPPED_EARLY = "early_stopping"
"""``results.json``'s ``stop_reason`` when patience ran out."""
REACHED_NUM_STEPS = "num_train_steps"
"""``results.json``'s ``stop_reason`` when training ran all its steps."""


@dataclasses.dataclass
class EarlyStopping:
    """The best dev perplexity so far and the evaluations since it.

    Attributes
    ----------
    patience : int
        Evaluations without improvement before stopping; 0 never stops (the best is still tracked).
    best_perplexity : float
        Lowest dev perplexity seen (``inf`` before the first evaluation).
    best_step : int or None
        The step of that evaluation.
    evaluations_since_best : int
        Evaluations after the best one, none of them better.
    """

    patience: int
    best_perplexity: float = math.inf
    best_step: int | None = None
    evaluations_since_best: int = 0

    def __post_init__(self) -> None:
        if self.patience < 0:
            raise ValueError(f"early_stopping_patience must be >= 0 (0: never stop early); got {self.patience}.")

    def update(self, step: int, perplexity: float) -> bool:
        """Record an evaluation; return whether it is the best so far.

        Parameters
        ----------
        step : int
            The evaluated step.
        perplexity : float
            Its dev perplexity (a NaN never improves).

        Returns
        -------
        bool
            True when ``perplexity`` is below every earlier one.
        """
        if perplexity < self.best_perplexity:
            self.best_perplexity, self.best_step, self.evaluations_since_best = float(perplexity), step, 0
            return True
        self.evaluations_since_best += 1
        return False

    def check_dev_split(self, dev_pairs: int) -> None:
        """Raise ``ValueError`` when early stopping is on and the dev split is too small to decide it.

        Parameters
        ----------
        dev_pairs : int
            Sentence pairs in the dev split that training evaluates on.
        """
        if self.patience > 0 and dev_pairs < MIN_DEV_PAIRS:
            raise ValueError(
                f"early_stopping_patience={self.patience} needs a dev split of at least {MIN_DEV_PAIRS} pairs to "
                f"compare evaluations; this one has {dev_pairs}. Use a larger dev split (config.eval_split), or "
                "set early_stopping_patience=0 and a fixed num_train_steps.")

    @property
    def should_stop(self) -> bool:
        """Whether patience has run out (never when ``patience`` is 0)."""
        return self.patience > 0 and self.evaluations_since_best >= self.patience

    def to_progress(self) -> dict[str, Any]:
        """The state as JSON-able checkpoint bookkeeping (``inf`` becomes ``None``).

        Returns
        -------
        dict
            ``best_eval_ppl``, ``best_step`` and ``evaluations_since_best``.
        """
        finite = math.isfinite(self.best_perplexity)
        return {"best_eval_ppl": self.best_perplexity if finite else None, "best_step": self.best_step,
                "evaluations_since_best": self.evaluations_since_best}

    @classmethod
    def from_progress(cls, patience: int, progress: Mapping[str, Any]) -> "EarlyStopping":
        """Rebuild the tracker from a checkpoint's bookkeeping (a fresh one when it has none).

        Parameters
        ----------
        patience : int
            ``config.early_stopping_patience`` (it may differ from the stopped run's).
        progress : Mapping[str, Any]
            What :meth:`to_progress` wrote, or ``{}``.

        Returns
        -------
        EarlyStopping
            The restored tracker.
        """
        best = progress.get("best_eval_ppl")
        return cls(patience=patience, best_perplexity=math.inf if best is None else float(best),
                   best_step=progress.get("best_step"),
                   evaluations_since_best=int(progress.get("evaluations_since_best", 0)))
