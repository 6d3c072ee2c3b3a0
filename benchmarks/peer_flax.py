r"""Our train step and beam search against the Flax WMT example's, side by side; prints and writes JSON.

The peer is the Flax WMT example's model and beam search, run by ``peer_flax_wmt.py`` from
``../shared/peers/`` (see its README). It is read from there when present and never copied into this
repository; without it this script says so and exits. Run from the repository root::

    python benchmarks/peer_flax.py --rounds=3 --out=benchmarks/results/peer_flax.json
    python benchmarks/peer_flax.py --tasks=beam_base --rounds=5      # one comparison only

Tasks (the shapes of the peer README):

- ``train_small``: 3 + 3 layers, d 256, ff 1024, 4 heads, vocab 8,000, 32 x 64 tokens;
- ``train_base``: 6 + 6 layers, d 512, ff 2048, 8 heads, vocab 32,000, 16 x 64 tokens;
- ``beam_base``: beam 4, alpha 0.6, base shape with vocab 37,000, 8 sentences of 64 source tokens,
  exactly 64 output tokens each (random weights; EOS suppressed on both sides, every beam runs all
  64 steps). Ours sizes its cache as the Translator does (64 positions here, grown in its default
  2 stages: 32, then 64); the peer's holds 64 from the start.

Each round runs every task as two fresh processes, ours then the peer's (compile, warm up, time), so
a busy neighbour slows both sides of a pair alike; the JSON keeps every run and the medians. Train
throughput is target tokens over the *mean* step time on both sides (the peer reports a mean); beam
throughput is sentences over the mean of 3 timed searches on both sides. ``ratio`` > 1: ours faster.

Results, and the profiles of where the time went in each round: ``docs/benchmarks.md``, "Against the Flax WMT
example".
"""

from __future__ import annotations

import os
import statistics
import sys
from typing import Any

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

from benchmarks import command_line  # noqa: E402
from peer_compare import _run_json, emit_json  # noqa: E402

DEFAULT_PEER_DIR = os.path.join(os.path.dirname(REPO_ROOT), "shared", "peers")
SMALL = {"num_layers": 3, "d_model": 256, "d_ff": 1024, "num_heads": 4, "vocab_size": 8000}
BASE = {"num_layers": 6, "d_model": 512, "d_ff": 2048, "num_heads": 8, "vocab_size": 32000}
TRAIN_SHAPES = {"train_small": (SMALL, 32, 64), "train_base": (BASE, 16, 64)}
BEAM = {"sentences": 8, "source_len": 64, "output_len": 64, "vocab_size": 37000}
TASKS = (*TRAIN_SHAPES, "beam_base")


def _peer_shape_flags(model: dict[str, int]) -> list[str]:
    return [f"--d={model['d_model']}", f"--ff={model['d_ff']}", f"--heads={model['num_heads']}",
            f"--layers={model['num_layers']}", f"--vocab={model['vocab_size']}"]


def run_ours(task: str, steps: int) -> dict[str, Any]:
    """One fresh process of our benchmark for ``task``; returns the fields compared."""
    if task == "beam_base":
        result = _run_json([sys.executable, "benchmarks/decode.py", "--models=base", "--searches=beam",
                            f"--batch_size={BEAM['sentences']}", f"--output_len={BEAM['output_len']}",
                            f"--source_len={BEAM['source_len']}", "--uncached=false", "--repeats=3",
                            "--json_line"])
        run = result["models"][0]["runs"][0]
        return {"sentences_per_s": BEAM["sentences"] / run["mean_seconds_per_batch"],
                "best_sentences_per_s": run["sentences_per_s"]}
    model, rows, length = TRAIN_SHAPES[task]
    config_flags = [f"--config.{key}={value}" for key, value in model.items()]
    result = _run_json([sys.executable, "benchmarks/train_step.py", "--config=configs/base.py", *config_flags,
                        f"--rows={rows}", f"--length={length}", f"--steps={steps}"])
    return {"target_tokens_per_s": rows * length / result["step_time_mean_s"],
            "median_step_target_tokens_per_s": result["target_tokens_per_s"], "mfu": result["mfu"],
            "peak_matmul_gflops_per_s": result["peak_matmul_gflops_per_s"]}


