"""A run exported for translation: weights, config, tokenizer and ``export.json`` in one directory."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError

PARAMS_FILE = "params.safetensors"
RECORD_FILE = "export.json"  # What the export came from.
EXPORTED_CHECKPOINT = "exported"  # load_run's checkpoint naming an export's parameters ("latest" does too).


def is_export_directory(path: str) -> bool:
    """Return whether ``path`` is a directory :func:`write_export_directory` wrote (parameters, no ``checkpoints/``).

    Parameters
    ----------
    path : str
        A directory given as a run's ``workdir``.

    Returns
    -------
    bool
        True for an export.
    """
    return ((os.path.isfile(os.path.join(path, PARAMS_FILE)) or os.path.isfile(os.path.join(path, RECORD_FILE)))
            and not os.path.isdir(os.path.join(path, run_files.CHECKPOINT_DIR)))


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_export_files(directory: str) -> None:
    """Refuse an export without its parameters file.

    Parameters
    ----------
    directory : str
        An export directory.

    Raises
    ------
    UserInputError
        Naming the file and the fix.
    """
    fix = "export the run again (python -m attention_jax.export --format=directory)"
    if not os.path.isfile(os.path.join(directory, PARAMS_FILE)):
        raise UserInputError(f"{directory} is an export without its {PARAMS_FILE} (the parameters): copy the "
                             f"whole export directory again, or {fix}.")
    try:
        with open(os.path.join(directory, RECORD_FILE), encoding="utf-8") as record_file:
            hashes = json.load(record_file).get("sha256") or {}
    except (OSError, ValueError, AttributeError):
        hashes = {}
    for name, expected in sorted(hashes.items()):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise UserInputError(f"{path} is missing from the export: copy the whole export directory again, "
                                 f"or {fix}.")
        if _file_sha256(path) != expected:
            raise UserInputError(f"{path} does not match the SHA-256 that {RECORD_FILE} records for it: the file "
                                 f"is damaged or was replaced; copy the export again, or {fix}.")


def check_export_target(out: str) -> None:
    """Refuse, before anything is written, an ``--out`` that an export would harm.

    Parameters
    ----------
    out : str
        The directory to write: new, empty, or an earlier export (replaced).

    Raises
    ------
    UserInputError
        For a file, or a directory holding anything but an earlier export.
    """
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserInputError(f"--out={out} is a file; --format=directory writes a directory: name a new one.")
    if os.path.isdir(out) and os.listdir(out) and not is_export_directory(out):
        raise UserInputError(f"--out={out} is a directory holding other files (a training run's, say), which the "
                             f"export's {run_files.CONFIG_FILE} and {run_files.TOKENIZER_FILE} would overwrite: "
                             f"name a new or empty directory.")


def write_export_directory(out: str, params: Any, experiment: Experiment, tokenizer_file: str, *,
                           workdir: str, checkpoint: str, step: int | None) -> dict[str, Any]:
    """Write one checkpoint's parameters, config and tokenizer into ``out``; the record last, so with it all is whole.

    Parameters
    ----------
    out : str
        The directory (an earlier export is replaced).
    params : pytree
        The parameters.
    experiment : Experiment
        The run's config.
    tokenizer_file : str
        The run's ``tokenizer.model``, copied as it is.
    workdir, checkpoint : str
        Where the parameters came from, for the record.
    step : int, optional
        The training step they stand for.

    Returns
    -------
    dict
        The record written to ``export.json``.
    """
    os.makedirs(out, exist_ok=True)
    with open(tokenizer_file, "rb") as tokenizer:
        run_files.write_atomically(os.path.join(out, run_files.TOKENIZER_FILE), tokenizer.read())
    run_files.write_json_atomically(os.path.join(out, run_files.CONFIG_FILE), experiment.to_json_dict())
    from attention_jax.checkpointing import safetensors_params  # Only to write or read one.

    metadata = safetensors_params.run_metadata(experiment, workdir=workdir, checkpoint=checkpoint)
    safetensors_params.save_safetensors(os.path.join(out, PARAMS_FILE), params,
                                        {**metadata, **({"step": str(step)} if step is not None else {})})
    hashed = (PARAMS_FILE, run_files.CONFIG_FILE, run_files.TOKENIZER_FILE)
    record = {"workdir": os.path.abspath(workdir), "checkpoint": checkpoint, "step": step,
              "tensors": len(safetensors_params.tensor_names(params)), "files": [*hashed, RECORD_FILE],
              "sha256": {name: _file_sha256(os.path.join(out, name)) for name in hashed}}
    run_files.write_json_atomically(os.path.join(out, RECORD_FILE), record)
    return record


def describe(directory: str) -> str:
    """Return what ``load_run`` reports as an export's ``checkpoint``, e.g. ``"exported (latest, step 20)"``.

    Parameters
    ----------
    directory : str
        An export directory.

    Returns
    -------
    str
        ``exported`` with the checkpoint and step its record holds.
    """
    try:
        with open(os.path.join(directory, RECORD_FILE), encoding="utf-8") as record_file:
            record = json.load(record_file)
    except (OSError, ValueError):
        return EXPORTED_CHECKPOINT
    origin = [str(record.get("checkpoint") or "")] + ([f"step {record['step']}"] if record.get("step") else [])
    return f"{EXPORTED_CHECKPOINT} ({', '.join(part for part in origin if part)})"


def load_export_params(directory: str, checkpoint: str = "latest", average_last: int = 0) -> Any:
    """Return the parameters of an export directory as JAX arrays.

    Parameters
    ----------
    directory : str
        An export directory.
    checkpoint : str
        ``"latest"`` or ``"exported"``: the export's one set.
    average_last : int
        Must be 0.

    Returns
    -------
    pytree
        The nested parameter dicts.

    Raises
    ------
    UserInputError
        For another checkpoint, an average, or a parameters file that is not safetensors.
    """
    import jax.numpy as jnp  # Here: reading the record needs no JAX.
    from jax import tree

    if average_last > 0 or checkpoint not in ("latest", EXPORTED_CHECKPOINT):
        asked = f"--average_last={average_last}" if average_last > 0 else f"checkpoint {checkpoint!r}"
        raise UserInputError(f"{directory} is an export of one checkpoint ({describe(directory)}), so "
                             f"{asked} is not in it: leave it out, or load the training run itself.")
    from attention_jax.checkpointing import safetensors_params  # Only to write or read one.

    params, _ = safetensors_params.load_safetensors(os.path.join(directory, PARAMS_FILE))
    return tree.map(jnp.asarray, params)
