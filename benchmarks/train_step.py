r"""Time the jitted train step on this machine's devices; prints one JSON object.

Run from the repository root::

    python benchmarks/train_step.py --config=configs/tiny.py --rows=64 --length=32
    python benchmarks/train_step.py --config=configs/base.py --rows=8 --length=32 --steps=10
    python benchmarks/train_step.py --config=configs/base.py --config.dtype=bfloat16 --rows=64 --length=64
    python benchmarks/train_step.py --quick

The step is :func:`attention_jax.training.train_state.train_step` as training runs it (forward, backward,
Adam, metrics; dropout and label smoothing from the config) on ``rows`` sentence pairs of ``length`` tokens
on both sides, no padding. ``step_time_s`` is the median of ``--steps`` steps, each timed to completion
after compilation and ``--warmup_steps``; ``compiled_memory_bytes`` is XLA's account of the compiled step
(its arguments: parameters, Adam's moments and the batch; ``temp``: activations kept for the backward pass and
scratch), the same on every run of one program and a device's memory need without a profiler; ``mfu`` is
the model's matmul FLOPs (:mod:`attention_jax.models.flops`) per second over the peak of float32
``--peak_size``^3 products measured here, times the device count.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import jax
import numpy as np
from absl import flags
from ml_collections import config_flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from attention_jax.experiment import sections  # noqa: E402
from attention_jax.models import model  # noqa: E402
from attention_jax.models.flops import transformer_train_flops  # noqa: E402
from attention_jax.training import device_peaks, sharding, train_state  # noqa: E402
from benchmarks import harness  # noqa: E402

DEFAULT_PEAK_SIZE = 2048
QUICK = dict(rows=4, length=8, steps=2, warmup_steps=1, peak_size=64)


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    config_flags.DEFINE_config_file("config", os.path.join(REPO_ROOT, "configs", "tiny.py"),
                                    "Config file; --config.FIELD=VALUE overrides a field.")
    flags.DEFINE_integer("rows", 64, "Sentence pairs per batch (a multiple of the device count).")
    flags.DEFINE_integer("length", 32, "Tokens per sentence, source and target.")
    flags.DEFINE_integer("steps", 20, "Timed steps.")
    flags.DEFINE_integer("warmup_steps", 3, "Untimed steps after compilation.")
    flags.DEFINE_integer("peak_size", DEFAULT_PEAK_SIZE, "Matmul size of the peak measurement.")


def random_batch(rows: int, length: int, vocab_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Full-length sentences (no padding) ending in EOS."""
    rng = np.random.default_rng(seed)
    batch = {key: rng.integers(4, vocab_size, size=(rows, length), dtype=np.int32) for key in ("inputs", "targets")}
    for value in batch.values():
        value[:, -1] = model.EOS_ID
    return batch


def build_step(config: Any, rows: int, length: int) -> tuple[Any, Any, dict[str, Any], model.Transformer]:
    """The jitted train step of ``config``, its initial state and a random batch placed for it.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        The model and training config.
    rows, length : int
        Sentence pairs per batch and tokens per sentence (source and target).

    Returns
    -------
    tuple
        ``(train, state, batch, transformer)``; ``train(state, batch)`` donates ``state`` and returns the
        new one and the loss sums.
    """
    experiment = sections.build_experiment(config, "benchmarks/train_step.py")
    mesh = sharding.create_mesh((-1,), ("data",))
    transformer = model.Transformer(experiment.model)
    optimizer = train_state.make_optimizer(experiment.optimizer)
    rules = sharding.logical_axis_rules(experiment.run.param_sharding, mesh)
    state, shardings = train_state.sharded_initial_state(experiment.seed, transformer, optimizer, mesh, rules)
    steps_fn = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                         label_smoothing=experiment.optimizer.label_smoothing,
                                         dropout_rng=experiment.optimizer.dropout_rng)
    batch = sharding.global_batch(random_batch(rows, length, experiment.model.vocab_size), steps_fn.batch_sharding)
    return steps_fn.train, state, batch, transformer


def benchmark(config: Any, rows: int, length: int, steps: int, warmup_steps: int,
              peak_size: int = DEFAULT_PEAK_SIZE) -> dict[str, Any]:
    """Compile and time the train step.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        The model and training config.
    rows, length : int
        Sentence pairs per batch and tokens per sentence (source and target).
    steps, warmup_steps : int
        Timed steps, and untimed steps after compilation.
    peak_size : int
        Matrix size of the float32 matmul peak that ``mfu`` is measured against.

    Returns
    -------
    dict[str, Any]
        The JSON fields (module docstring).
    """
    train, state, batch, transformer = build_step(config, rows, length)
    start = time.perf_counter()
    compiled = train.lower(state, batch).compile()
    compile_s = time.perf_counter() - start
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    memory = compiled.memory_analysis()
    carry = {"state": state}

    def step() -> None:
        carry["state"], carry["sums"] = train(carry["state"], batch)
        jax.block_until_ready(carry["sums"])

    times = harness.timing(harness.time_calls(step, steps, warmup=1 + warmup_steps))
    step_time, sums = times["median_s"], carry["sums"]
    model_config = transformer.config
    dims = {name: getattr(model_config, name) for name in ("num_layers", "d_model", "d_ff", "num_heads", "key_dim",
                                                           "value_dim", "vocab_size")}
    shape = dict(rows=rows, length=length, **dims, dropout_rate=model_config.dropout_rate,
                 label_smoothing=config.label_smoothing, layer_norm_position=model_config.layer_norm_position,
                 share_embeddings=model_config.share_embeddings)
    flops = transformer_train_flops(rows=rows, source_len=length, target_len=length, **dims,
                                    attention_function=model_config.attention_function,
                                    feed_forward=model_config.feed_forward,
                                    feed_forward_match_params=model_config.feed_forward_match_params)
    peak = device_peaks.measure_matmul_peak("float32", peak_size, repeats=10) * jax.device_count()
    return {
        "framework": f"jax {jax.__version__}",
        "config": config.get("name", None),
        "device": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
        "dtype": config.dtype,
        "param_sharding": config.param_sharding,
        "dropout_rng": config.get("dropout_rng", "threefry"),
        "shape": shape,
        "params": model.count_params(carry["state"].params),
        "compile_s": compile_s,
        "step_time_s": step_time,
        "step_time_mean_s": times["mean_s"],
        "step_times_s": times["times_s"],
        "target_tokens_per_s": rows * length / step_time,
        "model_flops_per_step": flops,
        "xla_flops_per_step": float(cost.get("flops", float("nan"))) if cost else None,
        "achieved_gflops_per_s": flops / step_time / 1e9,
        "peak_matmul_gflops_per_s": peak / 1e9,
        "mfu": flops / step_time / peak,
        "loss": float(sums["loss_sum"] / sums["tokens"]),
        "compiled_memory_bytes": {name: getattr(memory, f"{name}_size_in_bytes")
                                  for name in ("argument", "output", "alias", "temp")} if memory else None,
    }


def main(argv: list[str]) -> None:
    """Print :func:`benchmark` as JSON; ``--quick`` shrinks the model to :data:`harness.QUICK_MODEL`."""
    del argv
    options = flags.FLAGS
    config = options.config
    sizes = {name: options[name].value for name in QUICK}
    if options.quick:
        config.update(harness.QUICK_MODEL)
        sizes = {name: value if options[name].present else QUICK[name] for name, value in sizes.items()}
    harness.emit({"quick": options.quick, **benchmark(config, **sizes)}, options.out)


if __name__ == "__main__":
    harness.run(main, define_flags)
