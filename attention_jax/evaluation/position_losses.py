"""Teacher-forced loss by target position, as sums and counts in ``RUN/position_losses.json`` (docs/positions.md)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from attention_jax.data import length_buckets
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError

_MIN_TOKENS = 50  # A bin with fewer scored tokens is not drawn: its mean would be one sentence's noise.


def _training_target_pieces(split_dir: str, tokenizer: Any) -> dict[str, int]:
    """Return the training targets' ``p50``, ``p90``, ``p99`` (nearest rank) and ``max`` length in pieces."""
    lengths = []
    with open(os.path.join(split_dir, "train.tsv"), encoding="utf-8") as train_file:
        for line in train_file:
            _, _, target = line.rstrip("\n").partition("\t")
            lengths.append(len(tokenizer.encode(target)))
    if not lengths:
        raise UserInputError(f"{split_dir}/train.tsv holds no pairs: pass the --buckets of a length split.")
    ordered = np.sort(np.asarray(lengths))
    rank = {name: ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
            for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}
    return {**{name: int(value) for name, value in rank.items()}, "max": int(ordered[-1])}


def score_run(workdir: str, split_dir: str, *, batch_size: int = 64) -> dict[str, Any]:
    """Score one run's loss by target position over a length split's buckets, or read it if done.

    Parameters
    ----------
    workdir, split_dir : str
        A finished training run and the length split.
    batch_size : int
        Pairs per forward pass.

    Returns
    -------
    dict
        ``RUN/position_losses.json``'s record.
    """
    from attention_jax.decoding import inference  # JAX loads only when a run is scored.
    from attention_jax.evaluation import translation_quality

    split = length_buckets.read_split(split_dir)
    bucket_files = {name: entry["sha256"] for name, entry in split["buckets"].items()}
    path = os.path.join(workdir, run_files.POSITION_LOSSES_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as record_file:
            previous = json.load(record_file)
        same_step = previous.get("trained_steps") == run_files.read_trained_step(workdir)
        if previous.get("buckets") == bucket_files and same_step:
            return previous
    run = inference.load_run(workdir, "latest")
    max_len = int(run.config.data.max_len)
    pairs = [pair for bucket in split["buckets"].values() for pair in length_buckets.read_bucket(split_dir, bucket)]
    sums, counts = translation_quality._cross_entropy_by_position(run.model_config, run.params, run.tokenizer, pairs,
                                                                 max_len=max_len, batch_size=batch_size)
    last = int(np.flatnonzero(counts).max()) + 1 if counts.any() else 0
    record = {
        "positional_encoding": run.model_config.positional_encoding,
        "seed": run.config.seed,
        "trained_steps": run_files.read_trained_step(workdir),
        "buckets": bucket_files,
        "num_pairs": len(pairs),
        "max_len": max_len,
        "sums": [round(float(value), 6) for value in sums[:last]],
        "counts": [int(value) for value in counts[:last]],
        "training_target_pieces": _training_target_pieces(split_dir, run.tokenizer),
    }
    run_files.write_json_atomically(path, record)
    return record


def _binned_means(record: dict[str, Any], bin_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return each bin's first position and mean nats per piece; NaN in bins of fewer than 50 tokens."""
    sums, counts = np.asarray(record["sums"], np.float64), np.asarray(record["counts"], np.int64)
    bins = math.ceil(len(sums) / bin_size)
    padded = bins * bin_size
    sums = np.pad(sums, (0, padded - len(sums))).reshape(bins, bin_size).sum(axis=1)
    counts = np.pad(counts, (0, padded - len(counts))).reshape(bins, bin_size).sum(axis=1)
    means = np.where(counts >= _MIN_TOKENS, sums / np.maximum(counts, 1), np.nan)
    return np.arange(bins) * bin_size, means


def plot_runs(records: Sequence[dict[str, Any]], path: str, *, bin_size: int) -> None:
    """Draw each run's mean loss by target position to a PNG; beside it each run minus ``sinusoidal``, if any.

    Parameters
    ----------
    records : Sequence[dict]
        :func:`score_run`'s records.
    path : str
        PNG file.
    bin_size : int
        Positions per point.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reference = next((record for record in records if record["positional_encoding"] == "sinusoidal"), None)
    figure, axes = plt.subplots(1, 2 if reference else 1, figsize=(15 if reference else 9, 4.8),
                                layout="constrained", squeeze=False)
    losses = axes[0][0]
    for index, record in enumerate(records):
        starts, means = _binned_means(record, bin_size)
        label, color = f"{record['positional_encoding']} (seed {record['seed']})", f"C{index % 10}"
        losses.plot(starts + (bin_size - 1) / 2, means, "o-", markersize=3, color=color, label=label)
        if reference is not None and record is not reference:
            _, reference_means = _binned_means(reference, bin_size)
            shared = min(len(means), len(reference_means))
            axes[0][1].plot(starts[:shared] + (bin_size - 1) / 2, means[:shared] - reference_means[:shared], "o-",
                            markersize=3, color=color, label=label)
    pieces = records[0]["training_target_pieces"]
    for axis in axes[0]:
        for key, style in (("p99", ":"), ("max", "--")):
            axis.axvline(pieces[key], color="gray", linestyle=style, linewidth=1,
                         label=f"training targets: {'99th percentile' if key == 'p99' else 'longest'} ({pieces[key]})")
        axis.set_xlabel(f"target position (pieces, EOS included; bins of {bin_size})")
    losses.set_ylabel("mean cross-entropy, nats per target piece")
    losses.set_title(f"loss by target position, teacher-forced, {records[0]['num_pairs']} held-apart pairs",
                     fontsize=10)
    if reference is not None:
        axes[0][1].axhline(0.0, color="black", linewidth=0.8)
        axes[0][1].set_ylabel("mean cross-entropy minus sinusoidal's, nats")
        axes[0][1].set_title(f"against sinusoidal (seed {reference['seed']}) on the same tokens", fontsize=10)
    for axis in axes[0]:
        axis.legend(fontsize=8)
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":  # The command (its flags) is in attention_jax/commands/.
    from attention_jax.commands import position_losses as command

    command.run()
