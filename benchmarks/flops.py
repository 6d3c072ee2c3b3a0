"""Matmul FLOPs of one Transformer training step: the library's count (:mod:`attention_jax.models.flops`).

Shared by ``benchmarks/train_step.py`` (JAX) and ``benchmarks/peer_torch.py`` (PyTorch, another venv),
so both report model FLOPs utilization from the same count; ``attention_jax.models.flops`` imports no
framework, so the PyTorch venv can load it from the repository root.

Run on its own, it prints the count for one shape (default: the paper's base model, 8 x 32 tokens)::

    python benchmarks/flops.py --rows=8 --source_len=32 --target_len=32
    python benchmarks/flops.py --decoder_only --num_layers=12 --target_len=512
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from attention_jax.models.flops import decoder_only_train_flops, transformer_train_flops  # noqa: E402

__all__ = ["decoder_only_train_flops", "transformer_train_flops"]

BASE_SHAPE = dict(num_layers=6, d_model=512, d_ff=2048, num_heads=8, key_dim=64, value_dim=64, vocab_size=37000)


def define_flags() -> None:
    """The command's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    from absl import flags

    flags.DEFINE_integer("rows", 8, "Sentences (or documents) per batch.")
    flags.DEFINE_integer("source_len", 32, "Source tokens per row (encoder-decoder only).")
    flags.DEFINE_integer("target_len", 32, "Target tokens per row (the row length of a decoder-only model).")
    for name, value in BASE_SHAPE.items():
        flags.DEFINE_integer(name, value, f"Model shape (default: the paper's base model, {value}).")
    flags.DEFINE_bool("decoder_only", False, "Count a decoder-only language model instead of encoder-decoder.")
    flags.DEFINE_string("attention_function", "scaled_dot_product", "config.attention_function of the model.")


def main(argv: list[str]) -> None:
    """Print the shape and the matmul FLOPs of one training step (forward and backward) as JSON."""
    from absl import flags

    del argv
    options = flags.FLAGS
    shape = {name: options[name].value for name in BASE_SHAPE}
    if options.decoder_only:
        flops = decoder_only_train_flops(rows=options.rows, length=options.target_len,
                                         attention_function=options.attention_function, **shape)
    else:
        flops = transformer_train_flops(rows=options.rows, source_len=options.source_len,
                                        target_len=options.target_len,
                                        attention_function=options.attention_function, **shape)
    print(json.dumps({"shape": dict(shape, rows=options.rows, source_len=options.source_len,
                                    target_len=options.target_len, decoder_only=options.decoder_only,
                                    attention_function=options.attention_function),
                      "train_flops_per_step": flops, "forward_flops_per_step": flops / 3}))


if __name__ == "__main__":
    from benchmarks import command_line

    command_line.run(main, define_flags)
