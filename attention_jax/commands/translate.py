r"""Translate sentences from stdin with a trained run: one input line in, one output line out.

Usage::

    echo "The house is small." | python -m attention_jax.translate --workdir=runs/tiny
    python -m attention_jax.translate --workdir=runs/base --checkpoint=averaged < newstest2014.en > out.de
    python -m attention_jax.translate --workdir=runs/tiny --nbest=4 --alignment     # H-/A- lines, as fairseq
    python -m attention_jax.translate --workdir=runs/tiny --format=jsonl --nbest=2  # one JSON object a line
    python -m attention_jax.translate --workdir=runs/tiny --print_scores --input=news.en  # P- lines, a file

Lines are read as UTF-8 (undecodable bytes become U+FFFD, with a warning on stderr), translated in
length-sorted batches with beam search (Section 6.1: beam 4, alpha 0.6, at most input + 50 tokens),
and written in input order. Empty lines give empty lines. Every ``--buffer_size`` lines are
translated together and printed (stdout flushed) before more are read: by default each line as soon
as it is typed when stdin is a terminal, and blocks of ``16 * --batch_size`` lines otherwise.

``--nbest=N`` prints the N best hypotheses of beam search with their scores, ``--alignment`` a hard
alignment of each from the cross-attention of one decoder layer (the average of its heads; the last
layer unless ``--alignment_layer``), as ``source-target`` pairs of 0-based SentencePiece piece
positions, EOS excluded; either switches ``--format=text`` to fairseq-like tagged lines::

    H-<line>\t<normalized_score>\t<score>\t<translation>
    A-<line>\t<source-target pairs>

with ``<line>`` the input line's number from 0, ``score`` ``log P`` (natural log) and
``normalized_score`` ``score / lp(length)``, what beam search ranks by; an empty line prints none.
``--print_scores`` adds after each ``H-`` line a ``P-<line>\t<lp> <lp> ...`` line, the log-probability of
each token of the hypothesis (natural logs, EOS's last; they sum to ``score``), from one teacher-forced
pass over it (:mod:`attention_jax.decoding.alignment`); it too switches to tagged lines, and adds
``token_log_probs`` to ``--format=jsonl``'s objects. ``--input=FILE`` reads the lines from a file
instead of stdin (a missing file is refused in one line, exit 2, before the model loads).

Line by line (``--buffer_size=1``, or a terminal), each batch decodes to its source bucket's length
(8, 16, 32 tokens, ...), so one search per bucket serves every sentence length: the first line's bucket is
compiled when that line arrives, and once its answer is printed the other buckets of up to
``--warm_up_tokens`` tokens (32) are compiled in the background
(:mod:`attention_jax.decoding.background_warm_up`), so a later sentence of a new length compiles nothing;
with the persistent compilation cache that ``load_run`` turns on, a second process loads them instead, and
reads each search from a ``jax.export`` artifact under that cache's directory (the parameter shapes too)
instead of tracing it.
Only warnings are logged unless ``--verbosity`` asks for more (``--verbosity=0``: INFO, as the
training command logs).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, BinaryIO

from absl import app, flags, logging

from attention_jax.commands.text_io import _read_lines, blocks, buffer_size
from attention_jax.foundation.user_errors import UserInputError, exit_with_error

FORMATS = ("text", "jsonl")
DEFAULT_WARM_UP_TOKENS = 32
"""``--warm_up_tokens`` when translating line by line: source buckets 8, 16 and 32, most sentences' pieces."""

