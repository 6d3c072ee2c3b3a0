"""Whether a work directory may resume with a config: what would make it another experiment is refused."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

import jax
from absl import logging
from etils import epath

from attention_jax.checkpointing.checkpoints import _flatten_config, finished_steps
from attention_jax.checkpointing.run_config import read_config
from attention_jax.experiment import schema
from attention_jax.experiment.fields import ResumeRule
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError

# What a changed value means for a resumed run is declared with each field (experiment.fields.ResumeRule).
MODEL_FIELDS = schema.FIELDS_BY_RULE[ResumeRule.MODEL]

DATA_IDENTITY_FIELDS = schema.FIELDS_BY_RULE[ResumeRule.DATA]
RUN_IDENTITY_FIELDS = schema.FIELDS_BY_RULE[ResumeRule.SEED]
OPTIMIZER_STATE_FIELDS = schema.FIELDS_BY_RULE[ResumeRule.OPTIMIZER_STATE]
SCHEDULE_FIELDS = schema.FIELDS_BY_RULE[ResumeRule.SCHEDULE]
POSITION_FIELDS = schema.FIELDS_BY_RULE[ResumeRule.POSITIONS]  # TransformerConfig.max_len is their sum.

# Splits in data_splits.json: pipeline name -> (user's name, config field choosing it, file in a tsv: corpus).
EVAL_SPLITS = {"validation": ("dev", "eval_split", "dev.tsv"), "test": ("test", "test_split", "test.tsv")}


def write_data_splits(workdir: str, splits: Mapping[str, Mapping[str, Any]]) -> None:
    """Record the run's evaluation splits in ``WORKDIR/data_splits.json`` (process 0 only; atomic).

    Parameters
    ----------
    workdir : str
        The work directory.
    splits : Mapping[str, Mapping[str, Any]]
        ``{"validation": {...}, "test": {...}}``: each split's name, size and SHA-256.
    """
    if jax.process_index() != 0:
        return
    try:
        if read_data_splits(workdir) == splits:
            return
    except UserInputError:  # A fresh run's leftover: replaced (a resumed run was refused before it got here).
        pass
    run_files.write_json_atomically(os.path.join(workdir, run_files.DATA_SPLITS_FILE), dict(splits), sort_keys=True)


def read_data_splits(workdir: str) -> dict[str, Any] | None:
    """Return the evaluation splits a run recorded.

    Parameters
    ----------
    workdir : str
        A training work directory.

    Returns
    -------
    dict or None
        ``None`` for a run from before the record was kept.

    Raises
    ------
    UserInputError
        For a damaged record (rewriting it would trust today's corpus).
    """
    path = epath.Path(workdir) / run_files.DATA_SPLITS_FILE
    if not path.exists():
        return None
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        recorded = error
    if isinstance(recorded, dict) and all(isinstance(split, dict) for split in recorded.values()):
        return recorded
    raise UserInputError(
        f"{path} is damaged ({' '.join(str(recorded).split())[:80]}): it records the dev and test splits the run "
        f"was evaluated on, which a resume must match. Restore it from a copy of the run; or, only if the corpus's "
        f"dev and test files are unchanged since the run started, delete it to record them again.")


def check_data_splits(workdir: str, splits: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse to resume a run whose dev or test split differs from its record: evaluations would compare two sets.

    Parameters
    ----------
    workdir : str
        The work directory of a run that holds a checkpoint.
    splits : Mapping[str, Mapping[str, Any]]
        The splits the data pipeline has now.

    Raises
    ------
    UserInputError
        Naming the split, the config field that chooses it and the fix.
    """
    recorded = read_data_splits(workdir) or {}
    for role, (name, field, tsv_file) in EVAL_SPLITS.items():
        was, now = recorded.get(role), splits.get(role)
        if not was or not now or dict(was) == dict(now):
            continue
        txt_file = tsv_file.replace(".tsv", ".txt")
        raise UserInputError(
            f"{workdir} was evaluated on another {name} split: config.{field}={now['split']!r} now holds "
            f"{_size(now)} (sha256 {str(now['sha256'])[:12]}), but {run_files.DATA_SPLITS_FILE} records "
            f"{_size(was)} of {was['split']!r} (sha256 {str(was['sha256'])[:12]}), so its evaluations "
            f"would compare two {name} sets. Put back the {name} split the run started with (a tsv: corpus's "
            f"{tsv_file}, a txt: corpus's {txt_file}) to resume it, or evaluate on the new one in a new --workdir "
            f"(--config.fine_tune_from={workdir} starts from this run's weights)."
        )


def _size(split: Mapping[str, Any]) -> str:
    unit = "documents" if "documents" in split else "pairs"
    return f"{split.get(unit)} {unit}"


def model_config_differences(saved: Experiment, experiment: Experiment) -> dict[str, tuple[Any, Any]]:
    """Return the model hyperparameters that differ between a saved experiment and a new one.

    Parameters
    ----------
    saved, experiment : Experiment
        The workdir's and the new run's.

    Returns
    -------
    dict[str, tuple]
        ``{field: (saved, new)}`` over :data:`MODEL_FIELDS`; positions by the :data:`POSITION_FIELDS` a user set.
    """
    before = {**dataclasses.asdict(saved.model), "model_kind": saved.model_kind}  # key_dim etc. resolved.
    after = {**dataclasses.asdict(experiment.model), "model_kind": experiment.model_kind}
    differences = {name: (before[name], after[name]) for name in MODEL_FIELDS if before[name] != after[name]}
    if saved.model.max_len != experiment.model.max_len:
        differences.update({name: (saved.fields[name], experiment.fields[name]) for name in POSITION_FIELDS
                            if saved.fields[name] != experiment.fields[name]})
    return differences


def check_resume_compatible(workdir: str, experiment: Experiment) -> None:
    """Refuse a workdir whose checkpoints belong to another model, corpus, seed, optimizer state or schedule.

    Parameters
    ----------
    workdir : str
        The work directory; without a checkpoint the new config replaces the old.
    experiment : Experiment
        The new run's.

    Raises
    ------
    UserInputError
        Naming every differing field and the fix.
    """
    checkpoint_steps = finished_steps(str(epath.Path(workdir) / run_files.CHECKPOINT_DIR))
    fine_tune_from = experiment.run.fine_tune_from
    if fine_tune_from and not checkpoint_steps:
        raise UserInputError(
            f"config.fine_tune_from={fine_tune_from} but {workdir} holds no checkpoint to fine-tune: start "
            f"with python -m attention_jax.main (or fine_tuning.start_from_source before train_and_evaluate).")
    if not (epath.Path(workdir) / run_files.CONFIG_FILE).exists():
        return
    saved = read_config(workdir)
    differences = model_config_differences(saved, experiment)
    if not checkpoint_steps:
        if differences:
            logging.warning("%s has no checkpoint: starting afresh with the new model config.", workdir)
        return  # Nothing to resume: the new config simply replaces the old one.
    if differences:
        listed = "; ".join(f"{name}: {old!r} in the workdir, {new!r} now"
                           for name, (old, new) in sorted(differences.items()))
        raise UserInputError(
            f"{workdir} holds a run of a different model ({listed}). Use a new --workdir, or "
            f"restore the original values to resume it."
        )
    old, new = saved.fields, experiment.fields
    data_changes = [(name, old[name], new[name]) for name in DATA_IDENTITY_FIELDS if old[name] != new[name]]
    if data_changes:
        listed = "; ".join(f"{name}: {old!r} in the workdir, {new!r} now" for name, old, new in data_changes)
        raise UserInputError(
            f"{workdir} holds a run trained on other data ({listed}): its weights belong to the token ids of "
            f"its own tokenizer.model. Restore the original values to resume it, or fine-tune it on the new "
            f"data in a new --workdir with --config.fine_tune_from={workdir}."
        )
    run_changes = [(name, old[name], new[name]) for name in RUN_IDENTITY_FIELDS if old[name] != new[name]]
    if run_changes:
        listed = "; ".join(f"{name}: {old!r} in the workdir, {new!r} now" for name, old, new in run_changes)
        restore = " ".join(f"--config.{name}={old!r}" for name, old, _ in run_changes)
        raise UserInputError(
            f"{workdir} holds a run started with another seed ({listed}): the seed chose its initial parameters, "
            f"dropout keys and batch order, so it cannot change halfway. Resume it with {restore} (or without the "
            f"override), or train the new seed in a new --workdir."
        )
    switched = [(name, old[name], new[name]) for name in OPTIMIZER_STATE_FIELDS
                if bool(old[name]) != bool(new[name])]
    if switched:
        listed = "; ".join(f"{name}: {old!r} in the workdir, {new!r} now" for name, old, new in switched)
        raise UserInputError(
            f"{workdir} cannot resume with {listed}: switching it on or off changes the optimizer state the "
            f"checkpoints hold. Resume with the recorded value (another non-zero value is allowed), or train "
            f"the new setting in a new --workdir."
        )
    schedules = [(name, old[name], new[name]) for name in SCHEDULE_FIELDS if old[name] != new[name]]
    if schedules:
        listed = "; ".join(f"{name}: {old!r} in the workdir, {new!r} now" for name, old, new in schedules)
        restore = " ".join(f"--config.{name}={old!r}" for name, old, _ in schedules)
        raise UserInputError(
            f"{workdir} holds a run trained with another learning-rate schedule ({listed}): its steps so far "
            f"followed its own. Resume it with {restore}, or train the new schedule in a new --workdir."
        )
    flat_old, flat_new = _flatten_config(old), _flatten_config(new)
    other = sorted(key for key in set(flat_old) | set(flat_new) if flat_old.get(key) != flat_new.get(key))
    if other:
        logging.warning("Resuming %s with changed non-model settings: %s", workdir, ", ".join(other))
