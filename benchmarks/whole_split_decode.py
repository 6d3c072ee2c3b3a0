r"""Whole-split decoding speed: a trained run's beam search over every sentence of dev and test, with
length-sorted batches and in input order; sentences/s, target tokens/s, batch shapes; prints JSON.

Run from the repository root, on a finished training run::

    python benchmarks/whole_split_decode.py --workdir=runs/table2_small/base/seed_0 --splits=dev,test \
        --note="2 quiet cores" --out=benchmarks/results/whole_split_decode_table2_small_base.json
    python benchmarks/whole_split_decode.py --smoke --out=/tmp/whole_split_decode_smoke.json   # < 1 minute

What it times is what training's final BLEU and ``python -m attention_jax.evaluate`` do: the run's own
checkpoint (``--checkpoint``, ``latest`` as ``evaluate``), decoding settings (beam size, alpha, output
margin, cache stages) and split text (``TrainedRun.data``), translated by
:func:`attention_jax.evaluation.translation_quality.translate_stoppably` in batches of ``--batch_size``.
Each split is translated twice:

- ``sorted``: the sources sorted longest first and cut into batches (the default everywhere), so a
  batch holds sentences of similar length;
- ``unsorted``: cut in input order (``sort_by_length=False``), so each batch is padded to, and
  searches as long as, its longest sentence.

Every batch is padded to a shape ``(rows B, source length S, decode length L)``: rows and source length
rounded up to powers of two, the decode length to a multiple of 16 within source plus margin
(:func:`padded_shape`); each distinct shape is one compilation. Before the timed
passes a warm-up decodes one batch of every shape the split needs that is not compiled yet, so the
timed passes compile nothing. A shape's compile time is estimated as its warm-up batch's seconds minus
the same batch's seconds in the timed pass; a mode's ``compile_s`` sums the estimates of its shapes (what
a cold process decoding the split that way would pay). The persistent compilation cache is not enabled
here (``jax_compilation_cache_dir`` is recorded: set from outside, the estimates are cache loads).

Target tokens are the translations re-encoded with the run's tokenizer, EOS included. The translations
of the two modes should be identical (padding is masked out; only the rounding of differently padded
products could tip a near tie): the JSON says whether they are, and how many differ if not, rather than
failing.

``--smoke``: trains ``configs/tiny.py`` shrunk as ``benchmarks/time_to_bleu.py --smoke`` shrinks it (one
layer of width 32, 12 steps on ``synthetic_en_de/small``: 100 dev and 100 test sentences) into a temporary
directory and measures it: every code path in well under a minute (34 s on 2 shared cores), numbers
meaningless. Its ``max_len`` of 8 cuts most sources to 8 tokens, so the splits decode at one or two shapes.

Notes
-----
Measured on the 1/4-width Table 2 pilot's base run (``/work/pilot_runs/table2_pilot_quarter/base/seed_0``:
6+6 layers, d_model 128, 1,000 pieces, step 6,000; beam 4, alpha 0.6) with ``--splits=dev``, on 2 cores
shared with a 2-run training sweep (contended: absolute rates low, ratios only):
the 2,000 dev sentences took 131.3 s length-sorted (15.2 sentences/s, 7 shapes, compile ~195 s) and
344.7 s in input order (5.8 sentences/s, 4 shapes, compile ~103 s), identical translations: sorting is
2.6x as fast (``benchmarks/results/whole_split_decode_table2_quarter_base_contended.json``,
``docs/benchmarks.md``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import sys
import tempfile
import time
import warnings
from typing import Any, Sequence

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import jax  # noqa: E402

from attention_jax.foundation import run_files  # noqa: E402
from attention_jax.decoding import decode, inference  # noqa: E402
from attention_jax.evaluation import translation_quality  # noqa: E402
from benchmarks import child_process, command_line, time_to_bleu  # noqa: E402

MODES = {"sorted": True, "unsorted": False}  # Mode name -> translate_stoppably's sort_by_length.
SPLITS = ("dev", "validation", "test")
# --smoke: time_to_bleu's tiny run, trained once to its end with no BLEU of its own.
SMOKE_TRAINING = time_to_bleu.SMOKE_OVERRIDES | dict(final_bleu=False, num_bleu_examples=0, checkpoint_every_steps=12)

Shape = tuple[int, int, int]  # (rows B, source length S, decode length L) of a padded batch.


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("workdir", None, "Finished training run (config.json, tokenizer.model, checkpoints/).")
    flags.DEFINE_list("splits", ["dev", "test"], "Splits of the run's dataset to decode whole: dev "
                      "(or validation), test.")
    flags.DEFINE_string("checkpoint", "latest", "latest, best, averaged or a step number (as evaluate).")
    flags.DEFINE_integer("batch_size", 64, "Sentences per decoding batch (training's final BLEU uses 64).")
    flags.DEFINE_integer("num_sentences", 0, "Decode only the first this many sentences of each split (0: all).")
    flags.DEFINE_string("note", "", "Recorded in the JSON: machine load, anything that affects timings.")
    flags.DEFINE_string("out", None, "Also write the JSON here (.json).")
    flags.DEFINE_bool("smoke", False, "Train a tiny run into a temporary directory and measure it (no --workdir).")


@dataclasses.dataclass(frozen=True)
class Settings:
    """One measurement's settings, checked by :func:`settings_from_flags`.

    Attributes
    ----------
    workdir : str or None
        The training run; ``None`` with ``smoke`` (a tiny run is trained).
    splits : tuple of str
        Splits to decode, as given (``"dev"``, ``"validation"``, ``"test"``).
    checkpoint : str
        Which parameters to load.
    batch_size : int
        Sentences per decoding batch.
    num_sentences : int
        Sentences per split to decode; 0 decodes all.
    note : str
        Recorded in the JSON.
    out : pathlib.Path or None
        JSON file to write.
    smoke : bool
        Train and measure a tiny run.
    """

    workdir: str | None
    splits: tuple[str, ...]
    checkpoint: str
    batch_size: int
    num_sentences: int
    note: str
    out: pathlib.Path | None
    smoke: bool


def settings_from_flags(values: flags.FlagValues) -> Settings:
    """The checked settings of the parsed flags; one line and exit status 2 for a mistake.

    Parameters
    ----------
    values : absl.flags.FlagValues
        The flags of :func:`define_flags`, parsed.

    Returns
    -------
    Settings
        What :func:`main` measures.

    Notes
    -----
    Everything a user can get wrong is checked here, before a run is loaded or a file written; a work
    directory without ``config.json`` is refused here, a missing checkpoint when the run is loaded.
    """
    if values.smoke and values.workdir:
        command_line.fail("--smoke trains its own tiny run: leave out --workdir.")
    if not values.smoke:
        if not values.workdir:
            command_line.fail("--workdir is required: a finished training run (config.json, tokenizer.model, "
                              "checkpoints/); or --smoke.")
        if not os.path.isdir(values.workdir):
            command_line.fail(f"--workdir={values.workdir} is not a directory: pass a finished training run.")
        if not os.path.isfile(os.path.join(values.workdir, run_files.CONFIG_FILE)):
            command_line.fail(f"--workdir={values.workdir} holds no {run_files.CONFIG_FILE}: it is not a "
                              "training run.")
    splits = tuple(split.strip() for split in values.splits)
    unknown = [split for split in splits if split not in SPLITS]
    if not splits or unknown:
        command_line.fail(f"--splits: unknown {unknown or 'none given'}; choose from {SPLITS}.")
    if len({run_files.data_split(split) for split in splits}) < len(splits):
        command_line.fail(f"--splits names a split twice: {list(splits)} (dev and validation are one split).")
    if values.batch_size < 1:
        command_line.fail(f"--batch_size must be positive; got {values.batch_size}.")
    if values.num_sentences < 0:
        command_line.fail(f"--num_sentences must be >= 0 (0: all); got {values.num_sentences}.")
    out = pathlib.Path(values.out) if values.out else None
    if out is not None and out.suffix != ".json":
        command_line.fail(f"--out must name a .json file; got {out}.")
    return Settings(workdir=values.workdir, splits=splits, checkpoint=values.checkpoint,
                    batch_size=values.batch_size, num_sentences=values.num_sentences, note=values.note,
                    out=out, smoke=values.smoke)


def train_smoke_run(directory: pathlib.Path) -> tuple[str, float]:
    """Train the tiny ``--smoke`` run (``time_to_bleu``'s smoke model) into ``directory / "run"``.

    Parameters
    ----------
    directory : pathlib.Path
        An empty directory (a temporary one).

    Returns
    -------
    tuple[str, float]
        The run's work directory and the seconds the training command took, start-up included.

    Notes
    -----
    Runs ``python -m attention_jax.main`` as a child; a failure ends the benchmark with its output's tail.
    """
    run_dir = directory / "run"
    command = [sys.executable, "-m", "attention_jax.main", f"--config={time_to_bleu.SMOKE_CONFIG}",
               f"--workdir={run_dir}", *[f"--config.{key}={value}" for key, value in SMOKE_TRAINING.items()]]
    started = time.perf_counter()
    completed = child_process.run_captured(command, child_process.repository_environment())
    if completed.returncode != 0:
        raise SystemExit(f"whole_split_decode: training the smoke run failed (exit {completed.returncode}):\n"
                         f"{completed.stderr[-3000:]}")
    return str(run_dir), time.perf_counter() - started


def padded_shape(translator: decode.Translator, batch_ids: Sequence[Sequence[int]]) -> Shape:
    """The padded shape a batch of sources is decoded at: one compilation per distinct shape.

    Parameters
    ----------
    translator : decode.Translator
        Its batch size, input limit, output margin and model length decide the padding.
    batch_ids : Sequence[Sequence[int]]
        The batch's source ids (non-empty, within ``translator.max_source_len``).

    Returns
    -------
    Shape
        ``(rows, source_length, decode_length)``: the sentences rounded up to a power of two (at most
        the batch size), the longest source to its power-of-two bucket, and the longest allowed output
        to the key/value cache length (:func:`attention_jax.decoding.decode.cache_length`).

    Notes
    -----
    Follows ``Translator._batches`` and ``Translator._decode`` (no mesh) through the public bucket
    functions; the JSON's ``compiled_programs`` (the decoder's jit cache growth during warm-up) checks the
    count against the compilations that really happened.
    """
    longest = max(len(ids) for ids in batch_ids)
    max_len = translator.model_config.max_len
    rows = decode.bucket_rows(len(batch_ids), translator.batch_size)
    source_length = decode.bucket_length(longest, translator.max_source_len)
    longest_output = min(longest + translator.max_extra_len, max_len)
    decode_length = decode.cache_length(longest_output, min(source_length + translator.max_extra_len, max_len))
    return rows, source_length, decode_length


def compiled_programs() -> int | None:
    """How many programs the jitted beam search holds (one per shape and setting); ``None`` if JAX hides it."""
    cache_size = getattr(decode.decode_batch, "_cache_size", None)
    return int(cache_size()) if callable(cache_size) else None


@dataclasses.dataclass(frozen=True)
class DecodePass:
    """One timed translation of a split.

    Attributes
    ----------
    translations : list of str
        In input order.
    seconds : float
        Wall time of the whole call (tokenizing, every batch, detokenizing).
    batch_seconds : list of float
        Each batch's decoding time, in decoding order.
    """

    translations: list[str]
    seconds: float
    batch_seconds: list[float]


def time_pass(translator: decode.Translator, sources: Sequence[str], *, sort_by_length: bool) -> DecodePass:
    """Translate ``sources`` once with :func:`translate_stoppably`, timing the call and each batch.

    Parameters
    ----------
    translator : decode.Translator
        The run's translator.
    sources : Sequence[str]
        The split's sources.
    sort_by_length : bool
        Length-sorted batches (True) or input order.

    Returns
    -------
    DecodePass
        The translations and times; a batch's time runs from the stop check before it to the progress
        report after it.
    """
    starts: list[float] = []
    ends: list[float] = []

    def batch_starts() -> bool:
        starts.append(time.perf_counter())
        return False

    def batch_ends(done: int) -> None:
        del done
        ends.append(time.perf_counter())

    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Truncation is counted once in the split's record.
        translations = translation_quality.translate_stoppably(
            translator, sources, should_stop=batch_starts, report_progress=batch_ends, sort_by_length=sort_by_length)
    seconds = time.perf_counter() - began
    return DecodePass(translations, seconds, [end - start for start, end in zip(starts, ends)])


def mode_record(translator: decode.Translator, encoded: Sequence[Sequence[int]], batches: Sequence[Sequence[int]],
                shapes: Sequence[Shape], decoded: DecodePass, compile_estimates: dict[Shape, float]) -> dict[str, Any]:
    """The JSON record of one mode on one split.

    Parameters
    ----------
    translator : decode.Translator
        Its tokenizer re-encodes the translations.
    encoded : Sequence[Sequence[int]]
        The split's source ids.
    batches : Sequence[Sequence[int]]
        The mode's batches (positions in ``encoded``).
    shapes : Sequence[Shape]
        Each batch's padded shape.
    decoded : DecodePass
        The mode's timed pass.
    compile_estimates : dict[Shape, float]
        Estimated compile seconds of every shape met so far.

    Returns
    -------
    dict[str, Any]
        ``sentences``, ``seconds``, ``sentences_per_s``, ``target_tokens``, ``target_tokens_per_s``,
        ``batches``, ``padded_batch_shapes`` (distinct), ``shapes`` (``[rows, S, L]``, sorted),
        ``source_padding_fraction`` (padded source slots holding no token), ``compile_s`` (the estimates
        of its distinct shapes summed) and ``seconds_with_compile``.
    """
    decoded_positions = [index for indices in batches for index in indices]
    target_tokens = sum(len(translator.tokenizer.encode(decoded.translations[index])) for index in decoded_positions)
    source_tokens = sum(len(encoded[index]) for index in decoded_positions)
    padded_slots = sum(rows * source_length for rows, source_length, _ in shapes)
    distinct = sorted(set(shapes))
    compile_s = sum(compile_estimates[shape] for shape in distinct)
    return {
        "sentences": len(decoded.translations),
        "seconds": round(decoded.seconds, 3),
        "sentences_per_s": round(len(decoded.translations) / decoded.seconds, 3),
        "target_tokens": target_tokens,
        "target_tokens_per_s": round(target_tokens / decoded.seconds, 1),
        "batches": len(batches),
        "padded_batch_shapes": len(distinct),
        "shapes": [list(shape) for shape in distinct],
        "source_padding_fraction": round(1.0 - source_tokens / padded_slots, 4) if padded_slots else 0.0,
        "compile_s": round(compile_s, 2),
        "seconds_with_compile": round(decoded.seconds + compile_s, 2),
    }


def measure_split(translator: decode.Translator, split: str, sources: Sequence[str],
                  compile_estimates: dict[Shape, float]) -> dict[str, Any]:
    """Warm up, then translate ``sources`` in every mode of :data:`MODES`, timed; the split's JSON record.

    Parameters
    ----------
    translator : decode.Translator
        The run's translator.
    split : str
        The split's name as given (recorded).
    sources : Sequence[str]
        The split's sources, in dataset order.
    compile_estimates : dict[Shape, float]
        Estimated compile seconds per shape of earlier splits; this split's new shapes are added.

    Returns
    -------
    dict[str, Any]
        ``split``, ``sentences``, ``source_tokens``, ``truncated_sources``, ``warmup`` (``seconds``,
        ``batches``, ``new_shapes``, ``compiled_programs``), ``modes`` (:func:`mode_record` per mode),
        ``identical_translations``, ``differing_translations`` and ``sorted_speedup`` (unsorted seconds
        over sorted).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoded = translator.encode_sources(sources)
    truncated = sum(len(translator.tokenizer.encode(source)) > translator.max_source_len
                    for source in sources if source.strip())
    batches = {mode: translation_quality.decoding_batches(encoded, translator.batch_size, sort_by_length=sort)
               for mode, sort in MODES.items()}
    shapes = {mode: [padded_shape(translator, [encoded[i] for i in indices]) for indices in batches[mode]]
              for mode in MODES}
    first_use: dict[Shape, tuple[str, int]] = {}  # Each new shape's first batch: (mode, batch number).
    for mode in MODES:
        for number, shape in enumerate(shapes[mode]):
            if shape not in compile_estimates and shape not in first_use:
                first_use[shape] = (mode, number)
    programs_before = compiled_programs()
    warm_seconds: dict[Shape, float] = {}
    warm_start = time.perf_counter()
    for shape, (mode, number) in first_use.items():
        start = time.perf_counter()
        translator.translate_ids([encoded[i] for i in batches[mode][number]])
        warm_seconds[shape] = time.perf_counter() - start
    warmup_s = time.perf_counter() - warm_start
    programs_after = compiled_programs()
    passes = {mode: time_pass(translator, sources, sort_by_length=sort) for mode, sort in MODES.items()}
    for mode in MODES:
        if len(passes[mode].batch_seconds) != len(batches[mode]):
            raise RuntimeError(f"{split} {mode}: translate_stoppably decoded {len(passes[mode].batch_seconds)} "
                               f"batches, decoding_batches cut {len(batches[mode])}.")
    for shape, (mode, number) in first_use.items():
        compile_estimates[shape] = max(0.0, warm_seconds[shape] - passes[mode].batch_seconds[number])
    reference = passes["sorted"].translations
    differing = sum(mine != theirs for mine, theirs in zip(reference, passes["unsorted"].translations))
    return {
        "split": split,
        "sentences": len(sources),
        "source_tokens": sum(len(ids) for ids in encoded),
        "truncated_sources": truncated,
        "warmup": {"seconds": round(warmup_s, 2), "batches": len(first_use), "new_shapes": len(first_use),
                   "compiled_programs": None if programs_before is None or programs_after is None
                   else programs_after - programs_before},
        "modes": {mode: mode_record(translator, encoded, batches[mode], shapes[mode], passes[mode], compile_estimates)
                  for mode in MODES},
        "identical_translations": differing == 0,
        "differing_translations": differing,
        "sorted_speedup": round(passes["unsorted"].seconds / passes["sorted"].seconds, 3),
    }


