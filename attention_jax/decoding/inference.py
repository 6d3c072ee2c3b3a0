"""Load a trained run for decoding (parameters of one checkpoint or an average, config and tokenizer), or export
it for translation: weights, config, tokenizer and ``export.json`` in one directory that :func:`load_run` opens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from attention_jax.data.tokenizer import Tokenizer
from attention_jax.experiment.sections import DataConfig, Experiment, TransformerConfig
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import MissingInputError, UserInputError, path_argument
from attention_jax.models.variants import ModelKind

if TYPE_CHECKING:  # Imported when first needed: translate starts without TFDS (and, warm, Orbax and Flax).
    from attention_jax.data import input_pipeline
    from attention_jax.decoding import decode

EXPORTED_CHECKPOINT = "exported"  # load_run's checkpoint naming an export's parameters ("latest" does too).
_PARAMS_FILE, _RECORD_FILE = run_files.EXPORT_PARAMS_FILE, run_files.EXPORT_RECORD_FILE


@dataclasses.dataclass
class TrainedRun:
    """A training run's model, ready for decoding."""

    workdir: str
    checkpoint: str  # "latest", "averaged", a step, or "average of steps ...".
    config: Experiment  # Built once from the run's config.json.
    model_config: TransformerConfig  # config.model
    params: Any  # Plain parameters.
    tokenizer: Any  # The run's shared source/target tokenizer.
    _data: input_pipeline.TranslationData | None = dataclasses.field(default=None, repr=False)

    @property
    def data(self) -> input_pipeline.TranslationData:
        """The run's data (splits as text and ids), opened on first use.

        Returns
        -------
        input_pipeline.TranslationData
            The datasets.
        """
        if self._data is None:
            from attention_jax.data import input_pipeline

            self._data = input_pipeline.get_datasets(self.data_config)
        return self._data

    @property
    def data_config(self) -> DataConfig:
        """The run's data section with the run's own vocabulary (``fine_tune_from`` set to the run).

        Returns
        -------
        DataConfig
            ``config.data``, changed so.
        """
        return dataclasses.replace(self.config.data, fine_tune_from=self.workdir)


_COMMAND_FOR_KIND = {ModelKind.ENCODER_DECODER: "python -m attention_jax.translate (or evaluate, plot_attention)",
                     ModelKind.DECODER_ONLY: "python -m attention_jax.generate"}


def _check_model_kind(workdir: str, experiment: Experiment, expected: str) -> None:
    """Raise ``ValueError`` for a run not of the ``expected`` model kind, naming the command that decodes it."""
    found = experiment.model_kind
    if found != expected:
        described = {ModelKind.ENCODER_DECODER: "an encoder-decoder translation model",
                     ModelKind.DECODER_ONLY: "a decoder-only language model"}
        raise ValueError(f"{workdir} holds {described[ModelKind(found)]} (config.model_kind={found!r}), not "
                         f"{described[ModelKind(expected)]}: use {_COMMAND_FOR_KIND[ModelKind(found)]} on it.")


def load_run(workdir: str, checkpoint: str = "latest", *, average_last: int = 0,
             model_kind: str = ModelKind.ENCODER_DECODER, compilation_cache: bool = True) -> TrainedRun:
    """Load the parameters, config and tokenizer of a training run or an export.

    The tokenizer must be the run's own: one rebuilt from a changed corpus would give other ids.

    Parameters
    ----------
    workdir, checkpoint : str
        A training work directory or an ``export --format=directory``; ``latest``, ``averaged``, ``best`` or a step.
    average_last : int
        Average the last this many checkpoints instead (Section 6.1).
    model_kind : str
        The model kind the caller decodes with.
    compilation_cache : bool
        Turn on the run's persistent compilation cache unless this process chose one.

    Returns
    -------
    TrainedRun
        Everything decoding needs.

    Raises
    ------
    TypeError
        For a ``workdir`` that is no path.
    FileNotFoundError
        For a missing workdir, config, tokenizer or checkpoint.
    ValueError
        For a damaged tokenizer, another model kind, or parameters that do not fit the config.
    """
    from attention_jax.checkpointing import checkpoints
    from attention_jax.decoding import decode

    workdir = path_argument(workdir, "workdir", "load_run")
    if not os.path.isdir(workdir):
        raise FileNotFoundError(f"No work directory {workdir!r}: pass the --workdir of a training run.")
    if _is_export_directory(workdir):  # Damaged or incomplete: one line naming the file.
        _check_export_files(workdir)
    experiment = checkpoints.read_config(workdir)
    _check_model_kind(workdir, experiment, model_kind)
    tokenizer_path = os.path.join(workdir, run_files.TOKENIZER_FILE)
    if not os.path.isfile(tokenizer_path):  # Before any checkpoint is read.
        raise MissingInputError(
            f"{tokenizer_path} is missing: the run's weights belong to the token ids of the tokenizer it was "
            f"trained with, which a tokenizer rebuilt from config.dataset need not match. Restore that file from "
            f"a copy of the run; it cannot be decoded without it.")
    tokenizer = Tokenizer.load(tokenizer_path)  # A damaged file: one line naming it, before any checkpoint.
    if compilation_cache:  # Before anything compiles (or traces the shapes it keeps): every decoding command.
        from attention_jax.checkpointing import compilation_cache as persistent_cache

        persistent_cache.enable_unless_set(experiment.run.compilation_cache_dir)
    params, config, checkpoint = _load_params(workdir, checkpoint, average_last)
    model_config = config.model
    if model_kind == ModelKind.ENCODER_DECODER:
        decode._check_params_match(model_config, params)
    return TrainedRun(workdir, checkpoint, config, model_config, params, tokenizer)


