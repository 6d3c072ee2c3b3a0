"""A trained run scored on each target-length bucket: perplexity per piece and beam-search BLEU (docs/positions.md).

Pairs over the run's ``max_len`` are counted (``num_over_max_len``): leaving them out would flatter the model.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from absl import logging

from attention_jax.data import length_buckets
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError

if TYPE_CHECKING:  # JAX loads when a run is scored, so a flag mistake is refused at once.
    from attention_jax.decoding import decode, inference

def _settings(run: inference.TrainedRun, translator: decode.Translator) -> dict[str, Any]:
    """What must match, with the bucket file's SHA-256, for a bucket's stored figures to be reused."""
    return {"checkpoint": run.checkpoint, "trained_steps": run_files.read_trained_step(run.workdir),
            "beam_size": translator.beam_size, "alpha": translator.alpha,
            "max_extra_len": translator.max_extra_len, "max_source_len": translator.max_source_len}


def _piece_lengths(translator: decode.Translator, pairs: Sequence[tuple[str, str]]) -> list[int]:
    return [max(len(translator.tokenizer.encode(source)), len(translator.tokenizer.encode(target)))
            for source, target in pairs]


def _score_bucket(translator: decode.Translator, pairs: Sequence[tuple[str, str]], name: str
                 ) -> tuple[dict[str, Any], list[str]]:
    """Return one bucket's figures (``EvaluationResult.summary``'s plus counts and ``wall_s``) and translations."""
    start = time.monotonic()
    lengths = _piece_lengths(translator, pairs)
    over = sum(length > translator.max_source_len for length in lengths)
    if over:
        logging.warning("%s: %d of %d pairs have a side longer than the run's max_len=%d pieces: their sources are "
                        "truncated and they are left out of the perplexity.", name, over, len(pairs),
                        translator.max_source_len)
    from attention_jax.evaluation import progress, translation_quality

    result = translation_quality.evaluate(translator, pairs,
                                          report_progress=progress.progress_logger(f"{name} BLEU", len(pairs)))
    figures = {key: value for key, value in result.summary().items() if key != "num_examples"}
    figures.update(num_pairs=len(pairs), num_over_max_len=over, longest_pieces=max(lengths),
                   wall_s=round(time.monotonic() - start, 2))
    return figures, result.hypotheses


def evaluate_run(workdir: str, split_dir: str, *, checkpoint: str = "latest", batch_size: int = 64) -> dict[str, Any]:
    """Score a run on every bucket of a length split into ``RUN/length_buckets.json``, reusing buckets already scored.

    Parameters
    ----------
    workdir, split_dir, checkpoint : str
        A finished training run; a split ``python -m attention_jax.data.length_buckets`` wrote; ``latest``,
        ``averaged``, ``best`` or a step.
    batch_size : int
        Sentences per batch.

    Returns
    -------
    dict
        The file's record.
    """
    from attention_jax.decoding import inference

    split = length_buckets.read_split(split_dir)
    run = inference.load_run(workdir, checkpoint)
    translator = inference.make_translator(run, batch_size=batch_size)
    settings = _settings(run, translator)
    previous = run_files.read_length_buckets(workdir)
    reusable = previous.get("buckets", {}) if all(previous.get(key) == value for key, value in settings.items()) else {}
    record = {"buckets_dir": split_dir, "cap": split["cap"], **settings,
              "positional_encoding": run.model_config.positional_encoding, "seed": run.config.seed, "buckets": {}}
    path = os.path.join(workdir, run_files.LENGTH_BUCKETS_FILE)
    for name, bucket in split["buckets"].items():
        described = {key: bucket[key] for key in ("min_words", "max_words", "sha256")}
        if reusable.get(name, {}).get("sha256") == bucket["sha256"]:
            record["buckets"][name] = reusable[name]
            logging.info("%s %s: already scored (PPL %.3f, BLEU %.2f).", workdir, name, reusable[name]["perplexity"],
                         reusable[name]["bleu"])
            continue
        figures, hypotheses = _score_bucket(translator, length_buckets.read_bucket(split_dir, bucket), name)
        record["buckets"][name] = described | figures
        run_files.write_atomically(run_files.hypotheses_path(os.path.join(workdir, f"length_buckets.{name}.json")),
                                   "".join(hypothesis.replace("\n", " ") + "\n" for hypothesis in hypotheses))
        run_files.write_json_atomically(path, record)
        print(f"{workdir} {name} ({bucket['min_words']}-{bucket['max_words']} target words, {figures['num_pairs']} "
              f"pairs): PPL {figures['perplexity']:.3f}, BLEU {figures['bleu']:.2f}, {figures['wall_s']:.0f} s",
              flush=True)
    run_files.write_json_atomically(path, record)
    return record


def _expected_runs(root: str) -> list[str]:
    """Return a sweep root's run directories (``ROOT/<row>/seed_<k>``) as its ``sweep.json`` lists them."""
    path = os.path.join(root, run_files.SWEEP_FILE)
    if not os.path.isfile(path):
        raise UserInputError(f"{root!r} holds no {run_files.SWEEP_FILE}: pass the --root of an "
                             "attention-jax-sweep sweep.")
    with open(path, encoding="utf-8") as sweep_file:
        record = json.load(sweep_file)
    seeds = record.get("seeds") or [None]
    return [os.path.join(root, row) if seed is None else os.path.join(root, row, f"seed_{seed}")
            for seed in seeds for row in record["rows"]]


def _finished(workdir: str) -> bool:
    path = os.path.join(workdir, run_files.RESULTS_FILE)
    if not os.path.isfile(path):
        return False
    with open(path, encoding="utf-8") as results_file:
        return bool(json.load(results_file).get("finished"))


def _scored(workdir: str, split: dict) -> bool:
    record = run_files.read_length_buckets(workdir)
    buckets = record.get("buckets", {})
    same_files = all(buckets.get(name, {}).get("sha256") == entry["sha256"] for name, entry in split["buckets"].items())
    return same_files and record.get("trained_steps") == run_files.read_trained_step(workdir)


def evaluate_root(root: str, split_dir: str, *, wait: bool = False, poll_s: float = 300.0,
                  batch_size: int = 64) -> list[str]:
    """Score every finished run of a sweep root; with ``wait``, poll every ``poll_s`` s until all of ``sweep.json`` are.

    Parameters
    ----------
    root, split_dir : str
        The sweep root and the length split.
    wait : bool
        Keep polling.
    poll_s : float
        Seconds between polls.
    batch_size : int
        Sentences per batch.

    Returns
    -------
    list[str]
        The runs this call scored.
    """
    split = length_buckets.read_split(split_dir)
    scored = []
    while True:
        runs = _expected_runs(root)
        for workdir in runs:
            if _finished(workdir) and not _scored(workdir, split):
                evaluate_run(workdir, split_dir, batch_size=batch_size)
                scored.append(workdir)
        waiting = [workdir for workdir in runs if not (_finished(workdir) and _scored(workdir, split))]
        if not wait or not waiting:
            return scored
        logging.info("%d of %d runs not finished yet; next look in %.0f s.", len(waiting), len(runs), poll_s)
        time.sleep(poll_s)


if __name__ == "__main__":  # The command (its flags) is in attention_jax/commands/.
    from attention_jax.commands import length_bucket_evaluation as command

    command.run()
