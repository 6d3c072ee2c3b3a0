"""metrics.jsonl and TensorBoard records, and their clean-up when a run resumes after a crash."""

from __future__ import annotations

import json
import os
import pathlib
import threading

from attention_jax.training import metric_writer


def _steps(workdir: pathlib.Path) -> list[tuple[int, str]]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [(record["step"], next(key for key in record if key != "step")) for record in map(json.loads, lines)]


def test_records_are_json_lines_with_null_for_non_finite(tmp_path: pathlib.Path) -> None:
    writer = metric_writer.MetricWriter(str(tmp_path), enabled=True)
    writer.write(2, "train", {"loss": 1.5, "perplexity": float("inf")})
    writer.write(2, "eval", {"bleu_signature": "nrefs:1"})
    writer.close()
    first, second = map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
    assert first == {"step": 2, "train/loss": 1.5, "train/perplexity": None}
    assert second == {"step": 2, "eval/bleu_signature": "nrefs:1"}
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(tmp_path / "tensorboard"))


def test_resume_drops_records_after_the_restored_step(tmp_path: pathlib.Path) -> None:
    writer = metric_writer.MetricWriter(str(tmp_path), enabled=True)
    for step in (2, 4, 6, 8):
        writer.write(step, "train", {"loss": 1.0})
    writer.close()
    with open(tmp_path / "metrics.jsonl", "a", encoding="utf-8") as file:
        file.write('{"step": 10, "train/lo')  # Cut off by the crash.
    writer = metric_writer.MetricWriter(str(tmp_path), resumed_step=4, enabled=True)
    writer.write(6, "train", {"loss": 0.5})
    writer.close()
    assert _steps(tmp_path) == [(2, "train/loss"), (4, "train/loss"), (6, "train/loss")]


def test_disabled_writer_writes_nothing(tmp_path: pathlib.Path) -> None:
    writer = metric_writer.MetricWriter(str(tmp_path / "run"), enabled=False)
    writer.write(1, "train", {"loss": 1.0})
    writer.close()
    assert not (tmp_path / "run").exists()


def test_a_stopped_tensorboard_thread_never_hangs_the_run(tmp_path: pathlib.Path) -> None:
    """A full disk kills tensorboardX's writer thread: more events, flush and close must still return."""
    writer = metric_writer.MetricWriter(str(tmp_path))
    writer._tensorboard.file_writer.event_writer._worker.stop()  # As the thread ends on an OSError.

    def write_and_close() -> None:
        for step in range(1, 40):  # More events than tensorboardX's queue holds (10).
            writer.write(step, "train", {"loss": 1.0 / step})
        writer.flush()
        writer.close()

    worker = threading.Thread(target=write_and_close, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "writing to a stopped TensorBoard writer hangs"
    assert [step for step, _ in _steps(tmp_path)] == list(range(1, 40))  # metrics.jsonl has every record.
