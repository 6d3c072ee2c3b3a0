"""Continue text with a trained decoder-only language model, or measure its perplexity on a split.

Usage::

    python -m attention_jax.generate --workdir=runs/lm_tiny --prompt="Der Hund"
    python -m attention_jax.generate --workdir=runs/lm_tiny --num_samples=3 --top_p=0.9 --format=jsonl < prompts.txt
    python -m attention_jax.generate --workdir=runs/lm_tiny --eval_split=validation

Without ``--prompt`` the prompts are stdin's lines; sample k is drawn with seed ``--seed`` + k;
``--temperature=0`` is greedy. ``--eval_split`` writes ``WORKDIR/lm_eval_<split>.json`` (docs/language_models.md).
"""

from __future__ import annotations

import sys
from typing import Any

from absl import app, flags, logging

from attention_jax.foundation.user_errors import UserInputError, exit_with_error
from attention_jax.models.variants import ModelKind

_WORKDIR = flags.DEFINE_string("workdir", None, "Training work directory of a language model.", required=True)
_CHECKPOINT = flags.DEFINE_string("checkpoint", "latest", "'latest', 'best' or a step number.")
_PROMPT = flags.DEFINE_string("prompt", None, "Text to continue (default: one prompt per stdin line).")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "Sampling temperature; 0 is greedy decoding.")
_TOP_K = flags.DEFINE_integer("top_k", 0, "Sample among the k most likely tokens (0: all).")
_TOP_P = flags.DEFINE_float("top_p", 1.0, "Sample within the nucleus of this probability (1: all).")
_MAX_NEW_TOKENS = flags.DEFINE_integer("max_new_tokens", 50, "Tokens generated after the prompt at most.")
_SEED = flags.DEFINE_integer("seed", 0, "Sampling seed (32 bits) of the first sample; sample k uses seed + k.",
                             lower_bound=0, upper_bound=2**32 - 1)
_NUM_SAMPLES = flags.DEFINE_integer("num_samples", 1, "Continuations per prompt; sample k is drawn with --seed + k.",
                                    lower_bound=1)
_ECHO_PROMPT = flags.DEFINE_bool("echo_prompt", False, "Print each prompt before its continuation (text format).")
_FORMAT = flags.DEFINE_enum("format", "text", ["text", "jsonl"], "'text' (one sample a line) or 'jsonl' (one JSON "
                            "object a line: prompt, sample, seed, continuation).")
_EVAL_SPLIT = flags.DEFINE_string("eval_split", None,
                                  "Measure perplexity and bits per byte on this split instead of generating.")
_EVAL_STRIDE = flags.DEFINE_integer(
    "eval_stride", 0, "With --eval_split: how far each later window of a document longer than the model's rows "
    "moves on (1 to max_len; 0: half of max_len). Each token is scored once, seeing at least max_len - stride + 1 "
    "tokens of its document.")


def _evaluate(run: Any, split: str) -> None:
    """Print and write the perplexity and bits per byte of ``run`` (an ``inference.TrainedRun``) on ``split``."""
    from attention_jax.data import lm_data
    from attention_jax.evaluation import lm_evaluation
    from attention_jax.foundation import run_files

    lm_evaluation.resolve_stride(_EVAL_STRIDE.value, run.config.data.max_len)  # A bad stride before any data.
    result = lm_evaluation.evaluate_split(run.model_config, run.params, lm_data.get_datasets(run.data_config), split,
                                          stride=_EVAL_STRIDE.value)
    result["checkpoint"] = run.checkpoint
    path = run_files.lm_eval_report_path(run.workdir, split)
    print(f"perplexity = {result['perplexity']:.3f}  ({result['nll_per_token']:.4f} nats/token, "
          f"{result['tokens']} tokens)")
    print(f"bits per byte = {result['bits_per_byte']:.4f}  ({result['utf8_bytes']} UTF-8 bytes)")
    print(f"each document in its own context: windows of {result['window']} tokens, stride {result['stride']} "
          f"({result['documents_longer_than_window']} of {result['documents']} documents longer than a window)")
    sys.stdout.flush()  # The figures first: a run directory that cannot be written still shows them.
    try:
        run_files.write_json_atomically(path, result)
    except OSError as error:
        raise UserInputError(f"cannot write {path}: {error.strerror}. The figures above were not saved.") from None
    print(f"wrote {path}")


def main(argv: list[str]) -> None:
    """Generate from (or evaluate) the language model in ``--workdir``.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if not flags.FLAGS["verbosity"].present:  # Orbax's and JAX's INFO lines around the output: off.
        logging.set_verbosity(logging.WARNING)
    from attention_jax.commands import generation_output
    from attention_jax.commands.text_io import _read_lines
    from attention_jax.decoding import generation, inference  # Imported here so --help is fast.

    try:
        settings = generation.SamplingSettings(temperature=_TEMPERATURE.value, top_k=_TOP_K.value,
                                               top_p=_TOP_P.value, max_new_tokens=_MAX_NEW_TOKENS.value,
                                               seed=_SEED.value)
        run = inference.load_run(_WORKDIR.value, _CHECKPOINT.value, model_kind=ModelKind.DECODER_ONLY)
        if _EVAL_SPLIT.value:
            from attention_jax.foundation import run_files

            _evaluate(run, run_files.data_split(_EVAL_SPLIT.value))  # --eval_split=dev is validation.
            return
        generator = generation.Generator(run.model_config, run.params, run.tokenizer,
                                         max_length=run.config.data.max_len)
        prompts = [_PROMPT.value] if _PROMPT.value is not None else list(_read_lines(sys.stdin.buffer))
        if not prompts:
            raise ValueError("No prompt: pass --prompt=TEXT or give prompts on stdin, one per line.")
        lengths = [len(generator.encode_prompt(prompt)) for prompt in prompts]  # Each checked before any generation.
        warning = generation.length_warning(generator.max_length, lengths, settings.max_new_tokens)
        if warning:
            logging.warning("%s", warning)
        lines = generation_output._sample_lines(generator, prompts, settings, num_samples=_NUM_SAMPLES.value,
                                               echo_prompt=_ECHO_PROMPT.value, output_format=_FORMAT.value)
    except UserInputError as error:  # A bad flag, an empty split, a run without its tokenizer: exit 2.
        exit_with_error("attention_jax.generate", str(error))
    except (FileNotFoundError, ValueError) as error:
        exit_with_error("attention_jax.generate", str(error))
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    app.run(main)
