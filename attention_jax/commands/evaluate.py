"""Evaluate a trained run on a split or a parallel text: BLEU, chrF and TER (sacrebleu) and perplexity.

Usage::

    python -m attention_jax.evaluate --workdir=runs/base --split=test --average_last=5
    python -m attention_jax.evaluate --workdir=runs/base --source=newstest2014.en --reference=newstest2014.de
    python -m attention_jax.evaluate --hypotheses=output.de --reference=newstest2014.de --tokenize=intl

Writes ``WORKDIR/eval_<split>[_first<K>].<checkpoint>.json`` and the translations beside it; a whole split
also goes to TensorBoard. ``--hypotheses`` needs no model. Mistakes are one line, exit 2, before anything
is written (docs/checkpoints.md, docs/quickstart.md).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from absl import app, flags, logging

from attention_jax.foundation.user_errors import UserInputError, exit_with_error

if TYPE_CHECKING:
    from attention_jax.decoding.decode import Translator
    from attention_jax.decoding.inference import TrainedRun
    from attention_jax.evaluation.translation_quality import EvaluationResult

_WORKDIR = flags.DEFINE_string("workdir", "", "Training work directory (required unless --hypotheses).")
_SPLIT = flags.DEFINE_string("split", "test", "'dev' (or its other name 'validation'), 'test' or 'train'.")
_SOURCE = flags.DEFINE_string("source", None, "Evaluate on this parallel text instead of --split: a file of "
                              "source sentences, one per line (with --reference).")
_REFERENCE = flags.DEFINE_string("reference", None, "The reference translations of --source (or of "
                                 "--hypotheses), one per line.")
_HYPOTHESES = flags.DEFINE_string("hypotheses", None, "Score this file of translations against --reference "
                                  "(one per line) instead of translating: no model, no --workdir.")
_TOKENIZE = flags.DEFINE_string("tokenize", "13a", "sacrebleu's BLEU tokenizer: 13a, intl, zh, char, none, "
                                "ja-mecab or ko-mecab (the last two need sacrebleu's extras).")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "latest",
                                  "'latest', 'averaged', 'best' (early stopping) or a step number.")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", 0,
                                     "Average the last N checkpoints first (paper: 5 base, 20 big); 0: off.")
_NUM_EXAMPLES = flags.DEFINE_integer("num_examples", 0, "Evaluate only the first N pairs (0: all); the report "
                                     "is then named eval_<split>_first<N>.<checkpoint>.json.")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "Beam size (default: the config's, 4); 1 is greedy.")
_ALPHA = flags.DEFINE_float("alpha", None, "Length penalty alpha (default: the config's, 0.6).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences per decoding batch.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON file to write (default: "
                              "WORKDIR/eval_<split>.<checkpoint>.json, e.g. eval_test.averaged.json).")
_REAVERAGE = flags.DEFINE_bool("reaverage", False, "With --checkpoint=averaged: redo the average over "
                               "the newest checkpoints first (an average older than them is an error).")

_PROGRAM = "attention_jax.evaluate"


def main(argv: list[str]) -> None:
    """Evaluate the run in ``--workdir`` on ``--split`` or on ``--source``/``--reference``.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if _HYPOTHESES.value is not None:  # Translations given: scored without a model (or JAX).
        from attention_jax.commands import hypothesis_scoring

        given = [name for name in hypothesis_scoring.MODEL_FLAGS if flags.FLAGS[name].present]
        hypothesis_scoring.run(_PROGRAM, _HYPOTHESES.value, _REFERENCE.value or "", _TOKENIZE.value,
                               _OUTPUT.value, given)
        return
    if not _WORKDIR.value:
        raise app.UsageError("--workdir is required: the run whose model translates (or give --hypotheses=FILE "
                             "--reference=FILE to score translations that exist).")
    from attention_jax.evaluation import sacrebleu_scores
    from attention_jax.foundation import run_files  # Here: fast --help, and fast refusals before JAX loads.

    try:
        sacrebleu_scores.check_bleu_tokenizer(_TOKENIZE.value)
    except UserInputError as error:
        exit_with_error(_PROGRAM, str(error))

    source, reference = _SOURCE.value or "", _REFERENCE.value or ""
    split = None if source or reference else run_files.data_split(_SPLIT.value)  # --split=dev: validation.
    label = run_files.checkpoint_label(_CHECKPOINT.value, _AVERAGE_LAST.value)
    file_pairs = _read_user_input(split, label)
    from attention_jax.evaluation import progress, translation_quality

    try:
        run, translator, averaged_steps = _load_translator()
        if split is None:  # The first --num_examples lines of the files, or all of them.
            available, pairs = len(file_pairs), file_pairs[:_NUM_EXAMPLES.value or None]
        else:
            available, pairs = run.data.num_pairs(split), run.data.text_pairs(split, max_pairs=_NUM_EXAMPLES.value)
    except UserInputError as error:  # E.g. a run without its tokenizer.model: one line, exit 2.
        exit_with_error(_PROGRAM, str(error))
    except (FileNotFoundError, ValueError) as error:
        exit_with_error(_PROGRAM, str(error))
    partial = len(pairs) < available
    text = f"{available} pairs of " + (f"the {split} split" if split else f"{source} and {reference}")
    described = f"the first {len(pairs)} of the {text}" if partial else f"all {text}"
    logging.info("Evaluating %s of %s on %s.", run.checkpoint, run.workdir, described)
    start = time.time()
    try:
        result = translation_quality.evaluate(translator, pairs, report_progress=progress.progress_logger(
            f"{split or 'file'} BLEU", len(pairs)), bleu_tokenizer=_TOKENIZE.value)
    except ValueError as error:
        exit_with_error(_PROGRAM, str(error))
    report = {
        "split": split,
        **({"source_file": os.path.abspath(source), "reference_file": os.path.abspath(reference)}
           if split is None else {}),
        "checkpoint": run.checkpoint,
        "checkpoint_step": _checkpoint_step(run),
        **({"averaged_steps": averaged_steps} if averaged_steps is not None else {}),
        "name": run.config.name,
        **result.summary(),
        "available_examples": available,
        "partial": partial,
        "beam_size": translator.beam_size,
        "alpha": translator.alpha,
        "max_extra_len": translator.max_extra_len,
        "wall_s": round(time.time() - start, 2),
    }
    name = split or run_files.parallel_text_name(source, run.workdir)
    path = _OUTPUT.value or run_files.eval_report_path(run.workdir, name, label, first=len(pairs) if partial else 0)
    _print_figures(result, described)  # First: a failed write keeps the figures.
    try:
        written = translation_quality.write_report(path, report, result.hypotheses, pairs)
    except OSError as error:
        exit_with_error(_PROGRAM, f"cannot write the report {error.filename or path}: {error.strerror}. The "
                        f"figures above were not saved; pass --output=FILE in a writable directory to keep them.")
    print(f"wrote {path}, {' and '.join(written)}")
    if split is not None and not partial and not _OUTPUT.value and not _other_bleu_tokenizer():
        _add_to_tensorboard(run, split, translator, result.bleu, result.perplexity)


