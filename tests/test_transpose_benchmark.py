"""benchmarks/transpose.py --quick runs, checks its programs against NumPy and writes complete JSON."""

import json
import pathlib
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quick_transpose_benchmark_writes_every_shape_and_program(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "transpose.json"
    completed = subprocess.run([sys.executable, "benchmarks/transpose.py", "--quick", f"--out={out}"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads(out.read_text())
    assert [entry["shape"] for entry in results["shapes"]] == [[512, 256], [256, 64]]
    for entry in results["shapes"]:
        assert entry["bytes"] == 4 * entry["shape"][0] * entry["shape"][1]
        assert set(entry["median_ms"]) == {"whole", "row_blocks", "copy"}
        assert all(value > 0 for value in entry["median_ms"].values())
