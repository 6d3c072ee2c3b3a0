r"""Translating real sentences with a trained run: compile and decode time per cache staging; prints JSON.

Run from the repository root, on any training work directory and a file of sources::

    python benchmarks/translate.py --workdir=runs/table2_small/base/seed_0 \
        --sources=../shared/data/messages_en_de/dev.tsv --num_sentences=500 --cache_stages=1,2,4

``benchmarks/decode.py`` times a search forced to a fixed output length on random weights; this one
times what ``evaluate`` and training's final BLEU do: a trained model's beam search (the run's own
decoding settings) over real sentences of every length, with early termination, where most outputs
end long before the input + 50 tokens the key/value cache is sized for. Each staging
(``config.cache_stages``, :func:`attention_jax.decoding.decode_steps.cache_stage_ends`) translates the same
sentences twice in this process: the first pass compiles every batch shape it meets (``cold_s``), the
second reuses them (``warm_s``; ``compile_s`` = cold - warm). The translations of every staging must
be identical; the benchmark fails otherwise.

Notes
-----
Measured with ``--workdir`` a ``configs/table2_pilot.py`` base run (6+6 layers, d_model 64, 1,000
pieces; ``benchmarks/results/translate_messages_table2_small_base.json``) and the command above, on the
2-core development machine while a sweep shared its cores (so the absolute times are high): decoding
500 sentences took 26.2 / 20.0 / 19.1 s and compiling 30.6 / 43.2 / 65.4 s with 1 / 2 / 4 stages, with
identical translations. Two stages save 6 s per 500 sentences for 13 s more compiling, so they pay
from about a thousand sentences on (the whole dev split is 2,000); four add compile time for little
more speed at these short outputs. The persistent compilation cache is not enabled here, so every
run compiles afresh.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import jax  # noqa: E402

from attention_jax.decoding import decode, inference  # noqa: E402
from benchmarks import command_line  # noqa: E402


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("workdir", None, "Training work directory (config.json, checkpoints/).")
    flags.DEFINE_string("sources", None, "Sentences to translate: a text file, one per line; for a .tsv file the "
                        "first tab-separated column.")
    flags.DEFINE_integer("num_sentences", 500, "Translate the first this many (0: all).")
    flags.DEFINE_list("cache_stages", ["1", "2", "4"], "Stagings to compare (config.cache_stages).")
    flags.DEFINE_string("checkpoint", "best", "latest, best, averaged or a step number.")
    flags.DEFINE_integer("batch_size", 64, "Sentences per decoding batch.")
    flags.DEFINE_string("out", None, "Also write the JSON here.")


def read_sources(path: str, limit: int) -> list[str]:
    """The first ``limit`` sources of ``path`` (all for 0): lines, or a ``.tsv`` file's first column.

    Parameters
    ----------
    path : str
        Text or ``.tsv`` file.
    limit : int
        Sentences to keep; 0 keeps all.

    Returns
    -------
    list of str
        The sources, in file order.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No sources file {path!r}: pass --sources=FILE (one sentence per line, or .tsv).")
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    if path.endswith(".tsv"):
        lines = [line.split("\t")[0] for line in lines]
    return lines[:limit] if limit > 0 else lines


def time_staging(run: inference.TrainedRun, sources: list[str], cache_stages: int,
                 batch_size: int) -> tuple[dict[str, Any], list[str]]:
    """Translate ``sources`` twice with ``cache_stages`` stages and time both passes.

    Parameters
    ----------
    run : inference.TrainedRun
        The trained model, its config (decoding settings) and tokenizer.
    sources : list of str
        Sentences to translate.
    cache_stages : int
        ``DecodeSettings.cache_stages`` for this staging.
    batch_size : int
        Sentences per decoding batch.

    Returns
    -------
    record : dict
        ``cache_stages``, ``cold_s`` (first pass, compiling included), ``warm_s``, ``compile_s`` and
        ``sentences_per_s_warm``.
    translations : list of str
        The first pass's outputs.

    Notes
    -----
    Raises ``RuntimeError`` when the two passes translate differently.
    """
    settings = dataclasses.replace(run.config.decoding, cache_stages=cache_stages)
    translator = decode.Translator(run.model_config, run.params, run.tokenizer, settings=settings,
                                   batch_size=batch_size)
    start = time.perf_counter()
    first = translator.translate(sources)
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    second = translator.translate(sources)
    warm_s = time.perf_counter() - start
    if first != second:
        raise RuntimeError(f"cache_stages={cache_stages}: two passes over the same sources translated differently.")
    record = {"cache_stages": cache_stages, "cold_s": round(cold_s, 2), "warm_s": round(warm_s, 2),
              "compile_s": round(cold_s - warm_s, 2), "sentences_per_s_warm": round(len(sources) / warm_s, 2)}
    return record, first


def main(argv: list[str]) -> None:
    """Time every staging of ``--cache_stages``, check their translations agree, print (and write) JSON."""
    del argv
    options = flags.FLAGS
    if not options.workdir or not options.sources:
        command_line.fail("--workdir and --sources are required.")
    try:
        stagings = [int(value) for value in options.cache_stages]
        sources = read_sources(options.sources, options.num_sentences)
    except (FileNotFoundError, ValueError) as error:
        command_line.fail(str(error))
    run = inference.load_run(options.workdir, options.checkpoint, compilation_cache=False)  # Compiles are timed.
    records, translations = [], {}
    for stages in stagings:
        record, translations[stages] = time_staging(run, sources, stages, options.batch_size)
        records.append(record)
        print(json.dumps(record), file=sys.stderr, flush=True)
    reference = next(iter(translations.values()))
    differing = [stages for stages, output in translations.items() if output != reference]
    if differing:
        raise RuntimeError(f"cache_stages {differing} translated differently from {records[0]['cache_stages']}.")
    report = {"backend": jax.default_backend(), "jax": jax.__version__, "workdir": options.workdir,
              "checkpoint": run.checkpoint, "sources": options.sources, "num_sentences": len(sources),
              "batch_size": options.batch_size, "beam_size": run.config.decoding.beam_size,
              "identical_translations": True, "runs": records}
    text = json.dumps(report, indent=2)
    print(text)
    if options.out:
        with open(options.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    command_line.run(main, define_flags)
