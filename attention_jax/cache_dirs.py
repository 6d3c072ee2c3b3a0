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
    """``$ATTENTION_JAX_CACHE_DIR/<subdir>`` as an absolute path, or ``None`` when the variable is unset.

    Parameters
    ----------
    subdir : str
        :data:`DATA_SUBDIR` or :data:`COMPILATION_SUBDIR`.

    Returns
    -------
    str or None
    """
    root = os.environ.get(CACHE_DIR_VARIABLE)
    return os.path.abspath(os.path.join(os.path.expanduser(root), subdir)) if root else None


def data_dir(configured: str) -> str | None:
    """The data directory to hand TFDS: ``config.data_dir``, else the cache root's, else ``None``.

    Parameters
    ----------
    configured : str
        ``config.data_dir`` ('' when unset).

    Returns
    -------
    str or None
        ``None``: TFDS's own default (``$TFDS_DATA_DIR``, else ``~/tensorflow_datasets``), also when
        ``TFDS_DATA_DIR`` is set beside ``ATTENTION_JAX_CACHE_DIR``.
    """
    if configured:
        return os.path.expanduser(configured)
    return None if os.environ.get("TFDS_DATA_DIR") else under_cache_root(DATA_SUBDIR)


def describe(configured_data_dir: str, compilation_dir: str | None) -> str:
    """The log line naming where this run's data and compiled programs are cached.

    Parameters
    ----------
    configured_data_dir : str
        ``config.data_dir``.
    compilation_dir : str or None
        The compilation cache in use (``None``: off).

    Returns
    -------
    str
    """
    data = data_dir(configured_data_dir) or os.environ.get("TFDS_DATA_DIR") or os.path.expanduser(
        os.path.join("~", DATA_SUBDIR))  # TFDS's own default.
    root = os.environ.get(CACHE_DIR_VARIABLE)
    moved = f"{CACHE_DIR_VARIABLE}={root}" if root else f"{CACHE_DIR_VARIABLE}=DIR moves both"
    return (f"Caches: data, tokenizers and token ids in {os.path.abspath(data)}; compiled programs in "
            f"{compilation_dir or 'none (compilation cache off)'} ({moved}).")
