r"""Our train step and beam search against the Flax WMT example's, side by side; prints and writes JSON.

The peer is the Flax WMT example's model and beam search, run by ``peer_flax_wmt.py`` from
``../shared/peers/`` (see its README): read there, never copied; without it this script says so and
exits. Run from the repository root::

    python benchmarks/peer_flax.py --rounds=3 --out=benchmarks/results/peer_flax.json
    python benchmarks/peer_flax.py --tasks=beam_base --rounds=5      # one comparison only
    python benchmarks/peer_flax.py --quick                           # one-layer stand-ins, one round

Tasks (the shapes of the peer README): ``train_small`` (3 + 3 layers, d 256, ff 1024, 4 heads, vocab
8,000, 32 x 64 tokens), ``train_base`` (6 + 6 layers, d 512, ff 2048, 8 heads, vocab 32,000, 16 x 64
tokens) and ``beam_base`` (beam 4, alpha 0.6, base shape with vocab 37,000, 8 sentences of 64 source
tokens, every output forced to 64 tokens on both sides; ours sizes and stages its cache as the
Translator does, the peer's holds 64 positions from the start).

Each round runs every task as two fresh processes, ours (``train_step.py``, ``decode.py``) then the
peer's, so a busy neighbour slows both sides of a pair alike. Train throughput is target tokens over the
*mean* step (the peer reports a mean), beam throughput sentences over the mean of 3 searches; ``ratio``
> 1: ours faster. Results: ``docs/benchmarks.md``, "Against the Flax WMT example".
"""

from __future__ import annotations

import os
import sys
from typing import Any

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks import harness  # noqa: E402  (no JAX in this process)

SMALL = {"num_layers": 3, "d_model": 256, "d_ff": 1024, "num_heads": 4, "vocab_size": 8000}
BASE = {"num_layers": 6, "d_model": 512, "d_ff": 2048, "num_heads": 8, "vocab_size": 32000}
TRAIN_SHAPES = {"train_small": (SMALL, 32, 64), "train_base": (BASE, 16, 64)}
BEAM = {"sentences": 8, "source_len": 64, "output_len": 64, "vocab_size": 37000}
TASKS = (*TRAIN_SHAPES, "beam_base")
QUICK_TRAIN = (harness.QUICK_MODEL, 4, 8)
QUICK_BEAM = {"sentences": 2, "source_len": 8, "output_len": 8, "vocab_size": harness.QUICK_MODEL["vocab_size"]}


def _peer_shape_flags(model: dict[str, int]) -> list[str]:
    return [f"--d={model['d_model']}", f"--ff={model['d_ff']}", f"--heads={model['num_heads']}",
            f"--layers={model['num_layers']}", f"--vocab={model['vocab_size']}"]


def shapes_of(task: str, quick: bool) -> tuple[dict[str, int], int, int]:
    """``(model, rows, length)`` of a task: for ``beam_base``, the model and ``sentences`` x ``output_len``."""
    if task == "beam_base":
        beam = QUICK_BEAM if quick else BEAM
        model = (harness.QUICK_MODEL if quick else BASE) | {"vocab_size": beam["vocab_size"]}
        return model, beam["sentences"], beam["output_len"]
    return QUICK_TRAIN if quick else TRAIN_SHAPES[task]


def run_ours(task: str, steps: int, quick: bool = False) -> dict[str, Any]:
    """One fresh process of our benchmark for ``task``; returns the fields compared."""
    model, rows, length = shapes_of(task, quick)
    if task == "beam_base":
        result = harness.run_json([sys.executable, "benchmarks/decode.py", "--models=base", "--searches=beam",
                                   f"--batch_size={rows}", f"--output_len={length}", f"--source_len={length}",
                                   "--uncached=false", "--repeats=3", *(["--quick"] if quick else [])])
        run = result["models"][0]["runs"][0]
        return {"sentences_per_s": rows / run["mean_seconds_per_batch"], "best_sentences_per_s": run["sentences_per_s"]}
    config_flags = [f"--config.{key}={value}" for key, value in model.items()]
    result = harness.run_json([sys.executable, "benchmarks/train_step.py", "--config=configs/base.py", *config_flags,
                               f"--rows={rows}", f"--length={length}", f"--steps={steps}",
                               *(["--quick"] if quick else [])])
    return {"target_tokens_per_s": rows * length / result["step_time_mean_s"],
            "median_step_target_tokens_per_s": result["target_tokens_per_s"], "mfu": result["mfu"],
            "peak_matmul_gflops_per_s": result["peak_matmul_gflops_per_s"]}


