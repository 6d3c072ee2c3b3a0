"""Train and evaluate a Transformer: the command-line entry point.

Usage::

    python -m attention_jax.main --config=configs/tiny.py --workdir=runs/tiny
    python -m attention_jax.main --config=configs/table2.py:B1 --workdir=runs/B1 --config.num_train_steps=1000

Rerunning the same command resumes from the workdir's latest checkpoint. Multi-process jobs (SLURM,
TPU pods, or ``JAX_COORDINATOR_ADDRESS`` + ``JAX_NUM_PROCESSES`` + ``JAX_PROCESS_ID``) are detected
and joined before training starts (:func:`attention_jax.training.distributed.maybe_initialize`).
"""

from __future__ import annotations

import logging as python_logging

from absl import app, flags, logging
from ml_collections import config_flags

from attention_jax import compilation_cache
from attention_jax.training import distributed, train

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file, e.g. configs/tiny.py or "
                                          "configs/table2.py:B1.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics and results.")


class _QuietLibraries(python_logging.Filter):
    """Drop INFO records of orbax's internals (several lines per checkpoint); keep warnings."""

    def filter(self, record: python_logging.LogRecord) -> bool:
        """Keep the record unless it is an orbax INFO/DEBUG line."""
        noisy = "/orbax/" in record.pathname
        return not noisy or record.levelno >= python_logging.WARNING


def main(argv: list[str]) -> None:
    """Join a multi-process job if there is one, then :func:`train.train_and_evaluate`."""
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if _CONFIG.value is None or not _WORKDIR.value:
        raise app.UsageError("--config and --workdir are required, e.g. "
                             "--config=configs/tiny.py --workdir=runs/tiny")
    logging.get_absl_handler().addFilter(_QuietLibraries())
    distributed.maybe_initialize()
    compilation_cache.enable(_CONFIG.value.get("compilation_cache_dir"))
    train.train_and_evaluate(_CONFIG.value, _WORKDIR.value)


if __name__ == "__main__":
    app.run(main)
