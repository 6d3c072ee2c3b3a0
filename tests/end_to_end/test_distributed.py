"""Multi-process detection and start-up errors, and the process-agreed stop request."""

from __future__ import annotations

import os
import signal
import time

import pytest

from attention_jax.training import distributed


@pytest.mark.parametrize("environ, expected", [
    ({}, None),
    ({"SLURM_NTASKS": "1"}, None),
    ({"SLURM_NTASKS": "4"}, "slurm"),
    ({"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"}, "env"),
    ({"TPU_WORKER_HOSTNAMES": "t0"}, None),
    ({"TPU_WORKER_HOSTNAMES": "t0,t1"}, "tpu_pod"),
    ({"OMPI_COMM_WORLD_SIZE": "2"}, "mpi"),
])
def test_describe_cluster(environ: dict, expected: str | None) -> None:
    assert distributed._describe_cluster(environ) == expected


def test_single_process_environment_does_not_initialize() -> None:
    assert distributed.maybe_initialize({"SLURM_NTASKS": "1"}) is False


def test_coordinator_address_needs_process_count_and_id() -> None:
    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES, JAX_PROCESS_ID"):
        distributed.maybe_initialize({"JAX_COORDINATOR_ADDRESS": "127.0.0.1:1234"})


def test_unreachable_coordinator_is_a_clear_error() -> None:
    environ = {"JAX_COORDINATOR_ADDRESS": "127.0.0.1:1", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"coordinator at 127.0.0.1:1 was not reachable within 1.5 s"):
        distributed.maybe_initialize(environ, timeout_s=1.5)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_first_signal_requests_a_stop_second_acts_as_usual(signal_number: int) -> None:
    previous = signal.getsignal(signal_number)
    with distributed.StopRequest() as stop:
        assert not stop.should_stop(1)
        os.kill(os.getpid(), signal_number)
        time.sleep(0.01)  # The handler runs in the main thread at the next bytecode boundary.
        assert stop.should_stop(2)
        assert signal.getsignal(signal_number) is previous  # Reinstated for a second signal.
    assert signal.getsignal(signal_number) is previous


def test_sighup_requests_a_stop_however_often_it_comes() -> None:
    # The default disposition, as a trainer started by a sweep has it (launch.row_processes resets it):
    # under `nohup pytest` the inherited SIG_IGN would rightly make StopRequest leave SIGHUP alone.
    outer = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        with distributed.StopRequest() as stop:
            for _ in range(3):  # As a killed multi-threaded sweep may deliver its parent-death signal.
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(0.01)
            assert stop.should_stop(1)
            assert signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL  # Still ours: a repeat never escalates.
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, outer)


def test_sighup_ignored_at_entry_stays_ignored() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # A run under `nohup` keeps running.
    try:
        with distributed.StopRequest() as stop:
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.01)
            assert not stop.should_stop(1)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
