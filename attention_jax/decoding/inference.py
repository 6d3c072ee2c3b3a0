"""Load a trained run for decoding: parameters (one checkpoint or an average), config, tokenizer.

Shared by the ``translate``, ``evaluate`` and ``plot_attention`` commands and usable from notebooks::

    run = inference.load_run("runs/tiny", checkpoint="latest")
    translator = inference.make_translator(run)
    translator.translate(["The house is small."])
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from attention_jax.checkpointing import checkpoints, exported_run, params_checkpoints
from attention_jax.data.data_config import DataConfig
from attention_jax.data.tokenizer import Tokenizer
from attention_jax.decoding import decode
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import MissingInputError, path_argument
from attention_jax.models.transformer_config import TransformerConfig
from attention_jax.models.variants import ModelKind

if TYPE_CHECKING:  # Imported when the data is first asked for: translate starts without TFDS.
    from attention_jax.data import input_pipeline


@dataclasses.dataclass
class TrainedRun:
    """A training run's model, ready for decoding.

    Attributes
    ----------
    workdir : str
        The run's directory.
    checkpoint : str
        Which parameters were loaded (``"latest"``, ``"averaged"``, a step, or ``"average of steps ..."``).
    config : Experiment
        The run's experiment (its ``config.json``, built once).
    model_config : TransformerConfig
        Its model (``config.model``).
    params : pytree
        Plain parameters.
    tokenizer : Tokenizer
        The run's shared source/target tokenizer.
    """

    workdir: str
    checkpoint: str
    config: Experiment
    model_config: TransformerConfig
    params: Any
    tokenizer: Any
    _data: input_pipeline.TranslationData | None = dataclasses.field(default=None, repr=False)

    @property
    def data(self) -> input_pipeline.TranslationData:
        """The run's data (splits as text and token ids), opened on first use.

        Returns
        -------
        input_pipeline.TranslationData
            From ``input_pipeline.get_datasets(run.data_config)``, which prepares the corpus if its cache
            is missing; translation and attention plots never need it.
        """
        if self._data is None:
            from attention_jax.data import input_pipeline

            self._data = input_pipeline.get_datasets(self.data_config)
        return self._data

    @property
    def data_config(self) -> DataConfig:
        """The run's data section, tokenized with the run's own ``tokenizer.model``.

        Returns
        -------
        DataConfig
            ``config.data`` with ``fine_tune_from`` set to the run itself, so that the data pipeline
            reads the run's vocabulary instead of training one from the corpus as it is now (which may
            have changed since training): the token ids the weights were trained on.
        """
        return dataclasses.replace(self.config.data, fine_tune_from=self.workdir)


_COMMAND_FOR_KIND = {ModelKind.ENCODER_DECODER: "python -m attention_jax.translate (or evaluate, plot_attention)",
                     ModelKind.DECODER_ONLY: "python -m attention_jax.generate"}


def check_model_kind(workdir: str, experiment: Experiment, expected: str) -> None:
    """Raise ``ValueError`` when the run in ``workdir`` is not of the ``expected`` model kind.

    Parameters
    ----------
    workdir : str
        The run's directory (named in the message).
    experiment : Experiment
        The run's.
    expected : str
        ``"encoder_decoder"`` (translation commands) or ``"decoder_only"`` (generation).
    """
    found = experiment.model_kind
    if found != expected:
        described = {ModelKind.ENCODER_DECODER: "an encoder-decoder translation model",
                     ModelKind.DECODER_ONLY: "a decoder-only language model"}
        raise ValueError(f"{workdir} holds {described[ModelKind(found)]} (config.model_kind={found!r}), not "
                         f"{described[ModelKind(expected)]}: use {_COMMAND_FOR_KIND[ModelKind(found)]} on it.")


def load_run(workdir: str, checkpoint: str = "latest", *, average_last: int = 0,
             model_kind: str = ModelKind.ENCODER_DECODER, compilation_cache: bool = True) -> TrainedRun:
    """Load the parameters, config and tokenizer of a training run.

    Parameters
    ----------
    workdir : str
        Training work directory (``config.json``, ``checkpoints/``, ``averaged/``), or a directory written by
        ``export --format=directory`` (``params.safetensors``, ``config.json``, ``tokenizer.model``:
        :mod:`attention_jax.checkpointing.exported_run`).
    checkpoint : str
        ``"latest"``, ``"averaged"``, ``"best"`` or a step number; ignored when ``average_last > 0``. An
        export holds one checkpoint, which ``"latest"`` (or ``"exported"``) names.
    average_last : int
        Average the parameters of the last this many training checkpoints (Section 6.1) instead.
    model_kind : str
        The model kind the caller decodes with (:func:`check_model_kind`).
    compilation_cache : bool
        Turn on JAX's persistent compilation cache with the run's setting, as training does
        (``config.compilation_cache_dir``; ``JAX_COMPILATION_CACHE_DIR`` wins), unless this process chose a
        cache directory already (:func:`attention_jax.checkpointing.compilation_cache.enable_unless_set`): a
        second process then loads the decoding programs the first one compiled instead of compiling them.
        ``False`` leaves JAX's settings alone.

    Returns
    -------
    TrainedRun
        Everything decoding needs.

    Notes
    -----
    Raises ``TypeError`` for a ``workdir`` that is no path, ``FileNotFoundError`` for a missing workdir,
    config or checkpoint and ``ValueError`` for
    parameters that do not fit the config, with messages that say what to do. The tokenizer is the
    run's own ``tokenizer.model`` (written by training), so no corpus is opened; a run without one is
    refused (:class:`attention_jax.foundation.user_errors.MissingInputError`), and so is a damaged one
    (:class:`attention_jax.foundation.user_errors.UserInputError`, a ``ValueError``): a tokenizer rebuilt
    from the corpus
    need not be the one the weights were trained with (the corpus may have changed since), and its
    token ids would decode to garbage. ``"latest"`` tolerates a trainer that rotates checkpoints away
    meanwhile (``config.keep_checkpoints``): when the chosen one disappears while it is read, the newest
    is loaded instead, until one read is whole (:func:`_load_params`).
    """
    workdir = path_argument(workdir, "workdir", "load_run")
    if not os.path.isdir(workdir):
        raise FileNotFoundError(f"No work directory {workdir!r}: pass the --workdir of a training run.")
    if exported_run.is_export_directory(workdir):  # Damaged or incomplete: one line naming the file.
        exported_run.check_export_files(workdir)
    check_model_kind(workdir, checkpoints.read_config(workdir), model_kind)
    tokenizer_path = os.path.join(workdir, run_files.TOKENIZER_FILE)
    if not os.path.isfile(tokenizer_path):  # Before any checkpoint is read.
        raise MissingInputError(
            f"{tokenizer_path} is missing: the run's weights belong to the token ids of the tokenizer it was "
            f"trained with, which a tokenizer rebuilt from config.dataset need not match. Restore that file from "
            f"a copy of the run; it cannot be decoded without it.")
    tokenizer = Tokenizer.load(tokenizer_path)  # A damaged file: one line naming it, before any checkpoint.
    params, config, checkpoint = _load_params(workdir, checkpoint, average_last)
    if compilation_cache:  # Before anything compiles: every command that decodes comes through here.
        from attention_jax.checkpointing import compilation_cache as persistent_cache

        persistent_cache.enable_unless_set(config.run.compilation_cache_dir)
    model_config = config.model
    if model_kind == ModelKind.ENCODER_DECODER:
        decode.check_params_match(model_config, params)
    return TrainedRun(workdir, checkpoint, config, model_config, params, tokenizer)


def _load_params(workdir: str, checkpoint: str, average_last: int) -> tuple[Any, Experiment, str]:
    """The parameters :func:`load_run` names, its experiment and the checkpoint's description.

    A trainer running beside the command may delete the checkpoint being read (``keep_checkpoints``
    rotation: with 1, the only one): when ``"latest"`` or an average of the last checkpoints fails to
    load and the run's steps changed meanwhile, it is loaded again from the newest steps, until one
    read is whole (:func:`checkpoints.read_while_rotating`).
    """
    if exported_run.is_export_directory(workdir):  # One set of parameters, no checkpoints/ to rotate.
        params = exported_run.load_export_params(workdir, checkpoint, average_last)
        return params, checkpoints.read_config(workdir), exported_run.describe(workdir)

    def load() -> tuple[Any, Experiment, str]:
        if average_last > 0:
            params, steps = params_checkpoints.average_last_params(workdir, average_last)
            return params, checkpoints.read_config(workdir), f"average of steps {steps}"
        params, config = params_checkpoints.load_for_inference(workdir, checkpoint)
        return params, config, checkpoint

    if not (checkpoint == "latest" or average_last > 0):  # A named step or average: it is there or it is not.
        return load()
    what = f"the average of the last {average_last} checkpoints" if average_last > 0 else "the latest checkpoint"
    return checkpoints.read_while_rotating(os.path.join(workdir, run_files.CHECKPOINT_DIR), load, what)


def make_translator(run: TrainedRun, *, beam_size: int | None = None, alpha: float | None = None,
                    batch_size: int = 64) -> decode.Translator:
    """A :class:`attention_jax.decoding.decode.Translator` with the run's decoding settings.

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

    Returns
    -------
    decode.Translator
        With the run's decoding section, ``run.config.decoding`` (output length limit
        ``input + max_decode_extra_len``).
    """
    if not isinstance(run, TrainedRun):
        hint = f": make_translator(load_run({run!r}))" if isinstance(run, str) else ""
        raise TypeError(f"make_translator takes the TrainedRun that load_run returns, not a "
                        f"{type(run).__name__}{hint}.")
    options = (("beam_size", beam_size), ("length_penalty_alpha", alpha))
    changes: dict[str, Any] = {name: value for name, value in options if value is not None}
    return decode.Translator(
        run.model_config, run.params, run.tokenizer,
        settings=dataclasses.replace(run.config.decoding, **changes),
        batch_size=batch_size,
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
        The training step the parameters stand for, kept in the export's record.

    Returns
    -------
    dict
        The record of ``out/export.json``: ``workdir``, ``checkpoint``, ``step``, ``tensors``, ``files``.

    Notes
    -----
    ``out`` holds ``params.safetensors``, ``config.json``, ``tokenizer.model`` and ``export.json``
    (:mod:`attention_jax.checkpointing.exported_run`); what ``export --format=directory`` writes. A file
    or a directory of other files (a training run's) is refused with
    :class:`~attention_jax.foundation.user_errors.UserInputError` before anything is written.
    """
    exported_run.check_export_target(out)
    return exported_run.write_export_directory(out, run.params, run.config,
                                               os.path.join(run.workdir, run_files.TOKENIZER_FILE),
                                               workdir=run.workdir, checkpoint=run.checkpoint, step=step)
