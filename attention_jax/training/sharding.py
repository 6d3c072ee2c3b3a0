"""Device mesh, logical-axis rules and the placement of parameters and batches.

Batch rows go over ``"data"``; ``fsdp`` splits ``"embed"`` over ``"data"``; a ``"model"`` axis splits ``"mlp"``,
``"heads"`` and ``"vocab"``. Axes are ``AxisType.Auto``: shardings at the jit boundary, propagated by GSPMD.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence, cast

import flax.linen as nn
import jax
import numpy as np
from absl import logging
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from attention_jax.foundation.user_errors import UserInputError

DATA_AXIS = "data"
MODEL_AXIS = "model"
PARAM_SHARDINGS = ("replicated", "fsdp")


def create_mesh(mesh_shape: Sequence[int], mesh_axes: Sequence[str],
                devices: Sequence[jax.Device] | None = None) -> Mesh:
    """Build the device mesh the config describes, with ``AxisType.Auto`` axes.

    Parameters
    ----------
    mesh_shape, mesh_axes : Sequence[int], Sequence[str]
        Axis sizes (one may be -1: the remaining devices) and names, ``"data"`` among them.
    devices : Sequence[jax.Device], optional
        Default ``jax.devices()``.

    Returns
    -------
    jax.sharding.Mesh
        The mesh.
    """
    devices = list(jax.devices() if devices is None else devices)
    shape, axes = _fit_mesh_shape(mesh_shape, mesh_axes, len(devices)), tuple(mesh_axes)
    return jax.make_mesh(shape, axes, axis_types=(jax.sharding.AxisType.Auto,) * len(axes), devices=devices)


def _fit_mesh_shape(mesh_shape: Sequence[int], mesh_axes: Sequence[str], device_count: int) -> tuple[int, ...]:
    """Return the mesh's axis sizes on ``device_count`` devices (every process's), its -1 entry resolved.

    Raises ``UserInputError``: for sizes that do not multiply to (or divide) the device count.
    """
    shape, axes = [int(size) for size in mesh_shape], tuple(mesh_axes)
    if len(shape) != len(axes) or DATA_AXIS not in axes or shape.count(-1) > 1:
        raise UserInputError(f"config.mesh_shape={tuple(shape)} and config.mesh_axes={axes} must have one entry per "
                             f"axis, an axis named {DATA_AXIS!r} (batches are split over it) and at most one -1.")
    fix = (f"set --config.mesh_shape to sizes whose product is {device_count}, or leave one axis -1 to take the "
           f"remaining devices (the default, (-1,), puts them all on {DATA_AXIS!r})")
    if -1 in shape:
        known = math.prod(size for size in shape if size != -1)
        if known <= 0 or device_count % known:
            raise UserInputError(f"config.mesh_shape={tuple(shape)}: its other axes hold {known} devices, which does "
                                 f"not divide the {device_count} device(s) this run sees: {fix}.")
        shape[shape.index(-1)] = device_count // known
    if math.prod(shape) != device_count or min(shape) <= 0:
        raise UserInputError(f"config.mesh_shape={tuple(shape)} needs {math.prod(shape)} devices, but this run sees "
                             f"{device_count}: {fix}.")
    return tuple(shape)


def logical_axis_rules(param_sharding: str, mesh: Mesh) -> tuple[tuple[str, str | None], ...]:
    """Return the rules mapping the model's logical parameter axes to mesh axes (unmentioned: replicated).

    Parameters
    ----------
    param_sharding : str
        ``"replicated"`` or ``"fsdp"``.
    mesh : jax.sharding.Mesh
        A ``"model"`` axis enables tensor parallelism.

    Returns
    -------
    tuple of (logical axis, mesh axis or None)
        For :func:`flax.linen.logical_to_mesh_sharding`.
    """
    if param_sharding not in PARAM_SHARDINGS:
        raise ValueError(f"param_sharding must be one of {PARAM_SHARDINGS}; got {param_sharding!r}.")
    tensor_axis = MODEL_AXIS if MODEL_AXIS in mesh.axis_names else None
    return (
        ("embed", DATA_AXIS if param_sharding == "fsdp" else None),
        ("mlp", tensor_axis),
        ("heads", tensor_axis),
        ("vocab", tensor_axis),
        ("kv", None),
    )


def _divisible_spec(spec: PartitionSpec, shape: Sequence[int], mesh: Mesh, name: str) -> PartitionSpec:
    kept: list[Any] = []  # PartitionSpec entries: an axis name, a tuple of names or None.
    for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
        names = (axes,) if isinstance(axes, str) else tuple(axes or ())
        size = math.prod(mesh.shape[axis] for axis in names)
        if names and dim % size:
            logging.warning("%s: dimension %d is not divisible by mesh axes %s (size %d); replicated.",
                            name, dim, names, size)
            kept.append(None)
        else:
            kept.append(axes)
    return PartitionSpec(*kept)


def _tree_shardings(boxed_tree: Any, mesh: Mesh, rules: Sequence[tuple[str, str | None]]) -> Any:
    """Return NamedShardings for a pytree of logical-axis leaves; a dimension no mesh axis divides is replicated."""
    logical_specs = nn.get_partition_spec(boxed_tree)
    mesh_specs = nn.logical_to_mesh(logical_specs, rules)
    shapes = nn.meta.unbox(boxed_tree)
    is_spec = lambda node: isinstance(node, PartitionSpec)  # noqa: E731
    paths_and_specs = jax.tree_util.tree_flatten_with_path(mesh_specs, is_leaf=is_spec)[0]
    shape_leaves, treedef = jax.tree_util.tree_flatten(shapes)
    shardings = [
        NamedSharding(mesh, _divisible_spec(spec, leaf.shape, mesh, jax.tree_util.keystr(path)))
        for (path, spec), leaf in zip(paths_and_specs, shape_leaves)
    ]
    return jax.tree_util.tree_unflatten(treedef, shardings)


def replicated(mesh: Mesh) -> NamedSharding:
    """Return the sharding that keeps a full copy on every device of ``mesh``.

    Parameters
    ----------
    mesh : Mesh
        The device mesh.

    Returns
    -------
    NamedSharding
        Fully replicated.
    """
    return NamedSharding(mesh, PartitionSpec())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Return the sharding of ``[rows, length]`` batches: rows over ``"data"``, replicated elsewhere.

    Parameters
    ----------
    mesh : Mesh
        The device mesh.

    Returns
    -------
    NamedSharding
        The batch sharding.
    """
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def _local_data_shards(mesh: Mesh) -> int:
    """Return the number of distinct ``"data"`` positions among this process's devices."""
    data_dim = mesh.axis_names.index(DATA_AXIS)
    process = jax.process_index()
    positions = {index[data_dim] for index, device in np.ndenumerate(mesh.devices)
                 if device.process_index == process}
    return max(len(positions), 1)


