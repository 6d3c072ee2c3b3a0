"""CPU-only speed-ups of the model's hot paths, equal to the plain JAX path, behind ``config.cpu_kernels``."""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax

from attention_jax.cpu_kernels import argmax, dropout, projection

__all__ = ["argmax", "dropout", "projection", "cpu_kernels_enabled", "dense_dot_general", "dropout_class"]


def cpu_kernels_enabled(cpu_kernels: bool) -> bool:
    """Return whether the CPU kernels run: the switch is on and the default backend is the CPU (read at trace time).

    Parameters
    ----------
    cpu_kernels : bool
        ``config.cpu_kernels``.

    Returns
    -------
    bool
        Whether to use them.
    """
    return bool(cpu_kernels) and jax.default_backend() == "cpu"


def dense_dot_general(cpu_kernels: bool) -> Callable[..., jax.Array] | None:
    """Return the ``dot_general`` of the model's Dense layers: :func:`projection.dot_general` or ``None`` (Flax's).

    Parameters
    ----------
    cpu_kernels : bool
        ``config.cpu_kernels``.

    Returns
    -------
    callable or None
        The product.
    """
    return projection.dot_general if cpu_kernels_enabled(cpu_kernels) else None


def dropout_class(cpu_kernels: bool) -> type[nn.Dropout]:
    """Return :class:`dropout.Dropout` or ``flax.linen.Dropout``: same name, so same auto-names, keys and masks.

    Parameters
    ----------
    cpu_kernels : bool
        ``config.cpu_kernels``.

    Returns
    -------
    type
        The class.
    """
    return dropout.Dropout if cpu_kernels_enabled(cpu_kernels) else nn.Dropout
