"""benchmarks/gpu_profile.py: the trace summary against hand-added sums, the peer's step wrapper on a stand-in
script, the smoke mode end to end on a CPU, and the full mode's one-line refusal (no timing thresholds)."""

from __future__ import annotations

import json
import os
import pathlib
import sys
from typing import Any

import jax
import pytest

from tests.support import train_support

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import gpu_profile  # noqa: E402


def _metadata(pid: int, process: str, threads: dict[int, str]) -> list[dict[str, Any]]:
    events = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": process}}]
    events += [{"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}
               for tid, name in threads.items()]
    return events


def _event(pid: int, tid: int, name: str, ts: float, dur: float, **args: str) -> dict[str, Any]:
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur, "args": args}


def gpu_like_trace() -> list[dict[str, Any]]:
    """Two steps on two streams of a GPU, with a derived line and host events that must not count."""
    gemm = "nvjet_hsh_256x128_2x1_v_bz_coopA_NNT"
    return [
        *_metadata(1, "/host:CPU", {10: "python"}),
        *_metadata(2, "/device:GPU:0", {20: "Stream #13(Compute)", 21: "Stream #14(MemcpyD2D)", 30: "XLA Ops"}),
        _event(1, 10, "PjitFunction(train)", 0, 5000),
        _event(1, 10, "loop_add_fusion", 0, 999, hlo_op="loop_add_fusion"),  # Host side: not device time.
        _event(2, 30, "custom-call.3", 0, 100, hlo_op="custom-call.3"),  # Derived from the stream: not again.
        # Step 1.
        _event(2, 20, gemm, 0, 100, hlo_op="custom-call.3", hlo_module="jit_train"),
        _event(2, 20, "loop_add_fusion", 100, 20, hlo_op="loop_add_fusion", hlo_module="jit_train"),
        _event(2, 20, "input_reduce_fusion_1", 120, 30, hlo_op="input_reduce_fusion.1", hlo_module="jit_train"),
        _event(2, 21, "MemcpyD2D", 140, 30),  # Overlaps the reduction by 10 us.
        # Step 2.
        _event(2, 20, gemm, 1000, 140, hlo_op="custom-call.7", hlo_module="jit_train"),
        _event(2, 20, "loop_add_fusion", 1140, 20, hlo_op="loop_add_fusion", hlo_module="jit_train"),
        _event(2, 20, "cudnn_generated_fort_native_sdpa_sm90", 1160, 50, hlo_module="jit_train"),
        _event(2, 20, "wrapped_transpose", 1210, 10, hlo_module="jit_train"),
        _event(2, 20, "loop_gather_fusion", 1220, 6, hlo_module="jit_train"),
        _event(2, 20, "loop_rng_bit_generator_fusion", 1226, 4, hlo_module="jit_train"),
        _event(2, 20, "sm90_xmma_gemm_bf16bf16_bf16f32", 1230, 30),
        {"ph": "i", "pid": 2, "tid": 20, "name": "marker", "ts": 1300},
    ]


def test_gpu_trace_counts_the_stream_events_once() -> None:
    summary = gpu_profile.summarize_trace(gpu_like_trace(), steps=2, top=3)
    # By hand, in us over 2 steps: gemm 100 + 140 + 30, cuDNN 50, add 2 x 20, reduce 30, transpose 10,
    # copy 30, gather 6, rng 4: 440 in all.
    assert summary["kernel_ms"] == pytest.approx(0.220)
    # Busy: 0-150 and 1000-1260 on the compute stream, and the copy's 150-170 beyond them: 430.
    assert summary["busy_ms"] == pytest.approx(0.215)
    expected_ms = {"matmul": 0.135, "cudnn/flash": 0.025, "fusion": 0.020, "reduce": 0.015, "copy/transpose": 0.020,
                   "scatter/gather": 0.003, "random/rng": 0.002, "other": 0.0}
    assert {name: record["ms"] for name, record in summary["categories"].items()} == pytest.approx(expected_ms)
    assert summary["categories"]["matmul"]["calls"] == 1.5
    assert summary["categories"]["matmul"]["share"] == pytest.approx(270 / 440, abs=1e-4)
    assert [entry["name"] for entry in summary["top"]] == [
        "nvjet_hsh_256x128_2x1_v_bz_coopA_NNT", "cudnn_generated_fort_native_sdpa_sm90", "loop_add_fusion"]
    first = summary["top"][0]
    assert first["ms"] == pytest.approx(0.120) and first["calls"] == 1.0 and first["mean_us"] == 120.0
    assert first["category"] == "matmul" and first["hlo_ops"] == ["custom-call.3", "custom-call.7"]
    assert first["share"] == pytest.approx(240 / 440, abs=1e-4)
    assert summary["modules"] == pytest.approx({"jit_train": 0.190, "(none named)": 0.030})
    assert summary["counted"] == {"source": "device streams", "processes": ["/device:GPU:0"],
                                  "threads": ["Stream #13(Compute)", "Stream #14(MemcpyD2D)"], "events": 11}
    assert {(row["process"], row["thread"]) for row in summary["threads"]} == {
        ("/host:CPU", "python"), ("/device:GPU:0", "Stream #13(Compute)"), ("/device:GPU:0", "Stream #14(MemcpyD2D)"),
        ("/device:GPU:0", "XLA Ops")}


