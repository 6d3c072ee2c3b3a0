"""launch.row_processes: a trainer whose sweep dies gets one stop request, however the kernel delivers it."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest

from launch import row_processes
from tests.support import REPO_ROOT
from tests.support.waiting import read_if_exists, wait_until


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")

_PR_GET_PDEATHSIG = 2


def _wait_for_text(path: pathlib.Path, text: str, timeout_s: float) -> None:
    wait_until(lambda: read_if_exists(path) == text, timeout_s, f"{path} to read {text!r}", poll_s=0.05,
               details=lambda: f"it reads {read_if_exists(path)!r}")


@pytest.mark.slow
def test_a_row_asks_for_sighup_on_the_sweeps_death_even_when_the_sweep_ignores_it(tmp_path: pathlib.Path) -> None:
    report = tmp_path / "child.json"
    script = ("import ctypes, json, signal, sys\n"
              "death = ctypes.c_int(0)\n"
              f"ctypes.CDLL(None).prctl({_PR_GET_PDEATHSIG}, ctypes.byref(death), 0, 0, 0)\n"
              "json.dump({'death_signal': death.value, 'sighup_default': signal.getsignal(signal.SIGHUP) is "
              f"signal.SIG_DFL}}, open({str(report)!r}, 'w'))\n")
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # As under `nohup launch.sweep ...`.
    try:
        assert row_processes.run([sys.executable, "-c", script]) == 0
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert json.loads(report.read_text()) == {"death_signal": int(signal.SIGHUP), "sighup_default": True}


_TRAINER = """
import pathlib, sys, time
from attention_jax.training import distributed
out = pathlib.Path(sys.argv[1])
with distributed.StopRequest() as stop:
    out.write_text("ready\\n")
    step = 0
    while not stop.should_stop(step):
        step += 1
        time.sleep(0.01)
    time.sleep(0.5)  # Stands for the checkpoint: further parent-death signals must not cut it short.
    out.write_text("stopped on request\\n")
"""

_SWEEP = """
import sys, threading, time
from launch import row_processes
threads = [threading.Thread(target=time.sleep, args=(600,), daemon=True) for _ in range(64)]
for thread in threads:
    thread.start()
row = threading.Thread(target=row_processes.run, args=([sys.executable, "-c", sys.argv[1], sys.argv[2]],))
row.start()
row.join()
"""


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(5))
def test_a_trainer_whose_multithreaded_sweep_is_killed_stops_once_with_its_checkpoint(
        tmp_path: pathlib.Path, attempt: int) -> None:
    # The kernel sends the parent-death signal each time the trainer passes from one dying thread of the
    # sweep to the next (here 65 threads), often two or more times: a second SIGTERM would kill at once.
    del attempt
    out = tmp_path / "trainer.txt"
    sweep = subprocess.Popen([sys.executable, "-c", _SWEEP, _TRAINER, str(out)], cwd=REPO_ROOT,
                             env={**os.environ, "JAX_PLATFORMS": "cpu"})
    try:
        _wait_for_text(out, "ready\n", 120)
    finally:
        sweep.kill()
    sweep.wait(timeout=30)
    _wait_for_text(out, "stopped on request\n", 30)  # A trainer killed by a repeated signal stays at "ready".