def run_peer(task: str, steps: int, peer_dir: str, quick: bool = False) -> dict[str, Any]:
    """One fresh process of ``peer_flax_wmt.py`` for ``task``; returns the fields compared."""
    script = os.path.join(peer_dir, "peer_flax_wmt.py")
    model, rows, length = shapes_of(task, quick)
    if task == "beam_base":  # A 1-step train run of the search's rows: only the search is read.
        peer_flags = [*_peer_shape_flags(model), f"--batch={rows}", f"--len={length}", "--steps=1",
                      f"--decode_batch={rows}", f"--decode_len={length}"]
        return {"sentences_per_s": harness.run_json([sys.executable, script, *peer_flags])["decode_sentences_per_s"]}
    peer_flags = [*_peer_shape_flags(model), f"--batch={rows}", f"--len={length}", f"--steps={steps}",
                  "--decode_batch=1", "--decode_len=4"]  # The smallest search: only the train step is read.
    return {"target_tokens_per_s": harness.run_json([sys.executable, script, *peer_flags])["train_tgt_tokens_per_s"]}


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
    summary: dict[str, Any] = {name: {"runs": runs} | harness.medians(runs) for name, runs in (("ours", ours),
                                                                                                ("peer", peer))}
    field = "sentences_per_s" if "sentences_per_s" in peer[0] else "target_tokens_per_s"
    summary["ratio"] = summary["ours"][f"median_{field}"] / summary["peer"][f"median_{field}"]
    return summary


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    flags.DEFINE_list("tasks", list(TASKS), f"Comma-separated subset of {TASKS}.")
    flags.DEFINE_integer("rounds", None, "Alternating ours/peer pairs per task (default 3; 1 with --quick).")
    flags.DEFINE_integer("steps", None, "Timed train steps per run (default 10; 2 with --quick).")
    flags.DEFINE_string("peer_dir", str(harness.DEFAULT_PEER_DIR), "Folder holding peer_flax_wmt.py and flax_wmt/.")


def main(argv: list[str]) -> None:
    """Alternate the runs, print a table to stderr and the JSON to stdout."""
    del argv
    args = flags.FLAGS
    tasks = [task for task in args.tasks if task]
    if args.quick and not args["tasks"].present:
        tasks = ["train_base", "beam_base"]  # train_small would time the same one-layer stand-in again.
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown or not tasks:
        harness.fail(f"unknown tasks {unknown or 'empty list'}; choose from {TASKS}.")
    if not os.path.exists(os.path.join(args.peer_dir, "peer_flax_wmt.py")):
        print(f"Skipped: no Flax WMT peer at {args.peer_dir} (peer_flax_wmt.py); pass --peer_dir.", file=sys.stderr)
        return
    rounds = args.rounds or (1 if args.quick else 3)
    steps = args.steps or (2 if args.quick else 10)
    os.environ["PEER"] = os.path.join(args.peer_dir, "flax_wmt")
    runs: dict[str, dict[str, list]] = {task: {"ours": [], "peer": []} for task in tasks}
    for round_index in range(rounds):
        for task in tasks:
            runs[task]["ours"].append(run_ours(task, steps, args.quick))
            runs[task]["peer"].append(run_peer(task, steps, args.peer_dir, args.quick))
            print(f"round {round_index + 1}/{rounds} {task}: ours {runs[task]['ours'][-1]}, "
                  f"peer {runs[task]['peer'][-1]}", file=sys.stderr, flush=True)
    report = {"quick": args.quick, "rounds": rounds, "train_steps_per_run": steps,
              "shapes": {task: shapes_of(task, args.quick) for task in tasks},
              "tasks": {task: summarize_task(runs[task]["ours"], runs[task]["peer"]) for task in tasks}}
    for task, summary in report["tasks"].items():
        field = "sentences_per_s" if task == "beam_base" else "target_tokens_per_s"
        print(f"{task:12s} ours {summary['ours'][f'median_{field}']:9.2f}  peer "
              f"{summary['peer'][f'median_{field}']:9.2f}  {field}  ratio {summary['ratio']:.2f}x", file=sys.stderr)
    harness.emit(report, args.out)


if __name__ == "__main__":
    harness.run(main, define_flags)
