"""CPU-only speed-ups of the model's hot paths, behind one switch: ``config.cpu_kernels``.

Each module computes what the plain Flax/JAX path computes, only sooner on a CPU: :mod:`.projection`
(Dense backward passes as 2-D products), :mod:`.dropout` (Threefry masks in one fusion, bit-identical)
and :mod:`.argmax` (the lowest-index argmax by block maxima). They run only where ``config.cpu_kernels``
is True and the backend is the CPU; the models ask :func:`dense_dot_general`, :func:`dropout_class` and
:func:`cpu_kernels_enabled`. Gains: docs/benchmarks.md, "CPU kernels".
"""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax

from attention_jax.cpu_kernels import argmax, dropout, projection

__all__ = ["argmax", "dropout", "projection", "cpu_kernels_enabled", "dense_dot_general", "dropout_class"]


def cpu_kernels_enabled(cpu_kernels: bool) -> bool:
    """Whether the CPU kernels run: the switch is on and JAX's default backend is the CPU.

    Parameters
    ----------
    cpu_kernels : bool
        ``config.cpu_kernels`` (``TransformerConfig.cpu_kernels``).

    Returns
    -------
    bool
        ``cpu_kernels and jax.default_backend() == "cpu"``.

    Notes
    -----
    Read when a model is traced, so a program compiled for one backend keeps its choice.
    """
    return bool(cpu_kernels) and jax.default_backend() == "cpu"


def dense_dot_general(cpu_kernels: bool) -> Callable[..., jax.Array] | None:
    """The ``dot_general`` argument of the model's ``Dense`` and ``DenseGeneral`` layers.

    Parameters
    ----------
    cpu_kernels : bool
        ``config.cpu_kernels``.

    Returns
    -------
    callable or None
        :func:`projection.dot_general` where :func:`cpu_kernels_enabled`, else ``None`` (Flax's own
        ``jax.lax.dot_general``).
    """
    return projection.dot_general if cpu_kernels_enabled(cpu_kernels) else None


def dropout_class(cpu_kernels: bool) -> type[nn.Dropout]:
    """The dropout module class of the model's sublayers, embeddings and attention weights.

    Parameters
    ----------
    cpu_kernels : bool
        ``config.cpu_kernels``.

    Returns
    -------
    type
        :class:`dropout.Dropout` where :func:`cpu_kernels_enabled`, else ``flax.linen.Dropout``.

    Notes
    -----
    Both are named ``Dropout``, so Flax auto-names their instances alike and ``make_rng`` hands each
    the same key: the masks are the same either way.
    """
    return dropout.Dropout if cpu_kernels_enabled(cpu_kernels) else nn.Dropout
