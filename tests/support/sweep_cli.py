"""Helpers for launcher tests: run ``python -m launch.sweep`` / ``attention_jax.report`` as a user would,
or the sweep's own ``main`` in this process, and the settings and prepared data of tiny real training runs."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import types
import warnings
from typing import Iterator

import pytest

from tests.support import REPO_ROOT

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


@contextlib.contextmanager
def _process_state(env: dict[str, str] | None) -> Iterator[None]:
    """Inside the block: ``env`` as ``os.environ`` (when given) and the repository root as the working
    directory; afterwards the environment, directory and SIGINT/SIGTERM handlers as they were."""
    saved_environment, saved_directory = dict(os.environ), os.getcwd()
    saved_handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(REPO_ROOT)
        yield
    finally:
        os.chdir(saved_directory)
        os.environ.clear()
        os.environ.update(saved_environment)
        for number, handler in saved_handlers.items():  # launch.sweep forwards stop signals to its rows.
            signal.signal(number, handler)


SWEEP_MODULE = "launch.sweep"


@contextlib.contextmanager
def _sweep_in_its_own_flag_registry() -> Iterator[types.ModuleType]:
    """``launch.sweep`` imported afresh into an empty absl flag registry, which lasts for the block only.

    Yields
    ------
    types.ModuleType
        The freshly imported module.

    Notes
    -----
    absl keeps one global registry, and ``launch.sweep`` defines its flags when imported: ``--config``,
    ``--root`` and others that command modules the suite imports in this process also define
    (``attention_jax.commands.count_params`` defines ``--config``), so importing it beside them raises
    ``DuplicateFlagError`` (tests/commands/test_flag_definitions.py). Here the registry's contents are set aside
    for the block and an empty one takes their place: the sweep's flags are defined, parsed and read
    there, then dropped with the module, and the suite's registry comes back untouched. The module is
    named by a string (``importlib``), not an import statement, so that test_flag_definitions.py's scan
    of the modules living in the shared registry does not count it.
    """
    from absl import app, flags, logging  # noqa: F401 (their flags stay in the suite's registry)

    import launch

    registry = flags.FLAGS.__dict__
    saved_registry = dict(registry)
    saved_module = sys.modules.pop(SWEEP_MODULE, None)
    registry.clear()
    registry.update(flags.FlagValues().__dict__)
    try:
        module = importlib.import_module(SWEEP_MODULE)
        defined_by = set(flags.FLAGS.flags_by_module_dict())
        if defined_by != {SWEEP_MODULE}:  # A module first imported here would lose its flags with the block.
            raise RuntimeError(f"importing {SWEEP_MODULE} defined flags of {sorted(defined_by)}; import "
                               f"those modules before sweep_in_process")
        yield module
    finally:
        sys.modules.pop(SWEEP_MODULE, None)
        if saved_module is not None:
            sys.modules[SWEEP_MODULE] = saved_module
            launch.sweep = saved_module  # type: ignore[attr-defined]
        elif hasattr(launch, "sweep"):
            del launch.sweep
        registry.clear()
        registry.update(saved_registry)


def sweep_in_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m launch.sweep <args>`` run in this process: its flag parser and ``main``, no interpreter start.

    Parameters
    ----------
    *args
        The command line's arguments, as for :func:`run_sweep`.
    env
        The environment the sweep (and so each row it starts) sees; None: this process's own.

    Returns
    -------
    subprocess.CompletedProcess
        The exit status (``main``'s return value, or the flag parser's ``sys.exit`` status) and what the
        sweep printed to stdout and stderr, as :func:`run_sweep` returns them.

    Notes
    -----
    For the tests of the sweep's logic, where the interpreter's start adds no check; the command line
    itself keeps its subprocess tests (``test_tiny_table2_rows_train_to_the_report_and_rerun_does_no_work``
    in tests/launch/test_sweep.py, the killed sweep in tests/training/test_faults.py). The rows still run as processes:
    starting them is the local executor's job. The sweep's flags live in a registry of their own for the
    call (:func:`_sweep_in_its_own_flag_registry`), so no call's flags leak into the next or clash with
    the suite's.
    """
    stdout, stderr = io.StringIO(), io.StringIO()
    with _process_state(env), _sweep_in_its_own_flag_registry() as sweep:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
            # A row's start forks (its preexec_fn asks for SIGHUP at the sweep's death); the child only
            # sets that up and execs, never touching JAX, so JAX's fork warning does not apply to it.
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            try:
                returncode = sweep.main(sweep._parse_flags([SWEEP_MODULE, *args]))
            except SystemExit as exit_request:  # The flag parser's exit 2 on a bad flag.
                returncode = exit_request.code if isinstance(exit_request.code, int) else 1
    return subprocess.CompletedProcess([SWEEP_MODULE, *args], returncode, stdout.getvalue(), stderr.getvalue())


