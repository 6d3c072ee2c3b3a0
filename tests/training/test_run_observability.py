"""Runs you can watch and compare (issue 36): step time, data wait and MFU on the progress line and in
metrics.jsonl; the config as TensorBoard hyperparameters and sample translations as TensorBoard text;
progress lines during long evaluations.

The event files are read with tensorboardX's own protocol buffers (a dependency of the library), and,
where ``tensorboard`` is installed (``pip install -e ".[tensorboard]"``), with TensorBoard's own reader.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import pathlib
import re
import struct
from typing import Any, Iterator

import pytest

from attention_jax.evaluation import progress
from attention_jax.foundation import run_files
from attention_jax.training import device_peaks, metric_writer, train
from tests.support import event_files, fake_data

PROGRESS_LINE = re.compile(r"\| ([\d.]+) ms/step \(data wait ([\d.]+) ms\) \| MFU ([\d.e-]+)% \|")
SESSION_START_TAG = "_hparams_/session_start_info"  # tensorboard.plugins.hparams.metadata's tag.
TRANSLATIONS_TAG = "eval/sample_translations/text_summary"  # tensorboardX's text tag for eval/sample_translations.


class _Messages(logging.Handler):
    """Keeps the messages of the ``absl`` logger (the training log)."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _train_and_log(workdir: pathlib.Path, **overrides: Any) -> list[str]:
    """Train a tiny model on fake data with progress lines at every call; the log's messages."""
    handler, absl_logger = _Messages(), logging.getLogger("absl")
    level, every_s = absl_logger.level, progress.PROGRESS_EVERY_S
    absl_logger.addHandler(handler)
    absl_logger.setLevel(logging.INFO)
    progress.PROGRESS_EVERY_S = 0.0  # Every evaluation counts as long.
    try:
        train.train_and_evaluate(fake_data.tiny_experiment(**overrides), str(workdir),
                                 data=fake_data.FakeData(shapes=((8, 12, 12),)))
    finally:
        progress.PROGRESS_EVERY_S = every_s
        absl_logger.removeHandler(handler)
        absl_logger.setLevel(level)
    return handler.messages


@pytest.fixture(scope="module")
def greedy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, list[str]]:
    """Four steps, logged and evaluated every two; no sampled BLEU, so the samples are greedy translations.

    The final BLEU of the dev and test splits is greedy too (beam 1: one decoding program less to compile).
    """
    workdir = tmp_path_factory.mktemp("greedy_run")
    messages = _train_and_log(workdir, num_train_steps=4, log_every_steps=2, eval_every_steps=2,
                              checkpoint_every_steps=0, num_bleu_examples=0, num_sample_translations=2,
                              final_bleu=True, beam_size=1)
    return workdir, messages


