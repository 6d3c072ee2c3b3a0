"""A persistent XLA compilation cache, so that resumed runs, sweep rows and repeated seeds skip compiling.

JAX can keep every compiled program on disk, keyed by the program, the compiler options and the
backend; a later process that needs the same program loads it instead of compiling it again. A resumed
run, a second seed of a sweep row or a rerun of ``evaluate`` compiles exactly what the first process did,
so with the cache they start training or decoding after a load of milliseconds per program.

The directory comes from, in order: JAX's own ``JAX_COMPILATION_CACHE_DIR`` environment variable, then
the config field ``compilation_cache_dir``: ``""`` for no cache, a path, or ``"default"`` (the base
config's value) for ``$ATTENTION_JAX_CACHE_DIR/jax_compilation_cache`` (:mod:`attention_jax.foundation.cache_dirs`),
else :data:`DEFAULT_DIRECTORY`.
The cache is trusted code: do not point it at a directory that others can write.
"""

from __future__ import annotations

import os

import jax
from absl import logging

from attention_jax.foundation import cache_dirs

DEFAULT_DIRECTORY = "~/.cache/attention_jax/jax_compilation_cache"
"""Where compiled programs go unless an environment variable or the config names another place."""

MIN_COMPILE_SECONDS = 0.5
"""Programs that compile faster than this are not written (JAX's default is 1 s, which would skip some
CPU train steps and decoding loops)."""


def resolve_directory(configured: str | None) -> str | None:
    """The cache directory to use, or ``None`` when the cache is off.

    Parameters
    ----------
    configured : str or None
        ``config.compilation_cache_dir``: a path (``~`` is expanded), ``""`` for no cache, or
        ``"default"`` or ``None`` (field absent, e.g. an older run's config) for the cache root's
        (``ATTENTION_JAX_CACHE_DIR``), else :data:`DEFAULT_DIRECTORY`.

    Returns
    -------
    str or None
        An absolute path, or ``None``.

    Notes
    -----
    ``JAX_COMPILATION_CACHE_DIR``, when set, wins over the config: it is how a cluster job points
    every process at a shared cache without editing configs.
    """
    from_environment = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if from_environment:
        return os.path.abspath(os.path.expanduser(from_environment))
    if configured == "":
        return None
    if configured is None or configured == "default":
        configured = cache_dirs.under_cache_root(cache_dirs.COMPILATION_SUBDIR) or DEFAULT_DIRECTORY
    return os.path.abspath(os.path.expanduser(configured))


def enable(configured: str | None) -> str | None:
    """Turn the persistent compilation cache on (call before the first compilation).

    Parameters
    ----------
    configured : str or None
        ``config.compilation_cache_dir`` (see :func:`resolve_directory`).

    Returns
    -------
    str or None
        The directory in use, or ``None`` when the cache is off.

    Notes
    -----
    A directory that cannot be created or written is reported with a warning and the run goes on
    without a cache: the cache saves time, it is never needed for a correct result.
    """
    directory = resolve_directory(configured)
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
    """:func:`enable` the cache, unless this process has already chosen a cache directory for JAX.

    Parameters
    ----------
    configured : str or None
        ``config.compilation_cache_dir`` (see :func:`resolve_directory`).

    Returns
    -------
    str or None
        The directory in use: the one set before (by the caller, a test, or an earlier run's
        :func:`enable`), else :func:`enable`'s.

    Notes
    -----
    For library entry points such as ``load_run``, which a notebook or a test may call after choosing a
    cache of its own: that choice is left as it is. ``JAX_COMPILATION_CACHE_DIR`` still wins as in
    :func:`resolve_directory`.
    """
    current = getattr(jax.config, "jax_compilation_cache_dir", None)  # Set by enable() or the caller.
    if current:
        return str(current)
    return enable(configured)
