"""FLOPs counted independently of attention_jax.models.flops: from a model's parameters, and by XLA."""

from __future__ import annotations

import math
from typing import Callable

import flax.linen as nn
import jax


def kernel_scalars(params: dict, prefix: str) -> int:
    """Scalars of the matmul kernels (attention projections and FFN) of the layers named ``prefix*``."""
    total = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(nn.meta.unbox(params))[0]:
        keys = jax.tree_util.keystr(path)
        if keys.startswith(f"['{prefix}") and "kernel" in keys:
            total += math.prod(leaf.shape)
    return total


def xla_flops(function: Callable[..., jax.Array], *arguments: jax.Array) -> float:
    """XLA's FLOP count of the compiled ``function`` (``Compiled.cost_analysis``; a list in older JAX)."""
    cost = jax.jit(function).lower(*arguments).compile().cost_analysis()
    return float((cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"])
