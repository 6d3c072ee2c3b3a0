r"""Translate sentences from stdin with a trained run: one input line in, one output line out.

Usage::

    echo "The house is small." | python -m attention_jax.translate --workdir=runs/tiny
    python -m attention_jax.translate --workdir=runs/base --checkpoint=averaged < newstest2014.en > out.de

Lines are read as UTF-8 (undecodable bytes become U+FFFD, with a warning on stderr), translated in
length-sorted batches with beam search (Section 6.1: beam 4, alpha 0.6, at most input + 50 tokens),
and written in input order. Empty lines give empty lines. Output is written after each block of
lines, so translations appear in blocks, not line by line. Only warnings are logged unless
``--verbosity`` asks for more (``--verbosity=0``: INFO, as the training command logs).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Iterator

from absl import app, flags, logging

from attention_jax.commands.text_io import read_lines
from attention_jax.user_errors import UserInputError, exit_with_error

_WORKDIR = flags.DEFINE_string("workdir", None, "Training work directory.", required=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "latest",
                                  "'latest', 'averaged', 'best' (early stopping) or a step number.")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", 0, "Average the last N checkpoints instead (0: off).")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "Beam size (default: the config's, 4); 1 is greedy.")
_ALPHA = flags.DEFINE_float("alpha", None, "Length penalty alpha (default: the config's, 0.6).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences per decoding batch.")
_REAVERAGE = flags.DEFINE_bool("reaverage", False, "With --checkpoint=averaged: redo the average over "
                               "the newest checkpoints first (an average older than them is an error).")

LINES_PER_BLOCK_PER_BATCH = 16  # Lines read before translating: 16 batches, sorted by length together.


def blocks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """Group ``lines`` into lists of at most ``size``."""
    block: list[str] = []
    for line in lines:
        block.append(line)
        if len(block) == size:
            yield block
            block = []
    if block:
        yield block


def main(argv: list[str]) -> None:
    """Translate stdin to stdout with the run in ``--workdir``."""
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not flags.FLAGS["verbosity"].present:  # Orbax's and JAX's INFO lines around each translation: off.
        logging.set_verbosity(logging.WARNING)
    from attention_jax.checkpointing import params_checkpoints
    from attention_jax.decoding import inference  # Imported here so --help is fast.

    try:
        if _REAVERAGE.value and _CHECKPOINT.value == "averaged":
            params_checkpoints.reaverage(_WORKDIR.value)
        run = inference.load_run(_WORKDIR.value, _CHECKPOINT.value, average_last=_AVERAGE_LAST.value)
        translator = inference.make_translator(run, beam_size=_BEAM_SIZE.value, alpha=_ALPHA.value,
                                               batch_size=_BATCH_SIZE.value)
    except UserInputError as error:  # E.g. a run without its tokenizer.model: one line, exit 2.
        exit_with_error("translate", str(error))
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"translate: {error}")
    logging.info("Translating with %s of %s (beam %d, alpha %.2f).", run.checkpoint, run.workdir,
                 translator.beam_size, translator.alpha)
    output = sys.stdout.buffer
    for block in blocks(read_lines(sys.stdin.buffer), _BATCH_SIZE.value * LINES_PER_BLOCK_PER_BATCH):
        with warnings.catch_warnings(record=True) as caught:  # One log line each, not warning + source line.
            warnings.simplefilter("always")
            translations = translator.translate(block)
        for message in dict.fromkeys(str(warning.message) for warning in caught):
            logging.warning("%s", message)
        for translation in translations:
            output.write(translation.replace("\n", " ").encode("utf-8") + b"\n")
        output.flush()


if __name__ == "__main__":
    app.run(main)
