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

CURVES = {  # metrics.jsonl key -> axis label
    "train/nll_loss": "train NLL (nats/token, no smoothing)",
    "eval/perplexity": "dev perplexity (whole dev split)",
    "eval/bleu": "dev BLEU (sampled sentences, beam 4; progress signal)",
}


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


Curves = dict[str, tuple[list[float], list[float]]]


def minutes_axis(records: list[dict]) -> Curves:
    """Train NLL, dev perplexity and sampled dev BLEU against minutes of the run's clock.

    Minutes at a record are the sum over the records up to it of ``train/tokens /
    train/tokens_per_s`` (step time) and ``eval/seconds`` (evaluation time, which counts against a
    wall-clock budget too). Compilation and checkpoint writes are not logged and are left out.

    Parameters
    ----------
    records : list[dict]
        The lines of a ``metrics.jsonl``.

    Returns
    -------
    Curves
        ``{"train/nll_loss": (minutes, values), "eval/perplexity": ..., "eval/bleu": ...}``.
    """
    seconds = 0.0
    curves: Curves = {key: ([], []) for key in CURVES}
    for record in records:
        rate = record.get("train/tokens_per_s")
        if rate:
            seconds += float(record["train/tokens"]) / float(rate)
        seconds += float(record.get("eval/seconds", 0.0))
        for key in CURVES:
            if key in record:
                curves[key][0].append(seconds / 60.0)
                curves[key][1].append(float(record[key]))
    return curves


def plot(runs: dict[str, str], out: str) -> None:
    """Draw train NLL, dev perplexity (log scales) and sampled dev BLEU of each run, one panel each.

    Parameters
    ----------
    runs : dict[str, str]
        Label -> ``metrics.jsonl`` path or run directory.
    out : str
        PNG file to write.
    """
    figure, all_axes = plt.subplots(1, len(CURVES), figsize=(16, 4.5))
    for label, path in runs.items():
        curves = minutes_axis(read_records(path))
        width = 2.5 if label.startswith("final") else 1.2
        for axes, key in zip(all_axes, CURVES):
            marker = "" if key.startswith("train/") else "o"
            axes.plot(*curves[key], marker=marker, linewidth=width, label=label)
    for axes, (key, ylabel) in zip(all_axes, CURVES.items()):
        axes.set_xlabel("minutes of training and evaluation (2 CPU cores)")
        axes.set_ylabel(ylabel)
        if key != "eval/bleu":
            axes.set_yscale("log")
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
