"""The products of Dense layers, with a backward pass of plain 2-D matrix products.

JAX differentiates a Dense layer's multi-axis ``dot_general`` into more multi-axis ones, which XLA's CPU
backend runs slowly. :func:`dot_general` computes the same product through :func:`contract_trailing`,
whose backward pass is ``dx = g K^T`` and ``dK = x^T g`` over ``M = B * L`` rows; gradients equal
autodiff's up to float rounding.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array


def _as_matrices(x: Array, kernel: Array, num_contracted: int) -> tuple[Array, Array]:
    """``x`` as ``[M, C]`` and ``kernel`` as ``[C, N]``, ``C`` the product of the contracted sizes."""
    contracted = math.prod(kernel.shape[:num_contracted])
    return x.reshape(-1, contracted), kernel.reshape(contracted, -1)


TRANSPOSE_BLOCK_ROWS = 128
"""Rows per block of :func:`transpose_in_row_blocks`: each column of a block spans 128 cache lines."""
MAX_TRANSPOSE_BLOCKS = 32
"""At most this many blocks (taller ones for longer matrices), so that the compiled program stays small."""


def transpose_in_row_blocks(matrix: Array) -> Array:
    """``matrix.T`` of a 2-D array, materialized as the transposes of blocks of rows, side by side.

    Parameters
    ----------
    matrix : Array
        ``[M, C]``.

    Returns
    -------
    Array
        ``[C, M]``, equal to ``matrix.T``.

    Notes
    -----
    XLA's CPU transpose reads one input column per output row, evicting cache lines once the input
    outgrows L2; 128-row blocks behind ``optimization_barrier`` stay in cache (docs/benchmarks.md, "CPU
    kernels"). For one device only: on a mesh GSPMD would move the blocks between devices.
    """
    num_rows = matrix.shape[0]
    block_rows = max(TRANSPOSE_BLOCK_ROWS, -(-num_rows // MAX_TRANSPOSE_BLOCKS))
    if num_rows <= block_rows:
        return jax.lax.optimization_barrier(matrix.T)
    blocks = [jax.lax.optimization_barrier(matrix[start:start + block_rows].T)  # [C, rows of the block]
              for start in range(0, num_rows, block_rows)]
    return jnp.concatenate(blocks, axis=1)  # [C, M]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def contract_trailing(x: Array, kernel: Array, num_contracted: int, precision: Any = None) -> Array:
    """Contract the last ``num_contracted`` axes of ``x`` with the first ones of ``kernel``.

    Parameters
    ----------
    x : Array
        ``[..., C1, ..., Cn]`` inputs.
    kernel : Array
        ``[C1, ..., Cn, N1, ...]`` weights, same dtype as ``x``.
    num_contracted : int
        ``n``, the number of contracted axes.
    precision : jax.lax.Precision, optional
        As for ``jax.lax.dot_general``, used by all three products.

    Returns
    -------
    Array
        ``[..., N1, ...]``: ``x``'s leading axes, then ``kernel``'s trailing ones.

    Notes
    -----
    On CPUs ``x^T`` is copied out first behind ``optimization_barrier`` s, in row blocks on one device,
    whole on a mesh; other backends multiply by the transposed view.
    """
    inputs, weights = _as_matrices(x, kernel, num_contracted)
    product = jnp.matmul(inputs, weights, precision=precision)
    return product.reshape(*x.shape[:x.ndim - num_contracted], *kernel.shape[num_contracted:])


def _contract_trailing_forward(x: Array, kernel: Array, num_contracted: int,
                               precision: Any) -> tuple[Array, tuple[Array, Array]]:
    return contract_trailing(x, kernel, num_contracted, precision), (x, kernel)


def _contract_trailing_backward(num_contracted: int, precision: Any, residuals: tuple[Array, Array],
                                output_gradient: Array) -> tuple[Array, Array]:
    x, kernel = residuals
    inputs, weights = _as_matrices(x, kernel, num_contracted)
    gradient = output_gradient.reshape(inputs.shape[0], weights.shape[1])  # [M, N]
    if jax.default_backend() != "cpu":
        inputs_transposed = inputs.T  # [C, M]
    elif jax.device_count() == 1:
        inputs_transposed = transpose_in_row_blocks(inputs)
    else:  # Over a mesh GSPMD would move the blocks of row-sharded inputs between the devices.
        inputs_transposed = jax.lax.optimization_barrier(inputs.T)
    x_gradient = jnp.matmul(gradient, weights.T, precision=precision)  # [M, C]
    kernel_gradient = jnp.matmul(inputs_transposed, gradient, precision=precision)  # [C, N]
    return x_gradient.reshape(x.shape), kernel_gradient.reshape(kernel.shape)


contract_trailing.defvjp(_contract_trailing_forward, _contract_trailing_backward)


def dot_general(lhs: Array, rhs: Array, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Array:
    """``jax.lax.dot_general`` for Flax's ``Dense`` / ``DenseGeneral``, through :func:`contract_trailing`.

    Only the layers' own case (trailing axes of ``lhs`` against leading axes of ``rhs``, no batch axes, equal
    dtypes, no ``preferred_element_type``) takes :func:`contract_trailing`; the rest goes to
    ``jax.lax.dot_general`` unchanged.

    Parameters
    ----------
    lhs, rhs : Array
        Inputs and kernel, as Flax passes them.
    dimension_numbers : tuple
        ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    precision, preferred_element_type : Any
        As for ``jax.lax.dot_general``.

    Returns
    -------
    Array
        ``jax.lax.dot_general(lhs, rhs, dimension_numbers, ...)``.
    """
    (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch) = dimension_numbers
    count = len(lhs_contracting)
    layer_case = (tuple(lhs_contracting) == tuple(range(lhs.ndim - count, lhs.ndim))
                  and tuple(rhs_contracting) == tuple(range(count)) and not lhs_batch and not rhs_batch
                  and lhs.dtype == rhs.dtype and preferred_element_type is None and count > 0)
    if not layer_case:
        return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                                   preferred_element_type=preferred_element_type)
    return contract_trailing(lhs, rhs, count, precision)
