r"""Time the base-shape train step with each of issue 38's candidate step changes, one at a time.

On an H100 our bfloat16 base step trails the Flax WMT example's (``docs/benchmarks.md``), and a comparison of the two lowered programs (``docs/benchmarks.md``) found three differences that may
cost time. This command measures them. It times ``benchmarks/train_step.py``'s step (``einsum``
attention) of ``configs/base.py`` in one process, once per variant:

- ``current``: the code as it is (the gold-token logit a gather, ``Q K^T`` with a float32 result);
- ``select_sum_gold_logit``: the gold-token logit as a select-and-sum over the vocabulary (exact; its
  gradient is elementwise, where the gather's is a scatter into a zero ``[B, T, vocab]`` tensor);
- ``input_dtype_scores``: the attention product ``Q K^T`` in the inputs' dtype (bfloat16 here, as
  cuDNN's attention and the Flax example have), then the scale and softmax in float32;
- ``both_changes``: the two above together;
- ``no_gradient_bookkeeping``: without the division of the gradients by the token count and without
  ``grad_norm``: not a valid training step (Adam sees summed gradients), only the size of what that
  bookkeeping costs;
- ``grad_norm_one_reduction``: ``grad_norm`` as one reduction over the concatenated gradients rather
  than one per parameter.

Each variant is the current code with a function replaced (module attributes, looked up when the step
is traced), so everything else is the same. Every variant is compiled first (each keeps its own state
and batch in device memory: about 0.8 GB each for base), then timed in ``--rounds`` rounds, each
round ``--steps`` steps of every variant in turn, so that a drift of the GPU's clock or of the host
hits every variant alike; a step is timed to completion. ``step_time_s`` is the median over all of a
variant's steps, ``round_median_step_time_s`` each round's median (their spread is the noise to read
differences against); ``vs_current`` > 1 means the variant's step is longer. The first step's loss is
recorded for each: every variant starts from the same parameters and batch. MFU is against the
GPU's datasheet peak for the dtype (:mod:`attention_jax.training.device_peaks`; ``null`` for an
unknown device or a CPU)::

    python benchmarks/gpu_step_changes.py --out=benchmarks/results/gpu_h100_step_changes.json
    python benchmarks/gpu_step_changes.py --smoke --out=/tmp/step_changes_smoke.json   # any backend

Results, and how the committed runs' variant names map to today's: ``docs/benchmarks.md`` ("On an H100").
"""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
import sys
import time
from typing import Any, Callable, Iterator

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from attention_jax.foundation import run_files  # noqa: E402
from attention_jax.models import attention, decode_attention, metrics  # noqa: E402
from attention_jax.training import device_peaks, train_state  # noqa: E402
from benchmarks import command_line  # noqa: E402
from peer_compare import emit_json  # noqa: E402

import gpu  # noqa: E402  (its model_config: configs/base.py with the benchmark's vocabulary)
import train_step  # noqa: E402
from flops import transformer_train_flops  # noqa: E402

FULL = dict(rows=128, length=128, steps=20, rounds=5, warmup_steps=2)
SMOKE = dict(rows=4, length=8, steps=2, rounds=2, warmup_steps=1)


def select_sum_gold_logit(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """The gold-token logit as a select-and-sum over the vocabulary.

    Parameters
    ----------
    logits : jax.Array
        ``[..., N]`` scores.
    targets : jax.Array
        ``[...]`` ids in ``[0, N)``.

    Returns
    -------
    jax.Array
        ``[...]``, equal to :func:`attention_jax.models.metrics.gold_token_logit`.

    Notes
    -----
    One non-zero term per sum, so exact; its gradient is elementwise, the gather's a scatter.
    """
    vocab_ids = jax.lax.broadcasted_iota(targets.dtype, logits.shape, logits.ndim - 1)
    return jnp.sum(jnp.where(vocab_ids == targets[..., None], logits, 0.0), axis=-1)


def input_dtype_scores_attention(query: jax.Array, key: jax.Array, value: jax.Array,
                                 mask: jax.Array | None = None, *, return_weights: bool = False,
                                 dropout_fn: Callable[[jax.Array], jax.Array] | None = None) -> Any:
    """``attention.scaled_dot_product_attention`` with ``Q K^T`` in the inputs' dtype, then float32.

    Parameters
    ----------
    query, key, value, mask, return_weights, dropout_fn
        As in :func:`attention_jax.models.attention.scaled_dot_product_attention`.

    Returns
    -------
    Array or (Array, Array)
        As that function; equal to it for float32 inputs.

    Notes
    -----
    In bfloat16 the product is rounded once to bfloat16 before the float32 scale and softmax.
    """
    scores = jnp.einsum("bthk,bshk->bhts", query, key).astype(jnp.float32)
    scores = scores / jnp.sqrt(jnp.float32(query.shape[-1]))
    return decode_attention.attend(scores, value, mask, return_weights=return_weights, dropout_fn=dropout_fn)


def step_without_bookkeeping(state: Any, batch: Any, carry: Any = None, *, transformer: Any,
                             optimizer: optax.GradientTransformation, label_smoothing: float,
                             micro_index: int = 0, dropout_rng: str = "threefry") -> tuple[Any, dict]:
    """``train_state.train_step`` without the per-token division and ``grad_norm`` (timing only).

    Parameters
    ----------
    state, batch, carry, transformer, optimizer, label_smoothing, micro_index, dropout_rng
        As in :func:`attention_jax.training.train_state.train_step`.

    Returns
    -------
    (TrainState, dict)
        The updated state and the metric sums, ``grad_norm`` 0.

    Notes
    -----
    Not a valid training step: Adam sees summed gradients. It measures what the bookkeeping costs.
    """
    grads, sums, _ = train_state.accumulate_gradients(state, carry, batch, jnp.int32(micro_index),
                                                      transformer=transformer, label_smoothing=label_smoothing,
                                                      dropout_rng=dropout_rng)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    new_state = state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                              opt_state=opt_state)
    return new_state, dict(sums, grad_norm=jnp.float32(0.0))