_WORKDIR = flags.DEFINE_string("workdir", None, "Training work directory.", required=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "latest",
                                  "'latest', 'averaged', 'best' (early stopping) or a step number.")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", 0, "Average the last N checkpoints instead (0: off).")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "Beam size (default: the config's, 4); 1 is greedy.")
_ALPHA = flags.DEFINE_float("alpha", None, "Length penalty alpha (default: the config's, 0.6).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "Sentences per decoding batch.")
_REAVERAGE = flags.DEFINE_bool("reaverage", False, "With --checkpoint=averaged: redo the average over "
                               "the newest checkpoints first (an average older than them is an error).")
_BUFFER_SIZE = flags.DEFINE_integer(
    "buffer_size", None, "Translate and print every N input lines (default: 1 when stdin is a terminal, "
    "else 16 * --batch_size); 1 prints each translation as soon as its line is read.")
_NBEST = flags.DEFINE_integer("nbest", None, "Print the N best hypotheses (1 to the beam size) with their "
                              "scores, as H-<line> lines in --format=text.")
_ALIGNMENT = flags.DEFINE_bool("alignment", False, "Print a hard alignment of each hypothesis (source-target "
                               "piece pairs, from a teacher-forced pass's cross-attention).")
_ALIGNMENT_LAYER = flags.DEFINE_integer("alignment_layer", -1, "With --alignment: the decoder layer whose "
                                        "cross-attention heads are averaged (-1: the last, -2: the penultimate).")
_PRINT_SCORES = flags.DEFINE_bool("print_scores", False, "Print each hypothesis's per-token log-probabilities "
                                  "(P-<line> lines after its H- line, as fairseq; natural logs).")
_INPUT = flags.DEFINE_string("input", None, "Read the sentences from this file (one per line) instead of stdin.")
_WARM_UP_TOKENS = flags.DEFINE_integer(
    "warm_up_tokens", None, "Keep one decode length per source bucket and, after the first answer, compile the "
    f"search for sources up to this many tokens in the background (default: {DEFAULT_WARM_UP_TOKENS} when "
    "translating line by line, i.e. --buffer_size=1 or a terminal; else 0: off).")
_FORMAT = flags.DEFINE_string("format", "text", "'text' (one translation a line; H-/A- lines with --nbest or "
                              "--alignment) or 'jsonl' (one JSON object a line).")

def _check_flags() -> None:
    """Refuse the flags that are wrong whatever the run (one line for the first mistake)."""
    if _FORMAT.value not in FORMATS:
        raise UserInputError(f"--format must be one of {', '.join(FORMATS)}; got {_FORMAT.value!r}.")
    if _BUFFER_SIZE.value is not None and _BUFFER_SIZE.value < 1:
        raise UserInputError(f"--buffer_size must be at least 1 line; got {_BUFFER_SIZE.value}.")
    if _NBEST.value is not None and _NBEST.value < 1:
        raise UserInputError(f"--nbest must be at least 1; got {_NBEST.value}.")
    if flags.FLAGS["alignment_layer"].present and not _ALIGNMENT.value:
        raise UserInputError("--alignment_layer chooses the layer of --alignment; add --alignment or drop it.")


def _check_run_flags(translator: Any) -> None:
    """Refuse ``--nbest`` and ``--alignment_layer`` values the loaded run cannot serve."""
    if _NBEST.value is not None and _NBEST.value > translator.beam_size:
        raise UserInputError(f"--nbest={_NBEST.value} is more than the beam size {translator.beam_size}: beam "
                             f"search keeps only {translator.beam_size} hypotheses; lower --nbest or raise "
                             f"--beam_size.")
    if _ALIGNMENT.value:
        from attention_jax.decoding import alignment

        try:
            alignment.check_layer(translator.model_config, _ALIGNMENT_LAYER.value)
        except ValueError as error:
            raise UserInputError(f"--alignment_layer={_ALIGNMENT_LAYER.value}: {error}") from None


def _translate_block(translator: Any, block: list[str], first_index: int) -> list[Any]:
    """Return the ``_LineResult`` of each line of ``block`` (numbered from ``first_index``), as the flags ask."""
    from attention_jax.commands.translation_output import _LineResult

    source_ids = translator.encode_sources(block)
    hypotheses = translator.translate_ids_nbest(source_ids, _NBEST.value or 1)
    if not _ALIGNMENT.value:
        return [_LineResult(first_index + offset, source, found)
                for offset, (source, found) in enumerate(zip(block, hypotheses))]
    from attention_jax.decoding import alignment  # Flax: only --alignment needs it.
    from attention_jax.evaluation.attention_maps import token_strings

    pairs = [(source_ids[offset], list(hypothesis.ids)) for offset, found in enumerate(hypotheses)
             for hypothesis in found]
    flat = iter(alignment.hard_alignments(translator.model_config, translator.params, [pair[0] for pair in pairs],
                                          [pair[1] for pair in pairs], layer=_ALIGNMENT_LAYER.value,
                                          batch_size=translator.batch_size))
    tokenizer = translator.tokenizer
    return [_LineResult(first_index + offset, source, found, [next(flat) for _ in found],
                       token_strings(tokenizer, source_ids[offset][:-1]),
                       [token_strings(tokenizer, list(hypothesis.ids[:-1])) for hypothesis in found])
            for offset, (source, found) in enumerate(zip(block, hypotheses))]


def _open_input() -> BinaryIO:
    """Return ``--input`` (or stdin) opened for bytes; an unreadable file is a one-line error."""
    if _INPUT.value is None:
        return sys.stdin.buffer
    if not os.path.isfile(_INPUT.value):
        what = "is a directory" if os.path.isdir(_INPUT.value) else "does not exist"
        raise UserInputError(f"--input={_INPUT.value} {what}: name a text file with one sentence per line "
                             f"(or leave --input out to read stdin).")
    try:
        return open(_INPUT.value, "rb")  # noqa: SIM115 (read to the end of the command).
    except OSError as error:
        raise UserInputError(f"--input={_INPUT.value} cannot be read: {error.strerror}.") from None


def _warm_up_tokens(lines_per_block: int) -> int:
    """Return ``--warm_up_tokens``, or its default: on when translating line by line."""
    if _WARM_UP_TOKENS.value is not None:
        return _WARM_UP_TOKENS.value
    return DEFAULT_WARM_UP_TOKENS if lines_per_block == 1 else 0


def _exported_searches() -> Any:
    """Return the ``ExportedSearches`` under the compilation cache directory, or ``None`` without a cache."""
    import jax

    from attention_jax.decoding import background_warm_up

    cache_dir = getattr(jax.config, "jax_compilation_cache_dir", None)
    return background_warm_up.ExportedSearches(cache_dir) if cache_dir else None


def _with_token_log_probs(translator: Any, results: list[Any]) -> list[Any]:
    """Return ``results`` with each hypothesis's per-token log-probabilities."""
    import dataclasses

    from attention_jax.decoding import alignment

    sources = [translator.encode_sources([result.source])[0] for result in results]
    pairs = [(source, list(hypothesis.ids)) for source, result in zip(sources, results)
             for hypothesis in result.hypotheses]
    flat = iter(alignment.token_log_probs(translator.model_config, translator.params, [pair[0] for pair in pairs],
                                          [pair[1] for pair in pairs], batch_size=translator.batch_size))
    return [dataclasses.replace(result, token_log_probs=[next(flat).tolist() for _ in result.hypotheses])
            for result in results]


def _write(results: list[Any], output: Any) -> None:
    """Print ``results`` in ``--format``'s layout and flush."""
    from attention_jax.commands import translation_output

    for result in results:
        if _FORMAT.value == "jsonl":
            lines = [translation_output._json_line(result, nbest=_NBEST.value is not None)]
        elif _NBEST.value is not None or _ALIGNMENT.value or _PRINT_SCORES.value:
            lines = translation_output._tagged_lines(result)
        else:
            lines = [translation_output._plain_line(result)]
        for line in lines:
            output.write(line.encode("utf-8") + b"\n")
    output.flush()


def main(argv: list[str]) -> None:
    """Translate stdin to stdout with the run in ``--workdir``.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not flags.FLAGS["verbosity"].present:  # Orbax's and JAX's INFO lines around each translation: off.
        logging.set_verbosity(logging.WARNING)
    try:
        _check_flags()  # Before JAX is imported: a mistyped flag is told at once.
        input_stream = _open_input()
    except UserInputError as error:
        exit_with_error("attention_jax.translate", str(error))
    interactive = input_stream is sys.stdin.buffer and sys.stdin.isatty()
    lines_per_block = buffer_size(_BUFFER_SIZE.value, _BATCH_SIZE.value, interactive)
    warm_up_tokens = _warm_up_tokens(lines_per_block)
    from attention_jax.decoding import background_warm_up  # Imported here so --help is fast.

    if warm_up_tokens > 0:  # While JAX and the run load: what the first line's exported search needs.
        background_warm_up.start_lapack()
    from attention_jax.decoding import inference

    try:
        if _REAVERAGE.value and _CHECKPOINT.value == "averaged":
            from attention_jax.checkpointing import params_checkpoints

            params_checkpoints.reaverage(_WORKDIR.value)
        if warm_up_tokens > 0:  # Line by line: the restored parameters kept, read without Orbax next time.
            run = background_warm_up.load_run(_WORKDIR.value, _CHECKPOINT.value, _AVERAGE_LAST.value)
        else:
            run = inference.load_run(_WORKDIR.value, _CHECKPOINT.value, average_last=_AVERAGE_LAST.value)
        translator = inference.make_translator(
            run, beam_size=_BEAM_SIZE.value, alpha=_ALPHA.value, batch_size=_BATCH_SIZE.value,
            exported_searches=_exported_searches() if warm_up_tokens > 0 else None)
        _check_run_flags(translator)
    except UserInputError as error:  # E.g. a run without its tokenizer.model: one line, exit 2.
        exit_with_error("attention_jax.translate", str(error))
    except (FileNotFoundError, ValueError) as error:
        exit_with_error("attention_jax.translate", str(error))
    logging.info("Translating with %s of %s (beam %d, alpha %.2f).", run.checkpoint, run.workdir,
                 translator.beam_size, translator.alpha)
    warm_up = None  # With fixed shapes only a source bucket not yet warm needs a new program.
    if warm_up_tokens > 0:
        warm_up = background_warm_up.BackgroundWarmUp(translator, translator.source_buckets(warm_up_tokens),
                                                      num_best=_NBEST.value or 1)
    first_index = 0
    try:
        for block in blocks(_read_lines(input_stream), lines_per_block):
            with warnings.catch_warnings(record=True) as caught:  # One log line each, not warning + source line.
                warnings.simplefilter("always")
                with warm_up.holding() if warm_up else contextlib.nullcontext():  # Not while a bucket warms.
                    results = _translate_block(translator, block, first_index)
                    if _PRINT_SCORES.value:
                        results = _with_token_log_probs(translator, results)
            for message in dict.fromkeys(str(warning.message) for warning in caught):
                logging.warning("%s", message)
            _write(results, sys.stdout.buffer)
            first_index += len(block)
            if warm_up:
                warm_up.start()  # After the first answer: the other buckets, while the next line is awaited.
    finally:
        if warm_up:
            warm_up.stop()


if __name__ == "__main__":
    app.run(main)
