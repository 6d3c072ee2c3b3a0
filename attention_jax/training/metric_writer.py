"""Where training metrics go: ``WORKDIR/metrics.jsonl`` and TensorBoard event files.

Each call of :meth:`MetricWriter.write` appends one JSON object ``{"step": ..., "<kind>/<name>": ...}``
to ``metrics.jsonl`` (``kind`` is ``train`` or ``eval``) and adds the same scalars to TensorBoard
(tensorboardX, no TensorFlow). Only process 0 writes; other processes' writers do nothing.

A resumed run appends to the same files. Records of steps after the restored checkpoint (written before
a crash, then trained again) are dropped from ``metrics.jsonl``, and TensorBoard is told to purge its
events from those steps on, so every step appears once.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping

import jax

from attention_jax import run_files


def _drop_records_after(path: str, step: int) -> None:
    """Rewrite the JSON-lines file at ``path`` without records whose step exceeds ``step``."""
    with open(path, encoding="utf-8") as file:
        lines = file.readlines()
    kept = []
    for line in lines:
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line if line.endswith("\n") else line + "\n")
        except (ValueError, KeyError, TypeError):  # A line cut by a crash.
            continue
    if len(kept) != len(lines):
        run_files.write_atomically(path, "".join(kept))


class MetricWriter:
    """Append scalar metrics to ``metrics.jsonl`` and TensorBoard.

    Parameters
    ----------
    workdir : str
        The run's work directory.
    resumed_step : int, optional
        The step training resumes from; later records of earlier sessions are discarded.
    enabled : bool, optional
        Write at all (default: only on process 0).

    Notes
    -----
    Non-finite values are written as JSON ``null`` (valid JSON, unlike ``NaN``).
    """

    def __init__(self, workdir: str, resumed_step: int | None = None, enabled: bool | None = None) -> None:
        self.enabled = jax.process_index() == 0 if enabled is None else enabled
        self._jsonl = None
        self._tensorboard = None
        if self.enabled:
            os.makedirs(workdir, exist_ok=True)
            path = os.path.join(workdir, run_files.METRICS_FILE)
            if resumed_step is not None and os.path.exists(path):
                _drop_records_after(path, resumed_step)
            self._jsonl = open(path, "a", encoding="utf-8")
            from tensorboardX import SummaryWriter  # Imported lazily: slow to import.

            purge_step = None if resumed_step is None else resumed_step + 1
            self._tensorboard = SummaryWriter(os.path.join(workdir, run_files.TENSORBOARD_DIR), purge_step=purge_step)

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
