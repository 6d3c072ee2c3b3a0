"""The initial train state, created directly into its shardings (FSDP never materializes it on one device)."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from attention_jax.models import language_model
from attention_jax.training import sharding
from attention_jax.training.train_state import TrainState


def _boxed_initial_state(key: jax.Array, transformer: nn.Module,
                         optimizer: optax.GradientTransformation) -> TrainState:
    init_key, train_key = jax.random.split(key)
    ids = language_model.init_arguments(transformer)  # Parameter shapes do not depend on the lengths.
    params = transformer.init({"params": init_key}, *ids)["params"]  # Boxed with logical axes.
    return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                      opt_state=optimizer.init(params), rng=jax.random.key_data(train_key))


def abstract_boxed_state(transformer: nn.Module,
                         optimizer: optax.GradientTransformation) -> TrainState:
    """Return the initial state's shapes, parameters boxed with their logical axis names; nothing is allocated.

    Parameters
    ----------
    transformer, optimizer : nn.Module, optax.GradientTransformation
        The model and its optimizer (moments inherit the parameters' axes).

    Returns
    -------
    TrainState
        ``jax.ShapeDtypeStruct`` leaves.
    """
    return jax.eval_shape(functools.partial(_boxed_initial_state, transformer=transformer,
                                            optimizer=optimizer), jax.random.key(0))


def train_state_shardings(boxed_state: TrainState, mesh: Mesh, rules: tuple) -> TrainState:
    """Return where every leaf of the train state lives.

    Parameters
    ----------
    boxed_state : TrainState
        From :func:`abstract_boxed_state`.
    mesh : Mesh
        Device mesh.
    rules : tuple
        Logical axis rules (:func:`sharding.logical_axis_rules`).

    Returns
    -------
    TrainState
        ``NamedSharding`` leaves; step and rng replicated.
    """
    return sharding.tree_shardings(boxed_state, mesh, rules)


def abstract_train_state(boxed_state: TrainState, shardings: TrainState) -> TrainState:
    """Return the state's shapes, dtypes and shardings: the target of a checkpoint restore.

    Parameters
    ----------
    boxed_state, shardings : TrainState
        From :func:`abstract_boxed_state` and :func:`train_state_shardings`.

    Returns
    -------
    TrainState
        Unboxed ``jax.ShapeDtypeStruct`` leaves with ``sharding`` set.
    """
    return jax.tree.map(lambda leaf, where: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=where),
                        nn.meta.unbox(boxed_state), shardings)


def create_train_state(seed: int, transformer: nn.Module,
                       optimizer: optax.GradientTransformation, shardings: TrainState) -> TrainState:
    """Initialize step 0's parameters and optimizer state directly in their shardings.

    Parameters
    ----------
    seed : int
        Seeds the parameters and, through a split, the dropout keys.
    transformer, optimizer : nn.Module, optax.GradientTransformation
        The model and its optimizer.
    shardings : TrainState
        From :func:`train_state_shardings`.

    Returns
    -------
    TrainState
        Step 0, unboxed parameters.
    """
    def _initialize(key: jax.Array) -> TrainState:
        return nn.meta.unbox(_boxed_initial_state(key, transformer, optimizer))

    return jax.jit(_initialize, out_shardings=shardings)(jax.random.key(seed))


def sharded_initial_state(seed: int, transformer: nn.Module, optimizer: optax.GradientTransformation,
                          mesh: Mesh, rules: tuple) -> tuple[TrainState, TrainState]:
    """Return a fresh state in its shardings, and the shardings (benchmarks, tests).

    Parameters
    ----------
    seed : int
        Seeds the parameters and the dropout keys.
    transformer, optimizer : nn.Module, optax.GradientTransformation
        The model and its optimizer.
    mesh : Mesh
        Device mesh.
    rules : tuple
        Logical axis rules.

    Returns
    -------
    state : TrainState
        Step 0.
    shardings : TrainState
        Where each leaf lives.
    """
    shardings = train_state_shardings(abstract_boxed_state(transformer, optimizer), mesh, rules)
    return create_train_state(seed, transformer, optimizer, shardings), shardings
