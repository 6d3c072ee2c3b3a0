"""Helpers for launcher tests: run ``python -m launch.sweep`` / ``attention_jax.report`` as a user would,
and the settings and prepared data of tiny real training runs."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SUPPORT_DIR = pathlib.Path(__file__).resolve().parent


def fake_main_env(**extra: str) -> dict[str, str]:
    """Environment in which ``--main=fake_main`` resolves to ``tests/support/fake_main.py``."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT_DIR), env.get("PYTHONPATH", "")]))
    return env


def run_module(module: str, *args: str, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m <module> <args>`` from the repository root and capture its output."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def run_sweep(*args: str, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m launch.sweep <args>`` from the repository root."""
    return run_module("launch.sweep", *args, env=env, timeout=timeout)


# A seconds-long training run on the small synthetic corpus: one bucket shape (max_len=8), so one
# compilation of the train step. Model widths are left to the rows (Table 2 varies them).
TINY_TRAINING = dict(dataset="synthetic_en_de/small", vocab_size=1000, max_len=8, tokens_per_batch=512,
                     num_layers=1, d_model=32, d_ff=64, warmup_steps=10, log_every_steps=5,
                     num_eval_batches=2, num_bleu_examples=0, final_bleu=False)


def needs_entry_point() -> None:
    """Skip the calling test when the training entry point ``attention_jax.main`` is absent."""
    if importlib.util.find_spec("attention_jax.main") is None:
        pytest.skip("needs the training entry point attention_jax.main (branch train)")


def tiny_flags(data_dir: pathlib.Path, steps: int, **extra: object) -> list[str]:
    """``--config.key=value`` flags for a tiny run of ``steps`` steps reading data from ``data_dir``."""
    values = dict(TINY_TRAINING, data_dir=str(data_dir), num_train_steps=steps, eval_every_steps=steps,
                  checkpoint_every_steps=steps)
    values.update(extra)  # May replace the defaults above.
    return [f"--config.{key}={value}" for key, value in values.items()]


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A data directory with the small synthetic corpus, its tokenizer and token ids prepared.

    Prepared once, before any run, so that concurrent jobs never build the same cache together.
    """
    from attention_jax.data import input_pipeline
    from attention_jax.experiment import sections
    from configs import tiny

    data_dir = tmp_path_factory.mktemp("tiny_data")
    config = tiny.get_config()
    config.update(TINY_TRAINING)
    config.data_dir = str(data_dir)
    input_pipeline.get_datasets(sections.build_experiment(config, "configs/tiny.py").data)
    return data_dir
