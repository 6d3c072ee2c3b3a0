"""benchmarks/complexity.py --quick runs and writes complete results (no timing thresholds here)."""

import json
import math
import os
import pathlib
import subprocess
import sys

from benchmarks.complexity import LAYER_TYPES

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quick_complexity_benchmark_writes_json_and_plot(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "complexity.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.complexity", "--quick", "--out", str(out)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]

    results = json.loads(out.read_text())
    assert out.with_suffix(".png").stat().st_size > 0
    assert set(results["exponents"]) == set(LAYER_TYPES)
    for layer_type, fit in results["exponents"].items():
        assert fit["time_n"] is not None and math.isfinite(fit["time_n"]), (layer_type, fit)
        assert fit["time_d"] is not None and math.isfinite(fit["time_d"]), (layer_type, fit)
        assert fit["paper_complexity"].startswith("O(")
    grid = results["grid"]
    for sweep, sizes in (("n", grid["lengths"]), ("d", grid["widths"])):
        measured = {(record["layer"], record[sweep]) for record in results["sweeps"][sweep]}
        assert measured == {(layer, size) for layer in LAYER_TYPES for size in sizes}
        assert all(record["median_s"] > 0 for record in results["sweeps"][sweep])
    # Memory is deterministic (XLA's buffer assignment), so its growth is checked where it was measured
    # (CPU): full attention's temporaries hold the [n, n] scores (additive attention's too: its [n, n, d]
    # tanh is fused into the scores), restricted and linear attention's grow linearly. (Causal linear
    # attention is one chunk of 64 positions at the quick grid's lengths, so quadratic there.)
    if results["environment"]["backend"] == "cpu":
        exponents = results["exponents"]
        for layer_type in ("self_attention", "unscaled_self_attention", "additive_self_attention"):
            assert exponents[layer_type]["temp_bytes_n"] > 1.5, layer_type
        for layer_type in ("restricted_self_attention", "linear_self_attention"):
            assert exponents[layer_type]["temp_bytes_n"] < 1.2, layer_type
