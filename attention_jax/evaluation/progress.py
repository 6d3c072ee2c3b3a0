"""Progress lines for long evaluations: how much is done, how fast, and how long is left.

A whole-split BLEU or a dev evaluation of a large split can take minutes; :func:`progress_logger`
gives its loop a callback that logs at most one line every :data:`PROGRESS_EVERY_S` seconds, e.g.
``final test BLEU: 640/3003 sentences (21.3 sentences/s, 111 s left)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from absl import logging

PROGRESS_EVERY_S = 30.0
"""Seconds between the progress lines of :func:`progress_logger`."""


def progress_logger(what: str, total: int, *, unit: str = "sentences", every_s: float | None = None,
                    always_final: bool = True) -> Callable[[int], None]:
    """A callback that logs items done, items per second and the time left, now and then.

    Parameters
    ----------
    what : str
        What is being done, e.g. ``"final test BLEU"`` or ``"dev evaluation at step 1000"``.
    total : int
        Items to do.
    unit : str
        What an item is, plural (``"sentences"``, ``"batches"``).
    every_s : float, optional
        At most one line per this many seconds (default :data:`PROGRESS_EVERY_S`, read at the call).
    always_final : bool
        Log a line when ``total`` is reached even if no line came before (False: a job that ends within
        ``every_s`` logs nothing).

    Returns
    -------
    Callable[[int], None]
        Called with the number of items done so far.
    """
    every_s = PROGRESS_EVERY_S if every_s is None else every_s
    started = time.monotonic()
    last = [started]
    printed = [False]

    def report(done: int) -> None:
        now = time.monotonic()
        finished = done >= total
        if now - last[0] < every_s and not (finished and (always_final or printed[0])):
            return
        last[0], printed[0] = now, True
        rate = done / max(now - started, 1e-9)
        left = (total - done) / rate if rate > 0 else float("nan")
        logging.info("%s: %d/%d %s (%.1f %s/s, %s left)", what, done, total, unit, rate, unit,
                     f"{left:.0f} s" if math.isfinite(left) else "?")

    return report
