"""Training throughput: target tokens per second, step time, data wait and MFU over training time.

Evaluation, checkpoints and compilation are kept out of the clock (:meth:`Throughput.pause`), so the
figures are those of the train steps alone.
"""

from __future__ import annotations

import dataclasses
import math
import time

from attention_jax.training.device_peaks import DevicePeak


@dataclasses.dataclass(frozen=True)
class IntervalRates:
    """The figures of one logging interval (NaN where nothing was timed).

    Attributes
    ----------
    tokens_per_s : float
        Target tokens per second of training time.
    step_time_s : float
        Mean seconds of training time per step (host and device: the time between two steps).
    data_wait_s : float
        Mean seconds per step the host waited for the input pipeline's next batch (part of the step time).
    steps : int
        Timed steps in the interval (steps that compiled a new shape are not timed).
    """

    tokens_per_s: float
    step_time_s: float
    data_wait_s: float
    steps: int

    def mfu(self, flops_per_token: float, peak: DevicePeak | None, device_count: int) -> float:
        """Model FLOPs utilization: ``flops_per_token x tokens/s`` over ``peak x devices``.

        Parameters
        ----------
        flops_per_token : float
            Model FLOPs (forward + backward) per target token
            (:func:`attention_jax.models.flops.training_flops` of one token).
        peak : DevicePeak or None
            The peak of one device (``None``: NaN).
        device_count : int
            Devices the step runs on.

        Returns
        -------
        float
            A fraction (0.25 is 25%); NaN without a peak or a rate.
        """
        if peak is None or peak.flops_per_s <= 0 or not math.isfinite(self.tokens_per_s):
            return float("nan")
        return flops_per_token * self.tokens_per_s / (peak.flops_per_s * device_count)


class Throughput:
    """Target tokens, steps and data-wait time per second of training time.

    Attributes
    ----------
    total_seconds, total_tokens : float
        The closed intervals' training time and tokens (a resumed run restores them).
    peak : DevicePeak or None
        The peak that MFU is computed against (set by the training loop).

    Notes
    -----
    :meth:`resume` and :meth:`pause` bracket the timed work; :meth:`add_tokens`, :meth:`add_step` count
    it, and :meth:`close_interval` gives the rates since its last call.
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
        """Count tokens trained on while the clock was running."""
        self._tokens += tokens

    def add_step(self, data_wait_s: float) -> None:
        """Count one timed step and the seconds the host waited for its batch."""
        self._steps += 1
        self._data_wait_s += data_wait_s

    def close_interval(self) -> IntervalRates:
        """The rates since the last call (NaN if nothing was timed); the clock keeps running if it ran.

        Returns
        -------
        IntervalRates
            Tokens/s, seconds per step, data-wait seconds per step, and the steps timed.
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
        """Tokens per second over all closed intervals of the session."""
        return self.total_tokens / self.total_seconds if self.total_seconds > 0 else float("nan")
