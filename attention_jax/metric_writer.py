"""Where training metrics go: ``WORKDIR/metrics.jsonl`` and TensorBoard event files.

Each call of :meth:`MetricWriter.write` appends one JSON object ``{"step": ..., "<kind>/<name>": ...}``
to ``metrics.jsonl`` (``kind`` is ``train`` or ``eval``) and adds the same scalars to TensorBoard
(tensorboardX, no TensorFlow). Only process 0 writes; other processes' writers do nothing. A resumed run
appends to the same files.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping

import jax

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


class MetricWriter:
    """Append scalar metrics to ``metrics.jsonl`` and TensorBoard.

    Parameters
    ----------
    workdir : str
        The run's work directory.
    enabled : bool, optional
        Write at all (default: only on process 0).

    Notes
    -----
    Non-finite values are written as JSON ``null`` (valid JSON, unlike ``NaN``).
    """

    def __init__(self, workdir: str, enabled: bool | None = None) -> None:
        self.enabled = jax.process_index() == 0 if enabled is None else enabled
        self._jsonl = None
        self._tensorboard = None
        if self.enabled:
            os.makedirs(workdir, exist_ok=True)
            self._jsonl = open(os.path.join(workdir, METRICS_FILE), "a", encoding="utf-8")
            from tensorboardX import SummaryWriter  # Imported lazily: slow to import.

            self._tensorboard = SummaryWriter(os.path.join(workdir, TENSORBOARD_DIR))

    def write(self, step: int, kind: str, values: Mapping[str, Any]) -> None:
        """Record ``values`` at ``step`` under the prefix ``kind``.

        Parameters
        ----------
        step : int
            Training step.
        kind : str
            ``"train"`` or ``"eval"`` (any prefix works).
        values : Mapping[str, Any]
            Scalars (numbers); strings are written to the JSON line only.
        """
        if not self.enabled:
            return
        record: dict[str, Any] = {"step": int(step)}
        for name, value in values.items():
            key = f"{kind}/{name}"
            if isinstance(value, str) or value is None:
                record[key] = value
                continue
            value = float(value)
            record[key] = value if math.isfinite(value) else None
            self._tensorboard.add_scalar(key, value, int(step))
        self._jsonl.write(json.dumps(record) + "\n")
        self._jsonl.flush()

    def flush(self) -> None:
        """Push buffered TensorBoard events to disk."""
        if self.enabled:
            self._tensorboard.flush()

    def close(self) -> None:
        """Flush and close the files."""
        if self.enabled:
            self._jsonl.close()
            self._tensorboard.close()
            self.enabled = False
