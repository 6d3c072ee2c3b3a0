"""Run a few train steps under several meshes and print how far they are from one device (JSON).

Run by tests/training/test_train.py in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (the flag must precede JAX's start-up)::

    python tests/support/sharded_steps_script.py

Prints ``RESULT {"<setup>": {"losses": [...], "param_diffs": {leaf path: max abs diff},
"max_opt_diff": float, "step": int, "param_spec_example": str}, ..., "grad_accum_2": {...}}`` where
differences are against the single-device run (for ``grad_accum_2``: two micro-batches of 8 rows
against one 16-row batch; for ``bfloat16``: the losses and the dtypes of the state). No dropout.
"""

from __future__ import annotations

import json
import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from attention_jax.models import model  # noqa: E402
from attention_jax.training import sharding, train_state  # noqa: E402
from tests.support import fake_data  # noqa: E402

NUM_STEPS = 3
SHAPE = (16, 10, 10)  # Global rows divisible by 8 devices.
SETUPS = {
    "single_device": ((1,), ("data",), "replicated", 1),
    "data_parallel_8": ((8,), ("data",), "replicated", 8),
    "fsdp_8": ((8,), ("data",), "fsdp", 8),
    "fsdp_data4_model2": ((4, 2), ("data", "model"), "fsdp", 8),
}


def run_setup(experiment, mesh_shape, mesh_axes, param_sharding, num_devices):
    """Train NUM_STEPS steps from the same initial parameters; return losses and the final state."""
    mesh = sharding.create_mesh(mesh_shape, mesh_axes, devices=jax.devices()[:num_devices])
    transformer = model.Transformer(experiment.model)
    optimizer = train_state.make_optimizer(experiment.optimizer)
    state, shardings = train_state.sharded_initial_state(experiment.seed, transformer, optimizer, mesh,
                                                           sharding.logical_axis_rules(param_sharding, mesh))
    steps = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                label_smoothing=experiment.optimizer.label_smoothing,
                                grad_accum_steps=experiment.optimizer.grad_accum_steps)
    losses = []
    for index in range(NUM_STEPS):
        batch = fake_data.make_batch(0, index, SHAPE, experiment.model.vocab_size)
        micro = np.array_split(np.arange(SHAPE[0]), experiment.optimizer.grad_accum_steps)
        micro_batches = [sharding.global_batch({k: v[rows] for k, v in batch.items()},
                                               steps.batch_sharding) for rows in micro]
        state, sums = train_state._run_update(steps, state, micro_batches)
        losses.append(float(sums["loss_sum"]) / float(sums["tokens"]))
    spec = str(state.params["encoder_0"]["ffn"]["inner"]["kernel"].sharding.spec)
    return losses, jax.device_get(state), spec


def differences(left, right) -> dict[str, float]:
    """Largest absolute difference per leaf, keyed by the leaf's path."""
    flat_left = jax.tree_util.tree_flatten_with_path(left)[0]
    return {jax.tree_util.keystr(path): float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
            for (path, a), b in zip(flat_left, jax.tree.leaves(right))}


def max_difference(left, right) -> float:
    return max(differences(left, right).values())


def main() -> None:
    # No dropout: every setup computes the same function (dropout keys under sharding are covered by
    # the two-process test, which compares losses with dropout on).
    config = fake_data.tiny_experiment(dropout_rate=0.0, num_train_steps=NUM_STEPS)
    report = {"device_count": jax.device_count()}
    reference = None
    for name, setup in SETUPS.items():
        losses, state, spec = run_setup(config, *setup)
        reference = state if reference is None else reference
        report[name] = {"losses": losses, "param_diffs": differences(state.params, reference.params),
                        "max_opt_diff": max_difference(state.opt_state, reference.opt_state),
                        "step": int(state.step), "param_spec_example": spec}
    # bfloat16 compute: parameters and optimizer state stay float32, losses close to float32's.
    losses, state, _ = run_setup(fake_data.tiny_experiment(dropout_rate=0.0, num_train_steps=NUM_STEPS,
                                                          dtype="bfloat16"), *SETUPS["single_device"])
    report["bfloat16"] = {"losses": losses, "reference_losses": report["single_device"]["losses"],
                          "state_dtypes": sorted({str(leaf.dtype) for leaf in
                                                  jax.tree.leaves((state.params, state.opt_state))})}
    # Gradient accumulation: 2 micro-batches of 8 rows equal one batch of 16.
    losses, accumulated, _ = run_setup(fake_data.tiny_experiment(dropout_rate=0.0, num_train_steps=NUM_STEPS,
                                                                 grad_accum_steps=2), *SETUPS["single_device"])
    report["grad_accum_2"] = {"losses": losses, "reference_losses": report["single_device"]["losses"],
                              "param_diffs": differences(accumulated.params, reference.params)}
    print("RESULT " + json.dumps(report))


if __name__ == "__main__":
    main()
