r"""Time the jitted train step on this machine's devices; prints one JSON object.

Run from the repository root::

    python benchmarks/train_step.py --config=configs/tiny.py --rows=64 --length=32
    python benchmarks/train_step.py --config=configs/base.py --rows=8 --length=32 --steps=10
    python benchmarks/train_step.py --config=configs/base.py --config.dtype=bfloat16 --rows=64 --length=64

The step is :func:`attention_jax.training.train_state.train_step` as training runs it (forward, backward, Adam, metrics;
dropout and label smoothing from the config), on a batch of ``rows`` sentence pairs of ``length`` tokens
on both sides (no padding), replicated parameters over all devices (``--config.param_sharding=fsdp`` to
shard them). Reported:

- ``step_time_s``: median over ``--steps`` steps, each timed to completion, after compilation and
  ``--warmup_steps`` (``step_time_mean_s`` and every ``step_times_s`` too);
- ``target_tokens_per_s``: ``rows * length / step_time_s``;
- ``model_flops_per_step`` (``benchmarks/flops.py``, the same count as ``peer_torch.py``) and XLA's own
  count of the compiled step (``xla_flops_per_step``);
- ``mfu``: model FLOP/s over the peak of float32 ``--peak_size``^3 matmuls measured here (per device,
  times the device count).

``shape`` holds the dimensions with the flag names of ``benchmarks/peer_torch.py``, which can read
this JSON (``--shape_json``) to time PyTorch at the same shapes. ``benchmarks/peer_flax.py`` times
this step side by side with the Flax WMT example's and holds a profile of where the step's time goes;
``--config.profile_steps`` traces steps of a real training run (``attention_jax/training/profiling.py``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from ml_collections import config_flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

from attention_jax.models import model  # noqa: E402
from attention_jax.training import initial_state, sharding, train_state  # noqa: E402
from attention_jax.experiment import sections  # noqa: E402
from benchmarks import command_line  # noqa: E402
from flops import transformer_train_flops  # noqa: E402

DEFAULT_PEAK_SIZE = 2048


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    config_flags.DEFINE_config_file("config", os.path.join(REPO_ROOT, "configs", "tiny.py"),
                                    "Config file; --config.FIELD=VALUE overrides a field.")
    flags.DEFINE_integer("rows", 64, "Sentence pairs per batch (a multiple of the device count).")
    flags.DEFINE_integer("length", 32, "Tokens per sentence, source and target.")
    flags.DEFINE_integer("steps", 20, "Timed steps.")
    flags.DEFINE_integer("warmup_steps", 3, "Untimed steps after compilation.")
    flags.DEFINE_integer("peak_size", DEFAULT_PEAK_SIZE, "Matmul size of the peak measurement.")


def measure_matmul_peak(size: int, repeats: int = 10) -> float:
    """Best float32 ``size^3`` matmul rate of one device, in FLOP/s."""
    matmul = jax.jit(jnp.dot)
    left = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    right = jax.random.normal(jax.random.key(1), (size, size), jnp.float32)
    matmul(left, right).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(left, right).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best


def random_batch(rows: int, length: int, vocab_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Full-length sentences (no padding) ending in EOS."""
    rng = np.random.default_rng(seed)
    batch = {key: rng.integers(4, vocab_size, size=(rows, length), dtype=np.int32)
             for key in ("inputs", "targets")}
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
        ``(train, state, batch, transformer)``: the jitted step (``train(state, batch)`` returns the new
        state, which replaces the donated one, and the loss sums; compiled on first call or with
        ``train.lower(state, batch).compile()``), the train state, the sharded batch and the model.

    Notes
    -----
    :func:`benchmark` times this step; ``benchmarks/gpu_profile.py`` traces it.
    """
    experiment = sections.build_experiment(config, "benchmarks/train_step.py")
    mesh = sharding.create_mesh((-1,), ("data",))
    transformer = model.Transformer(experiment.model)
    optimizer = train_state.make_optimizer(experiment.optimizer)
    rules = sharding.logical_axis_rules(experiment.run.param_sharding, mesh)
    state, shardings = initial_state.sharded_initial_state(experiment.seed, transformer, optimizer, mesh, rules)
    steps_fn = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                   label_smoothing=experiment.optimizer.label_smoothing,
                                   dropout_rng=experiment.optimizer.dropout_rng)
    batch = sharding.global_batch(random_batch(rows, length, experiment.model.vocab_size), steps_fn.batch_sharding)
    return steps_fn.train, state, batch, transformer


def benchmark(config: Any, rows: int, length: int, steps: int, warmup_steps: int,
              peak_size: int = DEFAULT_PEAK_SIZE) -> dict[str, Any]:
    """Compile and time the train step; returns the JSON fields (see the module docstring).

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
        The JSON fields.
    """
    train, state, batch, transformer = build_step(config, rows, length)

    start = time.perf_counter()
    compiled = train.lower(state, batch).compile()
    compile_s = time.perf_counter() - start
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    for _ in range(1 + warmup_steps):
        state, sums = train(state, batch)
    jax.block_until_ready(sums)
    step_times = []
    for _ in range(steps):  # Each step timed to completion: the median resists a busy neighbour.
        start = time.perf_counter()
        state, sums = train(state, batch)
        jax.block_until_ready(sums)
        step_times.append(time.perf_counter() - start)
    step_time = float(np.median(step_times))

    model_config = transformer.config
    shape = dict(rows=rows, length=length, num_layers=model_config.num_layers, d_model=model_config.d_model,
                 d_ff=model_config.d_ff, num_heads=model_config.num_heads, key_dim=model_config.key_dim,
                 value_dim=model_config.value_dim, vocab_size=model_config.vocab_size,
                 dropout_rate=model_config.dropout_rate, label_smoothing=config.label_smoothing,
                 layer_norm_position=model_config.layer_norm_position,
                 share_embeddings=model_config.share_embeddings)
    flops = transformer_train_flops(rows=rows, source_len=length, target_len=length,
                                    **{k: shape[k] for k in ("num_layers", "d_model", "d_ff", "num_heads",
                                                             "key_dim", "value_dim", "vocab_size")},
                                    attention_function=model_config.attention_function,
                                    feed_forward=model_config.feed_forward,
                                    feed_forward_match_params=model_config.feed_forward_match_params)
    peak = measure_matmul_peak(peak_size) * jax.device_count()
    return {
        "framework": f"jax {jax.__version__}",
        "config": config.get("name", None),
        "device": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
        "dtype": config.dtype,
        "param_sharding": config.param_sharding,
        "dropout_rng": config.get("dropout_rng", "threefry"),
        "shape": shape,
        "params": model.count_params(state.params),
        "compile_s": compile_s,
        "step_time_s": step_time,
        "step_time_mean_s": float(np.mean(step_times)),
        "step_times_s": [round(value, 5) for value in step_times],
        "target_tokens_per_s": rows * length / step_time,
        "model_flops_per_step": flops,
        "xla_flops_per_step": float(cost.get("flops", float("nan"))) if cost else None,
        "achieved_gflops_per_s": flops / step_time / 1e9,
        "peak_matmul_gflops_per_s": peak / 1e9,
        "mfu": flops / step_time / peak,
        "loss": float(sums["loss_sum"] / sums["tokens"]),
    }


def main(argv: list[str]) -> None:
    """Print :func:`benchmark` as JSON."""
    del argv
    options = flags.FLAGS
    print(json.dumps(benchmark(options.config, options.rows, options.length, options.steps, options.warmup_steps,
                               options.peak_size)))


if __name__ == "__main__":
    command_line.run(main, define_flags)
