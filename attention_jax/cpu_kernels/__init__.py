"""CPU-only speed-ups of the model's hot paths, behind one switch: ``config.cpu_kernels``.

XLA's CPU code generation leaves time on the table in three places of a training step; each module
here computes what the plain Flax/JAX path computes, only sooner on a CPU. They run only where
``config.cpu_kernels`` is True (the default) *and* ``jax.default_backend() == "cpu"``; everywhere
else, and on any backend with ``--config.cpu_kernels=False``, the model is built from plain Flax/JAX
(``Dense`` / ``DenseGeneral`` with ``dot_general=None``, ``flax.linen.Dropout``, ``jnp.argmax``).
The models ask this module which to use (:func:`dense_dot_general`, :func:`dropout_class`,
:func:`cpu_kernels_enabled`), so the switch is honoured in one place.

============================  =====================================================  ===============================
speed-up                      measured gain (2 CPU cores; command)                   same result as the plain path?
============================  =====================================================  ===============================
:mod:`.projection`: Dense     AMD EPYC, alternating ``benchmarks/train_step.py``     outputs and gradients equal to
layers' backward pass as two  runs, target tokens/s: 679 -> 746, 665 -> 714, 651 ->  float rounding
2-D products                  715 (base shape), 3,809 -> 4,350, 4,160 -> 4,456       (``tests/test_projection.py``)
                              (small shape)
:mod:`.projection`: ``x^T``   Sapphire Rapids, ``python benchmarks/transpose.py``:   the same values
built from 128-row blocks     ``[1,024, 2,048]`` 9.7 -> 2.9 ms; train step +3%
                              (base shape), +3-13% (small) in alternating
                              ``benchmarks/train_step.py`` runs
:mod:`.dropout`: Threefry     AMD EPYC, alternating ``benchmarks/train_step.py``     masks identical, losses equal
dropout masks unrolled into   runs: +7-9% at the base shape, +11-12% at the small    to float rounding
one fusion                    one                                                    (``tests/test_dropout.py``)
:mod:`.argmax`: the accuracy  1,024 x 32,000 float32 logits: 5.5 ms against          the same index
metric's lowest-index argmax  ``top_k``'s 32 (XLA's ``argmax``: 67); train step      (``tests/test_metrics.py``)
in two levels of block        +1-3% at the small shape, within noise at the base
maxima                        one (``benchmarks/peer_flax.py``'s profile notes)
============================  =====================================================  ===============================

"Masks identical, losses equal to float rounding": :mod:`.dropout` draws exactly the bits and masks of
``flax.linen.Dropout``, but a jitted training step that uses it is a different compiled program, whose
float rounding differs (measured on one model: a loss of 438.323669 against 438.323700). Histories of
these measurements: ``docs/benchmarks.md`` and the modules' docstrings. To time the whole step with
and without them on one machine::

    python benchmarks/train_step.py --config=configs/base.py --rows=16 --length=64
    python benchmarks/train_step.py --config=configs/base.py --rows=16 --length=64 --config.cpu_kernels=False
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
