"""Load a trained run for decoding: parameters (one checkpoint or an average), config and tokenizer."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from attention_jax.checkpointing import exported_run
from attention_jax.data.tokenizer import Tokenizer
from attention_jax.experiment.sections import DataConfig, Experiment, TransformerConfig
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import MissingInputError, path_argument
from attention_jax.models.variants import ModelKind

if TYPE_CHECKING:  # Imported when first needed: translate starts without TFDS (and, warm, Orbax and Flax).
    from attention_jax.data import input_pipeline
    from attention_jax.decoding import decode


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


def check_model_kind(workdir: str, experiment: Experiment, expected: str) -> None:
    """Refuse a run that is not of the ``expected`` model kind, naming the command that decodes it.

    Parameters
    ----------
    workdir : str
        The run's directory.
    experiment : Experiment
        The run's experiment.
    expected : str
        ``"encoder_decoder"`` or ``"decoder_only"``.

    Raises
    ------
    ValueError
        For another kind.
    """
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
    workdir : str
        A training work directory or an ``export --format=directory``.
    checkpoint : str
        ``"latest"``, ``"averaged"``, ``"best"`` or a step.
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
    if exported_run.is_export_directory(workdir):  # Damaged or incomplete: one line naming the file.
        exported_run.check_export_files(workdir)
    experiment = checkpoints.read_config(workdir)
    check_model_kind(workdir, experiment, model_kind)
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
        decode.check_params_match(model_config, params)
    return TrainedRun(workdir, checkpoint, config, model_config, params, tokenizer)


def _load_params(workdir: str, checkpoint: str, average_last: int) -> tuple[Any, Experiment, str]:
    """Return the parameters :func:`load_run` names, its experiment and the checkpoint's description."""
    from attention_jax.checkpointing import checkpoints, params_checkpoints

    if exported_run.is_export_directory(workdir):  # One set of parameters, no checkpoints/ to rotate.
        params = exported_run.load_export_params(workdir, checkpoint, average_last)
        return params, checkpoints.read_config(workdir), exported_run.describe(workdir)

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
        The translator.

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
    exported_run.check_export_target(out)
    return exported_run.write_export_directory(out, run.params, run.config,
                                               os.path.join(run.workdir, run_files.TOKENIZER_FILE),
                                               workdir=run.workdir, checkpoint=run.checkpoint, step=step)
