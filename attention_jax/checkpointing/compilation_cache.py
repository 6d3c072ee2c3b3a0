"""A persistent XLA compilation cache (trusted code: never a directory others can write)."""

from __future__ import annotations

import os

import jax
from absl import logging

from attention_jax.foundation import cache_dirs

DEFAULT_DIRECTORY = "~/.cache/attention_jax/jax_compilation_cache"
# Faster compilations are not written; JAX's default, 1 s, would skip some CPU train steps and decoding loops.
MIN_COMPILE_SECONDS = 0.5


def _resolve_directory(configured: str | None) -> str | None:
    """Return ``JAX_COMPILATION_CACHE_DIR``, else ``configured`` (``""``: none; ``"default"``, ``None``: default)."""
    from_environment = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if from_environment:
        return os.path.abspath(os.path.expanduser(from_environment))
    if configured == "":
        return None
    if configured is None or configured == "default":
        configured = cache_dirs.under_cache_root(cache_dirs.COMPILATION_SUBDIR) or DEFAULT_DIRECTORY
    return os.path.abspath(os.path.expanduser(configured))


def enable(configured: str | None) -> str | None:
    """Turn the persistent compilation cache on, before the first compilation (unwritable: warn, go on without).

    Parameters
    ----------
    configured : str or None
        ``config.compilation_cache_dir``.

    Returns
    -------
    str or None
        The directory in use, or ``None`` when the cache is off.
    """
    directory = _resolve_directory(configured)
    if directory is None:
        return None
    try:
        os.makedirs(directory, exist_ok=True)
        if not os.access(directory, os.W_OK):
            raise PermissionError(f"{directory} is not writable")
    except OSError as error:
        logging.warning("No compilation cache (%s); set --config.compilation_cache_dir to a writable "
                        "directory, or to '' to silence this.", error)
        return None
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    logging.info("Compilation cache: %s", directory)
    return directory


def enable_unless_set(configured: str | None) -> str | None:
    """Call :func:`enable` unless this process chose a cache directory already.

    Parameters
    ----------
    configured : str or None
        ``config.compilation_cache_dir``.

    Returns
    -------
    str or None
        The directory in use.
    """
    current = getattr(jax.config, "jax_compilation_cache_dir", None)  # Set by enable() or the caller.
    if current:
        return str(current)
    return enable(configured)
