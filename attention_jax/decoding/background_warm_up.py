"""Warm a translator's source buckets in a background thread, after the first line's own; trace each once.

Line by line, ``translate`` keeps one program per source bucket (``Translator.warm_up``). The first line's
search is compiled (or loaded) when it arrives, its answer printed, and the other buckets are warmed while
the next line is awaited. The caller and the thread never run JAX on the translator at once: each bucket
is warmed holding a lock, which the caller takes around each block (:meth:`BackgroundWarmUp.holding`).

The persistent compilation cache skips XLA's compilation, not the tracing that computes its key, which was
most of a warm process's first answer. :func:`use_exported_searches` keeps each traced search as a
``jax.export`` artifact beside that cache (trusted code, as the cache is), keyed by JAX, the machine, the
package's source, the shapes and the settings; a later process loads it and compiles (from the cache)
without tracing. Not in the run directory: a read-only or shared run could not hold them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from absl import logging

SEARCHES_SUBDIR = "exported_searches"
"""Where :func:`use_exported_searches` keeps its artifacts, under the compilation cache directory."""


class BackgroundWarmUp:
    """Warm ``buckets`` of ``translator`` one by one in a daemon thread, from :meth:`start` on.

    Parameters
    ----------
    translator : decode.Translator
        The translator; its :attr:`fixed_shapes` is turned on at once, so the first line decodes to its
        bucket's length, as every later one does.
    buckets : Sequence[int]
        Source buckets to warm, in order (``Translator.source_buckets``).
    num_best : int
        The ``nbest`` the caller asks for (a compiled setting).
    """

    def __init__(self, translator: Any, buckets: Sequence[int], num_best: int = 1) -> None:
        translator.fixed_shapes = True
        self._translator = translator
        self._pending = list(buckets)
        self._num_best = num_best
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.warmed: list[int] = []

    @contextlib.contextmanager
    def holding(self) -> Iterator[Any]:
        """Hold the translator for a block: wait for the bucket being warmed, warm none meanwhile."""
        with self._lock:
            yield self._translator

    def start(self) -> None:
        """Start warming the buckets (again: nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._warm_all, name="translate-warm-up", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Warm no further bucket and wait for the one in progress.

        A thread whose start was interrupted (Ctrl-C inside :meth:`start`) is not waited for: it finds no
        bucket left and ends at once.
        """
        with self._lock:
            self._pending.clear()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join()

    def _warm_all(self) -> None:
        started = time.perf_counter()
        while True:
            with self._lock:
                if not self._pending:
                    break
                length = self._pending.pop(0)
                try:  # A bucket already compiled (the first line's) is a call of the compiled program.
                    self._translator.warm_bucket(length, self._num_best)
                except Exception as error:  # A line of that bucket compiles it when it comes.
                    logging.warning("Warming the search for source bucket %d failed: %s", length, error)
                    continue
                self.warmed.append(length)
        logging.info("Warmed the search for source buckets %s in %.1f s, in the background.", self.warmed,
                     time.perf_counter() - started)


def use_exported_searches(translator: Any, cache_dir: str | None) -> bool:
    """Route ``translator``'s fixed-shape searches through ``jax.export`` artifacts kept under ``cache_dir``.

    A search met for the first time is traced, exported and written (atomically) before it runs; one written
    before is read and called instead of being traced. Hypotheses are those of the plain search. Any failure
    to export, write or read falls back to the plain search, with a warning.

    Parameters
    ----------
    translator : decode.Translator
        The translator; its searches go through the artifacts while :attr:`fixed_shapes` is on.
    cache_dir : str or None
        The persistent compilation cache's directory; ``None`` (no cache): nothing changes.

    Returns
    -------
    bool
        Whether the artifacts are in use (not with a mesh, nor without a cache).
    """
    if cache_dir is None or translator.mesh is not None:
        return False
    plain_decode = translator._decode
    calls: dict[tuple[Any, ...], Callable[..., Any] | None] = {}

    def _decode(batch: Any, num_best: int = 1) -> Any:
        from attention_jax.decoding import beam_search

        if not translator.fixed_shapes:
            return plain_decode(batch, num_best)
        key = (batch.inputs.shape, num_best)
        if key not in calls:
            calls[key] = _exported_search(translator, os.path.join(cache_dir, SEARCHES_SUBDIR),
                                          batch.inputs.shape, num_best)
        call = calls[key]
        if call is None:
            return plain_decode(batch, num_best)
        return beam_search.SearchResult(*call(translator.params, batch.inputs, batch.max_lengths))

    translator._decode = _decode
    return True


def _search_settings(translator: Any, source_len: int, num_best: int) -> dict[str, Any]:
    """The static arguments of ``decode_batch`` as ``Translator._decode`` passes them with fixed shapes."""
    return dict(model_config=translator.model_config, method=translator.settings.method,
                beam_size=translator.beam_size, alpha=translator.alpha,
                max_decode_len=min(source_len + translator.max_extra_len, translator.model_config.max_len),
                use_cache=translator.use_cache, mesh=None, cache_stages=translator.settings.cache_stages,
                num_best=num_best)


@functools.cache
def _source_digest() -> str:
    """A digest of the package's Python source: an edited search is traced again, never read stale."""
    import attention_jax

    root, digest = os.path.dirname(os.path.abspath(attention_jax.__file__)), hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        for name in sorted(name for name in files if name.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as file:
                digest.update(file.read() + b"\0")
    return digest.hexdigest()


def _artifact_name(params: Any, shapes: Sequence[tuple[int, ...]], settings: dict[str, Any]) -> str:
    """The artifact's file name: a digest of everything the traced search depends on."""
    import jax
    import jaxlib

    parts = [jax.__version__, jaxlib.__version__, jax.default_backend(), jax.devices()[0].device_kind,
             str(getattr(jax.config, "jax_enable_x64", None)),
             str(getattr(jax.config, "jax_default_matmul_precision", None)), _source_digest(),
             repr(shapes), repr(sorted(settings.items()))]
    parts += [f"{jax.tree_util.keystr(path)}:{leaf.shape}:{leaf.dtype}"
              for path, leaf in jax.tree_util.tree_leaves_with_path(params)]
    return "search-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40] + ".jax_export"


def _exported_search(translator: Any, directory: str, inputs_shape: tuple[int, ...],
                     num_best: int) -> Callable[..., Any] | None:
    """Return the jitted call of the bucket's exported search, read or written now; ``None`` on a failure."""
    import jax
    import numpy as np

    from attention_jax.decoding import decode, exported_functions

    settings = _search_settings(translator, inputs_shape[1], num_best)
    shapes = [inputs_shape, inputs_shape[:1]]
    path = os.path.join(directory, _artifact_name(translator.params, shapes, settings))
    try:
        if os.path.isfile(path):
            return jax.jit(exported_functions.load_exported(path).call)
        params = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype), translator.params)
        search = jax.jit(lambda *arrays: tuple(decode.decode_batch(*arrays, **settings)))
        exported = jax.export.export(search)(params, *(jax.ShapeDtypeStruct(shape, np.int32) for shape in shapes))
        os.makedirs(directory, exist_ok=True)
        exported_functions.save_exported(path, exported)
        return jax.jit(exported.call)
    except Exception as error:  # The plain search serves the bucket instead.
        logging.warning("Source bucket %d's search goes without an exported artifact (%s): %s", inputs_shape[1],
                        path, error)
        return None
