r"""Our JAX train step against PyTorch ``nn.Transformer`` at one shape, alternating runs; writes JSON.

A single pair of runs on a shared 2-core machine can differ by 20% from the next pair; this driver
runs ``train_step.py`` and ``peer_torch.py`` alternately ``--rounds`` times (each a fresh process:
compile, warm-up, ``--steps`` timed steps, median step time) and reports every run and the median per
framework, so a comparison survives a busy neighbour.

Run from the repository root (PyTorch in its own environment, see ``peer_torch.py``)::

    python benchmarks/peer_compare.py --config=configs/base.py --rows=8 --length=32 \
        --torch_python=/tmp/torchenv/bin/python --rounds=3 --out=benchmarks/results/peer_compare_base_8x32.json

Extra ``--config.key=value`` flags go to ``train_step.py`` (and the shape they imply to PyTorch).
Output: ``{"shape": ..., "jax": {"runs": [...], "median_step_time_s": ..., "median_mfu": ..., ...},
"torch": {...}, "torch_over_jax": ...}`` (a median for each field in :data:`RUN_FIELDS`);
``torch_over_jax > 1`` means our step is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_FIELDS = ("step_time_s", "step_time_mean_s", "target_tokens_per_s", "mfu", "peak_matmul_gflops_per_s")


def _run_json(argv: list[str]) -> dict[str, Any]:
    """Run a benchmark script and parse the JSON object on its last stdout line."""
    completed = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {completed.returncode}):\n{completed.stderr[-3000:]}")
    return json.loads(lines[-1])


def compare(args: argparse.Namespace, config_flags: list[str]) -> dict[str, Any]:
    """Alternate the two benchmarks ``args.rounds`` times; returns the JSON described above.

    Parameters
    ----------
    args : argparse.Namespace
        ``config``, ``rows``, ``length``, ``steps``, ``rounds``, ``torch_python``.
    config_flags : list[str]
        ``--config.key=value`` flags passed through to ``train_step.py``.

    Returns
    -------
    dict[str, Any]
        See :func:`summarize`.

    Notes
    -----
    JAX runs first in each round; the PyTorch run of the round reads its shape from the JAX run's
    JSON, so the two always time the same model size.
    """
    runs: dict[str, list[dict[str, Any]]] = {"jax": [], "torch": []}
    shape = None
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(args.rounds):
            jax_result = _run_json([sys.executable, "benchmarks/train_step.py", f"--config={args.config}",
                                    f"--rows={args.rows}", f"--length={args.length}", f"--steps={args.steps}",
                                    *config_flags])
            shape = jax_result["shape"]
            shape_path = os.path.join(scratch, "shape.json")
            with open(shape_path, "w", encoding="utf-8") as file:
                json.dump(jax_result, file)
            torch_result = _run_json([args.torch_python, "benchmarks/peer_torch.py", f"--shape_json={shape_path}",
                                      f"--steps={args.steps}"])
            for name, result in (("jax", jax_result), ("torch", torch_result)):
                runs[name].append({field: result.get(field) for field in RUN_FIELDS}
                                  | {"framework": result["framework"]})
            print(f"round {round_index + 1}/{args.rounds}: jax {jax_result['step_time_s']:.3f} s, "
                  f"torch {torch_result['step_time_s']:.3f} s", file=sys.stderr, flush=True)
    return summarize({"shape": shape, "rounds": args.rounds, "steps_per_run": args.steps,
                      "config": args.config, "config_flags": config_flags}, runs)


def summarize(header: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per framework, the median over runs of every timed field; and PyTorch's over our step time.

    Parameters
    ----------
    header : dict[str, Any]
        Fields copied to the front of the summary (shape, rounds, config, ...).
    runs : dict[str, list[dict[str, Any]]]
        ``{"jax": [...], "torch": [...]}``, each run a dict with :data:`RUN_FIELDS`.

    Returns
    -------
    dict[str, Any]
        ``header`` plus, per framework, ``runs`` and ``median_<field>`` for each of :data:`RUN_FIELDS`,
        and ``torch_over_jax`` (the ratio of median step times).

    Notes
    -----
    Each median is taken over runs separately, so the median MFU need not come from the run with the
    median step time.
    """
    summary = dict(header)
    for name, framework_runs in runs.items():
        summary[name] = {"runs": framework_runs} | {
            f"median_{field}": statistics.median(run[field] for run in framework_runs)
            for field in RUN_FIELDS if all(run.get(field) is not None for run in framework_runs)}
    summary["torch_over_jax"] = summary["torch"]["median_step_time_s"] / summary["jax"]["median_step_time_s"]
    return summary


def main() -> None:
    """Parse flags, compare, print and optionally write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/base.py")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--length", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="Timed steps per run.")
    parser.add_argument("--rounds", type=int, default=3, help="Alternating JAX/PyTorch run pairs.")
    parser.add_argument("--torch_python", default="/tmp/torchenv/bin/python",
                        help="A Python with torch installed (see peer_torch.py).")
    parser.add_argument("--out", default="", help="Also write the JSON here.")
    args, config_flags = parser.parse_known_args()
    unknown = [flag for flag in config_flags if not flag.startswith("--config.")]
    if unknown:
        parser.error(f"unknown flags {unknown}; only --config.key=value flags pass through.")
    if not os.path.exists(args.torch_python):
        parser.error(f"--torch_python={args.torch_python} does not exist; create it with "
                     "`python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 numpy`.")
    emit_json(compare(args, config_flags), args.out)


def emit_json(report: dict[str, Any], out: str) -> None:
    """Print ``report`` as indented JSON and, when ``out`` is set, write it there too."""
    text = json.dumps(report, indent=1)
    print(text)
    if out:
        with open(out, "w", encoding="utf-8") as file:
            file.write(text + "\n")


if __name__ == "__main__":
    main()