def one_reduction_norm(tree: Any) -> jax.Array:
    """The global L2 norm of a pytree as one reduction over its concatenated leaves.

    Parameters
    ----------
    tree : Any
        A pytree of arrays.

    Returns
    -------
    jax.Array
        Float32 scalar, equal to ``optax.tree.norm(tree)`` up to summation order.
    """
    leaves = [leaf.ravel().astype(jnp.float32) for leaf in jax.tree.leaves(tree)]
    return jnp.sqrt(jnp.sum(jnp.square(jnp.concatenate(leaves))))


# Each variant: (module, attribute, replacement) patches applied to the current code.
VARIANTS: dict[str, list[tuple[Any, str, Any]]] = {
    "current": [],
    "select_sum_gold_logit": [(metrics, "gold_token_logit", select_sum_gold_logit)],
    "input_dtype_scores": [(attention, "scaled_dot_product_attention", input_dtype_scores_attention)],
    "both_changes": [(metrics, "gold_token_logit", select_sum_gold_logit),
                     (attention, "scaled_dot_product_attention", input_dtype_scores_attention)],
    "no_gradient_bookkeeping": [(train_state, "train_step", step_without_bookkeeping)],
    "grad_norm_one_reduction": [(optax.tree, "norm", one_reduction_norm)],
}


