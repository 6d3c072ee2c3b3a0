"""Training throughput: target tokens per second of training time (moved out of ``train.py``)."""

from __future__ import annotations

import time


class Throughput:
    """Target tokens per second of training time (evaluation, checkpoints, compilation excluded).

    Notes
    -----
    :meth:`resume` and :meth:`pause` bracket the timed work; :meth:`close_interval` gives the rate
    since its last call.
    """

    def __init__(self) -> None:
        self._running_since: float | None = None
        self._seconds = 0.0
        self._tokens = 0.0
        self.total_seconds = 0.0
        self.total_tokens = 0.0

    def resume(self) -> None:
        """Start (or continue) the clock."""
        if self._running_since is None:
            self._running_since = time.time()

    def pause(self) -> None:
        """Stop the clock, keeping the time so far."""
        if self._running_since is not None:
            self._seconds += time.time() - self._running_since
            self._running_since = None

    def add_tokens(self, tokens: float) -> None:
        """Count tokens trained on while the clock was running."""
        self._tokens += tokens

    def close_interval(self) -> float:
        """Tokens per second since the last call (NaN if nothing was timed); the clock keeps state."""
        running = self._running_since is not None
        self.pause()
        rate = self._tokens / self._seconds if self._seconds > 0 else float("nan")
        self.total_seconds += self._seconds
        self.total_tokens += self._tokens
        self._seconds = self._tokens = 0.0
        if running:
            self.resume()
        return rate

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second over all closed intervals of the session."""
        return self.total_tokens / self.total_seconds if self.total_seconds > 0 else float("nan")
