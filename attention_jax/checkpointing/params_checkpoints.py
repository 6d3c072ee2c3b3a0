"""Parameters-only checkpoints (``averaged/``, ``best/``) and a run's parameters for inference."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from etils import epath

from attention_jax.checkpointing.checkpoints import (
    PARAMS_ITEM,
    _absolute_path,
    finished_steps,
    read_while_rotating,
    reason_line,
)
from attention_jax.checkpointing.run_config import read_config
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import full_disk, run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import language_model


def _save_params(directory: str, step: int, params: Any, info: Mapping[str, Any], *, keep: int | None = 1) -> None:
    """Write a parameters-only checkpoint under ``step`` (replaced), synchronously; ``OSError`` for a full disk."""
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False)
    with (_writing_alone(directory), full_disk.as_os_error(),
          ocp.CheckpointManager(_absolute_path(directory), options=options) as manager):
        if step in manager.all_steps():
            manager.delete(step)
        manager.save(step, args=ocp.args.Composite(params=ocp.args.StandardSave(params),
                                                   info=ocp.args.JsonSave(dict(info))), force=True)
        manager.wait_until_finished()


@contextlib.contextmanager
def _writing_alone(directory: str) -> Iterator[None]:
    """Hold an exclusive lock on a local ``directory``: two writers' orbax temporary directories collided."""
    if "://" in directory:
        yield
        return
    os.makedirs(directory, exist_ok=True)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # Releases the lock.


def _ranked_by_perplexity(directory: str) -> list[int]:
    """Return a ``best/`` directory's steps, lowest dev perplexity first (ties: earlier; unrecorded: last)."""
    def _rank(step: int) -> tuple[float, int]:
        perplexity = _read_params_info(directory, step).get("eval_ppl")
        return (float(perplexity), step) if perplexity is not None else (float("inf"), -step)

    return sorted(finished_steps(directory), key=_rank)


def keep_if_among_best(directory: str, step: int, perplexity: float, params: Callable[[], Any], *,
                       keep: int) -> bool:
    """Save an evaluation's parameters when its dev perplexity is among the ``keep`` best so far.

    Parameters
    ----------
    directory : str
        ``WORKDIR/best``.
    step : int
        The evaluated step (an earlier save of it is replaced).
    perplexity : float
        Its dev perplexity; NaN is never kept.
    params : Callable[[], Any]
        Returns the parameters; called only to save them.
    keep : int
        Evaluations kept: the lowest perplexities.

    Returns
    -------
    bool
        Whether they were saved (those beyond the ``keep`` best are deleted).
    """
    ranked = [kept for kept in _ranked_by_perplexity(directory) if kept != step]
    if not perplexity == perplexity:  # NaN.
        return False
    if len(ranked) >= keep:
        worst = _read_params_info(directory, ranked[keep - 1]).get("eval_ppl")
        if worst is not None and perplexity >= float(worst):
            return False
    _save_params(directory, step, params(), {"step": step, "eval_ppl": float(perplexity)}, keep=None)
    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=False)
    with ocp.CheckpointManager(_absolute_path(directory), options=options) as manager:
        for dropped in ranked[keep - 1:]:
            manager.delete(dropped)
    return True


class StaleAverageError(ValueError):
    """The averaged checkpoint is older than the run's newest training checkpoint."""


def _read_params_info(directory: str, step: int) -> dict[str, Any]:
    """Return the ``info`` item of a parameters-only checkpoint (``{}`` without one)."""
    path = _absolute_path(directory) / str(step) / "info"
    if not path.exists():
        return {}
    handler = ocp.JsonCheckpointHandler()
    try:
        return dict(handler.restore(path, args=ocp.args.JsonRestore()) or {})
    finally:
        handler.close()


