"""Plot the learning curves of the small-corpus recipe: dev perplexity and sampled dev BLEU vs minutes.

Each run directory (or a copy of its ``metrics.jsonl``) gives one line. The x axis is minutes of the
run's own clock: the time of its train steps (``train/tokens / train/tokens_per_s`` summed over the
train records) plus the time of its evaluations (``eval/seconds``). Only compilation and checkpoint
writes are left out, so it is a little below the wall time of ``results.json``.

Run (from the repository root)::

    python docs/small_corpus/plot.py --out=docs/small_corpus/learning_curve.png \
        final=docs/small_corpus/metrics.jsonl p2=/work/recipe_runs/p2/metrics.jsonl ...
"""

from __future__ import annotations

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_records(path: str) -> list[dict]:
    """Read a ``metrics.jsonl`` (or the one inside a run directory).

    Parameters
    ----------
    path : str
        A ``metrics.jsonl`` file or a run directory holding one.

    Returns
    -------
    list[dict]
        One dict per line, in file order.
    """
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def minutes_axis(records: list[dict]) -> tuple[list[float], list[float], list[float], list[float]]:
    """Dev perplexity and sampled dev BLEU against training minutes.

    Minutes at a record are the sum over the records up to it of ``train/tokens /
    train/tokens_per_s`` (step time) and ``eval/seconds`` (evaluation time, which counts against a
    wall-clock budget too). Compilation and checkpoint writes are not logged and are left out.

    Parameters
    ----------
    records : list[dict]
        The lines of a ``metrics.jsonl``.

    Returns
    -------
    tuple of four lists
        ``(ppl_minutes, dev_ppl, bleu_minutes, dev_bleu)``.
    """
    seconds = 0.0
    ppl_x: list[float] = []
    ppl_y: list[float] = []
    bleu_x: list[float] = []
    bleu_y: list[float] = []
    for record in records:
        rate = record.get("train/tokens_per_s")
        if rate:
            seconds += float(record["train/tokens"]) / float(rate)
        seconds += float(record.get("eval/seconds", 0.0))
        if "eval/perplexity" in record:
            ppl_x.append(seconds / 60.0)
            ppl_y.append(float(record["eval/perplexity"]))
        if "eval/bleu" in record:
            bleu_x.append(seconds / 60.0)
            bleu_y.append(float(record["eval/bleu"]))
    return ppl_x, ppl_y, bleu_x, bleu_y


def plot(runs: dict[str, str], out: str) -> None:
    """Draw dev perplexity (log scale) and sampled dev BLEU of each run on two panels.

    Parameters
    ----------
    runs : dict[str, str]
        Label -> ``metrics.jsonl`` path or run directory.
    out : str
        PNG file to write.
    """
    figure, (ppl_axes, bleu_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, path in runs.items():
        ppl_x, ppl_y, bleu_x, bleu_y = minutes_axis(read_records(path))
        width = 2.5 if label.startswith("final") else 1.2
        ppl_axes.plot(ppl_x, ppl_y, marker=".", linewidth=width, label=label)
        bleu_axes.plot(bleu_x, bleu_y, marker=".", linewidth=width, label=label)
    ppl_axes.set_yscale("log")
    ppl_axes.set_xlabel("minutes of training and evaluation (2 CPU cores)")
    ppl_axes.set_ylabel("dev perplexity (whole dev split)")
    bleu_axes.set_xlabel("minutes of training and evaluation (2 CPU cores)")
    bleu_axes.set_ylabel("dev BLEU (sample, beam 4; progress signal)")
    for axes in (ppl_axes, bleu_axes):
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    figure.suptitle("configs/small_corpus.py on messages_en_de: final run and probes")
    figure.tight_layout()
    figure.savefig(out, dpi=110)


def main() -> None:
    """Parse ``LABEL=PATH`` arguments and write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/small_corpus/learning_curve.png")
    parser.add_argument("runs", nargs="+", help="LABEL=PATH (metrics.jsonl or run directory)")
    args = parser.parse_args()
    runs = dict(item.split("=", 1) for item in args.runs)
    plot(runs, args.out)


if __name__ == "__main__":
    main()