def global_batch(local_batch: Mapping[str, np.ndarray], sharding: NamedSharding) -> dict[str, jax.Array]:
    """Assemble one global batch from this process's rows (``rows * process_count`` rows, in process order).

    Parameters
    ----------
    local_batch : Mapping[str, np.ndarray]
        This process's rows, e.g. ``{"inputs": [rows, S], "targets": [rows, T]}``.
    sharding : NamedSharding
        From :func:`batch_sharding`.

    Returns
    -------
    dict[str, jax.Array]
        The global arrays.

    Raises
    ------
    ValueError
        When the rows do not split evenly over the local ``"data"`` devices.
    """
    local_shards = _local_data_shards(cast(Mesh, sharding.mesh))  # batch_sharding's mesh is concrete.
    arrays = {}
    for key, value in local_batch.items():
        value = np.asarray(value)
        if value.shape[0] % local_shards:
            raise ValueError(
                f"batch {key!r} has {value.shape[0]} rows on this process, not a multiple of its "
                f"{local_shards} data-parallel devices; pass rows_multiple to the input pipeline."
            )
        arrays[key] = jax.make_array_from_process_local_data(sharding, value)
    return arrays


def _pad_rows(batch: Mapping[str, np.ndarray], multiple: int) -> dict[str, np.ndarray]:
    """Append all-pad rows (id 0, ignored by every metric) up to a multiple of ``multiple`` rows."""
    padded = {}
    for key, value in batch.items():
        value = np.asarray(value)
        extra = -value.shape[0] % multiple
        padded[key] = np.pad(value, [(0, extra)] + [(0, 0)] * (value.ndim - 1)) if extra else value
    return padded
