"""The attention functions (Section 3.2.1), one registry: name -> how a head attends and what that supports.

Imports no framework (``models/flops.py`` reads it); the JAX code is in
:mod:`attention_jax.models.attention_functions`. Shapes: B batch, T queries, S keys, H heads, K d_k, V d_v.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

from attention_jax.foundation.registry import Registration, Registry
from attention_jax.models.registry import jax_hook


class AttentionImplementation(enum.StrEnum):
    """How dot-product attention is computed: ``einsum`` (ours, everything) or ``jax.nn.dot_product_attention``.

    ``cudnn`` runs only on an NVIDIA GPU; ``fused`` is cuDNN on a GPU in half precision, else XLA.
    """

    EINSUM = "einsum"
    XLA = "xla"
    CUDNN = "cudnn"
    FUSED = "fused"


ATTENTION_IMPLEMENTATIONS = tuple(member.value for member in AttentionImplementation)
"""Allowed values of ``config.attention_implementation``."""

GPU_ONLY_IMPLEMENTATIONS = (AttentionImplementation.CUDNN,)
"""Implementations that run only on an NVIDIA GPU; training refuses them elsewhere."""

LINEAR_CHUNK_SIZE = 64
"""Positions per chunk of causal linear attention (``attention_functions.linear_attention``)."""

FlopCount = Callable[..., float]
"""``flops(*, query_len, key_len, key_dim, value_dim, causal, chunk_size)``: a head's forward FLOPs."""


@dataclasses.dataclass(frozen=True)
class AttentionFunction:
    """One attention function: its name, its computation and what it supports (docs/extending.md).

    It runs the dot-product paths (after ``query_transform(q)``), or gives ``score(module, q, k)`` (float32
    ``[B, H, T, S]``; the shared softmax does the rest) or ``attend(module, q, k, v, mask, *, decode)`` (heads
    ``[B, T, H, V]`` from keys with ``B / R`` rows). The ``supports_*`` flags say which settings it takes.
    """

    name: str
    summary: str
    flops: FlopCount
    supports_weights: bool = True
    supports_decode_cache: bool = True
    supports_packing: bool = True
    supports_window: bool = True
    supports_attention_dropout: bool = True
    implementations: tuple[str, ...] = (AttentionImplementation.EINSUM.value,)
    structured_masks: bool = False
    query_transform: Callable[[Any], Any] | None = None
    score: Callable[..., Any] | None = None
    attend: Callable[..., Any] | None = None
    settings: type | None = None

    def __post_init__(self) -> None:
        if self.score is not None and self.attend is not None:
            raise ValueError(f"attention function {self.name!r}: give score or attend, not both.")
        if self.query_transform is not None and not self.uses_dot_product_paths:
            raise ValueError(f"attention function {self.name!r}: query_transform is for the dot-product paths "
                             "(no score, no attend).")
        unknown = set(self.implementations) - set(ATTENTION_IMPLEMENTATIONS)
        if unknown or not self.implementations:
            raise ValueError(f"attention function {self.name!r}: implementations must be a non-empty subset of "
                             f"{ATTENTION_IMPLEMENTATIONS}; got {self.implementations}.")
        if not self.uses_dot_product_paths and tuple(self.implementations) != (AttentionImplementation.EINSUM,):
            raise ValueError(f"attention function {self.name!r}: score and attend functions run on the einsum "
                             f"path only (implementations=('einsum',)); got {self.implementations}.")
        if self.structured_masks and self.attend is None:
            raise ValueError(f"attention function {self.name!r}: structured_masks needs an attend function.")

    @property
    def uses_dot_product_paths(self) -> bool:
        """Whether the function runs the scaled dot-product paths (no ``score``, no ``attend``).

        Returns
        -------
        bool
            True for dot-product entries.
        """
        return self.score is None and self.attend is None


# --- FLOP counts of the built-in functions (models/flops.py's convention) -----------------------------

def dot_product_flops(*, query_len: int, key_len: int, key_dim: int, value_dim: int, causal: bool = False,
                      chunk_size: int = LINEAR_CHUNK_SIZE) -> float:
    """Return ``2 T S (K + V)``: ``q k^T`` and the weighted values over all pairs, per head.

    Parameters
    ----------
    query_len, key_len, key_dim, value_dim : int
        ``T``, ``S``, ``K``, ``V``.
    causal : bool
        Not used: every pair is scored, then masked.
    chunk_size : int
        Not used.

    Returns
    -------
    float
        FLOPs of one head.
    """
    return float(2 * query_len * key_len * (key_dim + value_dim))


def _additive_flops(*, query_len: int, key_len: int, key_dim: int, value_dim: int, causal: bool = False,
                   chunk_size: int = LINEAR_CHUNK_SIZE) -> float:
    """Return ``3 T S K + 2 T S V`` per head (tanh not counted)."""
    pairs = query_len * key_len
    return float(3 * pairs * key_dim + 2 * pairs * value_dim)