def _newest_average(workdir: str) -> tuple[str, int | None, dict[str, Any]]:
    """Return ``WORKDIR/averaged``, its newest step (``None`` if none) and that average's info."""
    averaged_dir = os.path.join(workdir, run_files.AVERAGED_DIR)
    saved = finished_steps(averaged_dir)
    if not saved:
        return averaged_dir, None, {}
    return averaged_dir, saved[-1], _read_params_info(averaged_dir, saved[-1])


def check_average_is_current(workdir: str) -> list[int]:
    """Return the steps the averaged checkpoint averages, refusing one older than the run's latest model.

    Parameters
    ----------
    workdir : str
        A training work directory.

    Returns
    -------
    list[int]
        The averaged steps (empty when unrecorded).

    Raises
    ------
    StaleAverageError
        When newer training checkpoints exist.
    """
    averaged_dir, saved, info = _newest_average(workdir)
    if saved is None:
        return []
    steps = [int(step) for step in info.get("averaged_steps", [])]
    source = info.get("source", run_files.CHECKPOINT_DIR)
    if not steps:
        logging.warning("%s/%d does not record which steps it averages; re-average to be sure it is current.",
                        averaged_dir, saved)
        return []
    newer = [step for step in finished_steps(os.path.join(workdir, source)) if step > steps[-1]]
    if newer:
        raise StaleAverageError(
            f"the averaged checkpoint of {workdir} averages steps {steps}, but {source}/ holds newer "
            f"steps {newer}: it is not the run's latest model. Re-average (python -m "
            f"attention_jax.average_checkpoints --workdir={workdir} --last={len(steps)}, or --reaverage "
            f"here), or evaluate --checkpoint=latest.")
    return steps


def write_average(workdir: str, last: int, *, source: str = run_files.CHECKPOINT_DIR) -> list[int]:
    """Average the newest ``last`` checkpoints of ``WORKDIR/<source>`` into ``WORKDIR/averaged``.

    Parameters
    ----------
    workdir : str
        A training work directory.
    last : int
        Checkpoints to average.
    source : str
        ``run_files.CHECKPOINT_DIR`` or ``run_files.BEST_DIR``.

    Returns
    -------
    list[int]
        The averaged steps; filed under the newest.
    """
    params, steps = read_while_rotating(os.path.join(workdir, source),
                                        lambda: average_last_params(workdir, last, directory_name=source),
                                        f"the last {last} checkpoints")
    directory = os.path.join(workdir, run_files.AVERAGED_DIR)
    _save_params(directory, steps[-1], params, {"averaged_steps": steps, "source": source})
    logging.info("Wrote the average of steps %s to %s.", steps, directory)
    return steps


def reaverage(workdir: str) -> list[int]:
    """Redo the run's average over the newest checkpoints, with as many steps as before.

    Parameters
    ----------
    workdir : str
        A training work directory with ``averaged/``.

    Returns
    -------
    list[int]
        The newly averaged steps.

    Raises
    ------
    FileNotFoundError
        When there is no average to redo.
    """
    averaged_dir, saved, info = _newest_average(workdir)
    if saved is None:
        raise FileNotFoundError(f"no averaged checkpoint in {averaged_dir} to redo: run "
                                f"`python -m attention_jax.average_checkpoints --workdir={workdir}` first.")
    count = len(info.get("averaged_steps", [])) or read_config(workdir).run.average_last_checkpoints
    return write_average(workdir, count, source=info.get("source", run_files.CHECKPOINT_DIR))


def abstract_inference_params(experiment: Experiment,
                              sharding: jax.sharding.Sharding | None = None) -> Any:
    """Return the shapes of ``experiment``'s unboxed model parameters, placed on one device.

    Parameters
    ----------
    experiment : Experiment
        Gives the model and model kind.
    sharding : jax.sharding.Sharding, optional
        Where to restore; the first local device by default.

    Returns
    -------
    pytree
        ``jax.ShapeDtypeStruct`` leaves.
    """
    sharding = sharding or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    shapes = language_model.abstract_params(experiment.model, experiment.model_kind)
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding),
                        nn.meta.unbox(shapes))


