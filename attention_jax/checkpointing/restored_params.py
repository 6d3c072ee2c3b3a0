"""A run's restored parameters kept as one safetensors file beside the compilation cache, read back without Orbax.

One entry per run directory and checkpoint choice, served only while its identity (:func:`run_identity`) holds:
a new, rotated or rewritten checkpoint changes it, so a stale entry is never read.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from attention_jax.checkpointing import safetensors_params
from attention_jax.foundation import cache_dirs, run_files

SUBDIR = "restored_params"
"""The entries' directory under the compilation cache directory."""


def run_identity(workdir: str, checkpoint: str, average_last: int) -> str:
    """Return a digest of everything the parameters that ``checkpoint`` names in ``workdir`` are read from.

    Parameters
    ----------
    workdir, checkpoint : str
        A training work directory; ``"latest"``, ``"averaged"``, ``"best"`` or a step.
    average_last : int
        Checkpoints averaged instead (0: none).

    Returns
    -------
    str
        Hex SHA-256 of the size, mtime and inode of every checkpoint file, ``config.json`` and the package source.
    """
    digest = hashlib.sha256(f"{os.path.abspath(workdir)}\0{checkpoint}\0{average_last}\0".encode())
    digest.update(cache_dirs.source_digest().encode())
    with open(os.path.join(workdir, run_files.CONFIG_FILE), "rb") as file:
        digest.update(file.read() + b"\0")
    for subdir in (run_files.CHECKPOINT_DIR, run_files.AVERAGED_DIR, run_files.BEST_DIR):
        for folder, subfolders, files in os.walk(os.path.join(workdir, subdir)):
            subfolders.sort()
            for name in sorted(files + subfolders):  # A step's directory counts even before its files.
                path = os.path.join(folder, name)
                stat = os.stat(path)
                digest.update(f"{os.path.relpath(path, workdir)}:{stat.st_size}:{stat.st_mtime_ns}:"
                              f"{stat.st_ino}\0".encode())
    return digest.hexdigest()


def entry_path(cache_dir: str, workdir: str, checkpoint: str, average_last: int) -> str:
    """Return the file that keeps the parameters ``checkpoint`` (or ``average_last``) names in ``workdir``.

    Parameters
    ----------
    cache_dir, workdir, checkpoint : str
        The compilation cache directory; as in :func:`run_identity`.
    average_last : int
        As in :func:`run_identity`.

    Returns
    -------
    str
        A path under :data:`SUBDIR`.
    """
    name = hashlib.sha256(f"{os.path.abspath(workdir)}\0{checkpoint}\0{average_last}".encode()).hexdigest()[:40]
    return os.path.join(cache_dir, SUBDIR, name + ".safetensors")


def save(path: str, params: Any, identity: str, description: str) -> None:
    """Write plain (unboxed) parameters to ``path`` atomically, with the identity they hold for.

    Parameters
    ----------
    path : str
        From :func:`entry_path`.
    params : dict
        Nested dicts of arrays, as a restore returns them.
    identity, description : str
        :func:`run_identity` before and after the restore; the restore's ``TrainedRun.checkpoint``.
    """
    safetensors_params.save_safetensors(path, params, {"identity": identity, "checkpoint": description})


def load(path: str, identity: str) -> tuple[dict[str, Any], str] | None:
    """Return the parameters kept at ``path`` and their checkpoint's description, if kept for ``identity``.

    Parameters
    ----------
    path, identity : str
        From :func:`entry_path`; :func:`run_identity` now.

    Returns
    -------
    (params, description) or None
        Nested dicts of NumPy arrays; ``None`` for no entry, a stale one or an unreadable file.
    """
    if not os.path.isfile(path):
        return None
    try:
        params, metadata = safetensors_params.load_safetensors(path)
    except Exception:  # A damaged entry: restored again and rewritten.
        return None
    return (params, metadata.get("checkpoint", "")) if metadata.get("identity") == identity else None