def _load_params(workdir: str, checkpoint: str, average_last: int) -> tuple[Any, Experiment, str]:
    """Return the parameters :func:`load_run` names, its experiment and the checkpoint's description."""
    from attention_jax.checkpointing import checkpoints, params_checkpoints

    if _is_export_directory(workdir):  # One set of parameters, no checkpoints/ to rotate.
        params = _load_export_params(workdir, checkpoint, average_last)
        return params, checkpoints.read_config(workdir), _describe_export(workdir)

    def _load() -> tuple[Any, Experiment, str]:
        if average_last > 0:
            params, steps = params_checkpoints.average_last_params(workdir, average_last)
            return params, checkpoints.read_config(workdir), f"average of steps {steps}"
        params, config = params_checkpoints.load_for_inference(workdir, checkpoint)
        return params, config, checkpoint

    if not (checkpoint == "latest" or average_last > 0):  # A named step or average: it is there or it is not.
        return _load()
    what = f"the average of the last {average_last} checkpoints" if average_last > 0 else "the latest checkpoint"
    return checkpoints.read_while_rotating(os.path.join(workdir, run_files.CHECKPOINT_DIR), _load, what)


def make_translator(run: TrainedRun, *, beam_size: int | None = None, alpha: float | None = None,
                    batch_size: int = 64, exported_searches: Any = None) -> decode.Translator:
    """Return a :class:`~attention_jax.decoding.decode.Translator` with the run's decoding settings.

    Parameters
    ----------
    run : TrainedRun
        From :func:`load_run`.
    beam_size : int, optional
        Replaces ``config.beam_size``.
    alpha : float, optional
        Replaces ``config.length_penalty_alpha``.
    batch_size : int
        Sentences per decoding batch.
    exported_searches : background_warm_up.ExportedSearches, optional
        The translator's fixed-shape searches' artifacts.

    Returns
    -------
    decode.Translator
        Decoding as the run's config says, but for the arguments given.

    Raises
    ------
    TypeError
        For a ``run`` that is no :class:`TrainedRun`.
    """
    if not isinstance(run, TrainedRun):
        hint = f": make_translator(load_run({run!r}))" if isinstance(run, str) else ""
        raise TypeError(f"make_translator takes the TrainedRun that load_run returns, not a "
                        f"{type(run).__name__}{hint}.")
    from attention_jax.decoding import decode

    options = (("beam_size", beam_size), ("length_penalty_alpha", alpha))
    changes: dict[str, Any] = {name: value for name, value in options if value is not None}
    return decode.Translator(
        run.model_config, run.params, run.tokenizer,
        settings=dataclasses.replace(run.config.decoding, **changes),
        batch_size=batch_size, exported_searches=exported_searches,
    )


def export_run(run: TrainedRun, out: str, *, step: int | None = None) -> dict[str, Any]:
    """Write what translating with ``run`` needs into the directory ``out``, which :func:`load_run` then opens.

    Parameters
    ----------
    run : TrainedRun
        From :func:`load_run`.
    out : str
        A new or empty directory, or an earlier export (replaced).
    step : int, optional
        The training step the parameters stand for.

    Returns
    -------
    dict
        The record of ``out/export.json``.

    Raises
    ------
    UserInputError
        For a file or a directory of other files, before anything is written.
    """
    check_export_target(out)
    return _write_export_directory(out, run.params, run.config, os.path.join(run.workdir, run_files.TOKENIZER_FILE),
                                   workdir=run.workdir, checkpoint=run.checkpoint, step=step)