def _checkpoint_step(run: TrainedRun) -> int | None:
    """Return the evaluated parameters' training step, or ``None`` where none is known."""
    from attention_jax.commands import evaluation_scalars

    try:
        return evaluation_scalars._checkpoint_step(run.workdir, _CHECKPOINT.value, _AVERAGE_LAST.value)
    except (OSError, ValueError, IndexError):  # An export (no checkpoints/), or a checkpoint rotated away.
        return None


def _other_bleu_tokenizer() -> bool:
    """Return whether ``--tokenize`` is not ``13a`` (TensorBoard's series are ``13a``)."""
    from attention_jax.evaluation import sacrebleu_scores

    if _TOKENIZE.value == sacrebleu_scores.DEFAULT_BLEU_TOKENIZER:
        return False
    print(f"not added to the run's TensorBoard: its evaluate/ series hold {sacrebleu_scores.DEFAULT_BLEU_TOKENIZER} "
          f"BLEU, not --tokenize={_TOKENIZE.value}")
    return True


def _read_user_input(split: str | None, label: str) -> list[tuple[str, str]]:
    """Check the flags and read ``--source``/``--reference`` (``[]`` with ``--split``) before anything is written."""
    from attention_jax.commands import text_io

    try:
        _check_flags(split, label)
        return [] if split else text_io._read_parallel_text(_SOURCE.value or "", _REFERENCE.value or "")
    except UserInputError as error:
        exit_with_error(_PROGRAM, str(error))