def _events(workdir: pathlib.Path) -> Iterator[Any]:
    """Every event of the run's TensorBoard files, read as TFRecords of tensorboardX's ``Event`` protos."""
    from tensorboardX.proto import event_pb2

    for path in sorted((workdir / run_files.TENSORBOARD_DIR).glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            offset += 12  # The length and its checksum.
            yield event_pb2.Event.FromString(data[offset:offset + length])
            offset += length + 4  # The record and its checksum.


def _summary_values(workdir: pathlib.Path, tag: str) -> list[tuple[int, Any]]:
    return [(event.step, value) for event in _events(workdir) for value in event.summary.value if value.tag == tag]


# --- Step time, data wait and MFU -------------------------------------------------------------------

def test_close_interval_gives_step_time_and_data_wait_per_timed_step(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = itertools.chain([100.0], itertools.repeat(102.0))  # Resumed at 100 s, the interval closes at 102 s.
    monkeypatch.setattr(device_peaks.time, "time", lambda: next(clock))
    meter = device_peaks._Throughput()
    meter.resume()
    meter.add_tokens(4000.0)
    for wait in (0.010, 0.030, 0.020, 0.020):
        meter.add_step(wait)
    rates = meter.close_interval()
    assert (rates.tokens_per_s, rates.step_time_s, rates.steps) == (2000.0, 0.5, 4)
    assert rates.data_wait_s == pytest.approx(0.020)
    peak = device_peaks._DevicePeak(flops_per_s=1e12, source="test")
    assert rates.mfu(flops_per_token=1e6, peak=peak, device_count=2) == pytest.approx(2000.0 * 1e6 / 2e12)
    assert math.isnan(rates.mfu(flops_per_token=1e6, peak=None, device_count=1))


def test_peak_is_declared_else_datasheet_else_measured_once(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # Not the user's own cache of measured peaks.
    monkeypatch.delenv("ATTENTION_JAX_CACHE_DIR", raising=False)
    h100 = device_peaks._device_peak("NVIDIA H100 80GB HBM3", "bfloat16")
    assert h100.flops_per_s == 989.5e12 and "H100 SXM" in h100.source
    assert device_peaks._device_peak("NVIDIA H100 PCIe", "float32").flops_per_s == 378.0e12
    assert device_peaks._device_peak("NVIDIA A100-SXM4-40GB", "float32").flops_per_s == 156.0e12
    declared = device_peaks._device_peak("NVIDIA H100 80GB HBM3", "bfloat16", declared_tflops=400.0)
    assert declared.flops_per_s == 400e12 and "declared" in declared.source
    timed = []
    monkeypatch.setattr(device_peaks, "_MEASURED", {})
    monkeypatch.setattr(device_peaks, "measure_matmul_peak", lambda dtype, repeats: timed.append(dtype) or 5e10)
    monkeypatch.setattr(device_peaks, "_machine_load", lambda: (0.0, 2))
    first, second = (device_peaks._device_peak("cpu", "float32") for _ in range(2))
    assert first.flops_per_s == second.flops_per_s == 5e10 and timed == ["float32"]
    assert first.source.startswith("measured here once: best of 5 ")
    monkeypatch.setattr(device_peaks, "_MEASURED", {})  # A later process on the same machine: the cached figure.
    third = device_peaks._device_peak("cpu", "float32")
    assert third.flops_per_s == 5e10 and timed == ["float32"] and "cached in" in third.source


def test_a_peak_measured_while_other_processes_load_the_cpus_is_named_so(monkeypatch: pytest.MonkeyPatch) -> None:
    timed_products: list[int] = []
    monkeypatch.setattr(device_peaks, "measure_matmul_peak",
                        lambda dtype, repeats: timed_products.append(repeats) or 4e10)
    monkeypatch.setattr(device_peaks, "_machine_load", lambda: (2.4, 2))  # A sweep's two runs beside this one.
    busy = device_peaks._measured_peak("cpu", "float32")
    assert busy.source.startswith("measured here under load: best of 25 ") and timed_products == [25]
    assert "load 2.4 on 2 CPUs" in busy.source and "MFU high" in busy.source
    monkeypatch.setattr(device_peaks, "_machine_load", lambda: (0.3, 2))  # Below 0.25 per CPU: quiet.
    assert device_peaks._measured_peak("cpu", "float32").source.startswith("measured here once: best of 5 ")
    monkeypatch.setattr(device_peaks, "_machine_load", lambda: (9.0, 2))
    assert device_peaks._measured_peak("Tesla T4", "float32").source.startswith("measured here once")  # A GPU's own.


def test_machine_load_leaves_out_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_peaks.os, "getloadavg", lambda: (3.5, 1.0, 1.0))
    assert device_peaks._machine_load()[0] == 2.5
    monkeypatch.setattr(device_peaks.os, "getloadavg", lambda: (0.4, 1.0, 1.0))
    assert device_peaks._machine_load()[0] == 0.0 and device_peaks._machine_load()[1] >= 1


def test_measured_matmul_peak_is_positive() -> None:
    assert device_peaks.measure_matmul_peak("float32", size=64, repeats=2) > 0


@pytest.mark.end_to_end
def test_progress_line_and_metrics_have_step_time_data_wait_and_mfu(
        greedy_run: tuple[pathlib.Path, list[str]]) -> None:
    workdir, messages = greedy_run
    assert any(message.startswith("MFU against ") and "TFLOP/s per device x 1" in message and "measured" in message
               for message in messages), messages
    lines = [message for message in messages if message.startswith("step ")]
    assert [line.split()[1] for line in lines] == ["2/4", "4/4"]
    for line in lines:
        step_ms, wait_ms, mfu_percent = map(float, PROGRESS_LINE.search(line).groups())
        assert step_ms > 0 and 0 <= wait_ms <= step_ms and mfu_percent > 0, line
    records = [json.loads(line) for line in (workdir / run_files.METRICS_FILE).read_text().splitlines()]
    train_records = [record for record in records if "train/loss" in record]
    assert [record["step"] for record in train_records] == [2, 4]
    for record in train_records:
        assert record["train/step_time_ms"] > 0 and 0 <= record["train/data_wait_ms"] <= record["train/step_time_ms"]
        assert 0 < record["train/mfu"] < 1
    scalars = {value.tag for event in _events(workdir) for value in event.summary.value
               if value.HasField("simple_value")}
    assert {"train/step_time_ms", "train/data_wait_ms", "train/mfu"} <= scalars


# --- TensorBoard: hyperparameters and sample translations ------------------------------------------

def test_flat_hparams_flattens_nested_values_and_writes_lists_as_text() -> None:
    flat = metric_writer._flat_hparams({"d_model": 512, "share_embeddings": True, "dataset": "fake",
                                       "paper": {"dev_bleu": 25.8}, "mesh_shape": [-1], "name": None})
    assert flat == {"d_model": 512.0, "share_embeddings": True, "dataset": "fake", "paper.dev_bleu": 25.8,
                    "mesh_shape": "[-1]", "name": "None"}


@pytest.mark.end_to_end
def test_tensorboard_gets_the_config_as_hparams_and_sample_translations_as_text(
        greedy_run: tuple[pathlib.Path, list[str]]) -> None:
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    workdir, _ = greedy_run
    [(_, session_start)] = _summary_values(workdir, SESSION_START_TAG)
    assert session_start.metadata.plugin_data.plugin_name == "hparams"
    hparams = HParamsPluginData.FromString(session_start.metadata.plugin_data.content).session_start_info.hparams
    config = json.loads((workdir / run_files.CONFIG_FILE).read_text())
    assert hparams["d_model"].number_value == config["d_model"] == 32
    assert hparams["dataset"].string_value == "fake" and hparams["share_embeddings"].bool_value is True
    assert hparams["final_bleu_splits"].string_value == '["dev", "test"]'
    assert set(hparams) == set(metric_writer._flat_hparams(config))
    tables = _summary_values(workdir, TRANSLATIONS_TAG)
    assert [step for step, _ in tables] == [2, 4]  # At each evaluation, the final one included.
    for _, value in tables:
        assert value.metadata.plugin_data.plugin_name == "text"
        text = value.tensor.string_val[0].decode()
        header, rule, *rows = text.splitlines()
        assert header == "| source | reference | translation |" and rule == "|---|---|---|"
        pairs = fake_data.FakeData(shapes=((8, 12, 12),)).text_pairs("validation", max_pairs=2)
        assert [row.split(" | ")[0].lstrip("| ") for row in rows] == [source for source, _ in pairs]
        assert [row.split(" | ")[1] for row in rows] == [reference for _, reference in pairs]
        assert all(row.endswith(" |") and len(row.split(" | ")) == 3 for row in rows)


@pytest.mark.end_to_end
def test_tensorboard_itself_reads_the_hparams_and_the_text(greedy_run: tuple[pathlib.Path, list[str]]) -> None:
    pytest.importorskip("tensorboard", reason='TensorBoard is the optional extra: pip install -e ".[tensorboard]"')
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import metadata as hparams_metadata

    workdir, _ = greedy_run
    accumulator = event_accumulator.EventAccumulator(str(workdir / run_files.TENSORBOARD_DIR),
                                                     size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    assert accumulator.PluginTagToContent("hparams").keys() == {hparams_metadata.SESSION_START_INFO_TAG,
                                                                hparams_metadata.SESSION_END_INFO_TAG}
    start = hparams_metadata.parse_session_start_info_plugin_data(
        accumulator.PluginTagToContent("hparams")[hparams_metadata.SESSION_START_INFO_TAG])
    assert start.hparams["num_layers"].number_value == 1
    [text_tag] = accumulator.PluginTagToContent("text")
    assert [event.step for event in accumulator.Tensors(text_tag)] == [2, 4]
    assert "| source | reference | translation |" in accumulator.Tensors(text_tag)[-1].tensor_proto.string_val[0].decode()
    assert "eval/perplexity" in accumulator.Tags()["scalars"]  # The HParams tab's metric column for the run.


@pytest.mark.end_to_end
def test_tensorboard_gets_the_final_figures_of_results_json_and_the_finished_status(
        greedy_run: tuple[pathlib.Path, list[str]]) -> None:
    """What results.json holds at the end: scalars final/<name> at the last step, HParams metric columns."""
    workdir, _ = greedy_run
    results = json.loads((workdir / run_files.RESULTS_FILE).read_text())
    final = event_files.scalars(workdir / run_files.TENSORBOARD_DIR, "final/")
    assert set(final) == {f"final/{name}" for name in metric_writer.FINAL_FIGURES}  # dev/test BLEU and ppl, dev ppl.
    for tag, series in final.items():
        [(step, value)] = series
        assert step == results["step"] == 4
        assert value == pytest.approx(results[tag.removeprefix("final/")], rel=1e-6), tag  # float32 in the event.
    assert event_files.session_end_status(workdir / run_files.TENSORBOARD_DIR) == "STATUS_SUCCESS"
    assert event_files.scalars(workdir / run_files.TENSORBOARD_DIR, "run/") == {"run/end_status": [(4, 1.0)]}


# --- Progress during long evaluations --------------------------------------------------------------

@pytest.mark.end_to_end
def test_a_long_dev_evaluation_logs_batches_done(greedy_run: tuple[pathlib.Path, list[str]]) -> None:
    _, messages = greedy_run
    lines = [message for message in messages if message.startswith("dev evaluation at step 2: ")]
    assert [line.split(": ")[1].split(" (")[0] for line in lines] == ["1/3 batches", "2/3 batches", "3/3 batches"]
    assert all(re.search(r"\([\d.]+ batches/s, \d+ s left\)$", line) for line in lines), lines


@pytest.mark.end_to_end
def test_sampled_bleu_logs_progress_and_its_translations_are_the_samples(tmp_path: pathlib.Path) -> None:
    messages = _train_and_log(tmp_path, num_train_steps=2, log_every_steps=2, eval_every_steps=0,
                              checkpoint_every_steps=0, num_bleu_examples=3, num_sample_translations=2)
    assert any(re.fullmatch(r"sampled dev BLEU at step 2: 3/3 sentences \([\d.]+ sentences/s, 0 s left\)", message)
               for message in messages), messages
    assert "sampled dev BLEU at step 2: 3 sentences ..." in messages  # The start line, then the end line.
    assert any(re.fullmatch(r"sampled dev BLEU at step 2: done in \d+\.\d s \([\d.]+ sentences/s\)", message)
               for message in messages), messages
    logged = [message.split("\n  hyp: ")[1] for message in messages if "\n  hyp: " in message]
    [(step, table)] = _summary_values(tmp_path, TRANSLATIONS_TAG)
    rows = table.tensor.string_val[0].decode().splitlines()[2:]
    assert step == 2 and [row.split(" | ")[2].removesuffix(" |").rstrip() for row in rows] == logged[:2]


def test_progress_logger_is_quiet_for_quick_work_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    # On absl's logger itself: a test that parsed absl flags in this worker left it at WARNING (verbosity -1).
    with caplog.at_level(logging.INFO, logger="absl"):
        quick = progress.progress_logger("quick", 2, unit="batches", every_s=60.0, always_final=False)
        quick(1)
        quick(2)
        final = progress.progress_logger("final test BLEU", 2, every_s=60.0)
        final(1)
        final(2)
    messages = [record.getMessage() for record in caplog.records]
    assert [message.split(" (")[0] for message in messages] == ["final test BLEU: 2/2 sentences"]


@pytest.mark.integration
def test_each_new_batch_shape_says_it_compiles_and_how_long_it_took(tmp_path: pathlib.Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """The first step of each batch shape is minutes of compilation on a big model: it is announced and timed."""
    experiment = fake_data.tiny_experiment(num_train_steps=3, eval_every_steps=0, checkpoint_every_steps=3)
    with caplog.at_level(logging.INFO, logger="absl"):
        train.train_and_evaluate(experiment, str(tmp_path / "run"),
                                 data=fake_data.FakeData(shapes=((8, 12, 12), (8, 12, 12), (4, 12, 20))))
    messages = [record.getMessage() for record in caplog.records]
    compiling = [message for message in messages if message.startswith("Compiling the train step")]
    assert compiling == ["Compiling the train step for target batches of 8x12 (rows x length) ...",
                         "Compiling the train step for target batches of 4x20 (rows x length) ..."], messages
    compiled = [message for message in messages if message.startswith("Compiled and ran step")]
    assert [re.fullmatch(r"Compiled and ran step (\d+) in \d+\.\d s\.", message).group(1)  # type: ignore[union-attr]
            for message in compiled] == ["1", "3"], compiled
