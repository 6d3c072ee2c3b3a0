"""Warm a translator's source buckets in a background thread, after the first line's own; trace each once.

The compilation cache skips XLA's compilation, not the tracing that computes its key: :class:`ExportedSearches`
keeps each traced search as a ``jax.export`` artifact beside that cache, so a later process does not trace.
:func:`load_run` keeps the restored parameters there too, read again without Orbax.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from absl import logging

from attention_jax.foundation import cache_dirs

SEARCHES_SUBDIR = "exported_searches"  # Under the compilation cache directory: a read-only run could not hold them.


class BackgroundWarmUp:
    """Warm ``buckets`` of ``translator`` one by one in a daemon thread, from :meth:`start` on.

    Each bucket is warmed holding a lock, which the caller takes around each block (:meth:`holding`).

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

    def wait(self) -> None:
        """Wait until every bucket given is warmed (or failed and left to its first line); at once if never started."""
        if self._thread is not None:
            self._thread.join()

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


def load_run(workdir: str, checkpoint: str = "latest", average_last: int = 0) -> Any:
    """Return ``inference.load_run``'s run, with its parameters read from the restore cache where current.

    The first process restores them (Orbax) and keeps them under the compilation cache directory; a later
    one reads them there, with the config and tokenizer, without importing Orbax. The entry is written after
    ``load_run``'s checks passed, and only if the run's files did not change during the restore.

    Parameters
    ----------
    workdir, checkpoint : str
        A training work directory or an export; as ``inference.load_run``'s.
    average_last : int
        As ``inference.load_run``'s.

    Returns
    -------
    inference.TrainedRun
        The run; the same parameters as ``inference.load_run``'s.
    """
    import jax

    from attention_jax.checkpointing import restored_params
    from attention_jax.decoding import inference

    identity = _restore_identity(workdir, checkpoint, average_last)
    if identity is not None:
        cached = _cached_run(workdir, checkpoint, average_last, identity)
        if cached is not None:
            return cached
    run = inference.load_run(workdir, checkpoint, average_last=average_last)
    cache_dir = getattr(jax.config, "jax_compilation_cache_dir", None)
    if identity is not None and cache_dir and identity == _restore_identity(workdir, checkpoint, average_last):
        path = restored_params.entry_path(cache_dir, workdir, checkpoint, average_last)
        try:
            restored_params.save(path, run.params, identity, run.checkpoint)
        except Exception as error:  # The next process restores them again.
            logging.warning("The restored parameters are not kept in %s: %s", path, error)
    return run


def _restore_identity(workdir: str, checkpoint: str, average_last: int) -> str | None:
    """``restored_params.run_identity``, or ``None`` where no entry serves (no checkpoints/: an export; unreadable)."""
    from attention_jax.checkpointing import restored_params
    from attention_jax.foundation import run_files

    if not isinstance(workdir, str) or not os.path.isdir(os.path.join(workdir, run_files.CHECKPOINT_DIR)):
        return None
    try:
        return restored_params.run_identity(workdir, checkpoint, average_last)
    except OSError:
        return None


def _cached_run(workdir: str, checkpoint: str, average_last: int, identity: str) -> Any:
    """The run with its parameters from a current entry, as ``inference.load_run`` builds it; else ``None``."""
    import jax

    from attention_jax.checkpointing import compilation_cache, restored_params, run_config
    from attention_jax.data.tokenizer import Tokenizer
    from attention_jax.decoding import inference
    from attention_jax.foundation import run_files
    from attention_jax.models.variants import ModelKind

    try:
        experiment = run_config.read_config(workdir)
    except Exception:  # load_run explains.
        experiment = None
    tokenizer_path = os.path.join(workdir, run_files.TOKENIZER_FILE)
    if experiment is None or experiment.model_kind != ModelKind.ENCODER_DECODER or not os.path.isfile(tokenizer_path):
        return None  # load_run explains.
    compilation_cache.enable_unless_set(experiment.run.compilation_cache_dir)  # As load_run does.
    cache_dir = getattr(jax.config, "jax_compilation_cache_dir", None)
    found = cache_dir and restored_params.load(restored_params.entry_path(cache_dir, workdir, checkpoint, average_last),
                                              identity)
    if not found:
        return None
    try:
        tokenizer = Tokenizer.load(tokenizer_path)
    except Exception:  # load_run explains.
        return None
    params, description = found
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])  # As the restore places them: the same programs.
    return inference.TrainedRun(workdir, description, experiment, experiment.model, jax.device_put(params, device),
                                tokenizer)


