"""CPU-only speed-ups of the model's hot paths, behind one switch: ``config.cpu_kernels``.

XLA's CPU code generation leaves time on the table in three places of a training step; each module
here computes what the plain Flax/JAX path computes, only sooner on a CPU. They run only where
``config.cpu_kernels`` is True (the default) *and* ``jax.default_backend() == "cpu"``; everywhere
else, and on any backend with ``--config.cpu_kernels=False``, the model is built from plain Flax/JAX
(``Dense`` / ``DenseGeneral`` with ``dot_general=None``, ``flax.linen.Dropout``, ``jnp.argmax``).
The models ask this module which to use (:func:`dense_dot_general`, :func:`dropout_class`,
:func:`cpu_kernels_enabled`), so the switch is honoured in one place.

The three speed-ups:

- :mod:`.projection`: the Dense layers' backward pass as two 2-D products, with ``x^T`` built from
  128-row blocks; outputs and gradients equal to float rounding (``tests/cpu_kernels/test_projection.py``).
- :mod:`.dropout`: Threefry dropout masks unrolled into one fusion; masks identical, losses equal to
  float rounding (``tests/cpu_kernels/test_dropout.py``).
- :mod:`.argmax`: the accuracy metric's lowest-index argmax in two levels of block maxima; the same
  index (``tests/models/test_metrics.py``).

"Losses equal to float rounding": :mod:`.dropout` draws exactly the bits and masks of
``flax.linen.Dropout``, but a jitted training step that uses it is a different compiled program, whose
float rounding differs. What each gains, and the command to time the step with and without them:
``docs/benchmarks.md``, "CPU kernels".
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
