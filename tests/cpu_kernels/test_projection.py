"""attention_jax.cpu_kernels.projection: the layers' products and their gradients against NumPy and
jax.lax.dot_general."""

from __future__ import annotations

import os
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.cpu_kernels import projection
from tests.support import REPO_ROOT, train_support


# (input shape, kernel shape, contracted axes): a Dense, a query projection, an output projection; the
# last has M = 150 rows, transposed on CPUs in blocks of 128 and 22.
CASES = [((3, 5, 8), (8, 6), 1), ((2, 7, 8), (8, 2, 4), 1), ((2, 7, 2, 4), (2, 4, 8), 2), ((6, 8), (8, 3), 1),
         ((3, 50, 8), (8, 6), 1)]


def _numpy_product_and_gradients(x: np.ndarray, kernel: np.ndarray, num_contracted: int,
                                 cotangent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 ``y = x . kernel`` and, for the loss ``sum(y * cotangent)``, its gradients."""
    x64, kernel64, cotangent64 = (np.asarray(a, np.float64) for a in (x, kernel, cotangent))
    contract = (tuple(range(x.ndim - num_contracted, x.ndim)), tuple(range(num_contracted)))
    product = np.tensordot(x64, kernel64, axes=contract)
    lead = x.ndim - num_contracted
    x_gradient = np.tensordot(cotangent64, kernel64, axes=(tuple(range(lead, cotangent.ndim)),
                                                           tuple(range(num_contracted, kernel.ndim))))
    kernel_gradient = np.tensordot(x64, cotangent64, axes=(tuple(range(lead)), tuple(range(lead))))
    return product, x_gradient, kernel_gradient


@pytest.mark.parametrize("x_shape, kernel_shape, num_contracted", CASES)
def test_contract_trailing_and_its_gradients_equal_numpy(x_shape, kernel_shape, num_contracted) -> None:
    rng = np.random.default_rng(len(x_shape) + len(kernel_shape))
    x = rng.normal(size=x_shape).astype(np.float32)
    kernel = rng.normal(size=kernel_shape).astype(np.float32)
    product = jax.jit(projection._contract_trailing, static_argnums=2)(x, kernel, num_contracted)
    cotangent = rng.normal(size=product.shape).astype(np.float32)
    loss = lambda a, b: jnp.sum(projection._contract_trailing(a, b, num_contracted) * cotangent)  # noqa: E731
    x_gradient, kernel_gradient = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, kernel)
    expected = _numpy_product_and_gradients(x, kernel, num_contracted, cotangent)
    for ours, reference in zip((product, x_gradient, kernel_gradient), expected):
        assert ours.shape == reference.shape
        np.testing.assert_allclose(np.asarray(ours), reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layer", ["dense", "query", "out"])
def test_flax_layers_with_it_equal_the_default_layers(layer: str) -> None:
    """Same parameters, outputs and gradients as the layer with ``jax.lax.dot_general``."""
    def make(dot_general):
        if layer == "dense":
            return nn.Dense(6, dot_general=dot_general)
        if layer == "query":
            return nn.DenseGeneral((2, 4), axis=-1, dot_general=dot_general)
        return nn.DenseGeneral(8, axis=(-2, -1), dot_general=dot_general)

    x = jax.random.normal(jax.random.key(0), (3, 5, 8) if layer != "out" else (3, 5, 2, 4))
    params = make(None).init(jax.random.key(1), x)
    assert jax.tree.structure(params) == jax.tree.structure(make(projection.dot_general).init(jax.random.key(1), x))

    def output_and_gradients(dot_general):
        module = make(dot_general)
        loss = lambda p, inputs: jnp.sum(jnp.sin(module.apply(p, inputs)))  # noqa: E731
        return module.apply(params, x), jax.grad(loss, argnums=(0, 1))(params, x)

    ours, default = output_and_gradients(projection.dot_general), output_and_gradients(None)
    np.testing.assert_allclose(np.asarray(ours[0]), np.asarray(default[0]), rtol=1e-6, atol=1e-6)
    for leaf, default_leaf in zip(jax.tree.leaves(ours[1]), jax.tree.leaves(default[1])):
        np.testing.assert_allclose(np.asarray(leaf), np.asarray(default_leaf), rtol=1e-5, atol=1e-5)


def test_bfloat16_stays_bfloat16() -> None:
    x = jnp.ones((2, 3, 4), jnp.bfloat16)
    kernel = jnp.ones((4, 5), jnp.bfloat16)
    assert projection.dot_general(x, kernel, (((2,), (0,)), ((), ()))).dtype == jnp.bfloat16
    gradient = jax.grad(lambda k: jnp.sum(projection._contract_trailing(x, k, 1)).astype(jnp.float32))(kernel)
    assert gradient.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(gradient, np.float32), np.full((4, 5), 6.0, np.float32))


@pytest.mark.parametrize("lhs_shape, rhs_shape, dimension_numbers, preferred", [
    ((4, 3), (4, 5), (((0,), (0,)), ((), ())), None),  # Contracting a leading axis of lhs.
    ((3, 4, 4), (3, 4, 5), (((2,), (1,)), ((0,), (0,))), None),  # Batch axes.
    ((3, 4, 4), (4, 5), (((2,), (0,)), ((), ())), jnp.float32),  # preferred_element_type.
])
def test_other_products_go_to_lax_dot_general(lhs_shape, rhs_shape, dimension_numbers, preferred) -> None:
    rng = np.random.default_rng(0)
    lhs = jnp.asarray(rng.normal(size=lhs_shape), jnp.float32)
    rhs = jnp.asarray(rng.normal(size=rhs_shape), jnp.float32)
    expected = jax.lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred)
    ours = projection.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(expected))


def test_the_cpu_backward_pass_materializes_the_transposed_inputs() -> None:
    """The point of the module on CPUs: ``x^T`` copied out behind a barrier, not folded into the product."""
    x, kernel = jnp.ones((4, 6, 8)), jnp.ones((8, 3))
    gradient = jax.grad(lambda k: jnp.sum(projection._contract_trailing(x, k, 1)))
    text = jax.jit(gradient).lower(kernel).as_text()
    assert ("optimization_barrier" in text) == (jax.default_backend() == "cpu")


@pytest.mark.reference
@pytest.mark.parametrize("shape", [(10, 3), (128, 5), (150, 7), (1024, 48),
                                   (projection.TRANSPOSE_BLOCK_ROWS * projection.MAX_TRANSPOSE_BLOCKS + 77, 3)])
def test_transpose_in_row_blocks_equals_numpy(shape: tuple[int, int]) -> None:
    """Less than a block, exactly one, a ragged last block, 8 blocks, and taller blocks past the cap."""
    matrix = np.random.default_rng(shape[0]).normal(size=shape).astype(np.float32)
    transposed = jax.jit(projection._transpose_in_row_blocks)(jnp.asarray(matrix))
    np.testing.assert_array_equal(np.asarray(transposed), matrix.T)


MESH_SCRIPT = """
import collections, jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from attention_jax.cpu_kernels import projection
mesh = Mesh(np.array(jax.devices()), ("data",))
rows, replicated = NamedSharding(mesh, P("data", None, None)), NamedSharding(mesh, P())
rng = np.random.default_rng(0)
x, kernel = rng.normal(size=(16, 64, 32)).astype(np.float32), rng.normal(size=(32, 48)).astype(np.float32)
loss = lambda k, x: jnp.sum(projection._contract_trailing(x, k, 1) ** 2)
gradient = jax.jit(jax.grad(loss), in_shardings=(replicated, rows), out_shardings=replicated)
text = gradient.lower(kernel, x).compile().as_text()
moves = sum(text.count(op) for op in (" collective-permute(", " all-to-all(", "collective-permute-start("))
expected = 2 * np.einsum("bld,bln->dn", x.astype(np.float64), np.einsum("bld,dn->bln", x, kernel))
np.testing.assert_allclose(np.asarray(gradient(kernel, x)), expected, rtol=1e-4, atol=1e-3)
print("DEVICES", jax.device_count(), "MOVES", moves)
"""


@pytest.mark.slow
def test_a_row_sharded_backward_pass_moves_no_rows_between_devices() -> None:
    """Over 8 CPU devices ``x^T`` stays whole: blocks would be moved between the devices by GSPMD."""
    environment = dict(os.environ, JAX_PLATFORMS="cpu",
                       XLA_FLAGS=train_support.child_xla_flags("--xla_force_host_platform_device_count=8"))
    completed = subprocess.run([sys.executable, "-c", MESH_SCRIPT], cwd=REPO_ROOT, env=environment,
                               capture_output=True, text=True, timeout=600)
    assert "DEVICES 8 MOVES 0" in completed.stdout, completed.stdout[-2000:] + completed.stderr[-3000:]
