"""Training metrics to ``metrics.jsonl`` and TensorBoard (process 0); a resumed run drops records after its step."""

from __future__ import annotations

import itertools
import json
import math
import os
import time
from typing import IO, Any, Mapping, Sequence

import jax
from absl import logging

from attention_jax.foundation import run_files

_WRITER_NUMBERS = itertools.count()  # Tells apart the event files of one process's writers.


def _drop_records_after(path: str, step: int) -> None:
    """Rewrite the JSON-lines file without records after ``step``; a cut last line is dropped, other bad lines kept."""
    with open(path, encoding="utf-8", errors="replace") as file:
        lines = file.readlines()
    kept = []
    for number, line in enumerate(lines, start=1):
        try:
            if json.loads(line)["step"] <= step:
                kept.append(line if line.endswith("\n") else line + "\n")
            continue
        except (ValueError, KeyError, TypeError):
            pass
        if number == len(lines):
            logging.warning("%s: its last line (%d) is not a whole record, as a crash leaves it; dropped: %.80r",
                            path, number, line)
            continue
        logging.warning("%s: line %d is not a metrics record (%.80r); kept as it is, and skipped by readers.",
                        path, number, line)
        kept.append(line if line.endswith("\n") else line + "\n")
    if kept != lines:
        run_files.write_atomically(path, "".join(kept))


HParamValue = str | float | bool

# results.json's whole-split figures, written as TensorBoard scalars ``final/<name>`` when a run finishes.
FINAL_FIGURES = ("dev_bleu", "test_bleu", "dev_ppl", "test_ppl", "eval_ppl", "best_eval_ppl")

# How a training session ended, the scalar ``run/end_status`` at its last step (the HParams tab shows the latest).
FINISHED, STOPPED, FAILED = "finished", "stopped", "failed"
END_STATUS_TAG = "run/end_status"
END_STATUS_VALUES = {
    FINISHED: 1.0,  # Trained and evaluated to the end; results.json is written.
    STOPPED: 0.0,  # Stopped on request (SIGTERM, Ctrl-C) after checkpointing: a rerun resumes it.
    FAILED: -1.0,  # An exception ended it (a non-finite loss, a full disk, a bug); a rerun resumes it once fixed.
}


def _final_figures(results: Mapping[str, Any]) -> dict[str, float]:
    return {name: float(results[name]) for name in FINAL_FIGURES
            if isinstance(results.get(name), (int, float)) and not isinstance(results.get(name), bool)}


def _flat_hparams(config: Mapping[str, Any], prefix: str = "") -> dict[str, HParamValue]:
    """Return a config as TensorBoard hyperparameters, nested names joined with dots."""
    flat: dict[str, HParamValue] = {}
    for name, value in config.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            flat.update(_flat_hparams(value, prefix=f"{key}."))
        elif isinstance(value, (bool, str)):
            flat[key] = value
        elif isinstance(value, (int, float)):
            flat[key] = float(value)
        else:
            flat[key] = "None" if value is None else json.dumps(value, default=str)
    return flat


def _table_cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") or " "


