"""The kept benchmarks' ``--quick`` modes run and write the harness's report (no timing thresholds here).

``time_to_bleu.py`` and ``gpu.py`` have their own files (``tests/end_to_end/test_time_to_bleu_benchmark.py``,
``tests/end_to_end/test_gpu_benchmark.py``).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.support import train_support

pytestmark = [pytest.mark.slow, pytest.mark.end_to_end]
PEER = pathlib.Path(__file__).resolve().parents[3] / "shared" / "peers" / "peer_flax_wmt.py"


def _quick(tmp_path: pathlib.Path, script: str, *extra: str) -> dict:
    out = tmp_path / "report.json"
    env = train_support.subprocess_env(str(tmp_path / "cache"))
    completed = train_support.run_python([f"benchmarks/{script}.py", "--quick", "--note=test", f"--out={out}",
                                          *extra], env, timeout=900)
    assert completed.returncode == 0, completed.stderr[-5000:]
    report = json.loads(out.read_text())
    assert json.loads(completed.stdout) == report
    assert report["quick"] is True and report["note"] == "test" and report["machine"]["cpu_count"] > 0
    return report


def test_train_step(tmp_path: pathlib.Path) -> None:
    report = _quick(tmp_path, "train_step")
    assert report["shape"]["num_layers"] == 1 and len(report["step_times_s"]) == 2
    assert report["target_tokens_per_s"] > 0 and 0 < report["mfu"] and report["loss"] > 0
    assert report["machine"]["backend"] == "cpu"


def test_decode(tmp_path: pathlib.Path) -> None:
    [model] = _quick(tmp_path, "decode")["models"]
    assert model["model"] == "tiny" and len(model["runs"]) == 4  # Beam and greedy, cached and not.
    assert all(run["steps"] == run["output_len"] == 8 and run["sentences_per_s"] > 0 for run in model["runs"])
    assert set(model["cache_speedup"]) == {"beam4", "greedy"}


def test_input_pipeline(tmp_path: pathlib.Path) -> None:
    report = _quick(tmp_path, "input_pipeline")
    corpus = report["synthetic_en_de/small"]
    assert corpus["timed_steps"] == 5 and corpus["train_tokens_per_s"] > 0
    assert report["settings"]["max_len"] == 8


def test_interactive_latency(tmp_path: pathlib.Path) -> None:
    report = _quick(tmp_path, "interactive_latency")
    assert report["lengths_words"] == [2, 4] and report["identical_translations"]
    [only_round] = report["rounds"]
    assert set(only_round) == set(report["summary"]) == {"before", "cold", "warm"}
    assert all(len(scenario["new_length_s"]) == 1 for scenario in only_round.values())


def test_peer_flax(tmp_path: pathlib.Path) -> None:
    if not PEER.exists():
        pytest.skip(f"no Flax WMT peer at {PEER}")
    report = _quick(tmp_path, "peer_flax")
    assert set(report["tasks"]) == {"train_base", "beam_base"} and report["rounds"] == 1
    assert all(task["ratio"] > 0 for task in report["tasks"].values())
