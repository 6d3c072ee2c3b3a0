"""Orbax checkpoints of training runs and the run files beside them (layout: docs/python_api.md)."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import shutil
import time
from typing import Any, Callable, Mapping, TypeVar

import jax
import orbax.checkpoint as ocp
from absl import logging
from etils import epath
from jax.experimental import multihost_utils

# Re-exported: commands, training and tests read and write a run's config.json through this module.
from attention_jax.checkpointing.run_config import read_config as read_config
from attention_jax.checkpointing.run_config import write_config as write_config
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import full_disk, run_files
from attention_jax.foundation.user_errors import UserInputError

_Read = TypeVar("_Read")

PARAMS_ITEM = "params"  # The parameters' item inside each step directory (orbax Composite layout).
REASON_LIMIT = 300  # Characters of an error's message that reason_line keeps.
_TENSORSTORE_ANNOTATION = re.compile(r"\s*\[(?:tensorstore_spec|source locations)=.*", re.S)


def reason_line(error: BaseException, limit: int = REASON_LIMIT) -> str:
    """Return why a checkpoint could not be read as ``"<type>: <message>"``, one line, TensorStore's spec cut.

    Parameters
    ----------
    error : BaseException
        What restoring a checkpoint raised.
    limit : int
        Characters of the message kept.

    Returns
    -------
    str
        E.g. ``"ValueError: NOT_FOUND: Error opening ..."``.
    """
    message = " ".join(_TENSORSTORE_ANNOTATION.sub("", str(error)).split())
    if len(message) > limit:
        message = message[:limit].rstrip() + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _absolute_path(path: str | os.PathLike) -> epath.Path:
    """Return ``path`` made absolute when local (orbax refuses relative paths); a URL unchanged."""
    text = os.fspath(path)
    return epath.Path(text if "://" in text else os.path.abspath(text))


class IteratorStateHandler(ocp.CheckpointHandler):
    """Orbax handler of the data iterator state: one ``process_<i>-of-<n>.json`` each, bytes base64."""

    def save(self, directory: epath.Path, args: "IteratorStateSave") -> None:  # numpydoc ignore=PR01
        """Write this process's state into the item's ``directory`` (Orbax's handler interface)."""
        state = args.state
        if isinstance(state, bytes):
            payload = {"bytes_base64": base64.b64encode(state).decode("ascii")}
        else:
            payload = {"json": state}
        name = _iterator_file(jax.process_index(), jax.process_count())
        (epath.Path(directory) / name).write_text(json.dumps(payload))

    def restore(self, directory: epath.Path, args: "IteratorStateRestore | None" = None) -> Any:  # numpydoc ignore=PR01
        """Return this process's saved state; ``None`` (the data order restarts) if another process count wrote it.

        Returns
        -------
        Any
            The iterator's ``get_state()`` as saved.
        """
        del args
        path = epath.Path(directory) / _iterator_file(jax.process_index(), jax.process_count())
        if not path.exists():
            found = sorted(p.name for p in epath.Path(directory).glob("process_*.json"))
            logging.warning("No data iterator state %s (found %s): the data order restarts.",
                            path.name, found)
            return None
        payload = json.loads(path.read_text())
        if "bytes_base64" in payload:
            return base64.b64decode(payload["bytes_base64"])
        return payload["json"]

    def metadata(self, directory: epath.Path) -> None:  # numpydoc ignore=PR01
        """Keep no metadata."""
        del directory
        return None

    def finalize(self, directory: epath.Path) -> None:  # numpydoc ignore=PR01
        """Finalize nothing: files are complete when written."""
        del directory

    def close(self) -> None:
        """Release nothing."""


def _iterator_file(process_index: int, process_count: int) -> str:
    return f"process_{process_index}-of-{process_count}.json"


@ocp.args.register_with_handler(IteratorStateHandler, for_save=True)
@dataclasses.dataclass
class IteratorStateSave(ocp.args.CheckpointArgs):
    """Save argument: ``state`` is the iterator's ``get_state()`` (JSON-able or bytes)."""

    state: Any


@ocp.args.register_with_handler(IteratorStateHandler, for_restore=True)
@dataclasses.dataclass
class IteratorStateRestore(ocp.args.CheckpointArgs):
    """Restore argument (no fields)."""



def write_tokenizer(workdir: str, model_proto: bytes) -> None:
    """Keep the run's tokenizer in ``WORKDIR/tokenizer.model``, so it decodes without the corpus (process 0 only).

    Parameters
    ----------
    workdir : str
        The work directory.
    model_proto : bytes
        The serialized SentencePiece model.
    """
    if jax.process_index() != 0:
        return
    run_files.write_atomically(os.path.join(workdir, run_files.TOKENIZER_FILE), model_proto)


def finished_results(workdir: str, experiment: Experiment) -> dict[str, Any] | None:
    """Return ``results.json`` of a run that already finished with exactly ``experiment`` (nothing left to do).

    Parameters
    ----------
    workdir : str
        The work directory.
    experiment : Experiment
        The new command's.

    Returns
    -------
    dict or None
        ``None`` for a fresh, interrupted or changed run.
    """
    root = epath.Path(workdir)
    results_path, config_path = root / run_files.RESULTS_FILE, root / run_files.CONFIG_FILE
    if not (results_path.exists() and config_path.exists()):
        return None
    try:
        results = json.loads(results_path.read_text())
        saved = json.loads(config_path.read_text())
    except json.JSONDecodeError:
        return None
    now = experiment.to_json_dict()
    if not results.get("finished") or _flatten_config(saved) != _flatten_config(now):
        return None
    return results


def _flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Return a nested config flat: keys joined by dots after ``prefix``, tuples as lists (JSON's view)."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            flat.update(_flatten_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return flat


class UnreadableCheckpointsError(UserInputError, RuntimeError):
    """No checkpoint of a run restores: a ``RuntimeError``, shown in one line as the user's to mend."""


def finished_steps(directory: str) -> list[int]:
    """Return the sorted steps of the finished checkpoints under an orbax manager root.

    Parameters
    ----------
    directory : str
        A run's ``checkpoints/`` (or ``best/``).

    Returns
    -------
    list[int]
        Empty if none.

    Raises
    ------
    UserInputError
        When ``directory`` is a file.
    """
    if not epath.Path(directory).exists():
        return []
    if "://" not in directory and not os.path.isdir(directory):
        raise UserInputError(f"{directory} is a file, not the run's checkpoint directory: move it away and restore "
                             f"the directory from a copy of the run (or train in a new --workdir).")
    return sorted(ocp.utils.checkpoint_steps(_absolute_path(directory)))  # Finalized ones only.


ROTATION_ATTEMPTS = 20  # Reads tried while a trainer beside the reader rotates checkpoints away.


def read_while_rotating(directory: str, read: Callable[[], _Read], what: str) -> _Read:
    """Return ``read()``, retried while a trainer rotates the checkpoints of ``directory`` away under it.

    Parameters
    ----------
    directory : str
        The checkpoints' directory.
    read : callable
        Chooses its checkpoints afresh on each call and reads them.
    what : str
        What is read, for the messages.

    Returns
    -------
    Any
        What ``read`` returned.

    Raises
    ------
    UserInputError
        When the steps changed during all :data:`ROTATION_ATTEMPTS` reads (other failures propagate).
    """
    for attempt in range(ROTATION_ATTEMPTS):
        steps_before = finished_steps(directory)
        try:
            return read()
        except (FileNotFoundError, UserInputError):
            steps_after = finished_steps(directory)
            if steps_after == steps_before:
                raise
            logging.warning("A checkpoint of %s was rotated away while %s was read (a trainer is running there): "
                            "reading again from steps %s.", directory, what, steps_after)
        time.sleep(0.05 * attempt)
    raise UserInputError(f"{what} of {directory} was rotated away during each of {ROTATION_ATTEMPTS} reads: the "
                         f"trainer there saves faster than it can be read. Read it once the trainer stops, or train "
                         f"with a larger config.keep_checkpoints or checkpoint_every_steps.")


def latest_progress(workdir: str) -> tuple[int, dict[str, Any]] | None:
    """Return the newest checkpoint's step and its ``progress`` item, without restoring it.

    Parameters
    ----------
    workdir : str
        A training work directory.

    Returns
    -------
    (int, dict) or None
        ``None`` if none is readable.
    """
    steps = finished_steps(str(epath.Path(workdir) / run_files.CHECKPOINT_DIR))
    if not steps:
        return None
    path = epath.Path(workdir) / run_files.CHECKPOINT_DIR / str(steps[-1]) / "progress" / "metadata"
    try:
        return steps[-1], dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def last_good_checkpoint_sentence(workdir: str) -> str:
    """Return a sentence naming the newest finished checkpoint and how to resume, for error messages.

    Parameters
    ----------
    workdir : str
        A training work directory.

    Returns
    -------
    str
        The sentence.
    """
    directory = os.path.join(workdir, run_files.CHECKPOINT_DIR)
    try:
        steps = finished_steps(directory)
    except Exception:  # An unreadable directory names no step.
        steps = []
    if not steps:
        return "No checkpoint was saved: free space, then rerun the same command."
    return (f"The last good checkpoint is step {steps[-1]} in {directory}: free space, then rerun the same "
            f"command to resume from it.")



@dataclasses.dataclass
class Restored:
    """A restored training checkpoint."""

    step: int
    state: Any  # Of the abstract state's type.
    data_state: Any  # This process's data iterator state (None if unusable).
    progress: dict  # Bookkeeping saved with it (wall_s, train_target_tokens).


class TrainingCheckpoints:
    """Save and restore train states with the data iterator state (orbax ``CheckpointManager``).

    Parameters
    ----------
    workdir : str
        Checkpoints go to ``WORKDIR/checkpoints``.
    keep : int
        Most recent checkpoints kept.
    asynchronous : bool
        Write in a background thread (arrays copied to host first).
    """

    def __init__(self, workdir: str, *, keep: int, asynchronous: bool = True) -> None:
        self.workdir = _absolute_path(workdir)
        self.directory = self.workdir / run_files.CHECKPOINT_DIR
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max(int(keep), 1),
            enable_async_checkpointing=asynchronous,
            cleanup_tmp_directories=True,  # Leftovers of saves that were killed mid-way.
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def _all_steps(self) -> list[int]:
        """Return the finished checkpoints' steps, ascending."""
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        """Return the newest finished checkpoint's step.

        Returns
        -------
        int or None
            ``None`` without one.
        """
        return self._manager.latest_step()

    def save(self, state: Any, *, data_state: Any, progress: Mapping[str, Any]) -> None:
        """Save ``state`` under its step, asynchronously; a step already saved is left alone.

        Parameters
        ----------
        state : TrainState
            Its ``step`` names the checkpoint.
        data_state : Any
            The data iterator's ``get_state()`` after the batches of ``state.step``.
        progress : Mapping[str, Any]
            JSON-able bookkeeping.

        Raises
        ------
        OSError
            For a full disk, met here or by the previous save.
        """
        step = int(state.step)
        if step in self._manager.all_steps():
            return
        args = ocp.args.Composite(
            params=ocp.args.StandardSave(state.params),
            opt_state=ocp.args.StandardSave(state.opt_state),
            counters=ocp.args.StandardSave({"step": state.step, "rng": state.rng}),
            progress=ocp.args.JsonSave(dict(progress, step=step, saved_at=time.time())),
            data=IteratorStateSave(data_state),
        )
        with full_disk.as_os_error():
            self._manager.save(step, args=args, force=True)

    def _restore(self, step: int, abstract_state: Any) -> Restored:
        """Restore the checkpoint of ``step`` into the shapes and shardings of ``abstract_state``."""
        items = self._manager.restore(step, args=ocp.args.Composite(
            params=ocp.args.StandardRestore(abstract_state.params),
            opt_state=ocp.args.StandardRestore(abstract_state.opt_state),
            counters=ocp.args.StandardRestore({"step": abstract_state.step, "rng": abstract_state.rng}),
            progress=ocp.args.JsonRestore(),
            data=IteratorStateRestore(),
        ))
        state = abstract_state.replace(params=items["params"], opt_state=items["opt_state"],
                                       step=items["counters"]["step"], rng=items["counters"]["rng"])
        return Restored(step=step, state=state, data_state=items["data"], progress=dict(items["progress"]))

    def restore_latest(self, abstract_state: Any) -> Restored | None:
        """Restore the newest readable checkpoint, moving unreadable newer ones to ``checkpoints_corrupt/``.

        Parameters
        ----------
        abstract_state : TrainState
            ``jax.ShapeDtypeStruct`` leaves with the target shardings.

        Returns
        -------
        Restored or None
            ``None`` without a checkpoint (a fresh run).

        Raises
        ------
        UnreadableCheckpointsError
            When no checkpoint restores.
        """
        failed: list[int] = []
        for step in reversed(self._all_steps()):
            try:
                restored = self._restore(step, abstract_state)
            except Exception as error:  # Orbax/tensorstore raise many types for damaged files.
                logging.warning("Checkpoint at step %d is unreadable (%s); falling back to the "
                                "previous one.", step, reason_line(error))
                failed.append(step)
                continue
            self._move_aside(failed)
            return restored
        if failed:
            raise UnreadableCheckpointsError(
                f"none of the checkpoints in {self.directory} (steps {sorted(failed)}) could be "
                f"restored; see the warnings above. Restore them from a copy of the run, or move them away to start "
                f"from scratch."
            )
        return None

    def _move_aside(self, steps: list[int]) -> None:
        if not steps:
            return
        if jax.process_index() == 0:
            target_root = self.workdir / run_files.CORRUPT_DIR
            target_root.mkdir(parents=True, exist_ok=True)
            for step in steps:
                target = target_root / f"{step}-{int(time.time())}"
                shutil.move(str(self.directory / str(step)), str(target))
                logging.warning("Moved unreadable checkpoint %d to %s.", step, target)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices("attention_jax_move_corrupt_checkpoints")
        self._manager.reload()

    def wait(self) -> None:
        """Block until pending asynchronous saves are on disk (``OSError`` for a full disk)."""
        with full_disk.as_os_error():
            self._manager.wait_until_finished()

    def close(self) -> None:
        """Finish pending saves and release the manager (``OSError`` for a full disk)."""
        with full_disk.as_os_error():
            self._manager.wait_until_finished()
            self._manager.close()
