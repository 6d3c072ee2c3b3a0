r"""Real target tokens per second of the train step with and without packing; prints one JSON object.

Run from the repository root::

    python -m benchmarks.packing     # messages_en_de -> benchmarks/results/packing_messages_en_de.json
    python -m benchmarks.packing --wide --rounds=4 --steps=4 \
        --out benchmarks/results/packing_messages_en_de_wide.json  # d_model 256, 3 layers, d_ff 1024
    python -m benchmarks.packing --quick --out /tmp/packing.json --dataset=tsv:DIR   # seconds (tests)
    python -m benchmarks.packing --unit=slots --out benchmarks/results/packing_messages_en_de_slots.json
    python -m benchmarks.packing --one_length --out benchmarks/results/packing_messages_en_de_real.json

Both modes train the same model (``configs/tiny.py``'s widths: d_model 128, 2 layers, d_ff 512, 4 heads; with
a vocabulary of 8000, max_len 64 and a budget of 2048 tokens per side and batch) from the same initialization
on the same corpus, through the real input pipeline and :func:`attention_jax.training.train_state.run_update`
(forward, backward, Adam; dropout 0.1 and label smoothing 0.1):

- ``unpacked``: length-bucketed batches (one shape per bucket, both sides padded to the bucket);
- ``packed``: ``config.packing=True`` with the default row lengths (3/8, 3/4 and all of ``max_len``:
  one shape each) or ``--row_lengths``;
- ``packed_one_length`` (with ``--one_length``): every row ``max_len`` long (one shape).

Every batch shape is compiled before timing (one step on a stand-in batch of that shape). The modes then
alternate in ``--rounds`` rounds of ``--steps`` steps each (unpacked, packed, unpacked, packed, ...), so that
a busy neighbour on shared cores slows both alike; each step is timed to completion. A round's rate is its
real (non-pad) target tokens over its summed step times; reported are each mode's median round rate, the ratio
of the medians (the issue's target: packed >= 1.25 x unpacked), the median over rounds of each round's ratio
(robust to a machine whose speed drifts between rounds), the per-step median, and the padding fractions of the
timed batches (and of a whole epoch's plan).

``--unit`` sets ``config.tokens_per_batch_unit`` in both modes. With ``real`` (the default, the paper's
count) both modes train on about the same real tokens per step, so they optimize alike and differ
only in the slots they pay for: bucketed batches get more rows to make up for their padding. With
``slots`` both spend the same slots per step and a packed step carries more real tokens. Either way
the gain is bounded by the padding packing removes, ``(1 - packed padding) / (1 - bucketed padding)``
on the target side, at equal time per slot. A packed step can be slower per slot: every position
attends over its whole row, so rows of ``max_len`` only attend over 64 positions where a bucketed
batch attends over its bucket's length (20 on average here); ``mean_attended_length`` in the JSON is
the row or bucket length averaged over the timed target slots.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
from typing import Any

import jax
import numpy as np
from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks import command_line  # noqa: E402

from attention_jax.models import model  # noqa: E402
from attention_jax.data import batching, input_pipeline  # noqa: E402
from attention_jax.training import initial_state, sharding, train_state  # noqa: E402
from attention_jax.experiment import sections  # noqa: E402
from configs import tiny  # noqa: E402

DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results" / "packing_messages_en_de.json"
DEFAULT_DATASET = f"tsv:{REPO_ROOT.parent / 'shared' / 'data' / 'messages_en_de'}"
FULL_SHAPE = dict(d_model=128, num_layers=2, d_ff=512, num_heads=4, key_dim=32, value_dim=32,
                  vocab_size=8000, max_len=64, tokens_per_batch=2048)
WIDE_SHAPE = dict(FULL_SHAPE, d_model=256, num_layers=3, d_ff=1024, key_dim=64, value_dim=64)
QUICK_SHAPE = dict(d_model=32, num_layers=1, d_ff=64, num_heads=2, key_dim=16, value_dim=16,
                   vocab_size=300, max_len=32, tokens_per_batch=512)
MODES = ("unpacked", "packed")
ONE_LENGTH_MODE = "packed_one_length"


def make_config(dataset: str, data_dir: str, shape: dict[str, int], packing: bool, unit: str = "real",
                row_lengths: tuple[int, ...] = ()) -> Any:
    """The tiny config with the benchmark's widths, corpus, packing setting, row lengths and budget unit."""
    config = tiny.get_config()
    config.dataset, config.data_dir, config.packing = dataset, data_dir, packing
    config.tokens_per_batch_unit = unit
    config.packing_row_lengths = tuple(row_lengths)
    for key, value in shape.items():
        config[key] = value
    return config


