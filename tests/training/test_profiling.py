"""The train-step profiler: a trace of exactly the configured steps, or nothing."""

from __future__ import annotations

import glob
import os

import jax
import jax.numpy as jnp
import pytest
from jax.profiler import ProfileData

from attention_jax.training import train
from tests.support import fake_data


@jax.jit
def traced_update(values):
    return values * 2.0 + 1.0


def _run_steps(profiler: train._StepProfiler, num_steps: int) -> None:
    values = jnp.ones((8,))
    for steps_done in range(num_steps):
        profiler.before_step(steps_done)
        values = traced_update(values)
        profiler.after_step(steps_done + 1, values)
    profiler.close()


def _update_calls(trace_path: str) -> int:
    """How many calls of ``traced_update`` the trace recorded on the host (nested events count once)."""
    data = ProfileData.from_file(trace_path)
    spans = sorted((event.start_ns, event.start_ns + event.duration_ns) for plane in data.planes
                   for line in plane.lines for event in line.events if "traced_update" in event.name)
    calls, outer_end = 0, float("-inf")
    for start, end in spans:
        if start >= outer_end:
            calls, outer_end = calls + 1, end
    return calls


@pytest.mark.integration
def test_profiler_traces_the_configured_steps_into_the_tensorboard_dir(tmp_path):
    config = fake_data.tiny_experiment(profile_steps=2, profile_start_step=3).run
    profiler = train._StepProfiler.from_config(config, str(tmp_path))
    _run_steps(profiler, num_steps=8)
    traces = glob.glob(os.path.join(tmp_path, "tensorboard", "plugins", "profile", "*", "*.xplane.pb"))
    assert len(traces) == 1
    assert _update_calls(traces[0]) == 2  # Steps 4 and 5 only.
    assert not profiler.tracing


def test_profiler_is_off_by_default(tmp_path):
    profiler = train._StepProfiler.from_config(fake_data.tiny_experiment().run, str(tmp_path))
    _run_steps(profiler, num_steps=12)
    assert not os.path.exists(os.path.join(tmp_path, "tensorboard"))


def test_profiler_rejects_negative_settings(tmp_path):
    with pytest.raises(ValueError, match="profile_steps"):
        train._StepProfiler(str(tmp_path), num_steps=-1, start_step=0)
