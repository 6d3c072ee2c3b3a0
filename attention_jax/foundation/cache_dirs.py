"""One setting for the caches outside a run: ``ATTENTION_JAX_CACHE_DIR``.

Set to a directory, it moves the prepared corpora with their tokenizers and token ids (TFDS's data
directory: ``<dir>/tensorflow_datasets``), the XLA compilation cache (``<dir>/jax_compilation_cache``) and
the measured device peaks (``<dir>/device_peaks.json``) together. A setting for one cache still wins for
that cache: ``--config.data_dir`` or ``TFDS_DATA_DIR`` for the data, ``--config.compilation_cache_dir``
(a path, or '' for none) or ``JAX_COMPILATION_CACHE_DIR`` for compiled programs.
"""

from __future__ import annotations

import os

CACHE_DIR_VARIABLE = "ATTENTION_JAX_CACHE_DIR"
DATA_SUBDIR = "tensorflow_datasets"
COMPILATION_SUBDIR = "jax_compilation_cache"


def under_cache_root(subdir: str) -> str | None:
    """``$ATTENTION_JAX_CACHE_DIR/<subdir>`` as an absolute path; ``None`` when the variable is unset."""
    root = os.environ.get(CACHE_DIR_VARIABLE)
    return os.path.abspath(os.path.join(os.path.expanduser(root), subdir)) if root else None


def data_dir(configured: str) -> str | None:
    """The data directory to hand TFDS for ``config.data_dir`` (''): it, else the cache root's, else ``None``.

    ``None`` is TFDS's own default, ``$TFDS_DATA_DIR`` (which wins over the cache root) or ``~/tensorflow_datasets``.
    """
    if configured:
        return os.path.expanduser(configured)
    return None if os.environ.get("TFDS_DATA_DIR") else under_cache_root(DATA_SUBDIR)


def describe(configured_data_dir: str, compilation_dir: str | None) -> str:
    """The log line naming where the data (``config.data_dir``) and compiled programs (``None``: off) are cached."""
    data = data_dir(configured_data_dir) or os.environ.get("TFDS_DATA_DIR") or os.path.expanduser(
        os.path.join("~", DATA_SUBDIR))  # TFDS's own default.
    root = os.environ.get(CACHE_DIR_VARIABLE)
    moved = f"{CACHE_DIR_VARIABLE}={root}" if root else f"{CACHE_DIR_VARIABLE}=DIR moves both"
    return (f"Caches: data, tokenizers and token ids in {os.path.abspath(data)}; compiled programs in "
            f"{compilation_dir or 'none (compilation cache off)'} ({moved}).")