def summary(report: dict[str, Any]) -> str:
    """A few lines for the console: per split and mode, seconds, sentences/s, tokens/s, shapes.

    Parameters
    ----------
    report : dict[str, Any]
        The benchmark's JSON.

    Returns
    -------
    str
        The lines, joined.
    """
    machine, settings = report["machine"], report["decoding"]
    lines = [f"{report['workdir']} ({report['checkpoint']}): beam {settings['beam_size']}, alpha "
             f"{settings['alpha']}, batches of {settings['batch_size']}; {machine['cpu']}, {machine['cpu_count']} "
             f"cores, {machine['backend']}" + (f"; {report['note']}" if report["note"] else "")]
    for record in report["splits"].values():
        lines.append(f"{record['split']}: {record['sentences']} sentences; warm-up compiled "
                     f"{record['warmup']['new_shapes']} shapes in {record['warmup']['seconds']:.1f} s")
        for mode, figures in record["modes"].items():
            lines.append(f"  {mode:<9}{figures['seconds']:8.1f} s {figures['sentences_per_s']:8.2f} sentences/s "
                         f"{figures['target_tokens_per_s']:8.1f} target tokens/s {figures['padded_batch_shapes']:4d} "
                         f"shapes  padding {100 * figures['source_padding_fraction']:.0f}%  compile ~"
                         f"{figures['compile_s']:.1f} s")
        agreement = ("translations identical" if record["identical_translations"] else
                     f"{record['differing_translations']} of {record['sentences']} translations differ")
        lines.append(f"  length-sorted batches {record['sorted_speedup']:.2f}x as fast as input order; {agreement}")
    return "\n".join(lines)