def _linear_flops(*, query_len: int, key_len: int, key_dim: int, value_dim: int, causal: bool = False,
                 chunk_size: int = LINEAR_CHUNK_SIZE) -> float:
    """Return linear attention's FLOPs per head, as ``attention_functions.linear_attention`` computes them.

    Causal, with ``C' = min(C, T)`` and padded length ``P``: ``P C' (2K + 2V + 1)`` within chunks,
    ``2PKV + 3PK`` chunk sums, ``(P / C') K (V + 1)`` carries, ``2PKV + PV + 2PK + P`` reads; a single chunk
    carries and sums nothing (XLA drops them).
    """
    if not causal:
        return float(2 * key_dim * value_dim * (key_len + query_len) + key_dim * (key_len + 2 * query_len))
    chunk = min(chunk_size, query_len)
    num_chunks = -(-query_len // chunk)
    padded = num_chunks * chunk  # P
    within_chunks = padded * chunk * (2 * key_dim + 2 * value_dim + 1)
    chunk_sums = 2 * padded * key_dim * value_dim + padded * key_dim + 2 * padded * key_dim
    carried = num_chunks * key_dim * (value_dim + 1)
    if num_chunks == 1:  # Nothing enters the only chunk: its sums are dead code, dropped by XLA.
        chunk_sums = carried = 0
    read = 2 * padded * key_dim * value_dim + padded * value_dim + 2 * padded * key_dim + padded
    return float(within_chunks + chunk_sums + carried + read)


ATTENTION_FUNCTIONS: Registry[AttentionFunction] = Registry("attention_function", (
    AttentionFunction(
        name="scaled_dot_product", summary="softmax(q k^T / sqrt(d_k)) v, the paper's Equation (1)",
        flops=dot_product_flops, implementations=ATTENTION_IMPLEMENTATIONS),
    AttentionFunction(
        name="dot_product", summary="softmax(q k^T) v, footnote 4's unscaled dot products",
        flops=dot_product_flops, implementations=ATTENTION_IMPLEMENTATIONS,
        query_transform=jax_hook("attention_functions", "unscaled_query")),
    AttentionFunction(
        name="additive", summary="softmax(w_h^T tanh(q + k)) v (Bahdanau et al., 2015)",
        flops=_additive_flops, score=jax_hook("attention_functions", "_additive_module_scores")),
    AttentionFunction(
        name="linear", summary="phi(q) (sum_s phi(k_s) v_s^T) / (phi(q) sum_s phi(k_s)), phi = elu + 1 "
                               "(Katharopoulos et al., 2020), without scoring query-key pairs",
        flops=_linear_flops, supports_weights=False, supports_window=False, supports_attention_dropout=False,
        structured_masks=True, attend=jax_hook("attention_functions", "_linear_module_attention")),
))
"""Every attention function by name (:func:`register_attention_function` adds to it)."""


def attention_function(name: str) -> AttentionFunction:
    """Return the registry entry of ``name``.

    Parameters
    ----------
    name : str
        ``config.attention_function``.

    Returns
    -------
    AttentionFunction
        Its entry.

    Raises
    ------
    ValueError
        Unknown name (one line, with a did-you-mean).
    """
    return ATTENTION_FUNCTIONS.lookup(name)


def check_attention_function(function: str, *, implementation: str = "einsum", window: int = 0,
                             attention_dropout_rate: float = 0.0) -> None:
    """Check that the function exists and supports the given settings.

    Parameters
    ----------
    function, implementation : str
        ``config.attention_function`` and ``config.attention_implementation``.
    window : int
        ``config.attention_window``.
    attention_dropout_rate : float
        ``config.attention_dropout_rate``.

    Raises
    ------
    ValueError
        Unknown function or unsupported setting (one line).
    """
    entry = attention_function(function)
    if implementation not in entry.implementations:
        allowed = (f"attention_implementation={entry.implementations[0]!r}" if len(entry.implementations) == 1
                   else f"attention_implementation in {entry.implementations}")
        raise ValueError(f"attention_function={function!r} needs {allowed} (the xla, cudnn and fused kernels "
                         f"compute softmax(q k^T) only); got {implementation!r}.")
    if window > 0 and not entry.supports_window:
        raise ValueError(f"attention_function={function!r} has no restricted window: set attention_window=0; "
                         f"got {window}.")
    if attention_dropout_rate > 0 and not entry.supports_attention_dropout:
        reason = "forms no attention weights to drop out" if not entry.supports_weights else "takes no dropout"
        raise ValueError(f"attention_function={function!r} {reason}: set attention_dropout_rate=0; got "
                         f"{attention_dropout_rate}.")


def require_weights(function: str) -> None:
    """Check that ``function`` forms attention weights (for attention maps).

    Parameters
    ----------
    function : str
        ``config.attention_function``.

    Raises
    ------
    ValueError
        A function without weights.
    """
    entry = attention_function(function)
    if not entry.supports_weights:
        raise ValueError(f"attention_function={function!r} forms no normalised attention weight matrix (it "
                         f"computes {entry.summary}), so there are no attention weights or maps to show; use "
                         "a softmax attention function.")


def register_attention_function(entry: AttentionFunction) -> Registration:
    """Add ``entry`` to :data:`ATTENTION_FUNCTIONS` (before tracing: jit keeps the old definition).

    Parameters
    ----------
    entry : AttentionFunction
        A new, unregistered name.

    Returns
    -------
    Registration
        ``.undo()`` removes it; usable as a context manager.
    """
    return ATTENTION_FUNCTIONS.register(entry)
