r"""PyTorch's ``nn.Transformer`` train step at the same shapes as ``train_step.py``; prints one JSON object.

A peer to compare our JAX step with: float32, eager mode, CPU. Needs PyTorch, which the project does not
depend on; install it into a separate environment::

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 numpy absl-py

Run from the repository root, with the shapes of a ``train_step.py`` result::

    python benchmarks/train_step.py --config=configs/tiny.py --rows=64 --length=32 > /tmp/jax.json
    /tmp/torchenv/bin/python benchmarks/peer_torch.py --shape_json=/tmp/jax.json

or with explicit shapes (``--rows --length --num_layers --d_model --d_ff --num_heads --vocab_size``...;
``--help`` lists them, and works without PyTorch; a run without it is one line naming the install).

The model mirrors ours: shared input/output embedding scaled by sqrt(d_model), sinusoidal positions,
post-LN ``nn.Transformer`` (ReLU, dropout), padding and causal masks, label-smoothed cross-entropy
(``F.cross_entropy(label_smoothing=eps)``: the same q = (1 - eps) one-hot + eps / N), Adam(0.9, 0.98, 1e-9)
with the paper's schedule. Differences: ``nn.Transformer`` always adds a final LayerNorm to each stack,
and it ties d_k = d_v = d_model / h. Fields as in ``train_step.py``; the matmul peak is measured with
torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import sys
import time
from typing import Any

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flops import transformer_train_flops  # noqa: E402  (adds the repository root to the path)
from benchmarks import command_line  # noqa: E402  (absl and the error line only)

PAD_ID, EOS_ID, BOS_ID = 0, 3, 2
SHAPE_FIELDS = ("rows", "length", "num_layers", "d_model", "d_ff", "num_heads", "vocab_size")
INSTALL = ("python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.13.0 numpy absl-py, then "
           "run /tmp/torchenv/bin/python benchmarks/peer_torch.py")


@dataclasses.dataclass(frozen=True)
class PeerSettings:
    """The shape and the timing of one PyTorch run (defaults: ``configs/tiny.py`` at 64 x 32 tokens)."""

    rows: int = 64
    length: int = 32
    num_layers: int = 2
    d_model: int = 128
    d_ff: int = 512
    num_heads: int = 4
    vocab_size: int = 1000
    dropout_rate: float = 0.1
    label_smoothing: float = 0.1
    steps: int = 20
    warmup_steps: int = 3
    peak_size: int = 2048


SHAPE_DEFAULTS = {field.name: field.default for field in dataclasses.fields(PeerSettings)
                  if field.name in (*SHAPE_FIELDS, "dropout_rate", "label_smoothing")}


def import_torch() -> Any:
    """``torch``, or one line naming the install and exit status 2 when this Python has none."""
    try:
        import torch
    except ImportError:
        command_line.fail(f"PyTorch is not installed in {sys.executable}; install it apart from the project: "
                          f"{INSTALL}.")
    return torch


def peer_transformer(settings: PeerSettings) -> Any:
    """The peer model: embeddings + positions + ``nn.Transformer`` + tied output projection.

    Parameters
    ----------
    settings : PeerSettings
        Its shape and dropout rate.

    Returns
    -------
    torch.nn.Module
        ``model(inputs, targets)`` gives the logits of every target position.
    """
    torch = import_torch()
    from torch import nn
    from torch.nn import functional as F

    def sinusoids(length: int, d_model: int) -> torch.Tensor:
        position = torch.arange(length, dtype=torch.float32)[:, None]
        inverse = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
        table = torch.zeros(length, d_model)
        table[:, 0::2] = torch.sin(position * inverse)
        table[:, 1::2] = torch.cos(position * inverse)
        return table

    class PeerTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.d_model = settings.d_model
            self.embedding = nn.Embedding(settings.vocab_size, settings.d_model)
            nn.init.normal_(self.embedding.weight, std=settings.d_model**-0.5)
            self.transformer = nn.Transformer(
                d_model=settings.d_model, nhead=settings.num_heads, num_encoder_layers=settings.num_layers,
                num_decoder_layers=settings.num_layers, dim_feedforward=settings.d_ff,
                dropout=settings.dropout_rate, batch_first=True, norm_first=False)
            self.dropout = nn.Dropout(settings.dropout_rate)
            self.register_buffer("positions", sinusoids(4 * settings.length, settings.d_model), persistent=False)

        def _embed(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embedding(ids) * math.sqrt(self.d_model) + self.positions[: ids.shape[1]]
            return self.dropout(x)

        def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            decoder_inputs = torch.cat([torch.full_like(targets[:, :1], BOS_ID), targets[:, :-1]], dim=1)
            causal = nn.Transformer.generate_square_subsequent_mask(targets.shape[1])
            hidden = self.transformer(
                self._embed(inputs), self._embed(decoder_inputs), tgt_mask=causal, tgt_is_causal=True,
                src_key_padding_mask=inputs == PAD_ID, tgt_key_padding_mask=targets == PAD_ID,
                memory_key_padding_mask=inputs == PAD_ID)
            return F.linear(hidden, self.embedding.weight)  # Tied pre-softmax projection.

    return PeerTransformer()


def measure_matmul_peak(size: int, repeats: int = 10) -> float:
    """Best float32 ``size^3`` matmul rate, in FLOP/s."""
    torch = import_torch()
    left, right = torch.randn(size, size), torch.randn(size, size)
    left @ right
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        left @ right
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best


def benchmark(args: PeerSettings) -> dict[str, Any]:
    """Time ``args.steps`` train steps after ``args.warmup_steps``; returns the JSON fields.

    Parameters
    ----------
    args : PeerSettings
        The shape and the timing.

    Returns
    -------
    dict[str, Any]
        The fields of ``train_step.py``'s JSON, measured with PyTorch.
    """
    torch = import_torch()
    from torch.nn import functional as F

    torch.manual_seed(0)
    model = peer_transformer(args)
    warmup = 4000

    def paper_rate(step: int) -> float:  # LambdaLR passes the 0-based update count.
        step += 1
        return args.d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, paper_rate)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randint(4, args.vocab_size, (args.rows, args.length), generator=generator)
    targets = torch.randint(4, args.vocab_size, (args.rows, args.length), generator=generator)
    inputs[:, -1] = targets[:, -1] = EOS_ID

    def step() -> float:
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs, targets)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab_size), targets.reshape(-1),
                               ignore_index=PAD_ID, label_smoothing=args.label_smoothing)
        loss.backward()
        optimizer.step()
        schedule.step()
        return float(loss.detach())

    model.train()
    for _ in range(1 + args.warmup_steps):
        loss = step()
    step_times = []
    for _ in range(args.steps):  # As train_step.py: each step timed, the median reported.
        start = time.perf_counter()
        loss = step()
        step_times.append(time.perf_counter() - start)
    step_time = statistics.median(step_times)
    head_dim = args.d_model // args.num_heads
    flops = transformer_train_flops(rows=args.rows, source_len=args.length, target_len=args.length,
                                    num_layers=args.num_layers, d_model=args.d_model, d_ff=args.d_ff,
                                    num_heads=args.num_heads, key_dim=head_dim, value_dim=head_dim,
                                    vocab_size=args.vocab_size)
    peak = measure_matmul_peak(args.peak_size)
    shape = {name: getattr(args, name) for name in SHAPE_FIELDS}
    shape.update(key_dim=head_dim, value_dim=head_dim, dropout_rate=args.dropout_rate,
                 label_smoothing=args.label_smoothing)
    return {
        "framework": f"torch {torch.__version__} (eager)",
        "device": f"cpu, {torch.get_num_threads()} threads",
        "dtype": "float32",
        "shape": shape,
        "params": sum(p.numel() for p in model.parameters()),
        "step_time_s": step_time,
        "step_time_mean_s": statistics.fmean(step_times),
        "step_times_s": [round(value, 5) for value in step_times],
        "target_tokens_per_s": args.rows * args.length / step_time,
        "model_flops_per_step": flops,
        "achieved_gflops_per_s": flops / step_time / 1e9,
        "peak_matmul_gflops_per_s": peak / 1e9,
        "mfu": flops / step_time / peak,
        "loss": loss,
    }


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("shape_json", "", "A train_step.py JSON result: the shape is read from its 'shape'.")
    for name, value in SHAPE_DEFAULTS.items():
        kind = flags.DEFINE_float if isinstance(value, float) else flags.DEFINE_integer
        kind(name, None, f"Model or batch shape; default {value}, or the value in --shape_json (this flag wins).")
    flags.DEFINE_integer("steps", PeerSettings.steps, "Timed train steps (the median is reported).")
    flags.DEFINE_integer("warmup_steps", PeerSettings.warmup_steps, "Untimed steps after the first.")
    flags.DEFINE_integer("peak_size", PeerSettings.peak_size, "Matmul size of the peak measurement.")


def settings_from_flags(values: flags.FlagValues) -> PeerSettings:
    """The run's settings: explicit flags, else ``--shape_json``'s shape, else :class:`PeerSettings`' defaults.

    Parameters
    ----------
    values : absl.flags.FlagValues
        The parsed flags of :func:`define_flags`.

    Returns
    -------
    PeerSettings
        Ready for :func:`benchmark`.

    Notes
    -----
    Raises ``ValueError`` when the JAX shape cannot be built by ``nn.Transformer`` (it needs
    ``key_dim * num_heads == d_model``).
    """
    shape = dict(SHAPE_DEFAULTS)
    if values.shape_json:
        with open(values.shape_json, encoding="utf-8") as file:
            given = json.loads(file.read().strip().splitlines()[-1])["shape"]
        if given.get("key_dim", 0) * given.get("num_heads", 0) != given.get("d_model"):
            raise ValueError("nn.Transformer needs d_k = d_v = d_model / num_heads; the JAX shape has "
                             f"key_dim={given.get('key_dim')}, num_heads={given.get('num_heads')}.")
        shape.update({key: given[key] for key in shape if key in given})
    shape.update({key: values[key].value for key in shape if values[key].value is not None})
    return PeerSettings(**shape, steps=values.steps, warmup_steps=values.warmup_steps, peak_size=values.peak_size)


def main(argv: list[str]) -> None:
    """Print :func:`benchmark` of the flags' settings as one JSON line."""
    del argv
    try:
        settings = settings_from_flags(flags.FLAGS)
    except (OSError, ValueError, KeyError) as error:
        command_line.fail(f"--shape_json={flags.FLAGS.shape_json}: {error}")
    import_torch()
    print(json.dumps(benchmark(settings)))


if __name__ == "__main__":
    command_line.run(main, define_flags, checks_config_file=False)
