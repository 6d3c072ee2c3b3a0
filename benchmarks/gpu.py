r"""One command for a GPU: base and big train steps (float32, bfloat16; every attention path), beam search,
and the Flax WMT example at the same shapes; JSON out.

Run from the repository root on a machine with a GPU. Each path compiles on its own, so the whole
default run is long (timings: ``docs/benchmarks.md``); split it with ``--models``/``--dtypes``/
``--implementations`` to fit shorter leases. ``--out`` is rewritten after each model and dtype
(``"complete": false`` and the ``pending`` pairs until the end), so a run cut short keeps what it
measured::

    python benchmarks/gpu.py --note="one H100 SXM, nothing else running" --out=benchmarks/results/gpu_h100.json
    python benchmarks/gpu.py --models=base --dtypes=bfloat16 --out=/tmp/gpu_base_bf16.json

On a CPU the full mode refuses with one line (exit 2); ``--quick`` runs every measurement at tiny shapes
(one layer, width 32-64, 4 x 8 tokens, 2 steps), numbers meaningless, fields all there::

    python benchmarks/gpu.py --quick --out=/tmp/gpu_quick.json

Measured, for each model (``configs/base.py``, ``configs/big.py``; vocabulary 37,000) and dtype
(``config.dtype``: ``float32``, whose matrix products JAX runs as TF32 on Ampere and later GPUs by
default, and ``bfloat16``, parameters kept in float32):

- **train step** per attention implementation (``config.attention_implementation``): ``einsum`` (the
  default, written out), ``xla`` (``jax.nn.dot_product_attention`` on XLA), ``fused`` (cuDNN for
  half-precision inputs on a GPU, else XLA) and ``cudnn`` (cuDNN flash attention; float32 is refused
  by it, recorded as an error). ``benchmarks/train_step.py``'s measurement: ``--rows`` x ``--length``
  target tokens, no padding, dropout and label smoothing from the config, each step timed to completion;
  target tokens/s of the median step, of the mean step (``mean_target_tokens_per_s``, what the peer reports),
  and **MFU**: the model's matmul FLOPs per second over the GPU's dense peak for the dtype
  (:data:`attention_jax.training.device_peaks.DATASHEET_PEAKS`, datasheet figures; an unknown device gets a
  peak measured here once per dtype, ``--peak_size``^3 products). ``speedup_vs_xla`` compares each path with
  ``xla``;
- **beam search** (beam 4, alpha 0.6, cached, ``benchmarks/decode.py``'s forced-length search) of
  ``--beam_sentences`` sources of ``--beam_len`` tokens, every output exactly ``--beam_len`` tokens (the
  peer's shape: its sources are as long as its outputs), sentences/s over the mean of
  ``--beam_repeats`` searches (``best_sentences_per_s`` too);
- **the Flax WMT example** (``../shared/peers/peer_flax_wmt.py``, read there, never copied; skipped
  when absent) at the same shapes and dtype, one fresh process per model and dtype before ours
  start (so both sides have the whole GPU): its train step (mean step) and beam search;
  ``ours_over_peer`` > 1 means ours is faster (train: mean step against mean step; beam: mean search).
  The peer's script has no dtype flag: for bfloat16 it is run with its ``TransformerConfig``'s
  ``dtype`` set to bfloat16 (:data:`PEER_BFLOAT16`), the Flax example's own mixed precision.

The issue's goals on an H100 (issue 38): bfloat16 base-shape train step >= 45% MFU and >= 1.25x the
peer. Results: ``docs/benchmarks.md`` ("One command for a GPU").
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import sys
from typing import Any

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from attention_jax.foundation import run_files  # noqa: E402 (after the path set-up; no JAX)
from attention_jax.training import device_peaks  # noqa: E402
from benchmarks import harness  # noqa: E402  (no JAX imported yet: the peers run first)
from benchmarks.peer_flax import _peer_shape_flags  # noqa: E402

MODELS = ("base", "big")
DTYPES = ("float32", "bfloat16")
IMPLEMENTATIONS = ("einsum", "xla", "fused", "cudnn")
VOCAB_SIZE = 37000  # configs/base.py's shared vocabulary (big inherits it).

# The peer in bfloat16: its TransformerConfig built with dtype=bfloat16, then its script run unchanged.
PEER_BFLOAT16 = ("import os, runpy, sys; sys.path.insert(0, os.environ['PEER']); import jax.numpy as jnp, models; "
                 "config_class = models.TransformerConfig; "
                 "models.TransformerConfig = lambda **fields: config_class(**fields, dtype=jnp.bfloat16); "
                 "script = sys.argv[1]; sys.argv = sys.argv[1:]; runpy.run_path(script, run_name='__main__')")

DEVICE_PROBE = ("import json, jax, flax; devices = jax.devices(); print(json.dumps({'backend': jax.default_backend(), "
                "'device_kind': devices[0].device_kind, 'device_count': len(devices), 'jax': jax.__version__, "
                "'flax': flax.__version__, 'matmul_precision': str(jax.config.jax_default_matmul_precision)}))")

FULL = dict(rows=128, length=128, steps=10, warmup_steps=2, beam_sentences=64, beam_len=64, beam_repeats=3,
            peak_size=8192)
SMOKE = dict(rows=4, length=8, steps=2, warmup_steps=1, beam_sentences=2, beam_len=8, beam_repeats=1, peak_size=64)
SMOKE_MODEL_OVERRIDES = {  # --quick's stand-ins, one layer each.
    "base": harness.QUICK_MODEL,
    "big": dict(harness.QUICK_MODEL, d_model=64, d_ff=128, num_heads=4),
}


def table_peak(device_kind: str, dtype: str) -> tuple[float, str] | None:
    """The dense peak of a known NVIDIA GPU for ``dtype``, in FLOP/s, and its source; ``None`` if unknown.

    Parameters
    ----------
    device_kind : str
        ``jax.devices()[0].device_kind``, e.g. ``"NVIDIA H100 80GB HBM3"``.
    dtype : str
        ``"float32"`` (the TF32 rate) or ``"bfloat16"``.

    Returns
    -------
    tuple[float, str] or None
        Peak FLOP/s per device and where the figure comes from.

    Notes
    -----
    The figures are the training loop's (:data:`attention_jax.training.device_peaks.DATASHEET_PEAKS`),
    restricted to NVIDIA's GPUs: this benchmark is for GPUs.
    """
    peak = device_peaks.datasheet_peak(device_kind, dtype)
    if peak is None or "NVIDIA" not in peak.source:
        return None
    return peak.flops_per_s, peak.source


def model_config(name: str, dtype: str, implementation: str, smoke: bool) -> Any:
    """``configs/<name>.py`` with the benchmark's vocabulary, ``dtype`` and attention implementation.

    Parameters
    ----------
    name : str
        ``"base"`` or ``"big"``.
    dtype : str
        ``config.dtype``.
    implementation : str
        ``config.attention_implementation``.
    smoke : bool
        Shrink to :data:`SMOKE_MODEL_OVERRIDES`.

    Returns
    -------
    ml_collections.ConfigDict
        The config.
    """
    from configs import base, big

    config = {"base": base, "big": big}[name].get_config()
    config.vocab_size = VOCAB_SIZE
    config.update(SMOKE_MODEL_OVERRIDES[name] if smoke else {})
    config.dtype = dtype
    config.attention_implementation = implementation
    return config


def _error(error: BaseException) -> dict[str, str]:
    text = str(error).strip().splitlines()
    return {"error": f"{type(error).__name__}: {text[0][:300] if text else ''}"}


def probe_device(env: dict[str, str]) -> dict[str, Any]:
    """The backend and devices, asked of a child process, so that this one holds no GPU memory yet.

    Parameters
    ----------
    env : dict[str, str]
        The child's environment.

    Returns
    -------
    dict
        ``backend``, ``device_kind``, ``device_count``, ``jax``, ``flax`` and ``matmul_precision``
        (``jax_default_matmul_precision``; ``None`` is JAX's default, TF32 products on recent GPUs).
    """
    completed = harness.run_captured([sys.executable, "-c", DEVICE_PROBE], env)
    if completed.returncode != 0:
        raise SystemExit(f"gpu.py: could not start JAX: {completed.stderr.strip().splitlines()[-1:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_peer(name: str, dtype: str, shapes: dict[str, int], smoke: bool, peer_dir: str) -> dict[str, Any]:
    """One fresh process of the Flax WMT example at our shapes: train tokens/s and beam sentences/s.

    Parameters
    ----------
    name, dtype : str
        Model and dtype.
    shapes : dict[str, int]
        :data:`FULL` or :data:`SMOKE`.
    smoke : bool
        Tiny model shapes.
    peer_dir : str
        Folder holding ``peer_flax_wmt.py`` and ``flax_wmt/``.

    Returns
    -------
    dict
        ``target_tokens_per_s`` (mean step), ``sentences_per_s`` (mean of 3 searches) and the
        peer's parameter count; or ``{"skipped": reason}`` / ``{"error": ...}``.
    """
    script = os.path.join(peer_dir, "peer_flax_wmt.py")
    if not os.path.exists(script):
        return {"skipped": f"no Flax WMT peer at {peer_dir} (peer_flax_wmt.py); pass --peer_dir"}
    config = model_config(name, dtype, "einsum", smoke)
    flags = [*_peer_shape_flags(config), f"--batch={shapes['rows']}", f"--len={shapes['length']}",
             f"--steps={shapes['steps']}", f"--decode_batch={shapes['beam_sentences']}",
             f"--decode_len={shapes['beam_len']}"]  # Its sources: the first beam_sentences rows, beam_len tokens.
    command = [sys.executable, script, *flags] if dtype == "float32" else [
        sys.executable, "-c", PEER_BFLOAT16, script, *flags]
    try:
        result = harness.run_json(command)
    except RuntimeError as error:
        return _error(error)
    return {"target_tokens_per_s": result["train_tgt_tokens_per_s"], "step_s": result["step_s"],
            "sentences_per_s": result["decode_sentences_per_s"], "params": result["params"]}


def our_train_step(config: Any, shapes: dict[str, int], peak: float, device_count: int) -> dict[str, Any]:
    """``benchmarks/train_step.py``'s measurement of one config; MFU against ``peak`` per device.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        From :func:`model_config`.
    shapes : dict[str, int]
        ``rows``, ``length``, ``steps``, ``warmup_steps``.
    peak : float
        Dense peak FLOP/s of one device for the config's dtype.
    device_count : int
        Devices the step runs on (data parallel).

    Returns
    -------
    dict
        Step times, target tokens/s (median and mean step), compile time, model FLOPs, ``mfu``,
        parameter count and loss; ``{"error": ...}`` when the path cannot run here.
    """
    from benchmarks import train_step

    try:
        result = train_step.benchmark(config, shapes["rows"], shapes["length"], shapes["steps"],
                                      shapes["warmup_steps"], shapes["peak_size"])  # Its peak is unused.
    except Exception as error:  # noqa: BLE001  (e.g. cuDNN refusing float32: recorded, the others go on)
        return _error(error)
    finally:
        gc.collect()
    tokens = shapes["rows"] * shapes["length"]
    return {"step_time_s": result["step_time_s"], "step_time_mean_s": result["step_time_mean_s"],
            "target_tokens_per_s": result["target_tokens_per_s"],
            "mean_target_tokens_per_s": tokens / result["step_time_mean_s"], "compile_s": result["compile_s"],
            "model_flops_per_step": result["model_flops_per_step"],
            "mfu": result["model_flops_per_step"] / result["step_time_s"] / (peak * device_count),
            "params": result["params"], "loss": result["loss"]}


def our_beam_search(config: Any, shapes: dict[str, int]) -> dict[str, Any]:
    """``benchmarks/decode.py``'s cached beam search (beam 4, forced length) of one config, random weights.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        From :func:`model_config`.
    shapes : dict[str, int]
        ``beam_sentences``, ``beam_len`` (source and output tokens), ``beam_repeats``.

    Returns
    -------
    dict
        ``sentences_per_s`` (mean search), ``best_sentences_per_s``, seconds per batch and compile
        time; ``{"error": ...}`` if it fails.
    """
    from attention_jax.experiment import sections
    from benchmarks import decode as decode_benchmark

    try:
        transformer_config = sections.build_experiment(config, "benchmarks/gpu.py").model.replace(dropout_rate=0.0)
        params = decode_benchmark.random_params(transformer_config)
        record = decode_benchmark.time_search(params, transformer_config, shapes["beam_sentences"], "beam", True,
                                              shapes["beam_len"], shapes["beam_len"], shapes["beam_repeats"])
    except Exception as error:  # noqa: BLE001
        return _error(error)
    finally:
        gc.collect()
    return {"sentences_per_s": shapes["beam_sentences"] / record["mean_seconds_per_batch"],
            "best_sentences_per_s": record["sentences_per_s"], "seconds_per_batch": record["seconds_per_batch"],
            "mean_seconds_per_batch": record["mean_seconds_per_batch"],
            "compile_and_first_run_s": record["compile_and_first_run_s"]}


def peaks_for(device: dict[str, Any], dtypes: list[str], size: int) -> dict[str, dict[str, Any]]:
    """The dense peak per device for each dtype: from the datasheet table, else measured once here.

    Parameters
    ----------
    device : dict
        :func:`probe_device`'s result.
    dtypes : list[str]
        ``"float32"`` and/or ``"bfloat16"``.
    size : int
        Matrix side of a measured peak.

    Returns
    -------
    dict
        ``{dtype: {"flops_per_s": float, "source": str}}``.
    """
    peaks = {}
    for dtype in dtypes:
        known = table_peak(device["device_kind"], dtype) if device["backend"] == "gpu" else None
        if known is not None:
            peaks[dtype] = {"flops_per_s": known[0], "source": known[1]}
        else:
            peaks[dtype] = {"flops_per_s": device_peaks.measure_matmul_peak(dtype, size, repeats=10),
                            "source": f"measured here: best of 10 {size}^3 {dtype} matmuls (device not in the "
                                      "datasheet table)"}
    return peaks


def compare(train: dict, beam: dict, peer: dict) -> None:
    """Add ``speedup_vs_xla`` and ``ours_over_peer`` to our records, in place.

    Parameters
    ----------
    train : dict
        ``{model: {dtype: {implementation: record}}}`` of :func:`our_train_step` records.
    beam : dict
        ``{model: {dtype: record}}`` of :func:`our_beam_search` records.
    peer : dict
        ``{model: {dtype: record}}`` of :func:`run_peer` records.

    Notes
    -----
    ``speedup_vs_xla``: median-step tokens/s over the ``xla`` path's. ``ours_over_peer``: our mean-step
    tokens/s (or mean-search sentences/s) over the peer's. ``None`` where the other side is missing
    (skipped or failed); records with an ``error`` are left as they are.
    """
    for name, by_dtype in train.items():
        for dtype, by_implementation in by_dtype.items():
            xla = by_implementation.get("xla", {}).get("target_tokens_per_s")
            peer_rate = peer.get(name, {}).get(dtype, {}).get("target_tokens_per_s")
            for record in by_implementation.values():
                if "error" in record:
                    continue
                record["speedup_vs_xla"] = record["target_tokens_per_s"] / xla if xla else None
                record["ours_over_peer"] = record["mean_target_tokens_per_s"] / peer_rate if peer_rate else None
            beam_record = beam.get(name, {}).get(dtype, {})
            peer_sentences = peer.get(name, {}).get(dtype, {}).get("sentences_per_s")
            if "sentences_per_s" in beam_record:
                beam_record["ours_over_peer"] = (beam_record["sentences_per_s"] / peer_sentences
                                                 if peer_sentences else None)


def table(report: dict[str, Any]) -> str:
    """The train and beam figures as aligned text (printed to stderr).

    Parameters
    ----------
    report : dict
        Holds ``train`` and ``beam`` after :func:`compare`.

    Returns
    -------
    str
        One line per train record and per beam record; an error is shown in place of its figures.
    """
    def number(value: Any, form: str) -> str:
        return "-" if value is None else format(value, form)

    lines = [f"{'model':6} {'dtype':9} {'attention':9} {'tokens/s':>10} {'MFU':>6} {'vs xla':>7} {'vs peer':>8}"]
    for name, by_dtype in report["train"].items():
        for dtype, by_implementation in by_dtype.items():
            for implementation, record in by_implementation.items():
                if "error" in record:
                    lines.append(f"{name:6} {dtype:9} {implementation:9} {record['error'][:60]}")
                    continue
                lines.append(f"{name:6} {dtype:9} {implementation:9} {record['target_tokens_per_s']:10,.0f} "
                             f"{record['mfu']:6.3f} {number(record['speedup_vs_xla'], '7.2f')} "
                             f"{number(record['ours_over_peer'], '8.2f')}")
    for name, by_dtype in report["beam"].items():
        for dtype, record in by_dtype.items():
            figure = record.get("error") or (f"{record['sentences_per_s']:,.2f} sentences/s, vs peer "
                                             f"{number(record['ours_over_peer'], '.2f')}")
            lines.append(f"beam 4 {name:6} {dtype:9} {figure}")
    return "\n".join(lines)


def build_report(context: dict[str, Any], train: dict, beam: dict, peer: dict,
                 pending: list[tuple[str, str]]) -> dict[str, Any]:
    """The JSON report of what has been measured so far, ratios included.

    Parameters
    ----------
    context : dict
        ``mode``, ``note``, ``device``, ``shapes`` and ``peaks``.
    train, beam, peer : dict
        The records so far (see :func:`compare`, which this calls).
    pending : list of (str, str)
        The (model, dtype) pairs not measured yet; empty when the run is complete.

    Returns
    -------
    dict
        The report; ``complete`` is false while pairs are pending.
    """
    compare(train, beam, peer)
    return {"what": "train step (target tokens/s, MFU against the dense peak), beam search, "
                    "Flax WMT peer at the same shapes",
            **context, "complete": not pending, "pending": [f"{name} {dtype}" for name, dtype in pending],
            "train": train, "beam": beam, "peer": peer}


def _subset(chosen: list[str], allowed: tuple[str, ...], flag: str) -> list[str]:
    chosen = [item for item in chosen if item]
    unknown = sorted(set(chosen) - set(allowed))
    if unknown or not chosen:
        harness.fail(f"--{flag}: unknown {unknown or 'empty list'}; choose from {allowed}.")
    return chosen


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    flags.DEFINE_list("models", list(MODELS), f"Comma-separated subset of {MODELS}.")
    flags.DEFINE_list("dtypes", list(DTYPES), f"Comma-separated subset of {DTYPES}.")
    flags.DEFINE_list("implementations", list(IMPLEMENTATIONS),
                      f"Attention implementations of the train step, a subset of {IMPLEMENTATIONS}.")
    for key, value in FULL.items():
        flags.DEFINE_integer(key, None, f"Default {value} ({SMOKE[key]} with --quick).")
    flags.DEFINE_string("peer_dir", str(harness.DEFAULT_PEER_DIR), "Folder holding peer_flax_wmt.py and flax_wmt/.")


def main(argv: list[str]) -> None:
    """Refuse the full mode without a GPU, run the peers, then ours; print and write the JSON.

    Parameters
    ----------
    argv : list of str
        The program name (the flags of :func:`define_flags` are parsed already).
    """
    del argv
    args = flags.FLAGS
    models = _subset(args.models, MODELS, "models")
    dtypes = _subset(args.dtypes, DTYPES, "dtypes")
    implementations = _subset(args.implementations, IMPLEMENTATIONS, "implementations")
    shapes = {key: args[key].value or (SMOKE if args.quick else FULL)[key] for key in FULL}
    if shapes["beam_sentences"] > shapes["rows"] or shapes["beam_len"] > shapes["length"]:
        harness.fail("the peer searches its first --beam_sentences training rows cut to --beam_len tokens: "
                          "--beam_sentences must be <= --rows and --beam_len <= --length.")

    env = harness.repository_environment()
    device = probe_device(env)
    if not args.quick and device["backend"] != "gpu":
        harness.fail(f"no GPU here (JAX backend {device['backend']!r}, {device['device_kind']}): the full mode "
                          f"measures a GPU; run with --quick for the tiny-shape check.")

    # The peers first, each in its own process, while this one holds no device memory.
    os.environ["PEER"] = os.path.join(args.peer_dir, "flax_wmt")
    peer = {name: {dtype: run_peer(name, dtype, shapes, args.quick, args.peer_dir) for dtype in dtypes}
            for name in models}

    peaks = peaks_for(device, dtypes, shapes["peak_size"])
    train: dict[str, dict[str, dict[str, Any]]] = {}
    beam: dict[str, dict[str, Any]] = {}
    context = {"mode": "quick" if args.quick else "full", "note": args.note, "device": device,
               "shapes": shapes | {"vocab_size": VOCAB_SIZE if not args.quick
                                   else SMOKE_MODEL_OVERRIDES["base"]["vocab_size"],
                                   "beam_size": 4, "alpha": 0.6},
               "peaks": peaks}
    pending = [(name, dtype) for name in models for dtype in dtypes]
    for name, dtype in list(pending):
        train.setdefault(name, {})[dtype] = {
            implementation: our_train_step(model_config(name, dtype, implementation, args.quick), shapes,
                                           peaks[dtype]["flops_per_s"], device["device_count"])
            for implementation in implementations}
        beam.setdefault(name, {})[dtype] = our_beam_search(model_config(name, dtype, "einsum", args.quick), shapes)
        pending.remove((name, dtype))
        print(f"{name} {dtype} done", file=sys.stderr, flush=True)
        if pending and args.out:  # A run cut short (a lease's time limit) keeps what it measured.
            run_files.write_json_atomically(args.out, build_report(context, train, beam, peer, pending),
                                            indent=1)
    report = build_report(context, train, beam, peer, pending)
    print(table(report), file=sys.stderr)
    harness.emit(report, args.out)


if __name__ == "__main__":
    harness.run(main, define_flags)
