"""``evaluate --hypotheses=FILE --reference=FILE``: score translations made already as ``sacrebleu`` does, no model."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from attention_jax.foundation.user_errors import UserInputError, exit_with_error

MODEL_FLAGS = ("workdir", "split", "source", "checkpoint", "average_last", "num_examples", "beam_size", "alpha",
               "batch_size", "reaverage")
"""``evaluate`` flags that choose a model or how it decodes: meaningless when the translations are given."""


def _check_no_model_flags(present: Sequence[str]) -> None:
    """Refuse, in one line, model or decoding flags given with ``--hypotheses``, which scores a file as it is."""
    if present:
        given = ", ".join(f"--{name}" for name in present)
        raise UserInputError(f"--hypotheses scores translations that already exist, with no model: leave out "
                             f"{given}, or leave out --hypotheses to translate --source with a run's model.")


def _score_file(hypotheses_file: str, reference_file: str, bleu_tokenizer: str) -> dict[str, Any]:
    """Read the two files and score the hypotheses: the report :func:`run` prints and writes."""
    from attention_jax.commands import text_io
    from attention_jax.evaluation import sacrebleu_scores

    sacrebleu_scores.check_bleu_tokenizer(bleu_tokenizer)
    pairs = text_io._read_parallel_text(hypotheses_file, reference_file, source_flag="--hypotheses")
    hypotheses = [hypothesis for hypothesis, _ in pairs]
    references = [reference for _, reference in pairs]
    scores = sacrebleu_scores.corpus_scores(hypotheses, references, bleu_tokenizer=bleu_tokenizer)
    return {"hypotheses_file": os.path.abspath(hypotheses_file), "reference_file": os.path.abspath(reference_file),
            "num_sentences": len(pairs), "bleu_tokenizer": bleu_tokenizer, **vars(scores)}


def run(program: str, hypotheses_file: str, reference_file: str, bleu_tokenizer: str, output: str | None,
        model_flags_given: Sequence[str]) -> None:
    """Score ``hypotheses_file`` against ``reference_file``, print the figures, then write ``output``.

    Parameters
    ----------
    program : str
        The command's name for error lines.
    hypotheses_file, reference_file : str
        ``--hypotheses`` and ``--reference``.
    bleu_tokenizer : str
        ``--tokenize``.
    output : str, optional
        ``--output``, a JSON file; ``None`` prints only.
    model_flags_given : Sequence[str]
        The :data:`MODEL_FLAGS` on the command line (refused).
    """
    from attention_jax.foundation import run_files

    try:
        if not reference_file:
            raise UserInputError("--hypotheses needs --reference: the reference translations, one per line.")
        _check_no_model_flags(model_flags_given)
        report = _score_file(hypotheses_file, reference_file, bleu_tokenizer)
    except UserInputError as error:
        exit_with_error(program, str(error))
    print(f"scored {report['num_sentences']} lines of {hypotheses_file} against {reference_file}")
    print(f"BLEU = {report['bleu']:.2f}  ({report['bleu_signature']})")
    print(f"chrF2 = {report['chrf']:.2f}  ({report['chrf_signature']})")
    print(f"TER = {report['ter']:.2f}  ({report['ter_signature']})")
    sys.stdout.flush()
    if output:
        try:
            run_files.write_json_atomically(output, report)
        except OSError as error:
            exit_with_error(program, f"cannot write --output={output}: {error.strerror}. The figures above were "
                            f"not saved; name a file in a writable directory.")
        print(f"wrote {output}")