def _load_translator() -> tuple[TrainedRun, Translator, list[int] | None]:
    """Return the ``--checkpoint`` run (re-averaged with ``--reaverage``), its translator and the averaged steps."""
    from attention_jax.checkpointing import compilation_cache, params_checkpoints
    from attention_jax.decoding import inference

    averaged_steps = None
    if _REAVERAGE.value and _CHECKPOINT.value == "averaged":
        averaged_steps = params_checkpoints.reaverage(_WORKDIR.value)
    run = inference.load_run(_WORKDIR.value, _CHECKPOINT.value, average_last=_AVERAGE_LAST.value)
    if _CHECKPOINT.value == "averaged" and not _AVERAGE_LAST.value and averaged_steps is None:
        averaged_steps = params_checkpoints.check_average_is_current(_WORKDIR.value)
    compilation_cache.enable(run.config.run.compilation_cache_dir)
    translator = inference.make_translator(run, beam_size=_BEAM_SIZE.value, alpha=_ALPHA.value,
                                           batch_size=_BATCH_SIZE.value)
    return run, translator, averaged_steps


def _check_flags(split: str | None, label: str) -> None:
    """Refuse, in one line, flags that do not go together; nothing has been read or written yet."""
    from attention_jax.commands import output_files
    from attention_jax.foundation import run_files

    if _NUM_EXAMPLES.value < 0:
        raise UserInputError(f"--num_examples must be >= 0 (0: all); got {_NUM_EXAMPLES.value}.")
    if _OUTPUT.value:  # --output=RUN/config.json would break the run.
        output_files._refuse_run_files(_OUTPUT.value, "--output", (_WORKDIR.value,))
    if split is None:
        if not (_SOURCE.value and _REFERENCE.value):
            given, missing = ("--source", "--reference") if _SOURCE.value else ("--reference", "--source")
            raise UserInputError(f"{given} needs {missing}: a parallel text is two files, source sentences "
                                 f"and their reference translations, one per line.")
        if flags.FLAGS["split"].present:
            raise UserInputError("--split and --source/--reference name two different texts to evaluate on; "
                                 "give one of them.")
    elif _OUTPUT.value and _NUM_EXAMPLES.value:
        whole = {run_files.eval_report_path(_WORKDIR.value, split, name) for name in (None, label)}
        if os.path.abspath(_OUTPUT.value) in {os.path.abspath(path) for path in whole}:
            raise UserInputError(
                f"--output={_OUTPUT.value} is the name of the whole {split} split's report, and "
                f"--num_examples={_NUM_EXAMPLES.value} may evaluate part of it: leave --output out (a partial "
                f"evaluation is filed as eval_{split}_first<N>.{label}.json) or name another file.")


def _print_figures(result: EvaluationResult, described: str) -> None:
    """Print the scores with their signatures and the perplexity, then flush (they come before any write)."""
    from attention_jax.evaluation import translation_quality

    print(f"evaluated {described}")
    print(f"BLEU = {result.bleu:.2f}  ({result.bleu_signature})")
    print(f"chrF2 = {result.chrf:.2f}  ({result.chrf_signature})")
    print(f"TER = {result.ter:.2f}  ({result.ter_signature})")
    print(translation_quality.perplexity_line(result))  # Says so when pairs were skipped, or none scored.
    sys.stdout.flush()


def _add_to_tensorboard(run: TrainedRun, split: str, translator: Translator, bleu: float,
                        perplexity: float) -> None:
    """Write the figures as TensorBoard scalars of the run (:mod:`~attention_jax.commands.evaluation_scalars`)."""
    from attention_jax.commands import evaluation_scalars

    settings = run.config.decoding
    changes = {name: value for name, value, default in (("beam", translator.beam_size, settings.beam_size),
                                                        ("alpha", translator.alpha, settings.length_penalty_alpha))
               if value != default}
    prefix = evaluation_scalars.series(split, _CHECKPOINT.value, _AVERAGE_LAST.value, changes)
    try:
        step = evaluation_scalars._checkpoint_step(run.workdir, _CHECKPOINT.value, _AVERAGE_LAST.value)
    except (OSError, ValueError) as error:  # The checkpoint rotated away since it was read, say.
        logging.warning("Not added to the run's TensorBoard: no step for --checkpoint=%s (%s).", _CHECKPOINT.value,
                        error)
        return
    if evaluation_scalars.write(run.workdir, step, prefix, bleu, perplexity) is not None:
        print(f"added {prefix}/bleu and {prefix}/perplexity at step {step} to the run's TensorBoard")


if __name__ == "__main__":
    app.run(main)
