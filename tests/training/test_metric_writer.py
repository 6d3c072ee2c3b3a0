"""metrics.jsonl and TensorBoard records, and their clean-up when a run resumes after a crash."""

from __future__ import annotations

import json
import os
import pathlib
import threading

from attention_jax.training import metric_writer
from tests.support import event_files


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


RESULTS = {"step": 8, "dev_bleu": 21.5, "test_bleu": 22.25, "dev_ppl": 4.5, "test_ppl": 4.75, "eval_ppl": 5.0,
           "best_eval_ppl": 4.875, "bleu": 3.0, "eval_loss": 1.6, "name": "run"}  # Exact in float32.


def test_final_figures_are_scalars_and_the_finished_session_ends_with_success(tmp_path: pathlib.Path) -> None:
    writer = metric_writer.MetricWriter(str(tmp_path), enabled=True)
    writer.write_hparams({"d_model": 32.0})
    writer.write(8, "eval", {"perplexity": 5.0})
    writer.write_final(8, RESULTS)
    writer.close(session_status=metric_writer.FINISHED, step=8)
    tensorboard = tmp_path / "tensorboard"
    assert event_files.scalars(tensorboard, "final/") == {
        f"final/{name}": [(8, RESULTS[name])] for name in metric_writer.FINAL_FIGURES}
    assert event_files.scalars(tensorboard, "run/") == {"run/end_status": [(8, 1.0)]}
    assert event_files.session_end_status(tensorboard) == "STATUS_SUCCESS"
    assert [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [
        {"step": 8, "eval/perplexity": 5.0}]  # The final figures' home is results.json.


def test_stopped_and_failed_sessions_say_so_in_end_status_and_a_finishing_rerun_succeeds(
        tmp_path: pathlib.Path) -> None:
    """TensorBoard keeps a run's first session-end record: only a finished run writes one."""
    run, failed = tmp_path / "run", tmp_path / "failed"
    writer = metric_writer.MetricWriter(str(run), enabled=True)
    writer.write_hparams({"d_model": 32.0})
    writer.close(session_status=metric_writer.STOPPED, step=4)
    assert event_files.session_end_status(run / "tensorboard") is None  # Unknown, as while it trains.
    assert event_files.scalars(run / "tensorboard") == {"run/end_status": [(4, 0.0)]}
    resumed = metric_writer.MetricWriter(str(run), resumed_step=4, enabled=True)
    resumed.write_hparams({"d_model": 32.0})
    resumed.close(session_status=metric_writer.FINISHED, step=8)
    assert event_files.session_end_status(run / "tensorboard") == "STATUS_SUCCESS"
    assert event_files.scalars(run / "tensorboard") == {"run/end_status": [(4, 0.0), (8, 1.0)]}  # The last counts.
    writer = metric_writer.MetricWriter(str(failed), enabled=True)
    writer.close(session_status=metric_writer.FAILED, step=3)
    assert event_files.session_end_status(failed / "tensorboard") is None
    assert event_files.scalars(failed / "tensorboard") == {"run/end_status": [(3, -1.0)]}


def test_a_writer_without_metrics_file_writes_tensorboard_only(tmp_path: pathlib.Path) -> None:
    writer = metric_writer.MetricWriter(str(tmp_path), enabled=True, metrics_file=False)
    writer.write(20, "evaluate/test", {"bleu": 12.5, "perplexity": 3.25})
    writer.close()
    assert not (tmp_path / "metrics.jsonl").exists()
    assert event_files.scalars(tmp_path / "tensorboard") == {"evaluate/test/bleu": [(20, 12.5)],
                                                             "evaluate/test/perplexity": [(20, 3.25)]}
    assert event_files.session_end_status(tmp_path / "tensorboard") is None
