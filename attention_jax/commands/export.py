r"""Export a trained run: its parameters as safetensors, or its forward pass or translate function as jax.export.

Usage::

    python -m attention_jax.export --workdir=runs/tiny --format=safetensors --out=tiny.safetensors
    python -m attention_jax.export --workdir=runs/tiny --format=jax_export --function=logits \
        --batch_size=8 --source_len=32 --target_len=32 --out=tiny_logits.jax_export
    python -m attention_jax.export --workdir=runs/tiny --format=directory --out=tiny_export

``load_run(OUT)`` and ``translate --workdir=OUT`` open a directory export. Prints one JSON line; mistakes
are one line, exit 2, before anything is written (docs/python_api.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any

from absl import app, flags, logging

from attention_jax.commands import output_files
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError, exit_with_error

FORMATS = ("safetensors", "jax_export", "directory")

_WORKDIR = flags.DEFINE_string("workdir", None, "Training work directory.")
_OUT = flags.DEFINE_string("out", None, "The file to write (--format=directory: the directory).")
_FORMAT = flags.DEFINE_string("format", "safetensors", f"One of {', '.join(FORMATS)}.")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "latest",
                                  "'latest', 'averaged', 'best' (early stopping) or a step number.")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", 0, "Export the average of the last N checkpoints (0: off).")
_FUNCTION = flags.DEFINE_string("function", "logits", "jax_export: 'logits' (teacher-forced forward pass) or "
                                "'translate' (beam search).")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 8, "jax_export: the batch's rows B.")
_SOURCE_LEN = flags.DEFINE_integer("source_len", 0, "jax_export: the source length S (0: the longest the model "
                                   "takes; for translate, max_len - max_decode_extra_len).")
_TARGET_LEN = flags.DEFINE_integer("target_len", 0, "jax_export, logits: the target length T (0: max_len).")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "jax_export, translate: beam size (default: the config's); "
                                  "1 is greedy.")
_ALPHA = flags.DEFINE_float("alpha", None, "jax_export, translate: length penalty alpha (default: the config's).")
_PLATFORMS = flags.DEFINE_list("platforms", [], "jax_export: lower for these, e.g. cpu,cuda (default: JAX's "
                               "default backend).")


def _check_flags() -> tuple[str, str]:
    """Check the flags that need no run (one line for the first mistake); return ``--workdir`` and ``--out``."""
    if not _WORKDIR.value:
        raise UserInputError("--workdir is required: the training run to export.")
    if not _OUT.value:
        raise UserInputError("--out is required: the file to write.")
    if _FORMAT.value == "directory":  # New, empty or an earlier export: checked by the directory export itself.
        output_files._refuse_run_files(_OUT.value, "--out", (_WORKDIR.value,))
    else:
        output_files._check_output_file(_OUT.value, "--out", (_WORKDIR.value,))  # Never over the run's own files.
    if _FORMAT.value not in FORMATS:
        raise UserInputError(f"--format must be one of {', '.join(FORMATS)}; got {_FORMAT.value!r}.")
    if _AVERAGE_LAST.value < 0:
        raise UserInputError(f"--average_last must be 0 or a positive number of checkpoints; "
                             f"got {_AVERAGE_LAST.value}.")
    return _WORKDIR.value, _OUT.value


def _export(workdir: str, out: str, file_format: str, *, checkpoint: str = "latest", average_last: int = 0,
            function: str = "logits", batch_size: int = 8, source_len: int = 0, target_len: int = 0,
            beam_size: int | None = None, alpha: float | None = None,
            platforms: list[str] | None = None) -> dict[str, Any]:
    """Write a run's parameters (``safetensors``) or one of its functions (``jax_export``) to ``out``, checked first.

    The arguments are the flags' (a length of 0: the longest the model takes); returns the record it prints.
    """
    from attention_jax.checkpointing import safetensors_params
    from attention_jax.decoding import exported_functions, inference  # Imported here so --help is fast.

    if file_format == "directory":
        inference.check_export_target(out)
    run = inference.load_run(workdir, checkpoint, average_last=average_last)
    record: dict[str, Any] = {"out": out, "format": file_format, "checkpoint": run.checkpoint}
    if file_format == "directory":
        record.update(_export_directory(run, out, checkpoint, average_last))
    elif file_format == "safetensors":
        metadata = safetensors_params.run_metadata(run.config, workdir=workdir, checkpoint=run.checkpoint)
        safetensors_params.save_safetensors(out, run.params, metadata)
        record["tensors"] = len(safetensors_params.tensor_names(run.params))
    else:
        options = (("beam_size", beam_size), ("length_penalty_alpha", alpha))
        changes: dict[str, Any] = {name: value for name, value in options if value is not None}
        try:
            settings = dataclasses.replace(run.config.decoding, **changes)
        except ValueError as error:
            raise UserInputError(f"--beam_size: {error}") from None
        model_config = run.model_config
        longest = model_config.max_len - (settings.max_decode_extra_len if function == "translate" else 0)
        exported = exported_functions.export_function(
            model_config, run.params, function, batch_size=batch_size, source_len=source_len or longest,
            target_len=target_len or model_config.max_len, settings=settings, platforms=platforms or None)
        exported_functions.save_exported(out, exported)
        record.update(function=function, input_shapes=[list(aval.shape) for aval in exported.in_avals],
                      platforms=list(exported.platforms))
    record["bytes"] = os.path.getsize(out if file_format != "directory" else
                                      os.path.join(out, run_files.EXPORT_PARAMS_FILE))
    return record


def _export_directory(run: Any, out: str, checkpoint: str, average_last: int) -> dict[str, Any]:
    """Write ``run``'s weights, config and tokenizer into the directory ``out``; the step when known."""
    from attention_jax.commands import evaluation_scalars
    from attention_jax.decoding import inference

    try:
        step: int | None = evaluation_scalars._checkpoint_step(run.workdir, checkpoint, average_last)
    except (OSError, ValueError, IndexError):  # An export of an export, or a checkpoint rotated away.
        step = None
    return inference.export_run(run, out, step=step)


def main(argv: list[str]) -> None:
    """Export ``--workdir`` to ``--out`` and print what was written as JSON.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not flags.FLAGS["verbosity"].present:  # Orbax's INFO lines while restoring: off.
        logging.set_verbosity(logging.WARNING)
    try:
        workdir, out = _check_flags()
        note = output_files._replacement_note(out, "--out")
        record = _export(workdir, out, _FORMAT.value, checkpoint=_CHECKPOINT.value,
                         average_last=_AVERAGE_LAST.value, function=_FUNCTION.value, batch_size=_BATCH_SIZE.value,
                         source_len=_SOURCE_LEN.value, target_len=_TARGET_LEN.value, beam_size=_BEAM_SIZE.value,
                         alpha=_ALPHA.value, platforms=_PLATFORMS.value)
    except (FileNotFoundError, ValueError) as error:  # UserInputError is a ValueError.
        exit_with_error("attention_jax.export", str(error))
    except OSError as error:  # A full disk, a directory made read-only: the temporary file is already gone.
        message = output_files._write_error_message(error, _OUT.value or "", "--out")
        if message is None:
            raise
        exit_with_error("attention_jax.export", message)
    if note:
        print(note, file=sys.stderr)
    print(json.dumps(record))


if __name__ == "__main__":
    app.run(main)
