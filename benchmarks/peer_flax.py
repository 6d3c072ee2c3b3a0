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

Where the time went (base shape, on the shared 2-core CPU; ``jax.profiler`` traces of the compiled
programs, thread time per XLA operation, mapped to source lines through the HLO's ``op_name``):

- Beam search (8 sentences x beam 4, cache of 114 positions): decoder-layer matmuls 37%, the output
  projection (logits) 12%, transposes of the self-attention cache into the layout the score and value
  products want 16%, transposes of the cross-attention keys/values 8.5%, the beam reorder (gather)
  of the cache 6.6%, elementwise rest 18%. XLA already hoists the cross-attention key/value
  *projection* out of the ``while`` loop (it is loop-invariant), so it is not recomputed per step.
  Kept: the cache sized to the longest output the batch may produce (``decode.cache_length``) instead
  of source bucket + 50: 114 -> 64 positions here, 5.1 -> 4.1 s per batch (process CPU time 9.5 ->
  7.7 s); and decode-mode attention of one position as a fused multiply-and-sum over the cache as
  stored (``attention_jax/models/decode_attention.py``), which removes the per-step transposes: ~8% less
  CPU time per search (6.8-7.0 vs 7.4-7.7 s, alternating processes). Tried and dropped: a cache
  never reordered (each hypothesis writes its own slot, an ancestry table masks the others; scores
  over ``K L`` positions) cost more than the gather it saved; replacing XLA's ``TopK`` by ``k``
  max-reductions looked 700x faster in a microbenchmark but cost more CPU time in the full search
  (9.9 vs 9.2 s), so it was dropped too.
- Beam search again, with the cache in stages (``benchmarks/op_profile.py --task=beam_base``, quiet
  cores): transposes and copies were still 22.7% of the thread time, mostly every layer's
  cross-attention keys and values, loop-invariant yet transposed at every step. Cross-attention now
  takes the multiply-and-sum path as well; after it: matmuls 80.6% (the logits 17%), the beam
  reorder 8.4%, top-k 3.4%, transposes 3.0%; thread time -10%, wall time about +3% (the transposes
  had run beside other work on the second core).
- Beam search a third time (2 quiet cores of an AMD EPYC): every hypothesis still held its own copy
  of its sentence's cross-attention keys and values, so the hoisted projection ran ``K`` times over
  and every step read ``K`` copies. The hypotheses of a sentence now share one row
  (``decode_attention.single_query_attention`` with ``R`` query rows per key/value row): 1.54-1.59 ->
  1.36 s a batch in alternating ``benchmarks/decode.py`` runs, the peer ratio 1.29x -> 1.47x
  (``--tasks=beam_base --rounds=3`` before and after). Written with an ``R`` axis for self-attention
  too (``R = 1``), the same search took 4.0 s, so that path keeps its own form. What is left
  (``op_profile_beam_base_epyc.json``, 2.9 s of thread time for 2 searches): matmuls 70% (the logits
  22%), the beam reorder of the self-attention cache 14%, top-k 5%, transposes 4.6%.
- Train step (16 x 64 tokens, vocab 32,000): matmuls 75% of thread time (the three vocabulary-sized
  products, logits forward and both backward products, about 20%), dropout masks and scaling ~6%,
  layer norms ~3%, softmax of the loss ~1%, and hundreds of small fusions (weight transposes, adds)
  none above 0.5%. Model FLOPs utilization ~0.5 of the measured matmul peak means the matmuls run
  at about two thirds of the peak of a 2048^3 product; no single operation is out of line.
- Train step again, on the AMD EPYC (``benchmarks/op_profile.py --task=train_base``): the dropout
  masks were ~7% of the thread time, and twice that in wall time at the small shape. On CPUs JAX lowers
  its Threefry-2x32 hash as a ``while`` loop over the hash's five blocks of rounds, so every mask went
  through memory five times. ``attention_jax/cpu_kernels/dropout.py`` computes the same bits unrolled, one fusion
  (masks identical, losses equal to float rounding; tested against JAX and Flax): alternating
  ``benchmarks/train_step.py`` runs read +7-9% at the base shape and +11-12% at the small one. The
  accuracy metric's ``top_k`` (33 ms) became two levels of plain maxima (5.5 ms;
  ``cpu_kernels/argmax.py``): +1-3% at the small shape, within noise at the base shape, where the
  profile's thread time per step stayed the same (1,670 ms) because the loss's ``exp`` fusion, the
  next reader of the logits, grew from 6 to 28 ms. After both
  (``benchmarks/results/op_profile_train_base_epyc.json``): matmuls 67%, elementwise 20% (Adam's
  update alone 5%), transposes and copies 9%, reductions 4%.
