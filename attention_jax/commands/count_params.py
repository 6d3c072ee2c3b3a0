"""Print the parameter count of a config as one JSON line.

Usage::

    python -m attention_jax.count_params --config=configs/table2.py:B1 [--config.vocab_size=37000]

prints ``{"row": "B1", "params": 56020992, "paper_params": 58000000}`` (``null`` where the paper has none).
"""

from __future__ import annotations

import json
from typing import Any

from absl import app
from ml_collections import config_flags

from attention_jax.experiment import sections
from attention_jax.foundation import user_errors

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file, e.g. configs/table2.py:A1, or a "
                                          "shipped config by name from any directory: table2:A1.",
                                          lock_config=True)


def _param_summary(config: Any) -> dict[str, Any]:
    """``{"row", "params", "paper_params"}``: the config's parameter count from shapes only, beside the paper's."""
    from attention_jax.models import language_model, model  # Here: a config mistake is refused before JAX loads.

    experiment = sections.build_experiment(config, "--config")
    millions = experiment.paper.params_millions
    params = model.count_params(language_model.abstract_params(experiment.model, experiment.model_kind))
    return {
        "row": experiment.name,
        "params": params,
        "paper_params": None if millions is None else int(round(millions * 1e6)),
    }


def main(argv: list[str]) -> None:
    """Print :func:`_param_summary` of ``--config`` as JSON.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    del argv
    if _CONFIG.value is None:
        raise app.UsageError("--config is required, e.g. --config=configs/table2.py:base")
    try:
        summary = _param_summary(_CONFIG.value)
    except ValueError as error:  # A config the schema refuses: one line, exit 2, as train gives it.
        user_errors.exit_with_error("attention_jax.count_params", f"bad config: {error}")
    print(json.dumps(summary))


if __name__ == "__main__":
    app.run(main)
