r"""Where one train step's device time goes, kernel by kernel: ours against the Flax WMT example's.

On an H100 our bfloat16 base-shape step trails the Flax WMT example's (the *peer*) at the same shape,
and counting operations in the two programs did not explain the gap (``docs/benchmarks.md``, "On an
H100"). This command records both steps with ``jax.profiler`` and adds up the trace's kernels. Run it
from the repository root on a machine with a GPU (each side compiles once, then a few steps are traced)::

    python benchmarks/gpu_profile.py --peer_dir=.device/peers --out=/tmp/profile.json
    python benchmarks/gpu_profile.py --dtype=float32 --trace_dir=/tmp/profile_traces --out=/tmp/profile_f32.json

On a CPU the full mode refuses with one line (exit 2); ``--smoke`` runs both sides at tiny shapes
(one layer, width 32, 4 x 8 tokens) on any backend, numbers meaningless, fields all there::

    python benchmarks/gpu_profile.py --smoke --out=/tmp/profile_smoke.json

What is traced. **Ours**: ``benchmarks/train_step.py``'s step (:func:`train_step.build_step`, the step
``benchmarks/gpu.py`` times) of ``configs/<--model>.py`` with vocabulary 37,000, ``--dtype`` and
``--implementation``, on ``--rows`` x ``--length`` tokens; compiled, run ``1 + --warmup_steps`` times,
then ``--steps`` steps run inside ``jax.profiler.trace(..., create_perfetto_trace=True)``, the last one
waited for before the trace ends. **The peer**: ``peer_flax_wmt.py`` from ``--peer_dir`` (read there,
never copied; ``{"skipped": ...}`` when absent), run first, in a fresh process (so neither side shares
the GPU's memory with the other), at the same shapes; for ``--dtype=bfloat16`` with its
``TransformerConfig``'s ``dtype`` set as ``benchmarks/gpu.py`` does (:data:`gpu.PEER_BFLOAT16`). That process wraps the
script's jitted ``step`` (:func:`peer_child`): the script's two untimed calls (compilation, warm-up)
run untraced, the next ``--steps`` calls run inside the trace (started once the earlier calls are done,
stopped once the last traced call is done), and the script is stopped there, before its beam search.
So both traces hold exactly ``--steps`` steady-state steps and nothing else of the step program; every
figure below is a trace total divided by ``--steps``. The peer's loop also draws each step's dropout
key (``jax.random.fold_in``, a separate tiny program, in the peer's own loop: every traced step's but
the first's falls inside the trace); ``modules`` shows it.

What is counted (:func:`select_device_events`): on a GPU, the complete events on the device
processes' (``/device:GPU:N``) stream threads (``Stream #N(...)``): CUDA kernels, memory copies and
sets, named as launched (XLA's fusion names such as ``loop_add_fusion``, cuBLAS's ``nvjet_...`` or
``sm90_xmma_gemm_...``, cuDNN's). A device process without stream threads has its other threads counted
instead, less XLA's derived lines (``XLA Ops``, ``XLA Modules``, ``Steps``...). On a CPU, where XLA's
operations run on host threads, the events that name an operation of an XLA module (``args.hlo_op``).
Events that contain another counted event on the same thread (a ``while`` around its body) are left
out, so no time is counted twice. ``counted`` in the JSON says which processes, threads and how many
events, and ``threads`` lists every thread of the trace with its event count, so a trace of unexpected
shape is visible in the JSON itself.

Reported per side, per step: ``kernel_ms`` (the counted events' durations added up), ``busy_ms`` (the
union of their intervals: device-busy time, less than ``kernel_ms`` when streams overlap),
``traced_wall_ms`` (host wall time of the traced steps; the profiler adds to it), the ``--top`` event
names by time (``ms``, ``calls``, ``mean_us``, ``share`` of ``kernel_ms``, ``category``, up to three
``hlo_ops`` they ran for), ``categories`` (:func:`category_of`: ``matmul``, ``cudnn/flash``,
``random/rng``, ``scatter/gather``, ``reduce``, ``copy/transpose``, ``fusion``, ``other``; by name
pattern only, so a fusion that holds a product but is named for its root operation counts as what its
name says), and ``modules`` (milliseconds per XLA module, where events name one). ``ours_minus_peer_ms``
gives the per-category differences; stderr gets the side-by-side table.

Not yet run on a GPU (written and tested on a CPU): the GPU trace's process and thread names above are those
other tools report for JAX's GPU traces; ``counted`` and ``threads`` show what a run found. Kernels that XLA
runs from command buffers (CUDA graphs) may name no ``hlo_op``; ``XLA_FLAGS=--xla_gpu_enable_command_buffer=``
turns those off in both processes, at some cost in step time, should the attribution be needed.
"""