def test_cpu_trace_counts_the_innermost_xla_operations() -> None:
    events = [
        *_metadata(7, "/host:CPU", {1: "tf_XLAPjRtCpuClient/1", 2: "python", 3: "tf_XLAEigen/2"}),
        _event(7, 2, "PjitFunction(f)", 0, 300),
        _event(7, 1, "while.5", 0, 100, hlo_op="while.5", hlo_module="jit_f"),  # Holds dot.1 and add_fusion.
        _event(7, 1, "dot.1", 10, 30, hlo_op="dot.1", hlo_module="jit_f"),
        _event(7, 1, "end: dot.1", 40, 0.5),
        _event(7, 1, "add_fusion", 50, 20, hlo_op="add_fusion", hlo_module="jit_f"),
        _event(7, 1, "ThunkExecutor::Execute (wait for completion)", 100, 1),
        _event(7, 3, "copy.2", 20, 40, hlo_op="copy.2", hlo_module="jit_f"),  # Beside the while, on a worker.
        _event(7, 3, "reduce.3", 200, 10, hlo_op="reduce.3", hlo_module="jit_f"),
    ]
    summary = gpu_profile.summarize_trace(events, steps=1, top=10)
    assert summary["kernel_ms"] == pytest.approx(0.100)  # 30 + 20 + 40 + 10 us; the while is not counted.
    assert summary["busy_ms"] == pytest.approx(0.070)  # 10-70 and 200-210.
    assert [entry["name"] for entry in summary["top"]] == ["copy.2", "dot.1", "add_fusion", "reduce.3"]
    assert {name: record["ms"] for name, record in summary["categories"].items() if record["ms"]} == pytest.approx(
        {"copy/transpose": 0.04, "matmul": 0.03, "fusion": 0.02, "reduce": 0.01})
    assert summary["counted"] == {"source": "host XLA operations", "processes": ["/host:CPU"],
                                  "threads": ["tf_XLAPjRtCpuClient/1", "tf_XLAEigen/2"], "events": 4}


@pytest.mark.parametrize("name, category", [
    ("nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NTN", "matmul"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", "matmul"),
    ("cutlass_80_tensorop_bf16_s16816gemm_relu", "matmul"),
    ("triton_gemm_dot_12", "matmul"),
    ("cudnn_generated_fort_native_sdpa_sm90_knob_7", "cudnn/flash"),
    ("flash_fwd_kernel", "cudnn/flash"),
    ("threefry2x32", "random/rng"),
    ("input_scatter_fusion_2", "scatter/gather"),
    ("input_reduce_fusion_3", "reduce"),
    ("MemcpyD2D", "copy/transpose"),
    ("loop_transpose_fusion", "copy/transpose"),
    ("loop_multiply_fusion", "fusion"),
    ("redzone_checker", "other"),
])
def test_categories_by_name(name: str, category: str) -> None:
    assert gpu_profile.category_of(name) == category


STAND_IN_PEER = """
import functools, os, sys
import jax, jax.numpy as jnp

@jax.jit
def other(x):
    return x * 2.0

@functools.partial(jax.jit, donate_argnums=(0,))
def step(x, y):
    return jnp.tanh(x @ y) + 1.0

calls = int(sys.argv[1].split("=")[1])
x, y = other(jnp.ones((8, 8))), jnp.ones((8, 8))
for _ in range(calls):
    x = step(x, y)
other(x).block_until_ready()
open(os.environ["MARKER"], "w").close()
"""


def test_peer_child_traces_only_the_steps_after_two_and_stops_the_script(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN_PEER)
    marker = tmp_path / "reached_the_end"
    monkeypatch.setenv("PEER", str(tmp_path))
    monkeypatch.setenv("MARKER", str(marker))
    argv, original_jit = list(sys.argv), jax.jit
    gpu_profile.peer_child([str(tmp_path / "trace"), "2", "float32", str(script), "--calls=5"])
    child = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert child["traced_steps"] == 2 and child["calls"] == 4 and child["traced_wall_ms"] > 0
    assert not marker.exists()  # Stopped after the fourth call.
    assert jax.jit is original_jit and sys.argv == argv
    events, _ = gpu_profile.load_trace(str(tmp_path / "trace"))
    summary = gpu_profile.summarize_trace(events, steps=2, top=5)
    assert set(summary["modules"]) == {"jit_step"} and summary["kernel_ms"] > 0

    # A script that ends before the traced steps are done: one message, the trace closed.
    with pytest.raises(SystemExit, match=r"called step\(\) 3 times; 4 were needed"):
        gpu_profile.peer_child([str(tmp_path / "trace_short"), "2", "float32", str(script), "--calls=3"])
    assert marker.exists() and jax.jit is original_jit and sys.argv == argv


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any], pathlib.Path]:
    """One ``--smoke`` run on the CPU (the peer from ``../shared/peers`` when it is there)."""
    tmp_path = tmp_path_factory.mktemp("gpu_profile")
    out, traces = tmp_path / "profile.json", tmp_path / "traces"
    env = train_support.subprocess_env(str(tmp_path / "cache"))
    completed = train_support.run_python(["benchmarks/gpu_profile.py", "--smoke", "--steps=2", "--top=5",
                                          f"--trace_dir={traces}", f"--out={out}"], env, timeout=400)
    assert completed.returncode == 0, completed.stderr[-5000:]
    report = json.loads(out.read_text())
    assert json.loads(completed.stdout) == report
    return completed, report, traces