def restore_params(directory: str, step: int, abstract_params: Any) -> Any:
    """Restore only the ``params`` item of the checkpoint ``step`` under ``directory``.

    Parameters
    ----------
    directory : str
        Orbax manager root.
    step : int
        The checkpoint's step.
    abstract_params : pytree
        Target shapes and shardings.

    Returns
    -------
    pytree
        The parameters.
    """
    # The params item alone, by its own handler: a manager would warn about every item it was not asked to restore.
    with ocp.StandardCheckpointer() as checkpointer:
        return checkpointer.restore(_absolute_path(directory) / str(step) / PARAMS_ITEM, abstract_params)


def _leaf_shapes(tree: Any) -> dict[str, tuple[int, ...]]:
    return {jax.tree_util.keystr(path): tuple(leaf.shape)
            for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def params_mismatch(directory: str, step: int, abstract_params: Any) -> list[str]:
    """Return how a checkpoint's parameter shapes (from its metadata) differ from the expected ones.

    Parameters
    ----------
    directory : str
        Orbax manager root.
    step : int
        The checkpoint's step.
    abstract_params : pytree
        Expected shapes.

    Returns
    -------
    list[str]
        One line per differing, missing or unexpected leaf.
    """
    handler = ocp.StandardCheckpointHandler()
    try:
        stored = _leaf_shapes(handler.metadata(_absolute_path(directory) / str(step) / PARAMS_ITEM))
    finally:
        handler.close()
    expected = _leaf_shapes(abstract_params)
    lines = [f"{path}: {stored[path]} in the checkpoint, {shape} expected"
             for path, shape in expected.items() if path in stored and stored[path] != shape]
    lines += [f"{path}: missing from the checkpoint" for path in expected if path not in stored]
    lines += [f"{path}: in the checkpoint but not in the model" for path in stored if path not in expected]
    return lines


def checkpoint_candidates(workdir: str, which: str = "latest", *,
                          directory_name: str = run_files.CHECKPOINT_DIR) -> tuple[epath.Path, list[int]]:
    """Return where the parameters ``which`` names lie in a run, and the steps to try there, in order.

    Parameters
    ----------
    workdir, which, directory_name : str
        As in :func:`load_for_inference`.

    Returns
    -------
    (directory, steps)
        Orbax manager root and steps: newest first for ``"latest"`` (older ones fall back), else one.

    Raises
    ------
    FileNotFoundError
        When there is no such checkpoint.
    StaleAverageError
        For an average older than the newest checkpoint.
    ValueError
        For an unknown ``which``.
    """
    root = epath.Path(workdir)
    if which in ("averaged", "best"):
        directory = root / (run_files.AVERAGED_DIR if which == "averaged" else run_files.BEST_DIR)
        steps = finished_steps(str(directory))
        if not steps:
            how = (f"run `python -m attention_jax.average_checkpoints --workdir={workdir}` first"
                   if which == "averaged" else "train with config.early_stopping_patience > 0")
            raise FileNotFoundError(f"no {which} checkpoint in {directory}: {how}.")
        if which == "averaged":
            check_average_is_current(workdir)
        # The newest average; the lowest dev perplexity among the best kept.
        candidates = [steps[-1]] if which == "averaged" else _ranked_by_perplexity(str(directory))[:1]
    elif which == "latest" or which.isdigit():
        directory = root / directory_name
        steps = finished_steps(str(directory))
        if not steps:
            raise FileNotFoundError(f"no finished checkpoint in {directory}.")
        if which == "latest":
            candidates = list(reversed(steps))
        elif int(which) in steps:
            candidates = [int(which)]
        else:
            raise FileNotFoundError(f"no checkpoint for step {which} in {directory}; steps: {steps}.")
    else:
        raise ValueError(f"which must be 'latest', 'averaged', 'best' or a step number; got {which!r}.")
    return directory, candidates


def load_for_inference(workdir: str, which: str = "latest", *,
                       directory_name: str = run_files.CHECKPOINT_DIR) -> tuple[Any, Experiment]:
    """Return the parameters and experiment of a training run, for decoding, evaluation and notebooks.

    Parameters
    ----------
    workdir, which, directory_name : str
        A training work directory; ``"latest"`` (newest readable), ``"averaged"``, ``"best"`` (dev perplexity) or
        a step like ``"12000"``; where a step is looked up, ``run_files.CHECKPOINT_DIR`` or ``run_files.BEST_DIR``.

    Returns
    -------
    (params, experiment)
        Unboxed float32 parameters on the first local device, and the run's :class:`Experiment`.

    Raises
    ------
    FileNotFoundError
        For a missing workdir, config or checkpoint.
    ValueError
        For an unknown ``which`` (``UserInputError``: parameters that do not fit the config).
    """
    config = read_config(workdir)
    directory, candidates = checkpoint_candidates(workdir, which, directory_name=directory_name)
    abstract = abstract_inference_params(config)
    last_error: Exception | None = None
    for step in candidates:
        try:
            mismatch = params_mismatch(str(directory), step, abstract)
        except Exception as error:  # Unreadable metadata: let the restore below report it.
            mismatch, last_error = [], error
        if mismatch:
            listed = "; ".join(mismatch[:5]) + (f"; and {len(mismatch) - 5} more" if len(mismatch) > 5 else "")
            raise UserInputError(f"checkpoint {directory}/{step} does not fit the model of "
                                 f"{workdir}/config.json (written by another version of attention_jax, or "
                                 f"another config.json): {listed}.")
        try:
            return restore_params(str(directory), step, abstract), config
        except Exception as error:  # Damaged files: try an older one for "latest".
            last_error = error
        logging.warning("Checkpoint %s/%d is unreadable (%s).", directory, step,
                        reason_line(last_error) if last_error else "no error")
    raise FileNotFoundError(f"no readable checkpoint among {candidates} in {directory}: "
                            f"{reason_line(last_error) if last_error else 'none found'}")


def average_last_params(workdir: str, count: int, *,
                        directory_name: str = run_files.CHECKPOINT_DIR) -> tuple[Any, list[int]]:
    """Return the element-wise mean of a run's newest ``count`` checkpoints' parameters (Section 6.1).

    Sums in float64 on the host, one checkpoint in memory at a time besides the sum.

    Parameters
    ----------
    workdir : str
        A training work directory.
    count : int
        Checkpoints to average (paper: 5 for base, 20 for big).
    directory_name : str
        ``run_files.CHECKPOINT_DIR`` (the last ones) or ``run_files.BEST_DIR`` (the ``count`` best).

    Returns
    -------
    (params, steps)
        float32 averaged parameters (host NumPy) and the averaged steps, ascending.

    Raises
    ------
    UserInputError
        For a non-positive ``count`` or fewer checkpoints than it.
    """
    if count <= 0:
        raise UserInputError(f"the number of checkpoints to average must be positive; got {count}.")
    directory = os.path.join(workdir, directory_name)
    steps = finished_steps(directory)
    if len(steps) < count:
        raise UserInputError(
            f"asked to average the last {count} checkpoints but {directory} holds {len(steps)} "
            f"(steps {steps}); average fewer, or train with config.keep_checkpoints >= {count}."
        )
    chosen = (sorted(_ranked_by_perplexity(directory)[:count]) if directory_name == run_files.BEST_DIR
              else steps[-count:])
    total = None
    for step in chosen:
        params, _ = load_for_inference(workdir, str(step), directory_name=directory_name)
        host = jax.tree.map(lambda leaf: np.asarray(leaf, np.float64), params)
        total = host if total is None else jax.tree.map(np.add, total, host)
        logging.info("Added the parameters of step %d.", step)
    average = jax.tree.map(lambda leaf: (leaf / len(chosen)).astype(np.float32), total)
    return average, chosen
