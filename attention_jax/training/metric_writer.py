"""Where training metrics go: ``WORKDIR/metrics.jsonl`` and TensorBoard event files.

Each call of :meth:`MetricWriter.write` appends one JSON object ``{"step": ..., "<kind>/<name>": ...}``
to ``metrics.jsonl`` (``kind`` is ``train`` or ``eval``) and adds the same scalars to TensorBoard
(tensorboardX, no TensorFlow). TensorBoard also gets the run's config as hyperparameters
(:meth:`MetricWriter.write_hparams`: the HParams tab compares the runs of a sweep) and text tables
(:meth:`MetricWriter.write_table`: sample translations). Only process 0 writes; other processes'
writers do nothing. ``pip install -e ".[tensorboard]"`` installs ``tensorboard --logdir`` to read them.

A resumed run appends to the same files. Records of steps after the restored checkpoint (written before
a crash, then trained again) are dropped from ``metrics.jsonl``, and TensorBoard is told to purge its
events from those steps on, so every step appears once.
"""

from __future__ import annotations

import json
import math
import os
from typing import IO, Any, Mapping, Sequence

import jax
from absl import logging

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


HParamValue = str | float | bool


def flat_hparams(config: Mapping[str, Any], prefix: str = "") -> dict[str, HParamValue]:
    """A config as TensorBoard hyperparameters: one entry per leaf, nested names joined with dots.

    Parameters
    ----------
    config : Mapping[str, Any]
        Plain values (e.g. ``json.loads(config.to_json_best_effort())``); nested mappings are flattened.
    prefix : str
        Prepended to every name (used for the nested ones).

    Returns
    -------
    dict[str, HParamValue]
        Booleans, numbers and strings as they are; lists and tuples as their JSON text (``"[-1]"``),
        ``None`` as ``"None"`` (TensorBoard's hyperparameters are numbers, strings or booleans).
    """
    flat: dict[str, HParamValue] = {}
    for name, value in config.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            flat.update(flat_hparams(value, prefix=f"{key}."))
        elif isinstance(value, (bool, str)):
            flat[key] = value
        elif isinstance(value, (int, float)):
            flat[key] = float(value)
        else:
            flat[key] = "None" if value is None else json.dumps(value, default=str)
    return flat


def _table_cell(text: str) -> str:
    """``text`` as one cell of a Markdown table: pipes escaped, line breaks as spaces."""
    return " ".join(str(text).split()).replace("|", "\\|") or " "


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
        self._jsonl: IO[str] | None = None  # Both open while enabled.
        self._tensorboard: Any = None  # A tensorboardX.SummaryWriter (untyped).
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
        assert self._jsonl is not None
        record: dict[str, Any] = {"step": int(step)}
        for name, value in values.items():
            key = f"{kind}/{name}"
            if isinstance(value, str) or value is None:
                record[key] = value
                continue
            value = float(value)
            record[key] = value if math.isfinite(value) else None
            tensorboard = self._live_tensorboard()
            if tensorboard is not None:
                tensorboard.add_scalar(key, value, int(step))
        self._jsonl.write(json.dumps(record) + "\n")
        self._jsonl.flush()

    def write_hparams(self, hparams: Mapping[str, HParamValue]) -> None:
        """Record the run's hyperparameters for TensorBoard's HParams tab.

        Parameters
        ----------
        hparams : Mapping[str, HParamValue]
            Names and values (:func:`flat_hparams` of the resolved config).

        Notes
        -----
        Only the session-start record is written, in the run's own event files: TensorBoard then builds
        the table of a sweep from every run's record (each value seen becomes a filter choice), with the
        run's scalars (``eval/perplexity``, ``eval/bleu``, ...) as its metric columns. An experiment
        record, as ``tensorboardX.SummaryWriter.add_hparams`` also writes (into a new subdirectory),
        would fix the columns to the first run's.
        """
        if not self.enabled:
            return
        from tensorboardX.summary import hparams as hparams_summaries

        _, session_start, _ = hparams_summaries(dict(hparams), {})
        tensorboard = self._live_tensorboard()
        if tensorboard is not None:
            tensorboard.file_writer.add_summary(session_start)

    def write_table(self, step: int, tag: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """Record a small table as TensorBoard text (Markdown) at ``step``.

        Parameters
        ----------
        step : int
            Training step.
        tag : str
            TensorBoard tag, e.g. ``"eval/sample_translations"``.
        columns : Sequence[str]
            Column headings.
        rows : Sequence[Sequence[str]]
            One sequence of cells per row (pipes and line breaks in a cell are escaped).
        """
        if not self.enabled or not rows:
            return
        lines = ["| " + " | ".join(map(_table_cell, columns)) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(map(_table_cell, row)) + " |" for row in rows]
        tensorboard = self._live_tensorboard()
        if tensorboard is not None:
            tensorboard.add_text(tag, "\n".join(lines), int(step))

    def _live_tensorboard(self) -> Any:
        """The TensorBoard writer, or ``None`` once its writer thread has stopped (a full disk, say).

        Notes
        -----
        tensorboardX queues events for one writer thread in a bounded queue; when that thread dies (an
        ``OSError`` writing the event file), the eleventh event, a flush or ``close`` would wait for it
        forever, and a run stopping on a full disk would hang instead of exiting. The writer is dropped
        then, with one warning: the scalars stay in ``metrics.jsonl``.
        """
        if self._tensorboard is None:
            return None
        event_writer = getattr(getattr(self._tensorboard, "file_writer", None), "event_writer", None)
        worker = getattr(event_writer, "_worker", None)
        if worker is not None and not worker.is_alive():
            logging.warning("TensorBoard's event writer has stopped; the rest of this run's scalars go to %s only.",
                            run_files.METRICS_FILE)
            self._tensorboard = None
        return self._tensorboard

    def flush(self) -> None:
        """Push buffered TensorBoard events to disk."""
        tensorboard = self._live_tensorboard() if self.enabled else None
        if tensorboard is not None:
            tensorboard.flush()

    def close(self) -> None:
        """Flush and close the files."""
        if self.enabled:
            assert self._jsonl is not None
            self._jsonl.close()
            tensorboard = self._live_tensorboard()
            if tensorboard is not None:
                tensorboard.close()
            self.enabled = False
