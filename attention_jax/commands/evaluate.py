"""Evaluate a trained run on a split: sacrebleu BLEU of beam-search translations and perplexity.

Usage::

    python -m attention_jax.evaluate --workdir=runs/base --split=test --average_last=5

Prints the BLEU score with sacrebleu's signature and the per-token perplexity (teacher forcing, no
label smoothing), and writes them as JSON to ``WORKDIR/eval_<split>.<checkpoint>.json`` (e.g.
``eval_test.averaged.json``, ``eval_test.step1200.json``) with the translations in
``WORKDIR/eval_<split>.<checkpoint>.hypotheses.txt`` (one per line, in split order). An averaged
checkpoint older than the run's newest checkpoint is refused (``--reaverage`` redoes it); the report of
an averaged checkpoint lists the steps it averages (``averaged_steps``). ``--split=dev`` and
``--split=validation`` name the same split (reports are filed under ``validation``). The figures are
printed before the report is written, so a run directory that cannot be written (read-only, full) still
shows them; the command then fails in one line (exit 2) naming the file, and ``--output`` writes elsewhere.

A whole-split evaluation (no ``--num_examples``) written into the run directory (no ``--output``) also adds
its BLEU and perplexity to the run's TensorBoard, as scalars ``evaluate/<split>/bleu`` and
``evaluate/<split>/perplexity`` at the evaluated checkpoint's step (averaged or best parameters and other
decoding settings get series of their own: :mod:`attention_jax.commands.evaluation_scalars`).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from absl import app, flags, logging

from attention_jax.user_errors import UserInputError, exit_with_error

if TYPE_CHECKING:  # Imported in main: fast --help.
    from attention_jax.decoding import decode, inference

_WORKDIR = flags.DEFINE_string("workdir", None, "Training work directory.", required=True)
_SPLIT = flags.DEFINE_string("split", "test", "'dev' (or its other name 'validation'), 'test' or 'train'.")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "latest",
                                  "'latest', 'averaged', 'best' (early stopping) or a step number.")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", 0,
                                     "Average the last N checkpoints first (paper: 5 base, 20 big); 0: off.")
_NUM_EXAMPLES = flags.DEFINE_integer("num_examples", 0, "Evaluate only the first N pairs (0: all).")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "Beam size (default: the config's, 4); 1 is greedy.")
_ALPHA = flags.DEFINE_float("alpha", None, "Length penalty alpha (default: the config's, 0.6).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences per decoding batch.")
_OUTPUT = flags.DEFINE_string("output", None, "JSON file to write (default: "
                              "WORKDIR/eval_<split>.<checkpoint>.json, e.g. eval_test.averaged.json).")
_REAVERAGE = flags.DEFINE_bool("reaverage", False, "With --checkpoint=averaged: redo the average over "
                               "the newest checkpoints first (an average older than them is an error).")


def main(argv: list[str]) -> None:
    """Evaluate the run in ``--workdir`` on ``--split``."""
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from attention_jax import run_files  # Here: fast --help.
    from attention_jax.checkpointing import params_checkpoints
    from attention_jax.decoding import inference
    from attention_jax.evaluation import progress, translation_quality
    from attention_jax.training import compilation_cache

    if _NUM_EXAMPLES.value < 0:
        sys.exit(f"evaluate: --num_examples must be >= 0; got {_NUM_EXAMPLES.value}.")
    split = run_files.data_split(_SPLIT.value)  # --split=dev is the validation split.
    averaged_steps = None
    try:
        if _REAVERAGE.value and _CHECKPOINT.value == "averaged":
            averaged_steps = params_checkpoints.reaverage(_WORKDIR.value)
        run = inference.load_run(_WORKDIR.value, _CHECKPOINT.value, average_last=_AVERAGE_LAST.value)
        if _CHECKPOINT.value == "averaged" and not _AVERAGE_LAST.value and averaged_steps is None:
            averaged_steps = params_checkpoints.check_average_is_current(_WORKDIR.value)
        compilation_cache.enable(run.config.run.compilation_cache_dir)
        translator = inference.make_translator(run, beam_size=_BEAM_SIZE.value, alpha=_ALPHA.value,
                                               batch_size=_BATCH_SIZE.value)
        pairs = run.data.text_pairs(split, max_pairs=_NUM_EXAMPLES.value)
    except UserInputError as error:  # E.g. a run without its tokenizer.model: one line, exit 2.
        exit_with_error("evaluate", str(error))
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"evaluate: {error}")
    logging.info("Evaluating %s of %s on %d %s pairs.", run.checkpoint, run.workdir, len(pairs), split)
    start = time.time()
    try:
        result = translation_quality.evaluate(translator, pairs, report_progress=progress.progress_logger(
            f"{split} BLEU", len(pairs)))
    except ValueError as error:
        sys.exit(f"evaluate: {error}")
    report = {
        "split": split,
        "checkpoint": run.checkpoint,
        **({"averaged_steps": averaged_steps} if averaged_steps is not None else {}),
        "name": run.config.name,
        **result.summary(),
        "beam_size": translator.beam_size,
        "alpha": translator.alpha,
        "max_extra_len": translator.max_extra_len,
        "wall_s": round(time.time() - start, 2),
    }
    label = run_files.checkpoint_label(_CHECKPOINT.value, _AVERAGE_LAST.value)
    path = _OUTPUT.value or run_files.eval_report_path(run.workdir, split, label)
    print(f"BLEU = {result.bleu:.2f}  ({result.bleu_signature})")  # First: a failed write keeps the figures.
    print(f"perplexity = {result.perplexity:.3f}  (cross-entropy {result.cross_entropy:.4f} nats/token, "
          f"{result.num_target_tokens} tokens)")
    sys.stdout.flush()
    try:
        hypotheses_path = translation_quality.write_report(path, report, result.hypotheses)
    except OSError as error:
        exit_with_error("evaluate", f"cannot write the report {error.filename or path}: {error.strerror}. The figures "
                        f"above were not saved; pass --output=FILE in a writable directory to keep them.")
    print(f"wrote {path} and {hypotheses_path}")
    if not _NUM_EXAMPLES.value and not _OUTPUT.value:
        _add_to_tensorboard(run, split, translator, result.bleu, result.perplexity)


def _add_to_tensorboard(run: inference.TrainedRun, split: str, translator: decode.Translator, bleu: float,
                        perplexity: float) -> None:
    """Write the figures as TensorBoard scalars of the run (:mod:`~attention_jax.commands.evaluation_scalars`)."""
    from attention_jax.commands import evaluation_scalars

    settings = run.config.decoding
    changes = {name: value for name, value, default in (("beam", translator.beam_size, settings.beam_size),
                                                        ("alpha", translator.alpha, settings.length_penalty_alpha))
               if value != default}
    prefix = evaluation_scalars.series(split, _CHECKPOINT.value, _AVERAGE_LAST.value, changes)
    try:
        step = evaluation_scalars.checkpoint_step(run.workdir, _CHECKPOINT.value, _AVERAGE_LAST.value)
    except (OSError, ValueError) as error:  # The checkpoint rotated away since it was read, say.
        logging.warning("Not added to the run's TensorBoard: no step for --checkpoint=%s (%s).", _CHECKPOINT.value,
                        error)
        return
    if evaluation_scalars.write(run.workdir, step, prefix, bleu, perplexity) is not None:
        print(f"added {prefix}/bleu and {prefix}/perplexity at step {step} to the run's TensorBoard")


if __name__ == "__main__":
    app.run(main)
