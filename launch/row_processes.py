"""The trainers a sweep started: each in its own process group, stopped with the sweep, never orphaned.

Every row's command runs in a new session (its own process group), so a Ctrl-C in the terminal
reaches the sweep only; :func:`forward_stop_signals` makes the sweep pass SIGINT / SIGTERM on to every
running row's group and start no new row. The trainer then checkpoints within a step and exits (status
75), the sweep waits for it, reports the row as ``stopped`` and exits; rerunning the sweep resumes each
row once. If the sweep itself is killed outright (``kill -9``), Linux sends each trainer SIGHUP
(``PR_SET_PDEATHSIG``), so it checkpoints and exits instead of running on re-parented to init.

The parent-death signal is SIGHUP, not SIGTERM, because Linux sends it each time the trainer is handed
from one dying thread of the sweep to the next, so a multi-threaded sweep killed outright may deliver it
two or more times at once: the trainer treats repeated SIGHUPs as one request, where a second SIGTERM
would stop it at once, without its checkpoint.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from types import FrameType
from typing import Any, Callable, Sequence

from attention_jax.foundation import run_files

STOPPED_EXIT = run_files.STOPPED_EXIT_STATUS  # attention_jax.main checkpointed on SIGTERM/SIGINT.
_PR_SET_PDEATHSIG = 1
_SIG_DFL = 0
PARENT_DEATH_SIGNAL = signal.SIGHUP  # attention_jax.training.distributed.StopRequest: stop, however often.

_lock = threading.Lock()
_running: dict[int, subprocess.Popen] = {}
_stop_requested = threading.Event()


class StopRequested(RuntimeError):
    """The sweep was asked to stop before this row started."""


def _terminate_with(parent_pid: int, cpus: frozenset[int] | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: in the child, before exec, ask for SIGHUP when the sweep dies (Linux only),
    and keep it to ``cpus`` when given.

    SIGHUP's disposition is reset to the default first: a sweep started under ``nohup`` ignores it,
    and an ignored disposition would pass through ``exec`` to the trainer.
    """

    def arrange() -> None:
        if cpus:
            os.sched_setaffinity(0, cpus)
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.signal(int(PARENT_DEATH_SIGNAL), _SIG_DFL)
            libc.prctl(_PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
            if os.getppid() != parent_pid:  # The sweep died before the request took effect.
                os._exit(128 + int(PARENT_DEATH_SIGNAL))

    return arrange


def stop_requested() -> bool:
    """Whether a stop signal reached the sweep (no new row starts then)."""
    return _stop_requested.is_set()


def run(argv: Sequence[str], *, cpus: frozenset[int] | None = None, **popen_options: Any) -> int:
    """Run a row's command in its own process group and wait for it.

    Parameters
    ----------
    argv : Sequence[str]
        The command.
    cpus : frozenset[int], optional
        CPUs the command may run on (``os.sched_setaffinity``); None: those of the sweep.
    **popen_options : Any
        ``subprocess.Popen`` options (``cwd``, ``env``, ``stdout``, ``stderr``).

    Returns
    -------
    int
        Its exit status.

    Notes
    -----
    Raises :class:`StopRequested` without starting anything once the sweep was asked to stop.
    """
    with _lock:
        if _stop_requested.is_set():
            raise StopRequested("the sweep was asked to stop")
        process = subprocess.Popen(list(argv), start_new_session=True, preexec_fn=_terminate_with(os.getpid(), cpus),
                                   **popen_options)
        _running[process.pid] = process
    try:
        while True:
            try:
                return process.wait()
            except KeyboardInterrupt:  # Keep waiting: the trainer got the signal and is checkpointing.
                continue
    finally:
        with _lock:
            _running.pop(process.pid, None)


def _forward(signum: int, frame: FrameType | None) -> None:
    del frame
    first = not _stop_requested.is_set()
    _stop_requested.set()
    with _lock:
        groups = list(_running)
    for pid in groups:
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass
    name = signal.Signals(signum).name
    if first:
        print(f"launch.sweep: {name}: passed to {len(groups)} running row(s); they checkpoint and exit, no new "
              "row starts. Rerun the same command to resume.", file=sys.stderr, flush=True)


def forward_stop_signals() -> None:
    """Install SIGINT/SIGTERM handlers that pass the signal on to every running row (main thread only)."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _forward)
