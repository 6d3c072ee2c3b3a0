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

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks import command_line  # noqa: E402  (absl and the project's error line; no JAX)

RUN_FIELDS = ("step_time_s", "step_time_mean_s", "target_tokens_per_s", "mfu", "peak_matmul_gflops_per_s")


def _run_json(argv: list[str]) -> dict[str, Any]:
    """Run a benchmark script and parse the JSON object on its last stdout line."""
    completed = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True)
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {completed.returncode}):\n{completed.stderr[-3000:]}")
    return json.loads(lines[-1])


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What :func:`compare` runs: the config and shape of both steps, how often, and PyTorch's Python."""

    config: str
    rows: int
    length: int
    steps: int
    rounds: int
    torch_python: str


def compare(args: Comparison, config_flags: list[str]) -> dict[str, Any]:
    """Alternate the two benchmarks ``args.rounds`` times; returns the JSON described above.

    Parameters
    ----------
    args : Comparison
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


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("config", "configs/base.py", "Config file of our step (train_step.py --config).")
    flags.DEFINE_integer("rows", 8, "Sentence pairs per batch.")
    flags.DEFINE_integer("length", 32, "Tokens per sentence, source and target.")
    flags.DEFINE_integer("steps", 10, "Timed steps per run.")
    flags.DEFINE_integer("rounds", 3, "Alternating JAX/PyTorch run pairs.")
    flags.DEFINE_string("torch_python", "/tmp/torchenv/bin/python", "A Python with torch installed (see peer_torch.py).")
    flags.DEFINE_string("out", "", "Also write the JSON here.")


def main(argv: list[str]) -> None:
    """Compare, print and optionally write the JSON; ``argv[1:]`` are ``--config.FIELD=VALUE`` overrides."""
    args = flags.FLAGS
    if not os.path.exists(args.torch_python):
        command_line.fail(f"--torch_python={args.torch_python} does not exist; create it with `python3 -m venv "
                          "/tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 numpy absl-py`.")
    comparison = Comparison(config=args.config, rows=args.rows, length=args.length, steps=args.steps,
                            rounds=args.rounds, torch_python=args.torch_python)
    emit_json(compare(comparison, argv[1:]), args.out)


def emit_json(report: dict[str, Any], out: str) -> None:
    """Print ``report`` as indented JSON and, when ``out`` is set, write it there too."""
    text = json.dumps(report, indent=1)
    print(text)
    if out:
        with open(out, "w", encoding="utf-8") as file:
            file.write(text + "\n")


if __name__ == "__main__":
    command_line.run(main, define_flags, passes_config_overrides=True)
