"""benchmarks/harness.py: the timing loop, its summaries and medians, the machine record and the JSON report."""

from __future__ import annotations

import json
import pathlib
import statistics
import sys

import pytest

from benchmarks import harness


def test_time_calls_runs_the_warmup_untimed_then_times_each_call() -> None:
    calls: list[int] = []
    times = harness.time_calls(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(calls) == 6 and len(times) == 4 and all(value >= 0.0 for value in times)


def test_timing_summarizes_the_calls() -> None:
    times = [0.3, 0.1, 0.2, 0.6]
    summary = harness.timing(times)
    assert summary["median_s"] == pytest.approx(0.25) and summary["mean_s"] == pytest.approx(0.3)
    assert summary["min_s"] == 0.1 and summary["times_s"] == times


def test_medians_take_each_numeric_field_that_every_run_holds() -> None:
    runs = [{"rate": 3.0, "mfu": 0.5, "name": "a", "only_here": 1.0, "ok": True},
            {"rate": 1.0, "mfu": 0.7, "name": "b", "ok": False},
            {"rate": 2.0, "mfu": 0.6, "name": "c", "ok": True}]
    assert harness.medians(runs) == {"median_rate": 2.0, "median_mfu": statistics.median([0.5, 0.7, 0.6])}


def test_machine_names_the_cpu_and_jax_devices_only_when_jax_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    description = harness.machine()
    assert description["cpu_count"] > 0 and description["cpu"] and len(description["load_average_after"]) == 3
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    assert "device" not in harness.machine()


def test_emit_prints_and_writes_the_report_with_the_note_and_machine(tmp_path: pathlib.Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nested" / "report.json"
    report = harness.emit({"figure": 1.5}, out, note="quiet cores")
    printed = json.loads(capsys.readouterr().out)
    assert printed == report == json.loads(out.read_text())
    assert report["note"] == "quiet cores" and report["figure"] == 1.5 and report["machine"]["cpu_count"] > 0


@pytest.mark.slow
def test_run_json_parses_a_childs_json_and_names_a_failure() -> None:
    assert harness.run_json([sys.executable, "-c", "print('log'); print('{\"a\": 1}')"]) == {"a": 1}
    with pytest.raises(RuntimeError, match="exit 3"):
        harness.run_json([sys.executable, "-c", "import sys; sys.exit(3)"])