def run_peer(task: str, steps: int, peer_dir: str) -> dict[str, Any]:
    """One fresh process of ``peer_flax_wmt.py`` for ``task``; returns the fields compared."""
    script = os.path.join(peer_dir, "peer_flax_wmt.py")
    if task == "beam_base":  # A 1-step train run of 8 rows: only the search is read.
        peer_flags = [*_peer_shape_flags(BASE | {"vocab_size": BEAM["vocab_size"]}), f"--batch={BEAM['sentences']}",
                      f"--len={BEAM['source_len']}", "--steps=1", f"--decode_batch={BEAM['sentences']}",
                      f"--decode_len={BEAM['output_len']}"]
        return {"sentences_per_s": _run_json([sys.executable, script, *peer_flags])["decode_sentences_per_s"]}
    model, rows, length = TRAIN_SHAPES[task]
    peer_flags = [*_peer_shape_flags(model), f"--batch={rows}", f"--len={length}", f"--steps={steps}",
                  "--decode_batch=1", "--decode_len=4"]  # The smallest search: only the train step is read.
    return {"target_tokens_per_s": _run_json([sys.executable, script, *peer_flags])["train_tgt_tokens_per_s"]}


def summarize_task(ours: list[dict[str, Any]], peer: list[dict[str, Any]]) -> dict[str, Any]:
    """Runs, per-field medians and ``ratio`` (our median throughput over the peer's) of one task.

    Parameters
    ----------
    ours, peer : list of dict
        One dict per run, as :func:`run_ours` / :func:`run_peer` return them.

    Returns
    -------
    dict[str, Any]
        ``{"ours": {"runs", "median_<field>"...}, "peer": {...}, "ratio": float}``.
    """
    summary: dict[str, Any] = {}
    for name, runs in (("ours", ours), ("peer", peer)):
        summary[name] = {"runs": runs} | {f"median_{field}": statistics.median(run[field] for run in runs)
                                          for field in runs[0]}
    field = "sentences_per_s" if "sentences_per_s" in peer[0] else "target_tokens_per_s"
    summary["ratio"] = summary["ours"][f"median_{field}"] / summary["peer"][f"median_{field}"]
    return summary


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_list("tasks", list(TASKS), f"Comma-separated subset of {TASKS}.")
    flags.DEFINE_integer("rounds", 3, "Alternating ours/peer pairs per task.")
    flags.DEFINE_integer("steps", 10, "Timed train steps per run.")
    flags.DEFINE_string("peer_dir", DEFAULT_PEER_DIR, "Folder holding peer_flax_wmt.py and flax_wmt/.")
    flags.DEFINE_string("note", "", "Recorded in the JSON: machine load, anything that affects timings.")
    flags.DEFINE_string("out", "", "Also write the JSON here.")


def main(argv: list[str]) -> None:
    """Alternate the runs, print a table to stderr and the JSON to stdout."""
    del argv
    args = flags.FLAGS
    tasks = [task for task in args.tasks if task]
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown or not tasks:
        command_line.fail(f"unknown tasks {unknown or 'empty list'}; choose from {TASKS}.")
    if not os.path.exists(os.path.join(args.peer_dir, "peer_flax_wmt.py")):
        print(f"Skipped: no Flax WMT peer at {args.peer_dir} (peer_flax_wmt.py); pass --peer_dir.", file=sys.stderr)
        return
    os.environ["PEER"] = os.path.join(args.peer_dir, "flax_wmt")
    runs: dict[str, dict[str, list]] = {task: {"ours": [], "peer": []} for task in tasks}
    for round_index in range(args.rounds):
        for task in tasks:
            runs[task]["ours"].append(run_ours(task, args.steps))
            runs[task]["peer"].append(run_peer(task, args.steps, args.peer_dir))
            print(f"round {round_index + 1}/{args.rounds} {task}: ours {runs[task]['ours'][-1]}, "
                  f"peer {runs[task]['peer'][-1]}", file=sys.stderr, flush=True)
    report = {"note": args.note, "rounds": args.rounds, "train_steps_per_run": args.steps,
              "shapes": {"train_small": TRAIN_SHAPES["train_small"], "train_base": TRAIN_SHAPES["train_base"],
                         "beam_base": BEAM},
              "tasks": {task: summarize_task(runs[task]["ours"], runs[task]["peer"]) for task in tasks}}
    for task, summary in report["tasks"].items():
        field = "sentences_per_s" if task == "beam_base" else "target_tokens_per_s"
        print(f"{task:12s} ours {summary['ours'][f'median_{field}']:9.2f}  peer "
              f"{summary['peer'][f'median_{field}']:9.2f}  {field}  ratio {summary['ratio']:.2f}x", file=sys.stderr)
    emit_json(report, args.out)


if __name__ == "__main__":
    command_line.run(main, define_flags)
