"""A run's ``config.json``, written and read back as its :class:`Experiment`.

Kept apart from ``checkpoints`` so that the warm ``translate`` path reads a config without importing Orbax.
"""

from __future__ import annotations

import json
import os

import jax
from etils import epath

from attention_jax.experiment import schema, sections
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files

# Files beside config.json that only a training run or an export writes.
_RUN_MARKERS = (run_files.CHECKPOINT_DIR, run_files.TOKENIZER_FILE, run_files.RESULTS_FILE, run_files.METRICS_FILE,
                run_files.EXPORT_PARAMS_FILE)


def read_config(workdir: str) -> Experiment:
    """Read ``WORKDIR/config.json`` as the run's :class:`Experiment`, fields added since as that run behaved.

    Parameters
    ----------
    workdir : str
        A training work directory.

    Returns
    -------
    Experiment
        The run's config, checked and built.

    Raises
    ------
    FileNotFoundError
        When the workdir or its config is missing.
    ConfigError
        For a config that is no JSON object or that the schema refuses.
    """
    root = epath.Path(workdir)
    if not root.exists():
        raise FileNotFoundError(f"workdir {workdir} does not exist.")
    path = root / run_files.CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: {workdir} is not a training workdir (train.train_and_evaluate "
            f"writes config.json first)."
        )
    try:
        saved = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:  # Half-written, or another file copied over it.
        raise schema.ConfigError(f"{path} is not valid JSON ({error}): restore it from a copy of the run.") from None
    if not isinstance(saved, dict):
        raise schema.ConfigError(f"{path} holds no config (a JSON object of fields): restore it from a copy.")
    try:
        return sections.build_experiment(schema.with_old_run_defaults(saved), str(path))
    except schema.ConfigError:
        known = sum(key in schema.FIELDS_BY_NAME for key in saved)
        if any((root / name).exists() for name in _RUN_MARKERS) or 2 * known >= len(saved) > 0:
            raise  # A run's own config.json, hand-edited: the field is named.
        raise schema.ConfigError(f"{workdir} is not a run directory: it holds a config.json that no training run "
                                 f"wrote, and none of {', '.join(_RUN_MARKERS)}. Pass the --workdir of a training "
                                 f"run or of an export.") from None


def write_config(workdir: str, experiment: Experiment) -> None:
    """Write the experiment's flat config to ``WORKDIR/config.json``, keys sorted (process 0 only).

    Parameters
    ----------
    workdir : str
        The work directory.
    experiment : Experiment
        The run's experiment.
    """
    if jax.process_index() != 0:
        return
    text = json.dumps(experiment.to_json_dict(), indent=2, sort_keys=True) + "\n"
    run_files.write_atomically(os.path.join(workdir, run_files.CONFIG_FILE), text)
