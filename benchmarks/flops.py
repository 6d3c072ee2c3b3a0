"""Matmul FLOPs of one Transformer training step: the library's count (:mod:`attention_jax.models.flops`).

Shared by ``benchmarks/train_step.py`` (JAX) and ``benchmarks/peer_torch.py`` (PyTorch, another venv),
so both report model FLOPs utilization from the same count; ``attention_jax.models.flops`` imports no
framework, so the PyTorch venv can load it from the repository root.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from attention_jax.models.flops import decoder_only_train_flops, transformer_train_flops  # noqa: E402

__all__ = ["decoder_only_train_flops", "transformer_train_flops"]
