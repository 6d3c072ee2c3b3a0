"""Warm a translator's source buckets in a background thread, after the first line's own.

Line by line, ``translate`` keeps one program per source bucket (``Translator.warm_up``). Warming all of them
before reading the first line made that line wait for every bucket's tracing, which the persistent
compilation cache does not skip (it keys on the traced program). Here the first line's search is compiled
(or loaded) when it arrives, its answer printed, and the other buckets are warmed while the next line is
awaited. Serialising the compiled searches with the run was the other way: it would skip the tracing too,
but tie a run directory to one jaxlib and one machine, a read-only or shared run could not hold them, and
``jax.experimental.serialize_executable`` refuses this search (JAX 0.10: "`LessThan` is not serializable").

The caller and the thread never run JAX on the translator at once: each bucket is warmed holding a lock,
which the caller takes around each block (:meth:`BackgroundWarmUp.holding`), so a line waits at most for
the bucket in progress, and then finds its own warm if it was that one.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from absl import logging


class BackgroundWarmUp:
    """Warm ``buckets`` of ``translator`` one by one in a daemon thread, from :meth:`start` on.

    Parameters
    ----------
    translator : decode.Translator
        The translator; its :attr:`fixed_shapes` is turned on at once, so the first line decodes to its
        bucket's length, as every later one does.
    buckets : Sequence[int]
        Source buckets to warm, in order (``Translator.source_buckets``).
    num_best : int
        The ``nbest`` the caller asks for (a compiled setting).
    """

    def __init__(self, translator: Any, buckets: Sequence[int], num_best: int = 1) -> None:
        translator.fixed_shapes = True
        self._translator = translator
        self._pending = list(buckets)
        self._num_best = num_best
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.warmed: list[int] = []

    @contextlib.contextmanager
    def holding(self) -> Iterator[Any]:
        """Hold the translator for a block: wait for the bucket being warmed, warm none meanwhile."""
        with self._lock:
            yield self._translator

    def start(self) -> None:
        """Start warming the buckets (again: nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._warm_all, name="translate-warm-up", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Warm no further bucket and wait for the one in progress."""
        with self._lock:
            self._pending.clear()
        if self._thread is not None:
            self._thread.join()

    def _warm_all(self) -> None:
        started = time.perf_counter()
        while True:
            with self._lock:
                if not self._pending:
                    break
                length = self._pending.pop(0)
                try:  # A bucket already compiled (the first line's) is a call of the compiled program.
                    self._translator.warm_bucket(length, self._num_best)
                except Exception as error:  # A line of that bucket compiles it when it comes.
                    logging.warning("Warming the search for source bucket %d failed: %s", length, error)
                    continue
                self.warmed.append(length)
        logging.info("Warmed the search for source buckets %s in %.1f s, in the background.", self.warmed,
                     time.perf_counter() - started)
