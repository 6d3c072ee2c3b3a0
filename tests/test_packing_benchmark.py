"""benchmarks/packing.py --quick runs and writes complete results (no timing thresholds here)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests import test_input_pipeline as pipeline_tests

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_packing_benchmark_writes_every_mode(tmp_path: pathlib.Path) -> None:
    pipeline_tests._make_corpus(tmp_path / "tsv")
    out = tmp_path / "packing.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.packing", "--quick", "--out", str(out),
         f"--dataset=tsv:{tmp_path / 'tsv'}", f"--data_dir={tmp_path / 'tfds'}", "--one_length"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]

    results = json.loads(out.read_text())
    assert results["tokens_per_batch_unit"] == "real"
    assert results["packed_row_lengths"] == [12, 24, 32]  # The default: 3/8, 3/4 and all of max_len.
    [(packed_rows, packed_length)] = results["packed_one_length"]["local_batch_shapes"]  # One shape of max_len.
    assert packed_length == 32 and packed_rows >= 512 // 32  # Real tokens: at least the slot-counted rows.
    for rows, length in results["packed"]["local_batch_shapes"]:
        assert length in (12, 24, 32) and rows >= 512 // length
    # Attention spans whole rows: shorter rows for short pairs attend over fewer positions.
    assert results["packed"]["mean_attended_length"] < results["packed_one_length"]["mean_attended_length"] == 32
    # Every mode carries about the budget (512) of real tokens per step on the longer side.
    for mode in ("unpacked", "packed", "packed_one_length"):
        longer = max(results[mode]["real_target_tokens_per_step"], results[mode]["real_source_tokens_per_step"])
        assert 0.6 * 512 <= longer <= 1.3 * 512, (mode, longer)
    assert len(results["unpacked"]["local_batch_shapes"]) > 1  # One per used bucket.
    for mode in ("unpacked", "packed"):
        assert len(results[mode]["round_rates"]) == results["rounds"]
        assert results[mode]["real_target_tokens_per_s"] > 0
        assert 0 <= results[mode]["targets_padding_fraction"] < 1
    # Packing fills rows: less padding on the target side than bucketing (a property of the data, not timing).
    assert results["packed"]["targets_padding_fraction"] < results["unpacked"]["targets_padding_fraction"]
    assert results["packed_over_unpacked_real_target_tokens_per_s"] > 0
    assert results["packed_one_length_over_unpacked_real_target_tokens_per_s"] > 0
