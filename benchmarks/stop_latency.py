"""Time from SIGTERM to exit of a training process: the step in progress, the checkpoint, the exit.

For each model shape, starts ``python -m attention_jax.main`` on the small synthetic corpus (vocabulary
1,000), waits until it has logged ``--warm_steps`` steps (compilation done), sends SIGTERM and measures
the wall time until the process has exited (status 75, checkpoint written). Also reads, from the
trainer's log, how many steps it trained after the last one that had finished when the signal came
(``steps_after_signal``), and the median step time from the logged steps. Each shape is measured
``--repeats`` times, alternating shapes; the JSON holds every run and the medians.

Run (from the repository root)::

    python benchmarks/stop_latency.py --repeats=3 --out=benchmarks/results/stop_latency_cpu.json

Shapes: ``tiny`` (configs/tiny.py: 2+2 layers, d_model 128) and ``base`` (the paper's base model: 6+6
layers, d_model 512, d_ff 2048, 8 heads) with 1,024 tokens per batch. Timings on a shared 2-core CPU
machine are noisy; the step counts are not.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks import command_line  # noqa: E402

COMMON = dict(dataset="synthetic_en_de/small", vocab_size=1000, max_len=16, tokens_per_batch=1024,
              eval_every_steps=0, checkpoint_every_steps=0, num_bleu_examples=0, final_bleu=False,
              log_every_steps=1, num_train_steps=1_000_000)
SHAPES = {"tiny": ("configs/tiny.py", {}),
          "base": ("configs/base.py", dict(num_layers=6, d_model=512, d_ff=2048, num_heads=8, key_dim=64,
                                           value_dim=64))}


def _stop_once(shape: str, data_dir: str, warm_steps: int) -> dict:
    config, overrides = SHAPES[shape]
    settings = dict(COMMON, data_dir=data_dir, **overrides)
    with tempfile.TemporaryDirectory() as workdir:
        log_path = pathlib.Path(workdir) / "log.txt"
        command = [sys.executable, "-m", "attention_jax.main", f"--config={config}", f"--workdir={workdir}/run",
                   "--log_format=absl",  # Microsecond times, read by _seconds.
                   *[f"--config.{key}={value}" for key, value in settings.items()]]
        with open(log_path, "w") as log:
            trainer = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                       env=dict(os.environ, PYTHONUNBUFFERED="1"))
        while not re.search(rf"step {warm_steps}/", log_path.read_text(errors="replace")):
            if trainer.poll() is not None:
                raise RuntimeError(f"{shape}: trainer exited early:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        signalled = time.perf_counter()
        trainer.send_signal(signal.SIGTERM)
        status = trainer.wait()
        exit_s = time.perf_counter() - signalled
        text = log_path.read_text(errors="replace")
    stopped = re.search(r"Stopped at step (\d+) on request \((\d+) step\(s\)", text)
    if status != 75 or stopped is None:
        raise RuntimeError(f"{shape}: exit {status}, no stop line:\n{text[-3000:]}")
    stamps = [_seconds(line) for line in text.splitlines() if re.search(r"progress\.py:\d+\] step \d+/", line)]
    step_s = statistics.median(b - a for a, b in zip(stamps[1:], stamps[2:])) if len(stamps) > 3 else None
    return {"shape": shape, "signal_to_exit_s": round(exit_s, 3), "stopped_at_step": int(stopped.group(1)),
            "steps_after_signal": int(stopped.group(2)), "median_step_s": step_s and round(step_s, 4)}


def _seconds(log_line: str) -> float:
    hours, minutes, seconds = re.search(r" (\d\d):(\d\d):(\d\d\.\d+) ", log_line).groups()
    return 3600 * int(hours) + 60 * int(minutes) + float(seconds)


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_list("shapes", ["tiny", "base"], f"Model shapes to stop, a subset of {sorted(SHAPES)}.")
    flags.DEFINE_integer("repeats", 3, "Stops per shape, alternating shapes.")
    flags.DEFINE_integer("warm_steps", 5, "Logged steps before the signal.")
    flags.DEFINE_string("data_dir", "", "Prepared data (default: a temporary directory).")
    flags.DEFINE_string("out", "", "Also write the JSON here.")


def main(argv: list[str]) -> None:
    """Measure, print and write the JSON."""
    del argv
    args = flags.FLAGS
    unknown = sorted(set(args.shapes) - set(SHAPES))
    if unknown or not args.shapes:
        command_line.fail(f"--shapes: unknown {unknown or 'empty list'}; choose from {sorted(SHAPES)}.")
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="stop_latency_data_")
    shapes = list(args.shapes)
    runs = [_stop_once(shape, data_dir, args.warm_steps) for _ in range(args.repeats) for shape in shapes]
    summary = {}
    for shape in shapes:
        mine = [run for run in runs if run["shape"] == shape]
        summary[shape] = {"median_signal_to_exit_s": statistics.median(run["signal_to_exit_s"] for run in mine),
                          "max_steps_after_signal": max(run["steps_after_signal"] for run in mine),
                          "median_step_s": statistics.median(run["median_step_s"] or 0.0 for run in mine)}
    report = {"what": "SIGTERM to exit of attention_jax.main (checkpoint written, exit 75)",
              "machine": f"{os.cpu_count()} CPU cores shared with other jobs (timings noisy), JAX on CPU",
              "settings": COMMON, "shapes": {name: dict(zip(("config", "overrides"), SHAPES[name])) for name in shapes},
              "summary": summary, "runs": runs}
    print(json.dumps(report, indent=2))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    command_line.run(main, define_flags)