- Train step a third time, on 2 cores of a Sapphire Rapids Xeon, after the Dense layers' 2-D backward
  products (``attention_jax/cpu_kernels/projection.py``): their ``x^T`` copies were the largest non-matmul
  operations after the loss (each FFN output layer's ``[1,024, 2,048]`` input, 17 ms of thread time a
  step, twelve times). XLA's CPU transpose reads one input column per output row, which thrashes once
  the input outgrows the L2 cache; transposed as 128-row blocks and concatenated
  (``projection.transpose_in_row_blocks``) it takes 2.9 instead of 9.7 ms (``benchmarks/transpose.py``).
  Alternating ``benchmarks/train_step.py`` runs: +3% at the base shape (medians 412 against 401
  target tokens/s), +3-13% at the small one. What is left
  (``benchmarks/results/op_profile_train_base_xeon_spr.json``): matmuls 74% (the three vocabulary-sized
  products 14%), elementwise 13%, transposes and copies 8.5% (the largest, 44 ms a step, a copy of
  the embedding lookups' scattered gradient, ``f32[32000, 1024]``, before it is added), reductions 4%.
- Beam search on the same machine, tried and dropped: ``top_k`` over the ``K V`` candidates through
  block maxima (the top ``2 K`` lie in the ``2 K`` best blocks; exact, ties included) cut the ``TopK``
  thread time from 273 to 21 ms for 2 searches, but the block maxima and the extra reads of the
  candidates grew by as much and 3 alternating ``benchmarks/decode.py`` rounds were within noise
  (2.00-2.11 against 1.96-2.07 sentences/s); 4 cache stages instead of 2 read 2.24-2.31 against
  2.13-2.32 sentences/s and compiled 2 s longer. The beam reorder itself runs at copy speed (12
  cache leaves of ``[32, 64, 8, 64]``: 10.6 ms gathered, 10.0 ms copied), so only fewer bytes would help.
- Beam search on the same machine, again: the optimized HLO showed every reordered cache leaf
  *copied* after its gather, back into the ``while`` loop's state buffer (a gather cannot write into
  the buffer it reads; the "copy speed" measured above included that copy). With two search steps
  per loop iteration (``beam_search.beam_search(steps_per_iteration=2)``) the second reorder writes
  back into the buffer the first one read, and the copies are gone: ``benchmarks/op_profile.py
  --task=beam_base`` at ``b9dc8e5`` and at ``c71d499`` read 1.16 -> 0.90 s of gathers and 0.54 -> 0.21 s
  of transposes and copies for 2 searches. Then the
  self-attention cache is kept heads first, ``[N, H, L, K]``, so both products of a decode step are
  batched matrix products over the cache as stored
  (``decode_attention.cached_single_query_attention``) instead of multiply-and-sum passes; and the
  logits read the shared embedding as stored (the per-search transposed copy was slower here, though
  faster on the EPYC). Alternating ``benchmarks/decode.py`` medians, seconds a batch: 3.95 -> 3.85
  (embedding as stored) -> 3.54 (two steps per iteration), then 2.89 -> 2.65 (heads first; the machine
  had sped up between the two comparisons). What is left
  (``benchmarks/results/op_profile_beam_base_xeon_spr.json``, 5.9 s of thread time for 2 searches against
  9.4 s before): matmuls 72% (the logits 17%), the beam reorder 12%, reductions 5%, top-k 4%.

On the 2-core development machine with nothing else running (``--rounds=2``,
``benchmarks/results/peer_flax_quiet_2cores.json``): train step 1.20x at the small shape and 1.09x at
the base shape, model FLOPs utilization 0.63 of the same runs' measured peak, beam search 1.14x.

On 2 quiet cores of an AMD EPYC with AVX-512 (``--rounds=3``,
``benchmarks/results/peer_flax_epyc_2cores.json``), after sharing the cross-attention keys and values: train
step 1.18x (small) and 1.20x (base), model FLOPs utilization 0.46 of that machine's measured matmul peak (~530
GFLOP/s), beam search 1.49x (per-round pairs 1.49, 1.50, 1.47). With the embedding then transposed once per
search for the logits (decode mode of ``Transformer.decode``), ``--tasks=beam_base --rounds=3``
(``peer_flax_beam_epyc_2cores.json``) read 1.58x (1.55, 1.61, 1.58). After the loop-free dropout masks and the
blockwise argmax, ``--tasks=train_small,train_base --rounds=3`` (``peer_flax_train_epyc_fused_dropout.json``):
train step 1.28x (small; per round 1.25, 1.29, 1.29) and 1.20x (base; 1.27, 1.20, 1.19), model FLOPs
utilization 0.52.

On 2 quiet cores of a Sapphire Rapids Xeon (``--rounds=3``, ``benchmarks/results/peer_flax_xeon_spr_2cores.json``),
after the row-block transposes: train step 1.50x (small) and 1.31x (base), model FLOPs utilization
0.65, beam search 1.28x (per round 1.31, 1.28, 1.27). Before them, at ``4d3af8e``
(``peer_flax_train_xeon_spr_before.json``, ``peer_flax_beam_xeon_spr_before.json``): 1.39x, 1.28x,
0.61-0.64, and beam search 1.47x (1.52, 1.53, 1.34) with the same beam code: on that machine the
beam ratio moves by more than a tenth between runs. After two search steps per loop iteration and
the heads-first cache (``--rounds=3``, ``peer_flax_xeon_spr_2cores_unrolled_heads_first.json``): beam
search 1.65x (1.60, 1.68, 1.66), train step 1.49x (small) and 1.30x (base), model FLOPs utilization
0.64 (the train step is unchanged; its ratios are the earlier ones remeasured); a second
``--tasks=beam_base --rounds=3`` run (``peer_flax_beam_xeon_spr_rerun.json``) read 1.60x (1.70, 1.60, 1.56).

Elsewhere (one round each, ``benchmarks/results/peer_flax_quiet_xeon_2cores.json`` and
``peer_flax_gpu_h100.json``): on 2 cores of an idle 16-core Xeon (``JAX_PLATFORMS=cpu taskset -c 2,3``)
ours was 1.08x the peer's train step and 1.35x its beam search at the base shape; on an H100 in float32
0.95x and 0.97x. There a 16 x 64-token base step takes 19 ms on both sides and the same in bfloat16 with
cuDNN attention: the GPU is bound by kernel launches at these shapes, not by arithmetic.
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
