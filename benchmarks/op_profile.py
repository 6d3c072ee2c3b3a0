r"""Where a compiled program's time goes, per XLA operation and per kind of work; prints and writes JSON.

Run from the repository root::

    python benchmarks/op_profile.py --task=beam_base --out=benchmarks/results/op_profile_beam_base.json
    python benchmarks/op_profile.py --task=train_base --runs=3

Tasks (the shapes of ``benchmarks/peer_flax.py``):

- ``beam_base``: beam 4, alpha 0.6, the base model with a 37,000-piece vocabulary, 8 sentences of 64
  source tokens, every output forced to exactly 64 tokens (``benchmarks/decode.py``'s search, cache in
  ``--cache_stages`` stages);
- ``train_base``: one train step (forward, backward, Adam) of the base model, vocabulary 32,000, on
  16 x 64 tokens (``benchmarks/train_step.py``'s step).

The program is compiled and run once, then ``--runs`` runs are traced with ``jax.profiler``
(``create_perfetto_trace``). Every trace event that names an operation of the compiled module
(``args.hlo_op``) is matched to that operation in the optimized HLO, and its duration (thread time,
summed over threads) is added to the operation and to its *kind* (:func:`kind_of`): ``matmul`` (a dot,
alone or fused), ``top_k``, ``gather`` (the beam reorder, embedding lookups), ``scatter``,
``transpose/copy`` (data movement only), ``reduction`` (softmax, layer norm, loss), ``elementwise`` and
``other``. Control flow (``while``, ``conditional``, ``call``) holds other operations and is not counted
itself. Reported: milliseconds and share per kind, and the top operations with the source operation
(``op_name``) that XLA kept in their metadata.

Thread time is what the cores spent, so a busy neighbour inflates every share alike less than it does
wall time; the shares, not the milliseconds, are what to compare across machines.
"""

from __future__ import annotations

import collections
import functools
import glob
import gzip
import json
import os
import re
import sys
import tempfile
from typing import Any, Callable

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

import jax  # noqa: E402

from benchmarks import command_line  # noqa: E402
from peer_compare import emit_json  # noqa: E402

