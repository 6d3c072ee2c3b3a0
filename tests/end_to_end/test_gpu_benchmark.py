"""benchmarks/gpu.py: the peak table, the ratios, the quick mode's fields on any backend, and the full
mode's one-line refusal without a GPU (no timing thresholds here)."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from attention_jax.foundation import run_files
from tests.support import REPO_ROOT, train_support

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import gpu  # noqa: E402

TRAIN_FIELDS = {"step_time_s", "step_time_mean_s", "target_tokens_per_s", "mean_target_tokens_per_s", "compile_s",
                "model_flops_per_step", "mfu", "params", "loss", "speedup_vs_xla", "ours_over_peer"}
BEAM_FIELDS = {"sentences_per_s", "best_sentences_per_s", "seconds_per_batch", "mean_seconds_per_batch",
               "compile_and_first_run_s", "ours_over_peer"}
PEER_FIELDS = {"target_tokens_per_s", "step_s", "sentences_per_s", "params"}


@pytest.mark.parametrize("device_kind, bfloat16_tflops, float32_tflops", [
    ("NVIDIA H100 80GB HBM3", 989.5, 494.5),
    ("NVIDIA H100 PCIe", 756.5, 378.0),
    ("NVIDIA H100 NVL", 835.5, 417.5),
    ("NVIDIA H200", 989.5, 494.5),
    ("NVIDIA H200 NVL", 835.5, 417.5),
    ("NVIDIA A100-SXM4-80GB", 312.0, 156.0),
    ("NVIDIA A100 80GB PCIe", 312.0, 156.0),
    ("NVIDIA L4", 121.0, 60.0),
    ("NVIDIA L40S", 366.5, 183.0),
    ("NVIDIA A10", 125.0, 62.5),
])
def test_known_gpus_get_their_dense_datasheet_peak(device_kind, bfloat16_tflops, float32_tflops):
    for dtype, tflops in (("bfloat16", bfloat16_tflops), ("float32", float32_tflops)):
        peak, source = gpu.table_peak(device_kind, dtype)
        assert peak == pytest.approx(tflops * 1e12)
        assert "datasheet" in source


@pytest.mark.parametrize("device_kind", ["NVIDIA A10G", "Tesla V100-SXM2-16GB", "NVIDIA B200", "cpu", "TPU v5e"])
def test_other_devices_have_no_table_peak(device_kind):
    assert gpu.table_peak(device_kind, "bfloat16") is None


def test_ratios_against_xla_and_the_peer():
    ok = dict(target_tokens_per_s=300.0, mean_target_tokens_per_s=280.0, mfu=0.5)
    train = {"base": {"bfloat16": {"xla": dict(ok), "cudnn": dict(ok, target_tokens_per_s=450.0),
                                   "einsum": {"error": "RuntimeError: no"}}},
             "big": {"bfloat16": {"cudnn": dict(ok)}}}  # No xla record: no speedup_vs_xla.
    beam = {"base": {"bfloat16": {"sentences_per_s": 30.0}}, "big": {"bfloat16": {"sentences_per_s": 5.0}}}
    peer = {"base": {"bfloat16": {"target_tokens_per_s": 200.0, "sentences_per_s": 20.0}},
            "big": {"bfloat16": {"skipped": "no peer"}}}
    gpu.compare(train, beam, peer)
    base = train["base"]["bfloat16"]
    assert base["xla"]["speedup_vs_xla"] == 1.0 and base["cudnn"]["speedup_vs_xla"] == pytest.approx(1.5)
    assert base["cudnn"]["ours_over_peer"] == pytest.approx(1.4)  # Mean step against the peer's mean step.
    assert base["einsum"] == {"error": "RuntimeError: no"}
    assert train["big"]["bfloat16"]["cudnn"]["speedup_vs_xla"] is None
    assert train["big"]["bfloat16"]["cudnn"]["ours_over_peer"] is None
    assert beam["base"]["bfloat16"]["ours_over_peer"] == pytest.approx(1.5)
    assert beam["big"]["bfloat16"]["ours_over_peer"] is None
    text = gpu.table({"train": train, "beam": beam})
    assert "RuntimeError: no" in text and "1.50" in text


def test_a_partial_report_names_the_pending_pairs(tmp_path: pathlib.Path) -> None:
    record = {"target_tokens_per_s": 200.0, "mean_target_tokens_per_s": 190.0, "mfu": 0.5}
    train = {"base": {"bfloat16": {"einsum": dict(record), "xla": dict(record, target_tokens_per_s=100.0)}}}
    beam = {"base": {"bfloat16": {"sentences_per_s": 30.0}}}
    peer = {"base": {"bfloat16": {"target_tokens_per_s": 95.0, "sentences_per_s": 20.0}},
            "big": {"bfloat16": {"skipped": "no peer"}}}
    out = tmp_path / "gpu.json"
    run_files.write_json_atomically(str(out), gpu.build_report({"mode": "full"}, train, beam, peer,
                                                            [("big", "bfloat16")]))
    report = json.loads(out.read_text())
    assert report["complete"] is False and report["pending"] == ["big bfloat16"]
    assert report["train"]["base"]["bfloat16"]["einsum"]["speedup_vs_xla"] == 2.0
    assert report["train"]["base"]["bfloat16"]["einsum"]["ours_over_peer"] == 2.0
    assert report["beam"]["base"]["bfloat16"]["ours_over_peer"] == 1.5


def test_full_mode_without_a_gpu_exits_2_with_one_line(tmp_path: pathlib.Path) -> None:
    env = train_support.subprocess_env(str(tmp_path / "cache"))  # JAX_PLATFORMS=cpu: no GPU here.
    completed = train_support.run_python(["benchmarks/gpu.py", f"--out={tmp_path / 'gpu.json'}"], env, timeout=300)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "no GPU here" in completed.stderr and "--quick" in completed.stderr
    assert completed.stdout == "" and not (tmp_path / "gpu.json").exists()


def test_unknown_subset_is_rejected_in_one_line(tmp_path: pathlib.Path) -> None:
    env = train_support.subprocess_env(str(tmp_path / "cache"))
    completed = train_support.run_python(["benchmarks/gpu.py", "--quick", "--dtypes=float16"], env, timeout=120)
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.strip().splitlines() == [
        "gpu.py: error: --dtypes: unknown ['float16']; choose from ('float32', 'bfloat16')."]


@pytest.mark.slow
@pytest.mark.end_to_end
def test_quick_mode_writes_every_field(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "gpu.json"
    env = train_support.subprocess_env(str(tmp_path / "cache"))
    # One model and one dtype keep the test short; the others are the same loop body with other arguments.
    # bfloat16: the dtype of the device figures.
    # --smoke: the old name of --quick, still accepted.
    completed = train_support.run_python(["benchmarks/gpu.py", "--smoke", "--models=base", "--dtypes=bfloat16",
                                          f"--out={out}"], env)
    assert completed.returncode == 0, completed.stderr[-5000:]
    report = json.loads(out.read_text())
    assert json.loads(completed.stdout) == report
    assert report["mode"] == "quick" and report["device"]["backend"] == "cpu" and report["device"]["device_count"] >= 1
    assert report["complete"] is True and report["pending"] == []
    assert set(report["shapes"]) == set(gpu.FULL) | {"vocab_size", "beam_size", "alpha"}
    assert set(report["peaks"]) == {"bfloat16"}
    for peak in report["peaks"].values():
        assert peak["flops_per_s"] > 0 and peak["source"].startswith("measured here")
    assert set(report["train"]) == set(report["beam"]) == set(report["peer"]) == {"base"}
    for dtype in ("bfloat16",):
        assert set(report["train"]["base"]) == set(report["beam"]["base"]) == {dtype}
        records = report["train"]["base"][dtype]
        assert set(records) == set(gpu.IMPLEMENTATIONS)
        assert "cuDNN" in records["cudnn"]["error"] or "cudnn" in records["cudnn"]["error"]  # No cuDNN on a CPU.
        for implementation in ("einsum", "xla", "fused"):
            record = records[implementation]
            assert set(record) == TRAIN_FIELDS, (dtype, implementation, record)
            assert record["target_tokens_per_s"] > 0 and 0 < record["mfu"] and record["model_flops_per_step"] > 0
        assert records["xla"]["speedup_vs_xla"] == 1.0
        assert set(report["beam"]["base"][dtype]) == BEAM_FIELDS and report["beam"]["base"][dtype]["sentences_per_s"] > 0
        peer = report["peer"]["base"][dtype]
        if "skipped" in peer:  # ../shared/peers absent: no ratios.
            assert records["xla"]["ours_over_peer"] is None
        else:
            assert set(peer) == PEER_FIELDS, peer
            assert peer["target_tokens_per_s"] > 0 and peer["sentences_per_s"] > 0
            assert records["xla"]["ours_over_peer"] > 0 and report["beam"]["base"][dtype]["ours_over_peer"] > 0
    assert "beam 4 base" in completed.stderr
    assert report["machine"]["cpu_count"] > 0 and report["note"] == ""
