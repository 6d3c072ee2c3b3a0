"""Training throughput and MFU over training time only (evaluation, checkpoints and compilation off the clock)."""

from __future__ import annotations

import dataclasses
import math
import time

from attention_jax.training.device_peaks import DevicePeak


@dataclasses.dataclass(frozen=True)
class IntervalRates:
    """The figures of one logging interval (NaN where nothing was timed)."""

    tokens_per_s: float  # Target tokens per second of training time.
    step_time_s: float  # Mean seconds between two steps.
    data_wait_s: float  # Mean seconds per step waiting for the batch (part of the step time).
    steps: int  # Timed steps (those compiling a new shape are not).

    def mfu(self, flops_per_token: float, peak: DevicePeak | None, device_count: int) -> float:
        """Return model FLOPs utilization: ``flops_per_token x tokens/s`` over ``peak x devices``.

        Parameters
        ----------
        flops_per_token : float
            Forward and backward FLOPs per target token.
        peak : DevicePeak or None
            One device's peak.
        device_count : int
            Devices the step runs on.

        Returns
        -------
        float
            A fraction; NaN without a peak or a rate.
        """
        if peak is None or peak.flops_per_s <= 0 or not math.isfinite(self.tokens_per_s):
            return float("nan")
        return flops_per_token * self.tokens_per_s / (peak.flops_per_s * device_count)


class Throughput:
    """Target tokens, steps and data-wait time per second of training time.

    Attributes
    ----------
    total_seconds, total_tokens : float
        The closed intervals' training time and tokens (restored on resume).
    peak : DevicePeak or None
        The peak MFU is computed against.
    """

    def __init__(self) -> None:
        self._running_since: float | None = None
        self._seconds = 0.0
        self._tokens = 0.0
        self._steps = 0
        self._data_wait_s = 0.0
        self.total_seconds = 0.0
        self.total_tokens = 0.0
        self.peak: DevicePeak | None = None

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
        """Count tokens trained on while the clock ran.

        Parameters
        ----------
        tokens : float
            Target tokens.
        """
        self._tokens += tokens

    def add_step(self, data_wait_s: float) -> None:
        """Count one timed step.

        Parameters
        ----------
        data_wait_s : float
            Seconds the host waited for its batch.
        """
        self._steps += 1
        self._data_wait_s += data_wait_s

    def close_interval(self) -> IntervalRates:
        """Return the rates since the last call; a running clock keeps running.

        Returns
        -------
        IntervalRates
            The interval's figures.
        """
        running = self._running_since is not None
        self.pause()
        rates = IntervalRates(
            tokens_per_s=self._tokens / self._seconds if self._seconds > 0 else float("nan"),
            step_time_s=self._seconds / self._steps if self._steps else float("nan"),
            data_wait_s=self._data_wait_s / self._steps if self._steps else float("nan"),
            steps=self._steps)
        self.total_seconds += self._seconds
        self.total_tokens += self._tokens
        self._seconds = self._tokens = self._data_wait_s = 0.0
        self._steps = 0
        if running:
            self.resume()
        return rates

    @property
    def tokens_per_s(self) -> float:
        """Return the tokens per second over the session's closed intervals.

        Returns
        -------
        float
            The rate.
        """
        return self.total_tokens / self.total_seconds if self.total_seconds > 0 else float("nan")