from __future__ import annotations

import collections
import gc
import glob
import gzip
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Iterable

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS_DIR = REPO_ROOT / "benchmarks"
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(BENCHMARKS_DIR))

from attention_jax.foundation import run_files  # noqa: E402  (no JAX: the peer's process runs before ours imports it)

from benchmarks import command_line  # noqa: E402
from child_process import repository_environment, run_captured  # noqa: E402
from peer_compare import emit_json  # noqa: E402
from peer_flax import DEFAULT_PEER_DIR, _peer_shape_flags  # noqa: E402

import gpu  # noqa: E402  (model_config, probe_device; no JAX at import)

FULL = dict(rows=128, length=128, warmup_steps=2)
SMOKE = dict(rows=4, length=8, warmup_steps=1)
PEER_SCRIPT = "peer_flax_wmt.py"
PEER_STEP_FUNCTION = "step"  # The name of the peer script's jitted train step.
PEER_UNTRACED_CALLS = 2  # The peer script's calls of it before its timed loop (compile, warm up).

# Categories of an event name: the first whose pattern matches (case-insensitive), else OTHER.
CATEGORY_PATTERNS = (
    ("cudnn/flash", r"cudnn|flash|sdpa|fmha"),
    ("matmul", r"gemm|gemv|splitk|cublas|cutlass|xmma|nvjet|wgmma|matmul|dot|convolution"),  # splitK: cuBLAS's sums.
    ("random/rng", r"rng|random|threefry|philox"),
    ("scatter/gather", r"scatter|gather"),
    ("reduce", r"reduc"),
    ("copy/transpose", r"copy|transpose|memcpy|memset"),
    ("fusion", r"fusion"),
)
CATEGORIES = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in CATEGORY_PATTERNS)
OTHER = "other"
CATEGORY_NAMES = tuple(name for name, _ in CATEGORIES) + (OTHER,)

# Lines the profiler derives from the others on a device (counting them would count kernels twice).
DERIVED_LINES = frozenset({"XLA Ops", "Async XLA Ops", "XLA Modules", "Steps", "Framework Ops", "Framework Name Scope",
                           "Source code", "Launch Stats", "XLA TraceMe", "TensorFlow Ops", "TensorFlow Name Scope"})
DEVICE_PROCESS_PREFIX = "/device:"
STREAM_THREAD_PREFIX = "Stream"


def category_of(name: str) -> str:
    """The coarse kind of work an event's name shows (module docstring); ``"other"`` if none.

    Parameters
    ----------
    name : str
        A kernel or operation name from the trace.

    Returns
    -------
    str
        One of :data:`CATEGORY_NAMES`.
    """
    for category, pattern in CATEGORIES:
        if pattern.search(name):
            return category
    return OTHER


def load_trace(trace_dir: str) -> tuple[list[dict[str, Any]], str]:
    """The trace events of the newest trace ``jax.profiler`` wrote under ``trace_dir``.

    Parameters
    ----------
    trace_dir : str
        The ``log_dir`` given to ``jax.profiler.trace``.

    Returns
    -------
    tuple[list[dict], str]
        ``traceEvents`` and the file read: ``perfetto_trace.json.gz`` if there is one, else
        ``<host>.trace.json.gz`` (the same Chrome trace-event JSON).

    Raises
    ------
    FileNotFoundError
        When no trace file is there.
    """
    for pattern in ("perfetto_trace.json.gz", "*.trace.json.gz"):
        paths = glob.glob(os.path.join(trace_dir, "**", pattern), recursive=True)
        if paths:
            path = max(paths, key=os.path.getmtime)
            with gzip.open(path, "rt", encoding="utf-8") as file:
                trace = json.load(file)
            return (trace["traceEvents"] if isinstance(trace, dict) else trace), path
    raise FileNotFoundError(f"jax.profiler wrote no trace (*.trace.json.gz) under {trace_dir}.")