def _is_export_directory(path: str) -> bool:
    """Return whether ``path`` is an export: parameters or a record, no ``checkpoints/``."""
    return ((os.path.isfile(os.path.join(path, _PARAMS_FILE)) or os.path.isfile(os.path.join(path, _RECORD_FILE)))
            and not os.path.isdir(os.path.join(path, run_files.CHECKPOINT_DIR)))


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_export_files(directory: str) -> None:
    """Raise ``UserInputError`` for an export whose files are missing or differ from its ``export.json``'s SHA-256s."""
    fix = "export the run again (python -m attention_jax.export --format=directory)"
    if not os.path.isfile(os.path.join(directory, _PARAMS_FILE)):
        raise UserInputError(f"{directory} is an export without its {_PARAMS_FILE} (the parameters): copy the "
                             f"whole export directory again, or {fix}.")
    try:
        with open(os.path.join(directory, _RECORD_FILE), encoding="utf-8") as record_file:
            hashes = json.load(record_file).get("sha256") or {}
    except (OSError, ValueError, AttributeError):
        hashes = {}
    for name, expected in sorted(hashes.items()):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise UserInputError(f"{path} is missing from the export: copy the whole export directory again, "
                                 f"or {fix}.")
        if _file_sha256(path) != expected:
            raise UserInputError(f"{path} does not match the SHA-256 that {_RECORD_FILE} records for it: the file "
                                 f"is damaged or was replaced; copy the export again, or {fix}.")


def check_export_target(out: str) -> None:
    """Refuse, before anything is written, an ``--out`` that an export would harm.

    Parameters
    ----------
    out : str
        The directory to write: new, empty, or an earlier export (replaced).

    Raises
    ------
    UserInputError
        For a file, or a directory holding anything but an earlier export.
    """
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserInputError(f"--out={out} is a file; --format=directory writes a directory: name a new one.")
    if os.path.isdir(out) and os.listdir(out) and not _is_export_directory(out):
        raise UserInputError(f"--out={out} is a directory holding other files (a training run's, say), which the "
                             f"export's {run_files.CONFIG_FILE} and {run_files.TOKENIZER_FILE} would overwrite: "
                             f"name a new or empty directory.")


def _write_export_directory(out: str, params: Any, experiment: Experiment, tokenizer_file: str, *,
                            workdir: str, checkpoint: str, step: int | None) -> dict[str, Any]:
    """Write parameters, config and tokenizer (copied as it is) into ``out``; the record last: with it all is whole."""
    os.makedirs(out, exist_ok=True)
    with open(tokenizer_file, "rb") as tokenizer:
        run_files.write_atomically(os.path.join(out, run_files.TOKENIZER_FILE), tokenizer.read())
    run_files.write_json_atomically(os.path.join(out, run_files.CONFIG_FILE), experiment.to_json_dict())
    from attention_jax.checkpointing import safetensors_params  # Only to write or read one.

    metadata = safetensors_params.run_metadata(experiment, workdir=workdir, checkpoint=checkpoint)
    safetensors_params.save_safetensors(os.path.join(out, _PARAMS_FILE), params,
                                        {**metadata, **({"step": str(step)} if step is not None else {})})
    hashed = (_PARAMS_FILE, run_files.CONFIG_FILE, run_files.TOKENIZER_FILE)
    record = {"workdir": os.path.abspath(workdir), "checkpoint": checkpoint, "step": step,
              "tensors": len(safetensors_params.tensor_names(params)), "files": [*hashed, _RECORD_FILE],
              "sha256": {name: _file_sha256(os.path.join(out, name)) for name in hashed}}
    run_files.write_json_atomically(os.path.join(out, _RECORD_FILE), record)
    return record


def _describe_export(directory: str) -> str:
    """Return what ``load_run`` reports as an export's ``checkpoint``, e.g. ``"exported (latest, step 20)"``."""
    try:
        with open(os.path.join(directory, _RECORD_FILE), encoding="utf-8") as record_file:
            record = json.load(record_file)
    except (OSError, ValueError):
        return EXPORTED_CHECKPOINT
    origin = [str(record.get("checkpoint") or "")] + ([f"step {record['step']}"] if record.get("step") else [])
    return f"{EXPORTED_CHECKPOINT} ({', '.join(part for part in origin if part)})"


def _load_export_params(directory: str, checkpoint: str = "latest", average_last: int = 0) -> Any:
    """Return an export's one set of parameters as JAX arrays; another checkpoint or an average is refused."""
    import jax.numpy as jnp  # Here: reading the record needs no JAX.
    from jax import tree

    if average_last > 0 or checkpoint not in ("latest", EXPORTED_CHECKPOINT):
        asked = f"--average_last={average_last}" if average_last > 0 else f"checkpoint {checkpoint!r}"
        raise UserInputError(f"{directory} is an export of one checkpoint ({_describe_export(directory)}), so "
                             f"{asked} is not in it: leave it out, or load the training run itself.")
    from attention_jax.checkpointing import safetensors_params  # Only to write or read one.

    params, _ = safetensors_params.load_safetensors(os.path.join(directory, _PARAMS_FILE))
    return tree.map(jnp.asarray, params)
