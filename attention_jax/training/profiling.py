"""A ``jax.profiler`` trace of a few train steps (``config.profile_steps``) for TensorBoard (docs/benchmarks.md)."""

from __future__ import annotations

import os
from typing import Any

import jax

from attention_jax.experiment.sections import RunConfig
from attention_jax.foundation import run_files


class StepProfiler:
    """Start a ``jax.profiler`` trace before one train step and stop it, the last step waited for, a few later.

    Parameters
    ----------
    log_dir : str
        TensorBoard log directory.
    num_steps : int
        Steps to trace; 0 disables the profiler.
    start_step : int
        Steps completed before the trace starts.
    """

    def __init__(self, log_dir: str, num_steps: int, start_step: int) -> None:
        if num_steps < 0 or start_step < 0:
            raise ValueError(f"profile_steps and profile_start_step must be >= 0; got {num_steps} and {start_step}.")
        self.log_dir = log_dir
        self.num_steps = num_steps
        self.start_step = start_step
        self.tracing = False

    @classmethod
    def from_config(cls, config: RunConfig, workdir: str) -> StepProfiler:
        """Return the profiler of ``config.profile_steps`` and ``profile_start_step``.

        Parameters
        ----------
        config : RunConfig
            The run section.
        workdir : str
            The run directory.

        Returns
        -------
        StepProfiler
            Writing to ``workdir/tensorboard``.
        """
        return cls(os.path.join(workdir, run_files.TENSORBOARD_DIR), config.profile_steps, config.profile_start_step)

    def before_step(self, steps_done: int) -> None:
        """Start the trace when ``steps_done`` equals the start step; call before each update.

        Parameters
        ----------
        steps_done : int
            Steps completed so far.
        """
        if self.num_steps > 0 and steps_done == self.start_step and not self.tracing:
            jax.profiler.start_trace(self.log_dir)
            self.tracing = True

    def after_step(self, steps_done: int, outputs: Any) -> None:
        """Stop the trace after the last traced step, once ``outputs`` are computed.

        Parameters
        ----------
        steps_done : int
            Steps completed, this one included.
        outputs : Any
            The update's outputs, waited for.
        """
        if self.tracing and steps_done >= self.start_step + self.num_steps:
            jax.block_until_ready(outputs)
            self.close()

    def close(self) -> None:
        """Stop a running trace (writing it)."""
        if self.tracing:
            jax.profiler.stop_trace()
            self.tracing = False