CONTROL_FLOW = frozenset({"while", "conditional", "call"})
DATA_MOVEMENT = frozenset({"transpose", "copy", "bitcast", "parameter", "reshape", "broadcast", "slice",
                           "concatenate", "dynamic-slice", "dynamic-update-slice", "tuple", "get-tuple-element",
                           "constant", "pad", "reverse"})
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([a-z][\w\-]*)\((.*)$")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_CUSTOM_TARGET = re.compile(r'custom_call_target="([^"]*)"')


def parse_hlo(hlo_text: str) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """The instructions of an HLO module's text, and the opcodes of each computation.

    Parameters
    ----------
    hlo_text : str
        ``compiled.as_text()`` of a jitted function.

    Returns
    -------
    tuple[dict, dict]
        Instruction name -> ``{"opcode", "computation", "calls", "op_name", "target"}`` (the computation
        holding it, the one it calls, the source operation from the metadata, the custom-call target;
        each may be ``""``), and computation name -> the opcodes of its instructions
        (``"custom-call:<target>"`` for custom calls).
    """
    instructions: dict[str, dict[str, Any]] = {}
    computations: dict[str, list[str]] = collections.defaultdict(list)
    current = ""
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line)
        if header and not line[:1].isspace():  # Headers start at column 0, instructions are indented.
            current = header.group(1)
            continue
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, opcode, rest = match.groups()
        calls, op_name, target = (_CALLS.search(rest), _OP_NAME.search(rest), _CUSTOM_TARGET.search(rest))
        instructions[name] = {"opcode": opcode, "computation": current, "calls": calls.group(1) if calls else "",
                              "op_name": op_name.group(1) if op_name else "",
                              "target": target.group(1) if target else ""}
        computations[current].append(f"custom-call:{target.group(1)}" if opcode == "custom-call" and target
                                     else opcode)
    return instructions, dict(computations)


def executed(instructions: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The instructions that run as operations: those not inside a fusion's computation.

    Parameters
    ----------
    instructions : dict
        :func:`parse_hlo`'s instructions.

    Returns
    -------
    dict
        The subset held by the entry computation, loop bodies and other non-fused computations.
    """
    fused = {instruction["calls"] for instruction in instructions.values() if instruction["opcode"] == "fusion"}
    return {name: instruction for name, instruction in instructions.items()
            if instruction["computation"] not in fused}


def kind_of(instruction: dict[str, Any], computations: dict[str, list[str]]) -> str:
    """The kind of work of one operation (module docstring), from its opcode and what it fuses.

    Parameters
    ----------
    instruction : dict
        One entry of :func:`parse_hlo`'s instructions.
    computations : dict
        :func:`parse_hlo`'s computations (what a fusion calls).

    Returns
    -------
    str
        ``matmul``, ``top_k``, ``gather``, ``scatter``, ``transpose/copy``, ``reduction``, ``elementwise``,
        ``control flow`` or ``other``.
    """
    opcode = instruction["opcode"]
    if opcode in CONTROL_FLOW:
        return "control flow"
    inner = set(computations.get(instruction["calls"], [])) if opcode == "fusion" else {opcode}
    if opcode == "custom-call":
        inner = {f"custom-call:{instruction['target']}"}
    if inner & {"dot", "convolution"}:
        return "matmul"
    if any("topk" in op.lower() for op in inner) or "sort" in inner:
        return "top_k"
    for kind in ("gather", "scatter"):
        if kind in inner:
            return kind
    if inner and inner <= DATA_MOVEMENT:
        return "transpose/copy"
    if inner & {"reduce", "reduce-window"}:
        return "reduction"
    if opcode == "fusion" or opcode not in DATA_MOVEMENT | {"custom-call", "rng-bit-generator"}:
        return "elementwise"
    return "other"


def summarize_trace(events: list[dict[str, Any]], hlo_text: str, *, top: int = 15) -> dict[str, Any]:
    """Add up a trace's operation events per operation and per kind of work.

    Parameters
    ----------
    events : list[dict]
        ``traceEvents`` of a Perfetto/Chrome trace written by ``jax.profiler.trace``.
    hlo_text : str
        The optimized HLO of the traced program (``compiled.as_text()``).
    top : int
        How many of the most expensive operations to list.

    Returns
    -------
    dict
        ``total_ms`` (operation thread time, control flow left out), ``kinds`` (kind -> ``ms``,
        ``share``), ``top_ops`` (``op``, ``kind``, ``ms``, ``share``, ``count``, ``op_name``), and
        ``unmatched_ms``: time of events naming no operation of this module (another program's).
    """
    instructions, computations = parse_hlo(hlo_text)
    by_op: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, int] = collections.Counter()
    unmatched = 0.0
    for event in events:
        op = (event.get("args") or {}).get("hlo_op")
        if event.get("ph") != "X" or not op:
            continue
        if op not in instructions:
            unmatched += event.get("dur", 0.0)
            continue
        by_op[op] += event.get("dur", 0.0)
        counts[op] += 1
    kind_by_op = {op: kind_of(instructions[op], computations) for op in by_op}
    kinds: dict[str, float] = collections.defaultdict(float)
    for op, microseconds in by_op.items():
        kinds[kind_by_op[op]] += microseconds
    kinds.pop("control flow", None)
    total = sum(kinds.values())
    counted = [op for op in by_op if kind_by_op[op] != "control flow"]
    ranked = sorted(counted, key=by_op.get, reverse=True)[:top]
    return {
        "total_ms": round(total / 1e3, 3),
        "kinds": {kind: {"ms": round(value / 1e3, 3), "share": round(value / total, 4) if total else 0.0}
                  for kind, value in sorted(kinds.items(), key=lambda item: -item[1])},
        "top_ops": [{"op": op, "kind": kind_by_op[op], "ms": round(by_op[op] / 1e3, 3),
                     "share": round(by_op[op] / total, 4) if total else 0.0, "count": counts[op],
                     "op_name": instructions[op]["op_name"]} for op in ranked],
        "unmatched_ms": round(unmatched / 1e3, 3),
    }


def profile(run: Callable[[], Any], hlo_text: str, *, runs: int, top: int = 15) -> dict[str, Any]:
    """Run ``run`` once untraced, then ``runs`` times under ``jax.profiler``; :func:`summarize_trace` it.

    Parameters
    ----------
    run : callable
        Runs the compiled program once and returns its outputs (waited for here).
    hlo_text : str
        The program's optimized HLO.
    runs : int
        Traced runs (their times add up).
    top : int
        Operations to list.

    Returns
    -------
    dict
        :func:`summarize_trace`'s result, with ``runs``.
    """
    jax.block_until_ready(run())
    with tempfile.TemporaryDirectory(prefix="op_profile_") as trace_dir:
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(runs):
                jax.block_until_ready(run())
        paths = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True))
        if not paths:
            raise RuntimeError(f"jax.profiler wrote no Perfetto trace under {trace_dir}.")
        with gzip.open(paths[-1], "rt", encoding="utf-8") as file:
            trace = json.load(file)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return {"runs": runs, **summarize_trace(events, hlo_text, top=top)}


def beam_base(cache_stages: int) -> tuple[Callable[[], Any], str]:
    """The beam search of ``peer_flax.py``'s ``beam_base`` task, compiled; returns (run, HLO text)."""
    import jax.numpy as jnp

    from benchmarks.decode import forced_inputs, forced_length_search, model_config_for, random_params

    model_config = model_config_for("base").replace(vocab_size=37000)
    params = random_params(model_config)
    inputs, max_lengths, max_decode_len = forced_inputs(model_config, batch_size=8, source_len=64, output_len=64)
    inputs, max_lengths = jnp.asarray(inputs), jnp.asarray(max_lengths)
    kwargs = dict(model_config=model_config, method="beam", max_decode_len=max_decode_len, use_cache=True,
                  cache_stages=cache_stages)
    compiled = forced_length_search.lower(params, inputs, max_lengths, **kwargs).compile()
    return functools.partial(compiled, params, inputs, max_lengths), compiled.as_text()


def train_base() -> tuple[Callable[[], Any], str]:
    """One train step of ``peer_flax.py``'s ``train_base`` task, compiled; returns (run, HLO text)."""
    from attention_jax.models import model
    from attention_jax.training import initial_state, sharding, train_state
    from attention_jax.experiment import sections
    from benchmarks.train_step import random_batch
    from configs import base as base_config

    config = base_config.get_config()
    config.vocab_size = 32000
    experiment = sections.build_experiment(config, "configs/base.py")
    mesh = sharding.create_mesh((-1,), ("data",))
    transformer = model.Transformer(experiment.model)
    optimizer = train_state.make_optimizer(experiment.optimizer)
    rules = sharding.logical_axis_rules(experiment.run.param_sharding, mesh)
    state, shardings = initial_state.sharded_initial_state(experiment.seed, transformer, optimizer, mesh, rules)
    steps_fn = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                         label_smoothing=experiment.optimizer.label_smoothing)
    batch = sharding.global_batch(random_batch(16, 64, experiment.model.vocab_size), steps_fn.batch_sharding)
    compiled = steps_fn.train.lower(state, batch).compile()
    current = {"state": state}

    def run() -> Any:  # The step donates its state: each run continues from the last one's.
        current["state"], sums = compiled(current["state"], batch)
        return sums

    return run, compiled.as_text()


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_enum("task", "beam_base", ["beam_base", "train_base"], "What to profile (see the module docstring).")
    flags.DEFINE_integer("runs", 2, "Traced runs (after one untraced).", lower_bound=1)
    flags.DEFINE_integer("cache_stages", 2, "beam_base: stages of the key/value cache.")
    flags.DEFINE_integer("top", 15, "Operations to list.")
    flags.DEFINE_string("out", "", "JSON file to write as well.")


def main(argv: list[str]) -> None:
    """Profile the requested task and print (and with ``--out`` write) the JSON."""
    del argv
    args = flags.FLAGS
    run, hlo_text = beam_base(args.cache_stages) if args.task == "beam_base" else train_base()
    report = {"task": args.task, "device": str(jax.devices()[0].device_kind), "jax": jax.__version__,
              **({"cache_stages": args.cache_stages} if args.task == "beam_base" else {}),
              **profile(run, hlo_text, runs=args.runs, top=args.top)}
    emit_json(report, args.out)


if __name__ == "__main__":
    command_line.run(main, define_flags)
