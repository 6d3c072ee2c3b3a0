"""Fine-tuning: a new work directory starting from another run's parameters and tokenizer (docs/faults.md)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import jax
from absl import logging

from attention_jax.checkpointing import checkpoints, params_checkpoints, resume_checks
from attention_jax.data.training_data import TrainingData
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import language_model
from attention_jax.training import run_context, setup_checks, sharding, train_state, workdir_lock

# Model fields a fine-tuning run may set apart from its source: they change no parameter.
ADJUSTABLE_FIELDS = ("dropout_rate", "attention_dropout_rate", "max_len", "max_decode_extra_len")


@dataclasses.dataclass(frozen=True)
class _FineTuneSource:
    """The run a fine-tuning run starts from, resolved and checked (:func:`resolve_source`)."""

    workdir: str  # The source run's, absolute.
    checkpoint: str  # "latest", "best", "averaged" or a step number.
    directory: str  # The orbax manager root holding those parameters.
    step: int
    tokenizer_sha256: str  # Of the source's tokenizer.model.

    def record(self) -> dict[str, Any]:
        """Return what ``fine_tuned_from.json`` and the step-0 checkpoint's bookkeeping keep."""
        return dataclasses.asdict(self)


def resolve_source(experiment: Experiment, workdir: str) -> _FineTuneSource | None:
    """Check ``config.fine_tune_from`` and find its parameters, writing nothing.

    Parameters
    ----------
    experiment : Experiment
        The new run's.
    workdir : str
        The new run's work directory.

    Returns
    -------
    _FineTuneSource or None
        ``None`` when nothing is fine-tuned or ``workdir`` already holds a checkpoint.

    Raises
    ------
    UserInputError
        When the source is no training run, is the new run itself, or holds another model.
    """
    source_workdir = experiment.run.fine_tune_from
    if not source_workdir:
        return None
    name = f"config.fine_tune_from={source_workdir}"
    if os.path.abspath(source_workdir) == os.path.abspath(workdir):
        raise UserInputError(f"{name} is the run's own --workdir: fine-tuning starts a new work directory.")
    if checkpoints.finished_steps(os.path.join(workdir, run_files.CHECKPOINT_DIR)):
        return None
    tokenizer_path = os.path.join(source_workdir, run_files.TOKENIZER_FILE)
    try:
        source_config = checkpoints.read_config(source_workdir)
        with open(tokenizer_path, "rb") as tokenizer_file:
            tokenizer_sha256 = hashlib.sha256(tokenizer_file.read()).hexdigest()
        which = experiment.run.fine_tune_checkpoint
        directory, steps = params_checkpoints.checkpoint_candidates(source_workdir, which)
    except (OSError, ValueError) as error:  # FileNotFoundError, StaleAverageError, an unknown checkpoint name.
        raise UserInputError(f"{name}: {error}") from error
    all_differences = resume_checks.model_config_differences(source_config, experiment)
    differences = {field: values for field, values in all_differences.items() if field not in ADJUSTABLE_FIELDS}
    if differences:
        listed = "; ".join(f"{field}: {old!r} there, {new!r} here" for field, (old, new) in sorted(differences.items()))
        raise UserInputError(f"{name} holds another model ({listed}): fine-tuning keeps the model; set the same "
                             f"fields (only {', '.join(ADJUSTABLE_FIELDS)} may differ).")
    mismatch = params_checkpoints.params_mismatch(str(directory), steps[0],
                                                  params_checkpoints.abstract_inference_params(experiment))
    if mismatch:
        raise UserInputError(f"{name}: the parameters of {directory}/{steps[0]} do not fit this model: "
                             f"{'; '.join(mismatch[:3])}{'; ...' if len(mismatch) > 3 else ''}.")
    return _FineTuneSource(workdir=os.path.abspath(source_workdir), checkpoint=which, directory=str(directory),
                          step=int(steps[0]), tokenizer_sha256=tokenizer_sha256)


def start_from_source(experiment: Experiment, workdir: str, source: _FineTuneSource,
                      data: TrainingData | None = None) -> TrainingData | None:
    """Write the new run's step-0 checkpoint, the source's parameters with a fresh optimizer, under the lock.

    Parameters
    ----------
    experiment : Experiment
        The new run's.
    workdir : str
        The new run's work directory.
    source : _FineTuneSource
        From :func:`resolve_source`.
    data : TrainingData, optional
        The new run's data (default: loaded here).

    Returns
    -------
    TrainingData or None
        The data for ``train_and_evaluate``; ``data`` unchanged when a checkpoint exists.
    """
    if checkpoints.finished_steps(os.path.join(workdir, run_files.CHECKPOINT_DIR)):
        return data
    config = experiment.run
    mesh = sharding.create_mesh(config.mesh_shape, config.mesh_axes)
    data = data if data is not None else run_context._load_data(experiment, mesh)  # The loader training uses.
    setup_checks._check_data(experiment, data)  # Before the step-0 checkpoint.
    lock = workdir_lock._acquire_for_job(workdir)  # Only now: a corpus mistake above leaves no work directory.
    try:
        transformer = language_model.build_model(experiment.model, experiment.model_kind)
        optimizer = train_state.make_optimizer(experiment.optimizer, train_state._make_schedule(experiment.optimizer))
        boxed_state = train_state._abstract_boxed_state(transformer, optimizer)
        rules = sharding.logical_axis_rules(config.param_sharding, mesh)
        shardings = sharding._tree_shardings(boxed_state, mesh, rules)
        params = params_checkpoints.restore_params(source.directory, source.step,
                                                   train_state._abstract_train_state(boxed_state, shardings).params)
        opt_state = jax.jit(optimizer.init, out_shardings=shardings.opt_state)(params)  # Fresh: Adam's moments 0.
        state = train_state._create_train_state(experiment.seed, transformer, optimizer, shardings).replace(
            params=params, opt_state=opt_state)  # Step 0 and the run's own dropout seed.
        iterator = data.train_iterator(experiment.seed)
        manager = checkpoints.TrainingCheckpoints(workdir, keep=config.keep_checkpoints)
        try:
            manager.save(state, data_state=iterator.get_state(),
                         progress={"fine_tuned_from": source.record()})
        finally:
            manager.close()
        if jax.process_index() == 0:
            run_files.write_json_atomically(os.path.join(workdir, run_files.FINE_TUNED_FROM_FILE), source.record())
    finally:
        if lock is not None:
            lock.release()
    logging.info("Fine-tuning from %s (%s, step %d of %s): its parameters and tokenizer.model, a fresh optimizer "
                 "at step 0.", source.workdir, source.checkpoint, source.step, source.directory)
    return data
