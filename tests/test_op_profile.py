"""benchmarks/op_profile.py: HLO parsing, kinds of work, trace summaries; and what a decode step moves."""

from __future__ import annotations

import functools
import os
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest

from attention_jax.decoding import decode
from tests.support.decoding_helpers import TINY, init_params
from tests.support.sweep_cli import REPO_ROOT

sys.path.insert(0, os.path.join(str(REPO_ROOT), "benchmarks"))
import op_profile  # noqa: E402

HLO = """HloModule jit_example, entry_computation_layout={(f32[4,8]{1,0})->f32[4]{0}}

%fused_dot (param_0: f32[4,8], param_1: f32[8,8]) -> f32[4,8] {
  %param_0 = f32[4,8]{1,0} parameter(0)
  %param_1 = f32[8,8]{1,0} parameter(1)
  ROOT %dot.1 = f32[4,8]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general"}
}

%fused_transpose (param_0.1: f32[4,8]) -> f32[8,4] {
  %param_0.1 = f32[4,8]{1,0} parameter(0)
  ROOT %transpose.2 = f32[8,4]{0,1} transpose(%param_0.1), dimensions={1,0}
}

%fused_softmax (param_0.2: f32[4,8]) -> f32[4] {
  %param_0.2 = f32[4,8]{1,0} parameter(0)
  %exponential.1 = f32[4,8]{1,0} exponential(%param_0.2)
  %constant.3 = f32[] constant(0)
  ROOT %reduce.4 = f32[4]{0} reduce(%exponential.1, %constant.3), dimensions={1}, to_apply=%add
}

%body.7 (arg_tuple: (s32[], f32[4,8], /*index=2*/f32[4])) -> (s32[], f32[4,8], /*index=2*/f32[4]) {
  %arg_tuple = (s32[], f32[4,8]{1,0}, /*index=2*/f32[4]{0}) parameter(0)
  %loop_copy_fusion = f32[8,4]{0,1} fusion(%arg_tuple), kind=kLoop, calls=%fused_transpose, metadata={op_name="jit(f)/while/body/cross_attention/key/add"}
}

ENTRY %main.9 (Arg_0.1: f32[4,8]) -> f32[4] {
  %Arg_0.1 = f32[4,8]{1,0} parameter(0)
  %matmul_fusion = f32[4,8]{1,0} fusion(%Arg_0.1, %Arg_0.1), kind=kOutput, calls=%fused_dot, metadata={op_name="jit(f)/decoder/dot_general"}
  %copy_fusion = f32[8,4]{0,1} fusion(%matmul_fusion), kind=kLoop, calls=%fused_transpose, metadata={op_name="jit(f)/cross_attention/key/add"}
  %topk = (f32[4,2]{1,0}, s32[4,2]{1,0}) custom-call(%matmul_fusion), custom_call_target="TopK", metadata={op_name="jit(f)/top_k"}
  %gather.5 = f32[4,8]{1,0} gather(%matmul_fusion, %Arg_0.1), offset_dims={1}, metadata={op_name="jit(f)/gather"}
  %while.6 = (s32[], f32[4,8]{1,0}) while(%tuple.0), condition=%cond, body=%body
  ROOT %softmax_fusion = f32[4]{0} fusion(%gather.5), kind=kLoop, calls=%fused_softmax
}
"""


def _event(op: str, microseconds: float) -> dict:
    return {"ph": "X", "name": op, "dur": microseconds, "args": {"hlo_op": op, "hlo_module": "jit_example"}}