class MetricWriter:
    """Append scalar metrics to ``metrics.jsonl`` and TensorBoard; non-finite values as JSON ``null``.

    Parameters
    ----------
    workdir : str
        The run's work directory.
    resumed_step : int, optional
        The step training resumes from; later records are discarded.
    enabled, metrics_file : bool, optional
        Write at all (default: only on process 0); append to ``metrics.jsonl`` too (False: TensorBoard only).
    """

    def __init__(self, workdir: str, resumed_step: int | None = None, enabled: bool | None = None, *,
                 metrics_file: bool = True) -> None:
        self.enabled = jax.process_index() == 0 if enabled is None else enabled
        self._jsonl: IO[str] | None = None  # Open while enabled, with metrics_file.
        self._tensorboard: Any = None  # A tensorboardX.SummaryWriter (untyped), open while enabled.
        if self.enabled:
            os.makedirs(workdir, exist_ok=True)
            path = os.path.join(workdir, run_files.METRICS_FILE)
            if metrics_file and resumed_step is not None and os.path.exists(path):
                _drop_records_after(path, resumed_step)
            self._jsonl = open(path, "a", encoding="utf-8") if metrics_file else None
            from tensorboardX import SummaryWriter  # Imported lazily: slow to import.

            purge_step = None if resumed_step is None else resumed_step + 1
            # tensorboardX names event files by second and host and truncates a namesake: pid and count tell apart.
            suffix = f".{os.getpid()}.{next(_WRITER_NUMBERS)}"
            self._tensorboard = SummaryWriter(os.path.join(workdir, run_files.TENSORBOARD_DIR), purge_step=purge_step,
                                              filename_suffix=suffix)

    def write(self, step: int, kind: str, values: Mapping[str, Any]) -> None:
        """Record ``values`` at ``step`` under the prefix ``kind``.

        Parameters
        ----------
        step : int
            Training step.
        kind : str
            ``"train"`` or ``"eval"``.
        values : Mapping[str, Any]
            Numbers; strings go to the JSON line only.
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
            tensorboard = self._live_tensorboard()
            if tensorboard is not None:
                tensorboard.add_scalar(key, value, int(step))
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(record) + "\n")
            self._jsonl.flush()

    def write_final(self, step: int, results: Mapping[str, Any]) -> None:
        """Record a finished run's whole-split figures as TensorBoard scalars ``final/<name>`` (HParams columns).

        Parameters
        ----------
        step : int
            The run's last step.
        results : Mapping[str, Any]
            The run's ``results.json``.
        """
        tensorboard = self._live_tensorboard() if self.enabled else None
        if tensorboard is not None:
            for name, value in _final_figures(results).items():
                tensorboard.add_scalar(f"final/{name}", value, int(step))

    def write_hparams(self, hparams: Mapping[str, HParamValue]) -> None:
        """Record the hyperparameters and the HParams session-start record (TensorBoard keeps the first session's).

        Parameters
        ----------
        hparams : Mapping[str, HParamValue]
            :func:`_flat_hparams` of the resolved config.
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
            Cells per row.
        """
        if not self.enabled or not rows:
            return
        lines = ["| " + " | ".join(map(_table_cell, columns)) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(map(_table_cell, row)) + " |" for row in rows]
        tensorboard = self._live_tensorboard()
        if tensorboard is not None:
            tensorboard.add_text(tag, "\n".join(lines), int(step))

    def _live_tensorboard(self) -> Any:
        """Return the TensorBoard writer, or ``None`` once its thread died (a next flush would hang)."""
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

    def _end_session(self, step: int, status: str) -> None:
        """Record how this session ended: ``run/end_status`` and, once finished, the session-end record."""
        if status not in END_STATUS_VALUES:
            raise ValueError(f"session status {status!r} is none of {sorted(END_STATUS_VALUES)}")
        tensorboard = self._live_tensorboard() if self.enabled else None
        if tensorboard is None:
            return
        tensorboard.add_scalar(END_STATUS_TAG, END_STATUS_VALUES[status], int(step))
        if status != FINISHED:
            return
        from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData
        from tensorboardX.summary import hparams as hparams_summaries

        _, _, session_end = hparams_summaries({}, {})  # tensorboardX's record: STATUS_SUCCESS, without the time.
        plugin_data = session_end.value[0].metadata.plugin_data
        content = HParamsPluginData.FromString(plugin_data.content)
        content.session_end_info.end_time_secs = time.time()
        plugin_data.content = content.SerializeToString()
        tensorboard.file_writer.add_summary(session_end)

    def close(self, session_status: str | None = None, step: int = 0) -> None:
        """Flush and close the files, recording the session's end first.

        Parameters
        ----------
        session_status : str, optional
            :data:`FINISHED`, :data:`STOPPED` or :data:`FAILED`; None records nothing.
        step : int
            The session's last step.
        """
        if self.enabled:
            if session_status is not None:
                self._end_session(step, session_status)
            if self._jsonl is not None:
                self._jsonl.close()
            tensorboard = self._live_tensorboard()
            if tensorboard is not None:
                tensorboard.close()
            self.enabled = False