def sweep_help() -> str:
    """The flags part of the launcher's ``--help`` (what ``attention-jax-sweep --help`` lists), read in this process."""
    from absl import flags

    with _sweep_in_its_own_flag_registry():
        return flags.FLAGS.module_help(SWEEP_MODULE)


# A seconds-long training run on the small synthetic corpus: one bucket shape (max_len=8), so one
# compilation of the train step. Model widths are left to the rows (Table 2 varies them).
TINY_TRAINING = dict(dataset="synthetic_en_de/small", vocab_size=1000, max_len=8, tokens_per_batch=512,
                     num_layers=1, d_model=32, d_ff=64, warmup_steps=10, log_every_steps=5,
                     num_eval_batches=2, num_bleu_examples=0, final_bleu=False)


def needs_entry_point() -> None:
    """Skip the calling test when the training entry point ``attention_jax.main`` is absent."""
    if importlib.util.find_spec("attention_jax.main") is None:
        pytest.skip("needs the training entry point attention_jax.main (branch train)")


def tiny_overrides(data_dir: pathlib.Path, steps: int, **extra: object) -> dict[str, object]:
    """The config fields of a tiny run of ``steps`` steps reading data from ``data_dir``.

    Parameters
    ----------
    data_dir
        The prepared data directory (the ``tiny_data_dir`` fixture).
    steps
        ``num_train_steps``, and the evaluation and checkpoint interval.
    **extra
        More fields, which may replace the ones above.

    Returns
    -------
    dict[str, object]
        Field name to value, on top of ``configs/tiny.py``.
    """
    values = dict(TINY_TRAINING, data_dir=str(data_dir), num_train_steps=steps, eval_every_steps=steps,
                  checkpoint_every_steps=steps)
    values.update(extra)
    return values


def tiny_flags(data_dir: pathlib.Path, steps: int, **extra: object) -> list[str]:
    """``--config.key=value`` flags of :func:`tiny_overrides`, for ``attention_jax.main`` or a sweep."""
    return [f"--config.{key}={value}" for key, value in tiny_overrides(data_dir, steps, **extra).items()]


def train_tiny_in_process(workdir: pathlib.Path, data_dir: pathlib.Path, steps: int, **extra: object) -> dict:
    """Train ``configs/tiny.py`` with :func:`tiny_overrides` in this process, as ``attention_jax.main`` does.

    Parameters
    ----------
    workdir
        The run's work directory (created, or resumed when it holds a checkpoint).
    data_dir, steps, **extra
        As for :func:`tiny_overrides`.

    Returns
    -------
    dict
        :func:`attention_jax.training.train.train_and_evaluate`'s results.

    Notes
    -----
    The same config, checked against the schema the same way, and the same training function as
    ``python -m attention_jax.main --config=configs/tiny.py --workdir=WORKDIR`` with :func:`tiny_flags`,
    without the interpreter's start and the imports (seconds each on 2 cores): for the tests whose
    check is the run's files, not the command line.
    """
    from attention_jax.experiment import sections
    from attention_jax.training import train
    from configs import tiny

    config = tiny.get_config()
    config.update(tiny_overrides(data_dir, steps, **extra))
    return train.train_and_evaluate(sections.build_experiment(config, "configs/tiny.py"), str(workdir))


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


def dry_run_commands(stdout: str) -> list[list[str]]:
    """The commands a ``--dry_run`` printed, split as a shell would (comment lines left out)."""
    return [shlex.split(line) for line in stdout.splitlines() if line and not line.startswith("#")]