class Mode:
    """One training setup (packed or not): its data iterator, compiled steps and state."""

    def __init__(self, config: Any, mesh: Any) -> None:
        experiment = sections.build_experiment(config, "benchmarks/packing.py")
        self.data = input_pipeline.get_datasets(experiment.data, rows_multiple=sharding.data_parallel_size(mesh))
        transformer = model.Transformer(experiment.model)
        optimizer = train_state.make_optimizer(experiment.optimizer)
        rules = sharding.logical_axis_rules(experiment.run.param_sharding, mesh)
        self.state, shardings = initial_state.sharded_initial_state(experiment.seed, transformer, optimizer, mesh,
                                                                    rules)
        self.steps = train_state.compile_steps(transformer, optimizer, mesh, shardings,
                                               label_smoothing=experiment.optimizer.label_smoothing)
        self.iterator = self.data.train_iterator(config.seed)
        self.multiple = sharding.local_data_shards(mesh)

    def next_batch(self) -> tuple[dict, dict[str, int]]:
        """The next global batch, its real-token and slot counts and its row length x target slots."""
        local = sharding.pad_rows(next(self.iterator), self.multiple)
        counts = batching.count_tokens(local)
        counts["attended_slots"] = counts["targets_slots"] * local["targets"].shape[1]
        return sharding.global_batch(local, self.steps.batch_sharding), counts

    def step(self, batch: dict) -> float:
        """One update, timed to completion (seconds)."""
        started = time.perf_counter()
        self.state, sums = train_state.run_update(self.steps, self.state, [batch])
        jax.block_until_ready(sums)
        return time.perf_counter() - started

    def compile_all_shapes(self) -> float:
        """Compile every batch shape of the plan with one step on a stand-in batch; returns the seconds."""
        keys = ("inputs", "targets") + (model.PACKED_KEYS if self.data.stats["packing"] else ())
        started = time.perf_counter()
        for rows, length in self.data.stats["local_batch_shapes"]:
            stand_in = {key: np.ones((rows, length), np.int32) for key in keys}  # Ids, segments, positions.
            self.step(sharding.global_batch(stand_in, self.steps.batch_sharding))
        return time.perf_counter() - started


def timed_round(mode: Mode, steps: int) -> dict[str, Any]:
    """``steps`` timed updates: seconds, and the real tokens and slots of their batches."""
    totals: dict[str, float] = {"seconds": 0.0}
    step_rates = []
    for _ in range(steps):
        batch, counts = mode.next_batch()
        seconds = mode.step(batch)
        totals["seconds"] += seconds
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
        step_rates.append(counts["targets_tokens"] / seconds)
    return dict(totals, step_rates=step_rates)


def summarize(rounds: list[dict[str, Any]], mode: Mode) -> dict[str, Any]:
    """Median round rate, per-step median, padding fractions of a mode's timed rounds."""
    rates = [r["targets_tokens"] / r["seconds"] for r in rounds]
    total = {key: sum(r[key] for r in rounds) for key in ("inputs_tokens", "inputs_slots",
                                                          "targets_tokens", "targets_slots")}
    stats = mode.data.stats
    total_attended = sum(r["attended_slots"] for r in rounds)
    return {
        "real_target_tokens_per_s": float(np.median(rates)),
        "round_rates": [round(rate, 1) for rate in rates],
        "median_step_real_target_tokens_per_s": float(np.median([x for r in rounds for x in r["step_rates"]])),
        "slot_target_tokens_per_s": float(np.median([r["targets_slots"] / r["seconds"] for r in rounds])),
        "real_target_tokens_per_step": total["targets_tokens"] / sum(len(r["step_rates"]) for r in rounds),
        "real_source_tokens_per_step": total["inputs_tokens"] / sum(len(r["step_rates"]) for r in rounds),
        "inputs_padding_fraction": 1 - total["inputs_tokens"] / total["inputs_slots"],
        "targets_padding_fraction": 1 - total["targets_tokens"] / total["targets_slots"],
        "epoch_padding_fraction": stats["train_padding_fraction"],
        "batches_per_epoch": stats["batches_per_epoch"]["train"],
        "local_batch_shapes": stats["local_batch_shapes"],
        "mean_attended_length": total_attended / total["targets_slots"],
    }


