"""A trace of a few train steps for TensorBoard's profiler (``config.profile_steps``).

With ``--config.profile_steps=N`` (``N > 0``), training records a ``jax.profiler`` trace of steps
``profile_start_step + 1 .. profile_start_step + N`` into ``WORKDIR/tensorboard/plugins/profile/<time>/``,
next to the training curves::

    python -m attention_jax.main --config=configs/tiny.py --workdir=/tmp/run \
        --config.profile_steps=3 --config.profile_start_step=10
    tensorboard --logdir=/tmp/run/tensorboard      # Profile tab (needs the tensorboard-plugin-profile package)

The default start (step 10) leaves compilation and the first steps out of the trace. The trace shows
each compiled operation's time on the host's threads (the XLA fusions and matmuls of the step), which
is how ``benchmarks/peer_flax.py`` found where the time goes.
"""

from __future__ import annotations

import os
from typing import Any

import jax

from attention_jax.experiment.sections import RunConfig
from attention_jax.foundation import run_files


class StepProfiler:
    """Starts a ``jax.profiler`` trace before one train step and stops it a few steps later.

    Parameters
    ----------
    log_dir : str
        TensorBoard log directory; the trace goes to ``log_dir/plugins/profile/<time>/``.
    num_steps : int
        Steps to trace; 0 disables the profiler.
    start_step : int
        Steps completed before the trace starts (the trace covers ``start_step + 1`` onwards).

    Notes
    -----
    Call :meth:`before_step` with the number of steps done so far just before each update and
    :meth:`after_step` with the new count and the update's outputs right after it; :meth:`close` ends
    a trace that training left open (a stop request or the last step inside the traced range). The
    last traced step is waited for, so its device work is inside the trace.
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
        """The profiler of ``config.profile_steps`` / ``profile_start_step`` writing under ``workdir``.

        Parameters
        ----------
        config : RunConfig
            The run section (``profile_steps``, ``profile_start_step``).
        workdir : str
            The run directory.

        Returns
        -------
        StepProfiler
            Writing to ``workdir/tensorboard``.
        """
        return cls(os.path.join(workdir, run_files.TENSORBOARD_DIR), config.profile_steps, config.profile_start_step)

    def before_step(self, steps_done: int) -> None:
        """Start the trace when ``steps_done`` equals the start step."""
        if self.num_steps > 0 and steps_done == self.start_step and not self.tracing:
            jax.profiler.start_trace(self.log_dir)
            self.tracing = True

    def after_step(self, steps_done: int, outputs: Any) -> None:
        """Stop the trace after the last traced step, once ``outputs`` are computed."""
        if self.tracing and steps_done >= self.start_step + self.num_steps:
            jax.block_until_ready(outputs)
            self.close()

    def close(self) -> None:
        """Stop a running trace (writing it); nothing if none runs."""
        if self.tracing:
            jax.profiler.stop_trace()
            self.tracing = False