def measure(settings: Settings, workdir: str) -> dict[str, Any]:
    """Load the run in ``workdir`` and measure every split of ``settings``; the report (JSON-serializable).

    Parameters
    ----------
    settings : Settings
        Checked settings.
    workdir : str
        The training run to load.

    Returns
    -------
    dict[str, Any]
        ``what``, ``note``, ``smoke``, ``workdir``, ``checkpoint``, ``config_name``, ``dataset``, ``model``,
        ``decoding``, ``machine``, ``splits`` (:func:`measure_split` per split), ``identical_translations``
        and ``total_s``.

    Notes
    -----
    A run that cannot be loaded, or a split its dataset lacks, ends the benchmark with one line and exit
    status 2 before anything is decoded.
    """
    started = time.perf_counter()
    load_before = os.getloadavg()
    try:
        run = inference.load_run(workdir, settings.checkpoint, compilation_cache=False)  # Compiles are timed.
        translator = inference.make_translator(run, batch_size=settings.batch_size)
        sources = {split: [source for source, _ in run.data.text_pairs(run_files.data_split(split),
                                                                        max_pairs=settings.num_sentences)]
                   for split in settings.splits}
    except (FileNotFoundError, ValueError) as error:
        command_line.fail(str(error))
    compile_estimates: dict[Shape, float] = {}
    records = {}
    for split in settings.splits:
        records[split] = measure_split(translator, split, sources[split], compile_estimates)
        print(f"{split}: done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    devices = jax.devices()
    return {
        "what": "whole-split beam-search decoding speed of a trained run: length-sorted batches against input "
                "order, after a warm-up that compiles every batch shape",
        "note": settings.note,
        "smoke": settings.smoke,
        "workdir": workdir,
        "checkpoint": run.checkpoint,
        "config_name": run.config.name,
        "dataset": run.config.data.dataset,
        "model": {"num_layers": run.model_config.num_layers, "d_model": run.model_config.d_model,
                  "vocab_size": run.model_config.vocab_size},
        "decoding": {"beam_size": translator.beam_size, "alpha": translator.alpha,
                     "max_decode_extra_len": translator.max_extra_len,
                     "cache_stages": translator.settings.cache_stages, "batch_size": translator.batch_size,
                     "num_sentences": settings.num_sentences, "max_source_len": translator.max_source_len},
        "machine": time_to_bleu.machine_description() | {
            "backend": jax.default_backend(), "jax": jax.__version__,
            "devices": f"{len(devices)} x {devices[0].device_kind}",
            "jax_compilation_cache_dir": jax.config.jax_compilation_cache_dir or None,
            "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "splits": records,
        "identical_translations": all(record["identical_translations"] for record in records.values()),
        "total_s": round(time.perf_counter() - started, 2),
    }


def main(argv: list[str]) -> None:
    """Measure the run of ``--workdir`` (or a tiny ``--smoke`` run); print the JSON and a summary.

    Parameters
    ----------
    argv : list of str
        The program name (the flags are parsed already).
    """
    del argv
    settings = settings_from_flags(flags.FLAGS)
    if settings.smoke:
        with tempfile.TemporaryDirectory(prefix="whole_split_decode_") as directory:
            workdir, training_s = train_smoke_run(pathlib.Path(directory))
            report = measure(settings, workdir) | {"smoke_training_s": round(training_s, 2)}
    else:
        report = measure(settings, settings.workdir)
    print(json.dumps(report, indent=2))
    print(summary(report), file=sys.stderr)
    if settings.out is not None:
        settings.out.parent.mkdir(parents=True, exist_ok=True)
        run_files.write_json_atomically(str(settings.out), report)


if __name__ == "__main__":
    command_line.run(main, define_flags)