def _names(events: Iterable[dict[str, Any]]) -> tuple[dict[Any, str], dict[tuple[Any, Any], str]]:
    """Process names by ``pid`` and thread names by ``(pid, tid)``, from the metadata events."""
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for event in events:
        if event.get("ph") != "M":
            continue
        name = (event.get("args") or {}).get("name", "")
        if event.get("name") == "process_name":
            processes[event.get("pid")] = name
        elif event.get("name") == "thread_name":
            threads[(event.get("pid"), event.get("tid"))] = name
    return processes, threads


def _end(event: dict[str, Any]) -> float:
    return float(event["ts"]) + float(event.get("dur", 0.0))


def _leaves(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events that hold no other of ``events`` on their thread (a ``while`` loses to its body).

    An event holds another when the other's interval lies wholly inside its own; two events that only
    overlap (rounded timestamps of consecutive kernels) both stay.
    """
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = collections.defaultdict(list)
    for event in events:
        by_thread[(event.get("pid"), event.get("tid"))].append(event)
    containers: set[int] = set()
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda event: (float(event["ts"]), -float(event.get("dur", 0.0))))
        open_events: list[dict[str, Any]] = []  # Events that may still hold the next one, outermost first.
        for event in thread_events:
            open_events = [outer for outer in open_events if _end(outer) > float(event["ts"])]
            holders = [outer for outer in open_events if _end(event) <= _end(outer)]
            if holders:
                containers.add(id(holders[-1]))
            open_events.append(event)
    return [event for event in events if id(event) not in containers]


def select_device_events(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The complete events that are device work, and a description of what was counted.

    Parameters
    ----------
    events : list[dict]
        A trace's ``traceEvents``.

    Returns
    -------
    tuple[list[dict], dict]
        The counted events (``ph == "X"``, leaves only: see the module docstring) and ``{"source",
        "processes", "threads", "events"}``: ``source`` is ``"device streams"``, ``"device threads"``
        or ``"host XLA operations"``, the others name the processes and threads counted.
    """
    processes, threads = _names(events)
    complete = [event for event in events if event.get("ph") == "X" and "ts" in event]
    device_pids = {pid for pid, name in processes.items() if name.startswith(DEVICE_PROCESS_PREFIX)}
    on_device = [event for event in complete if event.get("pid") in device_pids
                 and threads.get((event.get("pid"), event.get("tid")), "") not in DERIVED_LINES]
    streams = [event for event in on_device
               if threads.get((event.get("pid"), event.get("tid")), "").startswith(STREAM_THREAD_PREFIX)]
    if streams:
        source, chosen = "device streams", streams
    elif on_device:
        source, chosen = "device threads", on_device
    else:
        source = "host XLA operations"
        chosen = [event for event in complete if (event.get("args") or {}).get("hlo_op")
                  and not str(event.get("name", "")).startswith("end: ")]
    chosen = _leaves(chosen)
    keys = sorted({(event.get("pid"), event.get("tid")) for event in chosen}, key=str)
    return chosen, {"source": source,
                    "processes": sorted({processes.get(pid, str(pid)) for pid, _ in keys}),
                    "threads": [threads.get(key, str(key[1])) for key in keys], "events": len(chosen)}


def _busy_microseconds(events: list[dict[str, Any]]) -> float:
    """The length of the union of the events' intervals, in microseconds."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted((float(event["ts"]), float(event["ts"]) + float(event.get("dur", 0.0)))
                              for event in events):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def thread_census(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every thread that holds complete events: its process, its name and how many events.

    Parameters
    ----------
    events : list[dict]
        A trace's ``traceEvents``.

    Returns
    -------
    list[dict]
        ``{"process", "thread", "events"}``, the busiest thread first.
    """
    processes, threads = _names(events)
    counts = collections.Counter((event.get("pid"), event.get("tid")) for event in events if event.get("ph") == "X")
    return [{"process": processes.get(pid, str(pid)), "thread": threads.get((pid, tid), str(tid)), "events": count}
            for (pid, tid), count in counts.most_common()]


def summarize_trace(events: list[dict[str, Any]], steps: int, top: int) -> dict[str, Any]:
    """Per-step device time of a trace of ``steps`` steps: totals, top event names, categories, modules.

    Parameters
    ----------
    events : list[dict]
        A trace's ``traceEvents`` (durations in microseconds).
    steps : int
        Steps the trace holds; every figure is divided by it.
    top : int
        How many event names to list.

    Returns
    -------
    dict
        ``kernel_ms``, ``busy_ms``, ``top`` (``name``, ``category``, ``ms``, ``calls``, ``mean_us``,
        ``share``, ``hlo_ops``), ``categories`` (``ms``, ``calls``, ``share``; every category, zeros
        included), ``modules`` (ms by ``args.hlo_module``), ``counted`` (:func:`select_device_events`)
        and ``threads`` (:func:`thread_census`); milliseconds and calls are per step.
    """
    chosen, counted = select_device_events(events)
    durations: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    hlo_ops: dict[str, list[str]] = collections.defaultdict(list)
    modules: dict[str, float] = collections.defaultdict(float)
    for event in chosen:
        name, args = str(event.get("name", "")), event.get("args") or {}
        durations[name] += float(event.get("dur", 0.0))
        calls[name] += 1
        op = args.get("hlo_op")
        if op and op not in hlo_ops[name] and len(hlo_ops[name]) < 3:
            hlo_ops[name].append(op)
        modules[args.get("hlo_module") or "(none named)"] += float(event.get("dur", 0.0))
    total = sum(durations.values())

    def per_step_ms(microseconds: float) -> float:
        return round(microseconds / 1e3 / steps, 4)

    categories = {category: {"ms": 0.0, "calls": 0.0, "share": 0.0} for category in CATEGORY_NAMES}
    by_category: dict[str, float] = collections.defaultdict(float)
    calls_by_category: collections.Counter[str] = collections.Counter()
    for name, microseconds in durations.items():
        by_category[category_of(name)] += microseconds
        calls_by_category[category_of(name)] += calls[name]
    for category, microseconds in by_category.items():
        categories[category] = {"ms": per_step_ms(microseconds), "calls": calls_by_category[category] / steps,
                                "share": round(microseconds / total, 4) if total else 0.0}
    ranked = sorted(durations, key=lambda name: (-durations[name], name))[:top]
    return {
        "kernel_ms": per_step_ms(total),
        "busy_ms": per_step_ms(_busy_microseconds(chosen)),
        "top": [{"name": name, "category": category_of(name), "ms": per_step_ms(durations[name]),
                 "calls": calls[name] / steps, "mean_us": round(durations[name] / calls[name], 3),
                 "share": round(durations[name] / total, 4) if total else 0.0, "hlo_ops": hlo_ops.get(name, [])}
                for name in ranked],
        "categories": categories,
        "modules": {module: per_step_ms(microseconds)
                    for module, microseconds in sorted(modules.items(), key=lambda item: -item[1])},
        "counted": counted,
        "threads": thread_census(events),
    }


def profile_ours(config: Any, shapes: dict[str, int], steps: int, trace_dir: str, top: int) -> dict[str, Any]:
    """Trace ``steps`` of our train steps (after compilation and warm-up) and summarize the trace.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        From :func:`gpu.model_config`.
    shapes : dict[str, int]
        ``rows``, ``length``, ``warmup_steps``.
    steps : int
        Traced steps.
    trace_dir : str
        Where ``jax.profiler`` writes (a fresh folder).
    top : int
        Event names to list.

    Returns
    -------
    dict
        :func:`summarize_trace`'s figures with ``steps``, ``traced_wall_ms``, ``compile_s``, ``loss``
        and ``trace_file``; ``{"error": ...}`` if the step cannot run here.
    """
    import jax

    import train_step

    try:
        train, state, batch, _ = train_step.build_step(config, shapes["rows"], shapes["length"])
        start = time.perf_counter()
        compiled = train.lower(state, batch).compile()
        compile_s = time.perf_counter() - start
        for _ in range(1 + shapes["warmup_steps"]):
            state, sums = compiled(state, batch)
        jax.block_until_ready((state, sums))
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            start = time.perf_counter()
            for _ in range(steps):
                state, sums = compiled(state, batch)
            jax.block_until_ready((state, sums))  # The last step's kernels end inside the trace.
            wall_s = time.perf_counter() - start
        loss = float(sums["loss_sum"] / sums["tokens"])
        events, path = load_trace(trace_dir)
        summary = summarize_trace(events, steps, top)
    except Exception as error:  # noqa: BLE001  (e.g. cuDNN refusing float32: recorded)
        return gpu._error(error)
    finally:
        gc.collect()
    return {"steps": steps, "traced_wall_ms": round(wall_s * 1e3 / steps, 4), "compile_s": round(compile_s, 3),
            "loss": loss, "trace_file": path, **summary}


def peer_child(argv: list[str]) -> None:
    """Run the peer script with its jitted train step traced (the child process's entry point).

    Parameters
    ----------
    argv : list of str
        ``[trace_dir, steps, dtype, script, *script_flags]``.

    Notes
    -----
    ``jax.jit`` is replaced, for the script's run only, by a function that wraps the script's
    :data:`PEER_STEP_FUNCTION`: its first :data:`PEER_UNTRACED_CALLS` calls run as they are; before the
    next one the arguments are waited for and the trace starts; after the ``steps``-th traced call its
    outputs are waited for, the trace stops, and the script is stopped (its beam search never runs).
    For ``dtype == "bfloat16"`` the script's ``models.TransformerConfig`` is built with bfloat16 as
    :data:`gpu.PEER_BFLOAT16` does. Prints one JSON line: ``traced_steps``, ``traced_wall_ms`` (per
    step), ``calls`` (of the step) and ``backend``; exits 1 with a message if the script ended before
    the traced steps were done.
    """
    import runpy

    import jax

    trace_dir, steps, dtype, script, *script_flags = argv
    steps = int(steps)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.path.insert(0, os.environ["PEER"])
    if dtype == "bfloat16":
        import jax.numpy as jnp
        import models  # The peer's, from $PEER.

        config_class = models.TransformerConfig
        models.TransformerConfig = lambda **fields: config_class(**fields, dtype=jnp.bfloat16)

    class TracedEnough(Exception):
        """Raised from the step wrapper once the traced steps are done."""

    record: dict[str, Any] = {"calls": 0}
    original_jit = jax.jit

    def traced_step(jitted: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            index = record["calls"]
            record["calls"] += 1
            if index == PEER_UNTRACED_CALLS:
                jax.block_until_ready((args, kwargs))
                jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
                record["start"] = time.perf_counter()
            outputs = jitted(*args, **kwargs)
            if index == PEER_UNTRACED_CALLS + steps - 1:
                jax.block_until_ready(outputs)
                record["wall_s"] = time.perf_counter() - record["start"]
                jax.profiler.stop_trace()
                raise TracedEnough
            return outputs

        return call

    def jit(fun: Any = None, *args: Any, **kwargs: Any) -> Any:
        jitted = original_jit(fun, *args, **kwargs) if fun is not None else original_jit(*args, **kwargs)
        is_step = (getattr(fun, "__name__", "") == PEER_STEP_FUNCTION
                   and getattr(fun, "__module__", "") == "__main__")
        return traced_step(jitted) if is_step else jitted

    sys.argv = [script, *script_flags]
    jax.jit = jit
    try:
        runpy.run_path(script, run_name="__main__")
    except TracedEnough:
        pass
    finally:
        jax.jit, sys.argv, sys.path[:] = original_jit, saved_argv, saved_path
    if "wall_s" not in record:
        if "start" in record:
            jax.profiler.stop_trace()
        raise SystemExit(f"{script} called {PEER_STEP_FUNCTION}() {record['calls']} times; "
                         f"{PEER_UNTRACED_CALLS + steps} were needed to trace {steps} steps.")
    print(json.dumps({"traced_steps": steps, "traced_wall_ms": round(record["wall_s"] * 1e3 / steps, 4),
                      "calls": record["calls"], "backend": jax.default_backend()}))


PEER_CHILD = (f"import sys; sys.path.insert(0, {str(BENCHMARKS_DIR)!r}); import gpu_profile; "
              "gpu_profile.peer_child(sys.argv[1:])")


def profile_peer(config: Any, dtype: str, shapes: dict[str, int], steps: int, peer_dir: str, trace_dir: str,
                 top: int) -> dict[str, Any]:
    """Trace ``steps`` of the peer's train steps in a fresh process (:func:`peer_child`) and summarize.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        Our config (:func:`gpu.model_config`), whose shapes the peer gets.
    dtype : str
        ``"float32"`` or ``"bfloat16"``.
    shapes : dict[str, int]
        ``rows`` and ``length``.
    steps : int
        Traced steps.
    peer_dir : str
        Folder holding ``peer_flax_wmt.py`` and ``flax_wmt/``.
    trace_dir : str
        Where the child's ``jax.profiler`` writes.
    top : int
        Event names to list.

    Returns
    -------
    dict
        As :func:`profile_ours` (no ``compile_s`` or ``loss``), with ``peer_calls``; ``{"skipped": ...}``
        without a peer, ``{"error": ...}`` if its process fails.
    """
    script = os.path.join(peer_dir, PEER_SCRIPT)
    if not os.path.exists(script):
        return {"skipped": f"no Flax WMT peer at {peer_dir} ({PEER_SCRIPT}); pass --peer_dir"}
    script_flags = [*_peer_shape_flags(config), f"--batch={shapes['rows']}", f"--len={shapes['length']}",
                    f"--steps={steps}"]
    env = dict(repository_environment(), PEER=os.path.join(peer_dir, "flax_wmt"))
    completed = run_captured([sys.executable, "-c", PEER_CHILD, trace_dir, str(steps), dtype, script,
                              *script_flags], env)
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        message = " | ".join(completed.stderr.strip().splitlines()[-3:])[-600:]
        return {"error": f"the peer's process failed (exit {completed.returncode}): {message}"}
    try:
        child = json.loads(lines[-1])
        events, path = load_trace(trace_dir)
        summary = summarize_trace(events, steps, top)
    except (ValueError, KeyError, OSError) as error:  # A trace of unexpected shape: recorded, ours goes on.
        return gpu._error(error)
    return {"steps": steps, "traced_wall_ms": child["traced_wall_ms"], "peer_calls": child["calls"],
            "trace_file": path, **summary}


def differences(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, float] | None:
    """Ours minus the peer's milliseconds per step, per category and in total; ``None`` without both.

    Parameters
    ----------
    ours, peer : dict
        :func:`profile_ours` and :func:`profile_peer` records.

    Returns
    -------
    dict[str, float] or None
        ``kernel_ms``, ``busy_ms``, ``traced_wall_ms`` and each category's ``ms``, ours minus the peer's.
    """
    if "categories" not in ours or "categories" not in peer:
        return None
    result = {key: round(ours[key] - peer[key], 4) for key in ("kernel_ms", "busy_ms", "traced_wall_ms")}
    result.update({category: round(ours["categories"][category]["ms"] - peer["categories"][category]["ms"], 4)
                   for category in CATEGORY_NAMES})
    return result


def table(ours: dict[str, Any], peer: dict[str, Any]) -> str:
    """Ours and the peer's milliseconds per step side by side: categories, then the totals.

    Parameters
    ----------
    ours, peer : dict
        :func:`profile_ours` and :func:`profile_peer` records (an ``error`` or ``skipped`` one shows
        as ``-``).

    Returns
    -------
    str
        Aligned text, one line per category and per total.
    """
    def cell(record: dict[str, Any], category: str | None, key: str = "kernel_ms") -> str:
        if "categories" not in record:
            return f"{'-':>9}"
        value = record["categories"][category]["ms"] if category else record[key]
        return f"{value:9.3f}"

    lines = [f"{'ms per step':16} {'ours':>9} {'peer':>9}"]
    lines += [f"{category:16} {cell(ours, category)} {cell(peer, category)}" for category in CATEGORY_NAMES]
    lines += [f"{label:16} {cell(ours, None, key)} {cell(peer, None, key)}"
              for label, key in (("kernels (sum)", "kernel_ms"), ("device busy", "busy_ms"),
                                 ("traced wall", "traced_wall_ms"))]
    for side, record in (("ours", ours), ("peer", peer)):
        if "categories" not in record:
            lines.append(f"{side}: {record.get('error') or record.get('skipped')}")
    return "\n".join(lines)


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_bool("smoke", False, "Tiny shapes, any backend: every field, in seconds.")
    flags.DEFINE_enum("model", "base", list(gpu.MODELS), "configs/<model>.py, vocabulary 37,000.")
    flags.DEFINE_enum("dtype", "bfloat16", list(gpu.DTYPES), "config.dtype (and the peer's).")
    flags.DEFINE_enum("implementation", "einsum", list(gpu.IMPLEMENTATIONS), "config.attention_implementation.")
    flags.DEFINE_integer("steps", 5, "Traced steps of each side.", lower_bound=1)
    for key, value in FULL.items():
        flags.DEFINE_integer(key, None, f"Default {value} ({SMOKE[key]} with --smoke).", lower_bound=0)
    flags.DEFINE_integer("top", 30, "Event names to list per side.", lower_bound=1)
    flags.DEFINE_string("peer_dir", DEFAULT_PEER_DIR, f"Folder holding {PEER_SCRIPT} and flax_wmt/.")
    flags.DEFINE_string("trace_dir", "", "Keep the traces here (ours/, peer/); default: a temporary folder, removed.")
    flags.DEFINE_string("note", "", "Recorded in the JSON: the machine, anything else running.")
    flags.DEFINE_string("out", "", "Also write the JSON here.")


def main(argv: list[str]) -> None:
    """Refuse the full mode without a GPU, trace the peer's steps, then ours; print and write the JSON.

    Parameters
    ----------
    argv : list of str
        The program name (the flags of :func:`define_flags` are parsed already).
    """
    del argv
    args = flags.FLAGS
    shapes = {key: args[key].value if args[key].value is not None else (SMOKE if args.smoke else FULL)[key]
              for key in FULL}
    if shapes["rows"] < 1 or shapes["length"] < 2:
        command_line.fail("--rows must be >= 1 and --length >= 2.")
    device = gpu.probe_device(repository_environment())
    if not args.smoke and device["backend"] != "gpu":
        command_line.fail(f"no GPU here (JAX backend {device['backend']!r}, {device['device_kind']}): the full mode "
                          f"profiles a GPU; run with --smoke for the tiny-shape check.")
    config = gpu.model_config(args.model, args.dtype, args.implementation, args.smoke)
    trace_root = args.trace_dir or tempfile.mkdtemp(prefix="gpu_profile_")
    try:
        # The peer first, in its own process, while this one holds no device memory.
        peer = profile_peer(config, args.dtype, shapes, args.steps, args.peer_dir, os.path.join(trace_root, "peer"),
                            args.top)
        ours = profile_ours(config, shapes, args.steps, os.path.join(trace_root, "ours"), args.top)
    finally:
        if not args.trace_dir:
            shutil.rmtree(trace_root, ignore_errors=True)
    if not args.trace_dir:
        for record in (ours, peer):
            record.pop("trace_file", None)
    report = {"what": "device time per train step by kernel and category, ours against the Flax WMT example; "
                      "milliseconds and calls per step",
              "mode": "smoke" if args.smoke else "full", "note": args.note, "device": device,
              "model": args.model, "dtype": args.dtype, "attention_implementation": args.implementation,
              "shapes": shapes | {"steps": args.steps, "vocab_size": config.vocab_size},
              "ours": ours, "peer": peer, "ours_minus_peer_ms": differences(ours, peer)}
    print(table(ours, peer), file=sys.stderr)
    if args.out:
        run_files.write_json_atomically(args.out, report, indent=1)
    emit_json(report, "")


if __name__ == "__main__":
    command_line.run(main, define_flags)
