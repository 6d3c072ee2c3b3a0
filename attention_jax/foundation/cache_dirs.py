"""``ATTENTION_JAX_CACHE_DIR``: one root for the data, compilation and device-peak caches (one's own setting wins)."""

from __future__ import annotations

import functools
import hashlib
import os

CACHE_DIR_VARIABLE = "ATTENTION_JAX_CACHE_DIR"
DATA_SUBDIR = "tensorflow_datasets"
COMPILATION_SUBDIR = "jax_compilation_cache"


def under_cache_root(subdir: str) -> str | None:
    """Return ``$ATTENTION_JAX_CACHE_DIR/<subdir>`` as an absolute path.

    Parameters
    ----------
    subdir : str
        The cache's directory under the root.

    Returns
    -------
    str or None
        The path; ``None`` when the variable is unset.
    """
    root = os.environ.get(CACHE_DIR_VARIABLE)
    return os.path.abspath(os.path.join(os.path.expanduser(root), subdir)) if root else None


def data_dir(configured: str) -> str | None:
    """Return the data directory to hand TFDS.

    Parameters
    ----------
    configured : str
        ``config.data_dir``; '' for unset.

    Returns
    -------
    str or None
        It, else the cache root's; ``None`` (TFDS's default) under ``TFDS_DATA_DIR`` or without a root.
    """
    if configured:
        return os.path.expanduser(configured)
    return None if os.environ.get("TFDS_DATA_DIR") else under_cache_root(DATA_SUBDIR)


def describe(configured_data_dir: str, compilation_dir: str | None) -> str:
    """Return the log line naming where data and compiled programs are cached.

    Parameters
    ----------
    configured_data_dir : str
        ``config.data_dir``.
    compilation_dir : str or None
        The compilation cache; ``None`` when off.

    Returns
    -------
    str
        One line.
    """
    data = data_dir(configured_data_dir) or os.environ.get("TFDS_DATA_DIR") or os.path.expanduser(
        os.path.join("~", DATA_SUBDIR))  # TFDS's own default.
    root = os.environ.get(CACHE_DIR_VARIABLE)
    moved = f"{CACHE_DIR_VARIABLE}={root}" if root else f"{CACHE_DIR_VARIABLE}=DIR moves both"
    return (f"Caches: data, tokenizers and token ids in {os.path.abspath(data)}; compiled programs in "
            f"{compilation_dir or 'none (compilation cache off)'} ({moved}).")


@functools.cache
def source_digest() -> str:
    """Return a digest of the package's Python source, part of the key of every cache of traced code.

    Returns
    -------
    str
        Hex SHA-256: an edited package traces again, never reads a stale entry.
    """
    root, digest = os.path.dirname(os.path.dirname(os.path.abspath(__file__))), hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        for name in sorted(name for name in files if name.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as file:
                digest.update(file.read() + b"\0")
    return digest.hexdigest()