def _check_side(record: dict[str, Any], trace_folder: pathlib.Path) -> None:
    assert record["steps"] == 2 and record["traced_wall_ms"] > 0
    assert record["counted"]["source"] == "host XLA operations" and record["counted"]["events"] > 0
    assert record["kernel_ms"] > 0 and 0 < record["busy_ms"] <= record["kernel_ms"] + 1e-3
    assert set(record["categories"]) == set(gpu_profile.CATEGORY_NAMES)
    assert sum(entry["ms"] for entry in record["categories"].values()) == pytest.approx(record["kernel_ms"], abs=5e-3)
    assert sum(entry["share"] for entry in record["categories"].values()) == pytest.approx(1.0, abs=1e-3)
    times = [entry["ms"] for entry in record["top"]]
    assert len(times) == 5 and times == sorted(times, reverse=True)
    assert sum(record["modules"].values()) == pytest.approx(record["kernel_ms"], abs=5e-3)
    assert pathlib.Path(record["trace_file"]).is_file() and trace_folder in pathlib.Path(record["trace_file"]).parents


@pytest.mark.slow
@pytest.mark.end_to_end
def test_smoke_mode_profiles_our_step(smoke_run: tuple[Any, dict[str, Any], pathlib.Path]) -> None:
    completed, report, traces = smoke_run
    assert report["mode"] == "smoke" and report["device"]["backend"] == "cpu"
    assert (report["model"], report["dtype"], report["attention_implementation"]) == ("base", "bfloat16", "einsum")
    assert report["shapes"] == {"rows": 4, "length": 8, "warmup_steps": 1, "steps": 2, "vocab_size": 256}
    ours = report["ours"]
    _check_side(ours, traces / "ours")
    assert set(ours["modules"]) == {"jit__lambda"}  # Only the train step ran inside the trace.
    assert ours["compile_s"] > 0 and ours["loss"] > 0
    assert "ms per step" in completed.stderr and "device busy" in completed.stderr


@pytest.mark.slow
@pytest.mark.end_to_end
def test_smoke_mode_profiles_the_peer(smoke_run: tuple[Any, dict[str, Any], pathlib.Path]) -> None:
    _, report, traces = smoke_run
    peer = report["peer"]
    if not os.path.exists(os.path.join(gpu_profile.DEFAULT_PEER_DIR, gpu_profile.PEER_SCRIPT)):
        assert set(peer) == {"skipped"} and report["ours_minus_peer_ms"] is None
        pytest.skip(f"no Flax WMT peer at {gpu_profile.DEFAULT_PEER_DIR}")
    _check_side(peer, traces / "peer")
    assert peer["peer_calls"] == gpu_profile.PEER_UNTRACED_CALLS + 2
    assert "jit_step" in peer["modules"]
    differences = report["ours_minus_peer_ms"]
    assert differences["kernel_ms"] == pytest.approx(report["ours"]["kernel_ms"] - peer["kernel_ms"], abs=1e-3)
    assert set(differences) == {"kernel_ms", "busy_ms", "traced_wall_ms", *gpu_profile.CATEGORY_NAMES}


def test_full_mode_without_a_gpu_exits_2_with_one_line(tmp_path: pathlib.Path) -> None:
    env = train_support.subprocess_env(str(tmp_path / "cache"))  # JAX_PLATFORMS=cpu: no GPU here.
    completed = train_support.run_python(["benchmarks/gpu_profile.py", f"--out={tmp_path / 'profile.json'}"], env,
                                         timeout=300)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "gpu_profile.py: error: no GPU here" in completed.stderr and "--smoke" in completed.stderr
    assert completed.stdout == "" and not (tmp_path / "profile.json").exists()