def run(dataset: str, data_dir: str, shape: dict[str, int], rounds: int, steps: int,
        unit: str = "real", row_lengths: tuple[int, ...] = (), one_length: bool = False) -> dict[str, Any]:
    """Build the modes, compile their shapes, alternate timed rounds; returns the JSON fields."""
    mesh = sharding.create_mesh((-1,), ("data",))
    settings = {"unpacked": (False, ()), "packed": (True, row_lengths)}
    if one_length:
        settings[ONE_LENGTH_MODE] = (True, (shape["max_len"],))
    modes = {name: Mode(make_config(dataset, data_dir, shape, packing, unit, lengths), mesh)
             for name, (packing, lengths) in settings.items()}
    compile_s = {name: round(mode.compile_all_shapes(), 2) for name, mode in modes.items()}
    print(f"compiled every shape: {compile_s}", file=sys.stderr, flush=True)
    measured: dict[str, list] = {name: [] for name in modes}
    for index in range(rounds):
        for name in modes:  # Alternate: unpacked, packed, (packed_one_length,) unpacked, ...
            measured[name].append(timed_round(modes[name], steps))
            rate = measured[name][-1]["targets_tokens"] / measured[name][-1]["seconds"]
            print(f"round {index + 1}/{rounds} {name}: {rate:.0f} real target tokens/s", file=sys.stderr,
                  flush=True)
    results = {name: summarize(measured[name], modes[name]) for name in modes}
    unpacked_rate = results["unpacked"]["real_target_tokens_per_s"]
    speedups = {f"{name}_over_unpacked_real_target_tokens_per_s": results[name]["real_target_tokens_per_s"]
                / unpacked_rate for name in modes if name != "unpacked"}
    for name in modes:  # Round by round: a slow spell of the machine slows both rates of one round.
        if name != "unpacked":
            ratios = [mine / theirs for mine, theirs in zip(results[name]["round_rates"], results["unpacked"]["round_rates"])]
            speedups[f"{name}_over_unpacked_median_round_ratio"] = float(np.median(ratios))
    return {
        "dataset": dataset,
        "shape": shape,
        "tokens_per_batch_unit": unit,
        "rounds": rounds,
        "steps_per_round": steps,
        "device": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
        "cpu_count": os.cpu_count(),
        "compile_and_first_steps_s": compile_s,
        "packed_row_lengths": list(modes["packed"].data.stats["bucket_lengths"]),
        **results,
        **speedups,
        "target": 1.25,
    }


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("out", str(DEFAULT_OUT), "JSON file to write.")
    flags.DEFINE_bool("quick", False, "Tiny model and few steps (tests).")
    flags.DEFINE_string("dataset", DEFAULT_DATASET, "config.dataset, e.g. tsv:DIR.")
    flags.DEFINE_string("data_dir", "", "config.data_dir (prepared data and caches).")
    flags.DEFINE_bool("wide", False, "d_model 256, 3 layers, d_ff 1024 instead.")
    flags.DEFINE_integer("rounds", None, "Alternating rounds (default 5; quick 2).")
    flags.DEFINE_integer("steps", None, "Steps per round (default 8; quick 3).")
    flags.DEFINE_enum("unit", "real", batching.TOKENS_PER_BATCH_UNITS, "config.tokens_per_batch_unit of every mode.")
    flags.DEFINE_string("row_lengths", "",
                        "config.packing_row_lengths of the packed mode, e.g. 24,48,64 (default: its default).")
    flags.DEFINE_bool("one_length", False, f"Also time {ONE_LENGTH_MODE}: packed rows all max_len long.")


def main(argv: list[str]) -> None:
    """Run, print the JSON and write it to ``--out``."""
    del argv
    args = flags.FLAGS
    rounds = args.rounds or (2 if args.quick else 5)
    steps = args.steps or (3 if args.quick else 8)
    shape = QUICK_SHAPE if args.quick else WIDE_SHAPE if args.wide else FULL_SHAPE
    row_lengths = tuple(int(length) for length in args.row_lengths.split(",") if length)
    results = run(args.dataset, args.data_dir, shape, rounds, steps, args.unit, row_lengths, args.one_length)
    text = json.dumps(results, indent=2)
    print(text)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")


if __name__ == "__main__":
    command_line.run(main, define_flags)
