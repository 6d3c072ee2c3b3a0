r"""Time the base-shape train step with each of issue 38's candidate step changes, one at a time.

``benchmarks/gpu.py`` measured our bfloat16 base step at 0.81-0.84x the Flax WMT example on an H100,
and a comparison of the two lowered programs (``docs/benchmarks.md``) found three differences that may
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
is traced), so everything else is the same. Step times are medians of ``--steps`` steps, as in
``train_step.py``; ``vs_current`` > 1 means the variant's step is longer. Run the command twice: on an
H100 the same variant's median moved by 3 ms (7%) between runs. MFU is against the GPU's datasheet
peak for the dtype (:mod:`attention_jax.training.device_peaks`; ``null`` for an unknown device or a
CPU)::

    python benchmarks/gpu_step_changes.py --out=benchmarks/results/gpu_h100_step_changes.json
    python benchmarks/gpu_step_changes.py --smoke --out=/tmp/step_changes_smoke.json   # any backend

Results: ``docs/benchmarks.md`` ("On an H100"). The committed runs (``gpu_h100_step_changes_run1.json``,
``_run2.json``) were taken at commit 47b5e8b, where the two changes were the code and the variants
undid them: there ``current`` is ``both_changes`` here, ``gather_gold_logit`` is
``input_dtype_scores``, ``float32_scores`` is ``select_sum_gold_logit`` and ``both_undone`` is
``current``.
"""

from __future__ import annotations

import contextlib
import gc
import pathlib
import sys
from typing import Any, Callable, Iterator

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from attention_jax import run_files  # noqa: E402
from attention_jax.models import attention, decode_attention, metrics  # noqa: E402
from attention_jax.training import device_peaks, train_state  # noqa: E402
from benchmarks import command_line  # noqa: E402
from peer_compare import emit_json  # noqa: E402

import gpu  # noqa: E402  (its model_config: configs/base.py with the benchmark's vocabulary)
import train_step  # noqa: E402

FULL = dict(rows=128, length=128, steps=10, warmup_steps=2)
SMOKE = dict(rows=4, length=8, steps=2, warmup_steps=1)


def select_sum_gold_logit(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """The gold-token logit as a select-and-sum over the vocabulary: one non-zero term, so exact."""
    vocab_ids = jax.lax.broadcasted_iota(targets.dtype, logits.shape, logits.ndim - 1)
    return jnp.sum(jnp.where(vocab_ids == targets[..., None], logits, 0.0), axis=-1)


def input_dtype_scores_attention(query: jax.Array, key: jax.Array, value: jax.Array,
                                 mask: jax.Array | None = None, *, return_weights: bool = False,
                                 dropout_fn: Callable[[jax.Array], jax.Array] | None = None) -> Any:
    """``attention.scaled_dot_product_attention`` with ``Q K^T`` in the inputs' dtype, then float32."""
    scores = jnp.einsum("bthk,bshk->bhts", query, key).astype(jnp.float32)
    scores = scores / jnp.sqrt(jnp.float32(query.shape[-1]))
    return decode_attention.attend(scores, value, mask, return_weights=return_weights, dropout_fn=dropout_fn)


def step_without_bookkeeping(state: Any, batch: Any, carry: Any = None, *, transformer: Any,
                             optimizer: optax.GradientTransformation, label_smoothing: float,
                             micro_index: int = 0, dropout_rng: str = "threefry") -> tuple[Any, dict]:
    """``train_state.train_step`` without the per-token division and ``grad_norm`` (timing only)."""
    grads, sums = train_state.accumulate_gradients(state, carry, batch, jnp.int32(micro_index),
                                                   transformer=transformer, label_smoothing=label_smoothing,
                                                   dropout_rng=dropout_rng)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    new_state = state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                              opt_state=opt_state)
    return new_state, dict(sums, grad_norm=jnp.float32(0.0))


def one_reduction_norm(tree: Any) -> jax.Array:
    """The global L2 norm of a pytree as one reduction over its concatenated leaves."""
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
    "grad_norm_one_reduction": [(train_state.optax.tree, "norm", one_reduction_norm)],
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


def define_flags() -> None:
    """The command line's flags."""
    flags.DEFINE_bool("smoke", False, "Tiny shapes, any backend: every variant, in seconds.")
    flags.DEFINE_enum("dtype", "bfloat16", ["bfloat16", "float32"], "config.dtype.")
    flags.DEFINE_list("variants", list(VARIANTS), f"Comma-separated subset of {list(VARIANTS)}.")
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
    shapes = SMOKE if args.smoke else FULL
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
    for name in args.variants:
        with patched(VARIANTS[name]):
            result = train_step.benchmark(config, shapes["rows"], shapes["length"], shapes["steps"],
                                          shapes["warmup_steps"], peak_size=64)  # Its CPU peak is unused.
        gc.collect()
        tokens = shapes["rows"] * shapes["length"]
        report["variants"][name] = {
            "step_time_s": result["step_time_s"], "step_time_mean_s": result["step_time_mean_s"],
            "target_tokens_per_s": result["target_tokens_per_s"], "compile_s": result["compile_s"],
            "loss": result["loss"],
            "mfu": (result["model_flops_per_step"] / result["step_time_s"] / (peak.flops_per_s * jax.device_count())
                    if peak else None),
            "mean_target_tokens_per_s": tokens / result["step_time_mean_s"],
        }
        current = report["variants"].get("current")
        for entry in report["variants"].values():
            entry["vs_current"] = entry["step_time_s"] / current["step_time_s"] if current else None
        print(f"{name}: {result['step_time_s'] * 1e3:.2f} ms/step, loss {result['loss']:.4f}",
              file=sys.stderr, flush=True)
        if args.out:  # A run cut short (a lease's time limit) keeps what it measured.
            run_files.write_json_atomically(args.out, report, indent=1)
    emit_json(report, args.out)


if __name__ == "__main__":
    command_line.run(main, define_flags)
