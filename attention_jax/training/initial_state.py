"""The initial train state, created directly into its shardings on the device mesh.

- :func:`abstract_boxed_state`: the state's shapes, parameters boxed with their logical axis names
  (nothing allocated);
- :func:`train_state_shardings`: where each leaf lives (:mod:`attention_jax.training.sharding`'s rules);
- :func:`abstract_train_state`: shapes, dtypes and shardings, the target of a checkpoint restore;
- :func:`create_train_state`: step 0, parameters and Adam's moments initialized in place (FSDP never
  materializes them whole on one device);
- :func:`sharded_initial_state`: the last two in one call, for code that starts from step 0 and
  restores nothing (benchmarks, tests).

The state itself and the update that advances it are :mod:`attention_jax.training.train_state`.
"""

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
    """Shapes of the initial train state, parameters still boxed with their logical axis names.

    Parameters
    ----------
    transformer : model.Transformer or language_model.LanguageModel
        The model.
    optimizer : optax.GradientTransformation
        The optimizer (its moments inherit the parameters' logical axes).

    Returns
    -------
    TrainState
        ``jax.ShapeDtypeStruct`` leaves (``jax.eval_shape``: nothing is allocated).
    """
    return jax.eval_shape(functools.partial(_boxed_initial_state, transformer=transformer,
                                            optimizer=optimizer), jax.random.key(0))


def train_state_shardings(boxed_state: TrainState, mesh: Mesh, rules: tuple) -> TrainState:
    """Where every leaf of the train state lives.

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
    """Shapes, dtypes and shardings of the train state (the target of a checkpoint restore).

    Parameters
    ----------
    boxed_state : TrainState
        From :func:`abstract_boxed_state`.
    shardings : TrainState
        From :func:`train_state_shardings`.

    Returns
    -------
    TrainState
        Unboxed ``jax.ShapeDtypeStruct`` leaves with ``sharding`` set.
    """
    return jax.tree.map(lambda leaf, where: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=where),
                        nn.meta.unbox(boxed_state), shardings)


def create_train_state(seed: int, transformer: nn.Module,
                       optimizer: optax.GradientTransformation, shardings: TrainState) -> TrainState:
    """Initialize parameters and optimizer state directly in their shardings.

    Parameters
    ----------
    seed : int
        Seeds parameter initialization and, through a split, the dropout keys.
    transformer : model.Transformer or language_model.LanguageModel
        The model.
    optimizer : optax.GradientTransformation
        The optimizer.
    shardings : TrainState
        From :func:`train_state_shardings`.

    Returns
    -------
    TrainState
        Step 0, unboxed parameters (FSDP never materializes them whole on one device).
    """
    def initialize(key: jax.Array) -> TrainState:
        return nn.meta.unbox(_boxed_initial_state(key, transformer, optimizer))

    return jax.jit(initialize, out_shardings=shardings)(jax.random.key(seed))


def sharded_initial_state(seed: int, transformer: nn.Module, optimizer: optax.GradientTransformation,
                          mesh: Mesh, rules: tuple) -> tuple[TrainState, TrainState]:
    """A fresh train state in its shardings, and the shardings (which
    :func:`attention_jax.training.train_state.compile_steps` takes).

    Parameters
    ----------
    seed : int
        Seeds parameter initialization and the dropout keys (:func:`create_train_state`).
    transformer : model.Transformer or language_model.LanguageModel
        The model.
    optimizer : optax.GradientTransformation
        The optimizer.
    mesh : Mesh
        Device mesh.
    rules : tuple
        Logical axis rules (:func:`sharding.logical_axis_rules`).

    Returns
    -------
    state : TrainState
        Step 0.
    shardings : TrainState
        Where each leaf lives (:func:`train_state_shardings`).

    Notes
    -----
    :func:`attention_jax.training.train.build_run` keeps the steps apart, because it restores a
    checkpoint into :func:`abstract_train_state` before it creates anything.
    """
    shardings = train_state_shardings(abstract_boxed_state(transformer, optimizer), mesh, rules)
    return create_train_state(seed, transformer, optimizer, shardings), shardings
