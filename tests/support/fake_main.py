"""A stand-in for ``attention_jax.main`` in launcher tests: same flags, instant fake training.

Parses ``--config`` (with overrides) and ``--workdir`` exactly like the entry point, writes
``config.json`` and ``results.json`` whose numbers are a deterministic function of the config, and
appends one line per invocation to ``WORKDIR/invocations.txt``. Rows listed in the environment
variable ``FAKE_MAIN_FAIL_ROWS`` (comma-separated names; ``<row>/seed_<k>`` names one seed of a row)
fail with exit status 3 after printing a recognizable error line.
"""

from __future__ import annotations

import json
import os
import sys

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Work directory.")


def fake_results(config) -> dict:
    """Results that depend on the row's hyperparameters (so rows differ)."""
    ppl = 4.0 + 1.0 / config.num_heads + config.num_layers * 0.01 + config.dropout_rate + 0.001 * config.seed
    return {"name": config.name, "seed": config.seed, "paper": config.paper.to_dict(),
            "step": config.num_train_steps,
            "train_loss": 2.0, "eval_loss": 1.5, "eval_ppl": ppl, "bleu": 20.0 + config.num_heads / 10,
            "params": 1000 * config.d_model, "wall_s": 12.5, "train_tokens_per_s": 100.0}


def main(argv: list[str]) -> None:
    del argv
    config, workdir = _CONFIG.value, _WORKDIR.value
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "invocations.txt"), "a") as file:
        file.write(config.name + "\n")
    with open(os.path.join(workdir, "config.json"), "w") as file:
        file.write(config.to_json_best_effort(indent=2))
    print(f"fake training of {config.name} for {config.num_train_steps} steps")
    failing = os.environ.get("FAKE_MAIN_FAIL_ROWS", "").split(",")
    if config.name in failing or f"{config.name}/seed_{config.seed}" in failing:
        print(f"FakeTrainingError: row {config.name} diverged", file=sys.stderr)
        sys.exit(3)
    with open(os.path.join(workdir, "results.json"), "w") as file:
        json.dump(fake_results(config), file)


if __name__ == "__main__":
    app.run(main)
