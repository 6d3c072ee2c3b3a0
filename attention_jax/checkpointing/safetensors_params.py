"""A run's parameters as one safetensors file, a tensor per leaf named by its ``/``-joined tree path."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save

from attention_jax.experiment import schema, sections
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError, path_argument

SEPARATOR = "/"  # Joins a leaf's keys into its tensor name.
FORMAT = "attention_jax.params"  # The metadata's format entry in the files save_safetensors writes.


def _key_name(key: Any) -> str:
    name = getattr(key, "key", getattr(key, "name", getattr(key, "idx", None)))
    if name is None or SEPARATOR in str(name):
        raise ValueError(f"the parameter tree key {key!r} cannot be part of a tensor name joined by {SEPARATOR!r}.")
    return str(name)


def _leaves_with_paths(params: Any) -> list[tuple[Any, Any]]:
    """Return the unboxed tree's leaves with their key paths (Flax imported here: a reader needs none)."""
    import flax.linen as nn

    return jax.tree_util.tree_flatten_with_path(nn.meta.unbox(params))[0]


def _flatten_params(params: Any) -> dict[str, np.ndarray]:
    """Return the leaves as host arrays keyed by tensor name, in the tree's order."""
    leaves = _leaves_with_paths(params)
    return {SEPARATOR.join(_key_name(key) for key in path): np.asarray(jax.device_get(leaf)) for path, leaf in leaves}


def _unflatten_params(tensors: Mapping[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for name, value in tensors.items():
        *parents, leaf = name.split(SEPARATOR)
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return tree


def tensor_names(params: Any) -> dict[str, tuple[int, ...]]:
    """Return each tensor name of a parameter tree with its shape: the file's name map.

    Parameters
    ----------
    params : pytree
        Parameters or their shapes (``jax.ShapeDtypeStruct`` leaves).

    Returns
    -------
    dict[str, tuple[int, ...]]
        ``{"decoder_0/cross_attention/key/kernel": (512, 8, 64), ...}``.
    """
    return {SEPARATOR.join(_key_name(key) for key in path): tuple(leaf.shape)
            for path, leaf in _leaves_with_paths(params)}


def run_metadata(experiment: Experiment, *, workdir: str = "", checkpoint: str = "") -> dict[str, str]:
    """Return the metadata a run's safetensors file carries: the format, the config and where it came from.

    Parameters
    ----------
    experiment : Experiment
        The run's; its ``config.json`` fields are stored.
    workdir, checkpoint : str
        Where the parameters came from (stored absolute) and which (``"latest"``, ``"averaged"``, a step).

    Returns
    -------
    dict[str, str]
        ``format``, ``config`` and those of ``workdir`` and ``checkpoint`` given.
    """
    metadata = {"format": FORMAT, "config": json.dumps(experiment.to_json_dict(), sort_keys=True)}
    origin = (("workdir", workdir and os.path.abspath(workdir)), ("checkpoint", checkpoint))
    metadata.update({name: value for name, value in origin if value})
    return metadata


def save_safetensors(path: str, params: Any, metadata: Mapping[str, str] | None = None) -> dict[str, str]:
    """Write a parameter tree to ``path`` as safetensors, one tensor per leaf, atomically.

    Parameters
    ----------
    path : str
        The file to write.
    params : pytree
        Parameters, boxed or plain.
    metadata : Mapping[str, str], optional
        The file's string metadata; ``format`` is set to :data:`FORMAT`.

    Returns
    -------
    dict[str, str]
        The metadata written.

    Raises
    ------
    TypeError
        For a ``path`` that is no path or ``params`` that are no dict.
    """
    path = path_argument(path, "path", "save_safetensors")  # save_safetensors(params, path): one line.
    if not isinstance(params, Mapping):
        raise TypeError(f"save_safetensors's params must be a parameter tree (a dict); got {type(params).__name__}.")
    written = {**dict(metadata or {}), "format": FORMAT}
    run_files.write_atomically(path, save(_flatten_params(params), metadata=written))
    return written


def load_safetensors(path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Read a file :func:`save_safetensors` wrote back into a parameter tree.

    Parameters
    ----------
    path : str
        A safetensors file.

    Returns
    -------
    (params, metadata)
        The nested parameter dicts (NumPy arrays) and the file's metadata.

    Raises
    ------
    UserInputError
        For a missing file or one that is not safetensors.
    """
    path = path_argument(path, "path", "load_safetensors")
    try:
        with safe_open(path, framework="numpy") as opened:
            metadata = dict(opened.metadata() or {})
            tensors = {name: opened.get_tensor(name) for name in opened.keys()}
    except FileNotFoundError:
        raise UserInputError(f"no safetensors file {path!r}.") from None
    except SafetensorError as error:
        raise UserInputError(f"{path} is not a safetensors file ({error}).") from None
    return _unflatten_params(tensors), metadata


def experiment_of(metadata: Mapping[str, str], source: str = "the safetensors metadata") -> Experiment:
    """Return the experiment (and so the model config) a safetensors file's metadata records.

    Parameters
    ----------
    metadata : Mapping[str, str]
        From :func:`load_safetensors`.
    source : str
        Named in errors.

    Returns
    -------
    Experiment
        Built as a run's ``config.json`` is; ``experiment.model`` fits the parameters.

    Raises
    ------
    UserInputError
        When the metadata holds no ``config``.
    """
    if "config" not in metadata:
        raise UserInputError(f"{source} holds no 'config' entry: the file was not written by attention_jax.export.")
    return sections.build_experiment(schema.with_old_run_defaults(json.loads(metadata["config"])), source)
