"""Multi-process start-up and process-agreed stop requests (SIGTERM, preemption)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from types import FrameType
from typing import Any, Callable, Mapping, TypeAlias

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils

DEFAULT_TIMEOUT_S = 300

# A handler as ``signal.signal`` takes and returns it.
_SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def _describe_cluster(environ: Mapping[str, str]) -> str | None:
    """Return the launcher ``environ`` names: ``env``, ``slurm``, ``tpu_pod``, ``mpi``; ``None`` for one process."""
    if environ.get("JAX_COORDINATOR_ADDRESS"):
        return "env"
    if int(environ.get("SLURM_NTASKS", "1") or 1) > 1:
        return "slurm"
    if len([h for h in environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]) > 1:
        return "tpu_pod"
    if int(environ.get("OMPI_COMM_WORLD_SIZE", "1") or 1) > 1:
        return "mpi"
    return None


def maybe_initialize(environ: Mapping[str, str] | None = None, *,
                     timeout_s: int = DEFAULT_TIMEOUT_S) -> bool:
    """Call ``jax.distributed.initialize`` for a multi-process job, before any other JAX call (CPU: gloo).

    Parameters
    ----------
    environ : Mapping[str, str], optional
        Environment to inspect (default ``os.environ``).
    timeout_s : int
        Seconds to wait for all processes to reach the coordinator.

    Returns
    -------
    bool
        Whether JAX was initialized for several processes.

    Raises
    ------
    RuntimeError
        When the coordinator is not reached within ``timeout_s``.
    """
    environ = os.environ if environ is None else environ
    cluster = _describe_cluster(environ)
    if cluster is None:
        return False
    kwargs: dict = {"initialization_timeout": int(timeout_s)}
    if cluster == "env":
        missing = [name for name in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID") if name not in environ]
        if missing:
            raise ValueError(
                f"JAX_COORDINATOR_ADDRESS is set but {', '.join(missing)} is not: set all three "
                f"(address host:port, number of processes, this process's id from 0)."
            )
        kwargs.update(coordinator_address=environ["JAX_COORDINATOR_ADDRESS"],
                      num_processes=int(environ["JAX_NUM_PROCESSES"]),
                      process_id=int(environ["JAX_PROCESS_ID"]))
        if kwargs["process_id"] != 0:  # Process 0 hosts the coordinator; the others connect to it.
            _wait_for_coordinator(kwargs["coordinator_address"], timeout_s)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    where = kwargs.get("coordinator_address", f"the coordinator found by {cluster} detection")
    logging.info("Multi-process job (%s): connecting to %s.", cluster, where)
    try:
        jax.distributed.initialize(**kwargs)
    except Exception as error:  # The runtime raises XlaRuntimeError / RuntimeError subtypes.
        raise RuntimeError(
            f"could not join the multi-process JAX job ({cluster}) through {where} within "
            f"{timeout_s} s: {error}. Check that every process was started, that the address is "
            f"reachable from this host, and that the process ids are distinct."
        ) from error
    logging.info("Process %d of %d; %d local / %d global devices.", jax.process_index(),
                 jax.process_count(), jax.local_device_count(), jax.device_count())
    return True


def _wait_for_coordinator(address: str, timeout_s: float) -> None:
    """Wait for a TCP connection to ``host:port``; JAX would abort the process instead of raising."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"JAX_COORDINATOR_ADDRESS must be host:port; got {address!r}.")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=min(5.0, timeout_s)):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"the JAX coordinator at {address} was not reachable within {timeout_s} s "
                    f"({error}). Start process 0 (JAX_PROCESS_ID=0) on that host, check the port "
                    f"and firewall, or raise the timeout."
                ) from error
            time.sleep(0.5)


def _all_processes_agree(flag: bool) -> bool:
    """Return process 0's value of ``flag`` on every process, so that all take the same branch."""
    if jax.process_count() == 1:
        return bool(flag)
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(flag, dtype=np.int32)))


class StopRequest:
    """Notice SIGTERM, Ctrl-C or a preemption and stop every process at the same step; a context manager.

    One process: the first SIGTERM/SIGINT sets a flag and restores the old handlers (a second acts as usual);
    SIGHUP only sets the flag (left alone under ``nohup``). Several: JAX's preemption service picks the step.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)  # The first requests a stop; the next acts as before.
    HANG_UP = signal.SIGHUP  # Requests a stop, as often as it comes.

    def __init__(self) -> None:
        self._requested = threading.Event()
        self._previous_handlers: dict[int, _SignalHandler] = {}
        self._previous_hang_up_handler: _SignalHandler = None
        self._completed_step: int | None = None
        self.completed_at_request: int | None = None  # The last step known finished when the stop came.

    def __enter__(self) -> "StopRequest":
        on_main_thread = threading.current_thread() is threading.main_thread()
        if jax.process_count() == 1 and on_main_thread:
            self._previous_handlers = {number: signal.signal(number, self._on_signal)
                                       for number in self.SIGNALS}
            if signal.getsignal(self.HANG_UP) is not signal.SIG_IGN:
                self._previous_hang_up_handler = signal.signal(self.HANG_UP, self._on_hang_up) or signal.SIG_DFL
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._restore_handlers()
        if self._previous_hang_up_handler is not None:
            signal.signal(self.HANG_UP, self._previous_hang_up_handler)
            self._previous_hang_up_handler = None

    def _restore_handlers(self) -> None:
        for number, handler in self._previous_handlers.items():
            signal.signal(number, handler)
        self._previous_handlers = {}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        del frame
        logging.warning("Received %s: will checkpoint and stop after the current step (send it again to "
                        "stop at once).", signal.Signals(signum).name)
        self._mark_requested()
        self._restore_handlers()

    def _on_hang_up(self, signum: int, frame: FrameType | None) -> None:
        del signum, frame
        if not self._requested.is_set():
            logging.warning("Received SIGHUP (the terminal or the sweep that started this run is gone): will "
                            "checkpoint and stop after the current step.")
        self._mark_requested()

    def _mark_requested(self) -> None:
        if not self._requested.is_set():
            self.completed_at_request = self._completed_step
        self._requested.set()


    def note_completed(self, step: int) -> None:
        """Record that the device finished ``step`` (measures how late a stop is honoured).

        Parameters
        ----------
        step : int
            A step whose update is complete.
        """
        self._completed_step = step

    def should_stop(self, step: int) -> bool:
        """Return whether training must checkpoint and stop after ``step``; call at every step.

        Parameters
        ----------
        step : int
            The step just completed, the same on all processes.

        Returns
        -------
        bool
            True on every process at the same step once requested.
        """
        if jax.process_count() == 1:
            return self._requested.is_set()
        stop = multihost_utils.reached_preemption_sync_point(step)
        if stop and self.completed_at_request is None:
            self.completed_at_request = self._completed_step
        return stop