def test_parse_hlo_and_kinds_of_a_hand_written_module() -> None:
    instructions, computations = op_profile.parse_hlo(HLO)
    assert instructions["matmul_fusion"]["calls"] == "fused_dot"
    assert instructions["copy_fusion"]["op_name"] == "jit(f)/cross_attention/key/add"
    assert instructions["topk"]["target"] == "TopK"
    assert computations["fused_softmax"] == ["parameter", "exponential", "constant", "reduce"]
    # A header with "=" in it (XLA's /*index=N*/ tuple comments) still starts a computation.
    assert instructions["loop_copy_fusion"]["computation"] == "body.7"
    assert set(op_profile.executed(instructions)) == {"Arg_0.1", "matmul_fusion", "copy_fusion", "topk", "gather.5",
                                                      "while.6", "softmax_fusion", "arg_tuple", "loop_copy_fusion"}
    kinds = {name: op_profile.kind_of(instructions[name], computations)
             for name in ("matmul_fusion", "copy_fusion", "topk", "gather.5", "while.6", "softmax_fusion")}
    assert kinds == {"matmul_fusion": "matmul", "copy_fusion": "transpose/copy", "topk": "top_k",
                     "gather.5": "gather", "while.6": "control flow", "softmax_fusion": "reduction"}


def test_summarize_trace_adds_durations_per_op_and_kind() -> None:
    events = [_event("matmul_fusion", 600.0), _event("matmul_fusion", 400.0), _event("copy_fusion", 500.0),
              _event("topk", 250.0), _event("while.6", 99_999.0),  # Holds the others: not counted.
              _event("not_in_this_module", 70.0),
              {"ph": "X", "name": "PjitFunction(f)", "dur": 5_000.0}]  # Not an operation.
    summary = op_profile.summarize_trace(events, HLO, top=2)
    assert summary["total_ms"] == pytest.approx(1.75)
    assert summary["kinds"] == {"matmul": {"ms": 1.0, "share": pytest.approx(1.0 / 1.75, abs=1e-4)},
                                "transpose/copy": {"ms": 0.5, "share": pytest.approx(0.5 / 1.75, abs=1e-4)},
                                "top_k": {"ms": 0.25, "share": pytest.approx(0.25 / 1.75, abs=1e-4)}}
    assert [(op["op"], op["count"], op["op_name"]) for op in summary["top_ops"]] == [
        ("matmul_fusion", 2, "jit(f)/decoder/dot_general"), ("copy_fusion", 1, "jit(f)/cross_attention/key/add")]
    assert summary["unmatched_ms"] == pytest.approx(0.07)


def test_profile_of_a_real_program_finds_its_matmul_and_top_k() -> None:
    def program(x, w):
        logits = x @ w
        return jax.lax.top_k(logits, 4)

    x, w = jnp.ones((64, 256)), jnp.ones((256, 512))
    compiled = jax.jit(program).lower(x, w).compile()
    summary = op_profile.profile(lambda: compiled(x, w), compiled.as_text(), runs=3)
    assert summary["runs"] == 3 and summary["total_ms"] > 0
    assert {"matmul", "top_k"} <= set(summary["kinds"])
    assert sum(kind["share"] for kind in summary["kinds"].values()) == pytest.approx(1.0, abs=1e-3)


def _decode_loop_hlo(model_config) -> str:
    params = nn.meta.unbox(init_params(model_config, seed=0))
    rows, source_len = 4, 12
    inputs = jnp.full((rows, source_len), 5, jnp.int32)
    max_lengths = jnp.full((rows,), 10, jnp.int32)
    search = functools.partial(decode.decode_batch, model_config=model_config, beam_size=2, alpha=0.6,
                               max_decode_len=16, cache_stages=1)
    return jax.jit(search).lower(params, inputs, max_lengths).compile().as_text()


def test_a_cached_decode_step_moves_no_cross_attention_keys_or_values() -> None:
    # One query position per row: both attentions contract the keys/values as stored. Before, XLA
    # transposed every layer's cross-attention keys and values at every step of the search loop (12% of
    # a base-shape beam search's thread time, benchmarks/op_profile.py).
    instructions, computations = op_profile.parse_hlo(_decode_loop_hlo(TINY))
    cross = [instruction for instruction in op_profile.executed(instructions).values()
             if "while/body" in instruction["op_name"] and "cross_attention" in instruction["op_name"]]
    assert cross  # The loop body attends to the source.
    moved = [instruction["op_name"] for instruction in cross
             if op_profile.kind_of(instruction, computations) == "transpose/copy"
             and instruction["opcode"] not in ("parameter", "bitcast", "get-tuple-element", "tuple", "constant")]
    assert moved == []