@contextlib.contextmanager
def patched(patches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """Replace module attributes for the duration of the block, then restore them.

    Parameters
    ----------
    patches : list of (module, str, object)
        ``(module, attribute, replacement)``.
    """
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    try:
        for module, name, replacement in patches:
            setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


@dataclasses.dataclass
class CompiledVariant:
    """One variant's compiled step, with the state and batch it runs on."""

    step: Any
    state: Any
    batch: Any
    compile_s: float
    first_loss: float
    step_times_s: list[list[float]] = dataclasses.field(default_factory=list)  # One list per round.


def compile_variant(config: Any, shapes: dict[str, int], patches: list[tuple[Any, str, Any]]) -> CompiledVariant:
    """Build and compile the train step with ``patches`` applied, then run its warm-up steps.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        From ``gpu.model_config``.
    shapes : dict[str, int]
        ``rows``, ``length`` and ``warmup_steps``.
    patches : list of (module, str, object)
        The variant (:data:`VARIANTS`).

    Returns
    -------
    CompiledVariant
        Its executable (fixed once compiled, so it runs the variant after the patches are undone),
        state, batch, compile time and the loss of its first step (every variant starts from the same
        parameters and batch, so equal first losses show the variants compute the same step).
    """
    with patched(patches):  # The step is traced, so the patches take effect, while it compiles.
        train, state, batch, _ = train_step.build_step(config, shapes["rows"], shapes["length"])
        start = time.perf_counter()
        compiled = train.lower(state, batch).compile()
        compile_s = time.perf_counter() - start
    state, sums = compiled(state, batch)
    first_loss = float(sums["loss_sum"] / sums["tokens"])
    for _ in range(shapes["warmup_steps"]):
        state, sums = compiled(state, batch)
    jax.block_until_ready(sums)
    return CompiledVariant(compiled, state, batch, compile_s, first_loss)


def time_round(variant: CompiledVariant, steps: int) -> None:
    """Time ``steps`` steps of ``variant``, each to completion, appending them as one round.

    Parameters
    ----------
    variant : CompiledVariant
        Its state is advanced and its ``step_times_s`` gains one list.
    steps : int
        Steps in the round.
    """
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        variant.state, sums = variant.step(variant.state, variant.batch)
        jax.block_until_ready(sums)
        times.append(time.perf_counter() - start)
    variant.step_times_s.append(times)


def summarize(variant: CompiledVariant, flops_per_step: float, peak: float | None, tokens: int) -> dict[str, Any]:
    """The JSON fields of one variant: medians over every timed step and per round.

    Parameters
    ----------
    variant : CompiledVariant
        After its rounds.
    flops_per_step : float
        The model's matmul FLOPs per step.
    peak : float or None
        The device's dense peak FLOP/s (``None``: no MFU).
    tokens : int
        Target tokens per step.

    Returns
    -------
    dict
        Step times (median, mean, per-round medians), tokens/s, MFU, compile time and first-step loss.
    """
    every_step = [time for round_times in variant.step_times_s for time in round_times]
    step_time = float(np.median(every_step))
    return {
        "step_time_s": step_time,
        "step_time_mean_s": float(np.mean(every_step)),
        "round_median_step_time_s": [float(np.median(times)) for times in variant.step_times_s],
        "target_tokens_per_s": tokens / step_time,
        "mfu": flops_per_step / step_time / (peak * jax.device_count()) if peak else None,
        "compile_s": variant.compile_s,
        "first_step_loss": variant.first_loss,
    }


def define_flags() -> None:
    """The command line's flags."""
    flags.DEFINE_bool("smoke", False, "Tiny shapes, any backend: every variant, in seconds.")
    flags.DEFINE_enum("dtype", "bfloat16", ["bfloat16", "float32"], "config.dtype.")
    flags.DEFINE_list("variants", list(VARIANTS), f"Comma-separated subset of {list(VARIANTS)}.")
    flags.DEFINE_integer("steps", None, f"Timed steps of each variant per round (default {FULL['steps']}).")
    flags.DEFINE_integer("rounds", None, f"Rounds over the variants (default {FULL['rounds']}).")
    flags.DEFINE_string("note", "", "Recorded in the JSON: the machine, anything else running.")
    flags.DEFINE_string("out", "", "Also write the JSON here (rewritten after each variant).")


def main(argv: list[str]) -> None:
    """Time each variant's train step; print and write the JSON.

    Parameters
    ----------
    argv : list of str
        The program name.
    """
    del argv
    args = flags.FLAGS
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        command_line.fail(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}.")
    defaults = SMOKE if args.smoke else FULL
    shapes = dict(defaults, steps=args.steps or defaults["steps"], rounds=args.rounds or defaults["rounds"])
    config = gpu.model_config("base", args.dtype, "einsum", args.smoke)
    device = jax.devices()[0]
    peak = device_peaks.datasheet_peak(device.device_kind, args.dtype)
    report: dict[str, Any] = {
        "mode": "smoke" if args.smoke else "full", "note": args.note,
        "device": {"backend": jax.default_backend(), "device_kind": device.device_kind,
                   "device_count": jax.device_count(), "jax": jax.__version__},
        "model": "base", "dtype": args.dtype, "attention_implementation": "einsum", "shapes": shapes,
        "vocab_size": config.vocab_size, "peak_flops_per_s": peak.flops_per_s if peak else None,
        "variants": {},
    }
    tokens = shapes["rows"] * shapes["length"]
    flops_per_step = transformer_train_flops(
        rows=shapes["rows"], source_len=shapes["length"], target_len=shapes["length"],
        **{key: config[key] for key in ("num_layers", "d_model", "d_ff", "num_heads", "key_dim", "value_dim",
                                       "vocab_size")})
    compiled = {}
    for name in args.variants:  # All compiled first, then timed in alternation: drift hits each alike.
        compiled[name] = compile_variant(config, shapes, VARIANTS[name])
        print(f"{name}: compiled in {compiled[name].compile_s:.1f} s, first-step loss "
              f"{compiled[name].first_loss:.6f}", file=sys.stderr, flush=True)
    for round_index in range(shapes["rounds"]):
        for name, variant in compiled.items():
            time_round(variant, shapes["steps"])
        report["variants"] = {name: summarize(variant, flops_per_step, report["peak_flops_per_s"], tokens)
                              for name, variant in compiled.items()}
        current = report["variants"].get("current")
        for entry in report["variants"].values():
            entry["vs_current"] = entry["step_time_s"] / current["step_time_s"] if current else None
        report["rounds_done"] = round_index + 1
        if args.out:  # A run cut short (a lease's time limit) keeps the rounds it finished.
            run_files.write_json_atomically(args.out, report, indent=1)
    for name, entry in report["variants"].items():
        rounds = ", ".join(f"{time * 1e3:.2f}" for time in entry["round_median_step_time_s"])
        print(f"{name}: {entry['step_time_s'] * 1e3:.2f} ms/step (rounds: {rounds})", file=sys.stderr)
    emit_json(report, args.out)


if __name__ == "__main__":
    command_line.run(main, define_flags)
