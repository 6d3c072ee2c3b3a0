"""Progress lines for long evaluations: how much is done, how fast, and how long is left."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator

from absl import logging

PROGRESS_EVERY_S = 30.0  # Seconds between the progress lines of progress_logger.


def progress_logger(what: str, total: int, *, unit: str = "sentences", every_s: float | None = None,
                    always_final: bool = True) -> Callable[[int], None]:
    """Return a callback, given the items done, that logs them, the rate and the time left now and then.

    Parameters
    ----------
    what : str
        E.g. ``"final test BLEU"``.
    total : int
        Items to do.
    unit : str
        What an item is, plural.
    every_s : float, optional
        Seconds between lines (:data:`PROGRESS_EVERY_S`).
    always_final : bool
        Log at ``total`` even if no line came before.

    Returns
    -------
    Callable[[int], None]
        The callback.
    """
    every_s = PROGRESS_EVERY_S if every_s is None else every_s
    started = time.monotonic()
    last = [started]
    printed = [False]

    def _report(done: int) -> None:
        now = time.monotonic()
        finished = done >= total
        if now - last[0] < every_s and not (finished and (always_final or printed[0])):
            return
        last[0], printed[0] = now, True
        rate = done / max(now - started, 1e-9)
        left = (total - done) / rate if rate > 0 else float("nan")
        logging.info("%s: %d/%d %s (%.1f %s/s, %s left)", what, done, total, unit, rate, unit,
                     f"{left:.0f} s" if math.isfinite(left) else "?")

    return _report


@contextlib.contextmanager
def timed_phase(what: str, total: int | None = None, *, unit: str = "sentences") -> Iterator[None]:
    """Log a line as a phase starts and one with its elapsed time as it ends (none if it raises).

    Parameters
    ----------
    what : str
        The phase.
    total : int, optional
        Items it works through, for the rate.
    unit : str
        What an item is, plural.
    """
    logging.info("%s: %s ...", what, f"{total} {unit}" if total is not None else "started")
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    rate = f" ({total / elapsed:.1f} {unit}/s)" if total and elapsed > 0 else ""
    logging.info("%s: done in %.1f s%s", what, elapsed, rate)
