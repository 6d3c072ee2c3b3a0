"""Dense products whose backward pass is two 2-D matmuls, ``dx = g K^T`` and ``dK = x^T g``, fast on XLA's CPU."""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array


def _as_matrices(x: Array, kernel: Array, num_contracted: int) -> tuple[Array, Array]:
    contracted = math.prod(kernel.shape[:num_contracted])
    return x.reshape(-1, contracted), kernel.reshape(contracted, -1)


TRANSPOSE_BLOCK_ROWS = 128
"""Rows per block of :func:`_transpose_in_row_blocks`."""
MAX_TRANSPOSE_BLOCKS = 32
"""At most this many blocks, so that the compiled program stays small."""


def _transpose_in_row_blocks(matrix: Array) -> Array:
    """Return ``matrix.T`` (``[M, C]`` to ``[C, M]``) built of transposed row blocks that stay in cache."""
    num_rows = matrix.shape[0]
    block_rows = max(TRANSPOSE_BLOCK_ROWS, -(-num_rows // MAX_TRANSPOSE_BLOCKS))
    if num_rows <= block_rows:
        return jax.lax.optimization_barrier(matrix.T)
    blocks = [jax.lax.optimization_barrier(matrix[start:start + block_rows].T)  # [C, rows of the block]
              for start in range(0, num_rows, block_rows)]
    return jnp.concatenate(blocks, axis=1)  # [C, M]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _contract_trailing(x: Array, kernel: Array, num_contracted: int, precision: Any = None) -> Array:
    """Contract ``x``'s last ``num_contracted`` axes with ``kernel``'s first, with the 2-D backward pass."""
    inputs, weights = _as_matrices(x, kernel, num_contracted)
    product = jnp.matmul(inputs, weights, precision=precision)
    return product.reshape(*x.shape[:x.ndim - num_contracted], *kernel.shape[num_contracted:])


def _contract_trailing_forward(x: Array, kernel: Array, num_contracted: int,
                               precision: Any) -> tuple[Array, tuple[Array, Array]]:
    return _contract_trailing(x, kernel, num_contracted, precision), (x, kernel)


def _contract_trailing_backward(num_contracted: int, precision: Any, residuals: tuple[Array, Array],
                                output_gradient: Array) -> tuple[Array, Array]:
    x, kernel = residuals
    inputs, weights = _as_matrices(x, kernel, num_contracted)
    gradient = output_gradient.reshape(inputs.shape[0], weights.shape[1])  # [M, N]
    if jax.default_backend() != "cpu":
        inputs_transposed = inputs.T  # [C, M]
    elif jax.device_count() == 1:
        inputs_transposed = _transpose_in_row_blocks(inputs)
    else:  # Over a mesh GSPMD would move the blocks of row-sharded inputs between the devices.
        inputs_transposed = jax.lax.optimization_barrier(inputs.T)
    x_gradient = jnp.matmul(gradient, weights.T, precision=precision)  # [M, C]
    kernel_gradient = jnp.matmul(inputs_transposed, gradient, precision=precision)  # [C, N]
    return x_gradient.reshape(x.shape), kernel_gradient.reshape(kernel.shape)


_contract_trailing.defvjp(_contract_trailing_forward, _contract_trailing_backward)


def dot_general(lhs: Array, rhs: Array, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Array:
    """Return ``jax.lax.dot_general``, through the 2-D products in the Dense layers' own case.

    Parameters
    ----------
    lhs, rhs : Array
        Inputs and kernel.
    dimension_numbers : tuple
        ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    precision, preferred_element_type : Any
        As for ``jax.lax.dot_general``.

    Returns
    -------
    Array
        The product.
    """
    (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch) = dimension_numbers
    count = len(lhs_contracting)
    layer_case = (tuple(lhs_contracting) == tuple(range(lhs.ndim - count, lhs.ndim))
                  and tuple(rhs_contracting) == tuple(range(count)) and not lhs_batch and not rhs_batch
                  and lhs.dtype == rhs.dtype and preferred_element_type is None and count > 0)
    if not layer_case:
        return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=precision,
                                   preferred_element_type=preferred_element_type)
    return _contract_trailing(lhs, rhs, count, precision)