def start_lapack() -> None:
    """Import SciPy's LAPACK in a daemon thread, before the run loads: the first exported search needs it.

    ``jax.export``'s call initialises jaxlib's CPU linear algebra with it, whatever the search holds.
    """

    def _import() -> None:
        with contextlib.suppress(ImportError):  # jaxlib reports it where it is needed.
            importlib.import_module("scipy.linalg.cython_lapack")

    threading.Thread(target=_import, name="translate-lapack", daemon=True).start()


class ExportedSearches:
    """A translator's fixed-shape searches as ``jax.export`` artifacts kept under a compilation cache directory.

    Keyed by JAX, the machine, the package's source, the shapes and the settings; hypotheses are the plain search's.

    Parameters
    ----------
    cache_dir : str
        The persistent compilation cache's directory; the artifacts go to its :data:`SEARCHES_SUBDIR`.
    """

    def __init__(self, cache_dir: str) -> None:
        self.directory = os.path.join(cache_dir, SEARCHES_SUBDIR)
        self._calls: dict[tuple[Any, ...], Callable[..., Any] | None] = {}

    def search(self, translator: Any, batch: Any, num_best: int) -> Any:
        """Return the search's result for ``batch`` from its artifact, or ``None`` where none serves (warned once).

        Parameters
        ----------
        translator : decode.Translator
            Its parameters and settings are those of the search.
        batch : decode._Batch
            Padded inputs and maximum lengths, of a source bucket's fixed shape.
        num_best : int
            Hypotheses kept per sentence.

        Returns
        -------
        beam_search.SearchResult or None
            ``None``: exporting, writing or reading failed, and the plain search is the caller's.
        """
        from attention_jax.decoding import beam_search

        key = (batch.inputs.shape, num_best)
        if key not in self._calls:
            self._calls[key] = _exported_search(translator, self.directory, batch.inputs.shape, num_best)
        call = self._calls[key]
        return None if call is None else beam_search.SearchResult(*call(translator.params, batch.inputs,
                                                                         batch.max_lengths))


def _search_settings(translator: Any, source_len: int, num_best: int) -> dict[str, Any]:
    """The static arguments of ``decode_batch`` as ``Translator._decode`` passes them with fixed shapes."""
    return dict(model_config=translator.model_config, method=translator.settings.method,
                beam_size=translator.beam_size, alpha=translator.alpha,
                max_decode_len=min(source_len + translator.max_extra_len, translator.model_config.max_len),
                use_cache=translator.use_cache, mesh=None, cache_stages=translator.settings.cache_stages,
                num_best=num_best)


def _artifact_name(params: Any, shapes: Sequence[tuple[int, ...]], settings: dict[str, Any]) -> str:
    """The artifact's file name: a digest of everything the traced search depends on."""
    import jax
    import jaxlib

    parts = [jax.__version__, jaxlib.__version__, jax.default_backend(), jax.devices()[0].device_kind,
             str(getattr(jax.config, "jax_enable_x64", None)),
             str(getattr(jax.config, "jax_default_matmul_precision", None)), cache_dirs.source_digest(),
             repr(shapes), repr(sorted(settings.items()))]
    parts += [f"{jax.tree_util.keystr(path)}:{leaf.shape}:{leaf.dtype}"
              for path, leaf in jax.tree_util.tree_leaves_with_path(params)]
    return "search-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40] + ".jax_export"


def _exported_search(translator: Any, directory: str, inputs_shape: tuple[int, ...],
                     num_best: int) -> Callable[..., Any] | None:
    """Return the jitted call of the bucket's exported search, read or written now; ``None`` on a failure."""
    import jax
    import numpy as np

    from attention_jax.decoding import decode

    settings = _search_settings(translator, inputs_shape[1], num_best)
    shapes = [inputs_shape, inputs_shape[:1]]
    path = os.path.join(directory, _artifact_name(translator.params, shapes, settings))
    try:
        if os.path.isfile(path):  # exported_functions.load_exported's read, without its Flax import.
            with open(path, "rb") as file:
                return jax.jit(jax.export.deserialize(bytearray(file.read())).call)
        from attention_jax.decoding import exported_functions

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
