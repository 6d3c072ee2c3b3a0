"""What the persistent compilation cache saves: the same short training run with a cold and a warm cache.

Runs ``python -m attention_jax.main`` twice in fresh work directories, both pointing
``--config.compilation_cache_dir`` at one new directory: the first run compiles every train-step shape
and the evaluation step and writes them to the cache (cold), the second loads them (warm), as a resumed
run, another seed of a sweep row or a rerun does. Prints (and with ``--out`` writes) JSON with each
run's process wall time, the training time in ``results.json`` and the cache's size.

Run (from the repository root; further ``--config.FIELD=VALUE`` flags go to both runs)::

    python benchmarks/compilation_cache.py --config=configs/tiny.py --steps=50 \
        --out=benchmarks/results/compilation_cache_tiny.json
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks import command_line  # noqa: E402


def _train(config: str, workdir: pathlib.Path, cache_dir: pathlib.Path, steps: int,
           extra: list[str]) -> dict:
    """One training process; returns its wall time and results."""
    environment = {key: value for key, value in os.environ.items() if key != "JAX_COMPILATION_CACHE_DIR"}
    command = [sys.executable, "-m", "attention_jax.main", f"--config={config}", f"--workdir={workdir}",
               f"--config.compilation_cache_dir={cache_dir}", f"--config.num_train_steps={steps}",
               "--config.eval_every_steps=0", "--config.num_bleu_examples=0", "--config.final_bleu=False",
               f"--config.log_every_steps={steps}", "--config.checkpoint_every_steps=0", *extra]
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True)
    wall_s = time.perf_counter() - started
    if completed.returncode != 0:
        raise RuntimeError(f"training failed (exit {completed.returncode}):\n{completed.stderr[-3000:]}")
    results = json.loads((workdir / "results.json").read_text())
    return {"process_wall_s": round(wall_s, 2), "training_wall_s": round(results["wall_s"], 2),
            "train_loss": results["train_loss"]}


def measure(config: str, steps: int, extra: list[str]) -> dict:
    """Cold then warm run of ``config`` for ``steps`` steps.

    Parameters
    ----------
    config : str
        Config file argument, e.g. ``configs/tiny.py``.
    steps : int
        Training steps per run.
    extra : list[str]
        Further ``--config.FIELD=VALUE`` flags.

    Returns
    -------
    dict
        ``cold`` and ``warm`` runs, ``saved_s`` (process wall time saved by the warm cache) and the
        cache's file count and size.

    Notes
    -----
    Both runs train the same steps on the same data, so their losses are equal: the cache changes
    when a program is compiled, never what it computes.
    """
    with tempfile.TemporaryDirectory(prefix="compilation_cache_") as scratch:
        scratch_path = pathlib.Path(scratch)
        cache_dir = scratch_path / "cache"
        cold = _train(config, scratch_path / "cold", cache_dir, steps, extra)
        warm = _train(config, scratch_path / "warm", cache_dir, steps, extra)
        files = [path for path in cache_dir.rglob("*") if path.is_file()]
        return {"config": config, "steps": steps, "overrides": extra, "cold": cold, "warm": warm,
                "saved_s": round(cold["process_wall_s"] - warm["process_wall_s"], 2),
                "cache_files": len(files), "cache_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1)}


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("config", "configs/tiny.py", "Config file of both training runs.")
    flags.DEFINE_integer("steps", 50, "Training steps per run.")
    flags.DEFINE_string("out", "", "Also write the JSON here.")


def main(argv: list[str]) -> None:
    """Measure, print JSON (and write it with ``--out``); ``argv[1:]`` are ``--config.FIELD=VALUE`` overrides."""
    options = flags.FLAGS
    report = measure(options.config, options.steps, argv[1:])
    text = json.dumps(report, indent=2)
    print(text)
    if options.out:
        pathlib.Path(options.out).write_text(text + "\n")


if __name__ == "__main__":
    command_line.run(main, define_flags, passes_config_overrides=True)
