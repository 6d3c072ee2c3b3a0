"""The one harness of every benchmark: command line, timing loop, medians, JSON report, ``--quick``.

Each benchmark defines its own flags in ``define_flags()`` (absl flags are global and benchmarks import
each other, so nothing is defined at import) and ends with ``harness.run(main, define_flags)``, which adds
the flags every benchmark shares: ``--quick`` (``--smoke`` is its old name), ``--note`` and ``--out``.
A mistake on the command line is one line and exit status 2. This module imports no JAX: drivers that
keep the GPU free for their children (``gpu.py``, ``time_to_bleu.py``) use it too.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Mapping, Sequence

from absl import app, flags

from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import exit_with_error

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PEER_DIR = REPO_ROOT.parent / "shared" / "peers"
CONFIG_OVERRIDE_PREFIX = "--config."
HELP_ARGUMENTS = ("--help", "-help", "--helpshort", "-h", "-?")

# --quick: one layer of width 32 (the base model's head count halved), seconds on any backend.
QUICK_MODEL = dict(num_layers=1, d_model=32, d_ff=64, num_heads=2, key_dim=16, value_dim=16, vocab_size=256)
# --quick of the benchmarks that train a run: configs/tiny.py shrunk to train and decode in seconds.
QUICK_CONFIG = "configs/tiny.py"
QUICK_TRAINING = dict(dataset="synthetic_en_de/small", vocab_size=1000, num_layers=1, d_model=32, d_ff=64,
                      num_heads=2, key_dim=16, value_dim=16, max_len=8, tokens_per_batch=512, num_train_steps=12,
                      warmup_steps=4, log_every_steps=3, max_decode_extra_len=4)

_load_at_start = os.getloadavg()


def run(main: Callable[[list[str]], Any], define_flags: Callable[[], None], *,
        passes_config_overrides: bool = False) -> None:
    """Define the shared and the benchmark's flags, parse the command line and run ``main``; never returns.

    Parameters
    ----------
    main : Callable[[list[str]], Any]
        The benchmark, called with the program name (and, when ``passes_config_overrides``, the
        ``--config.FIELD=VALUE`` arguments, left unparsed for the runs it starts).
    define_flags : Callable[[], None]
        Defines the benchmark's own flags.
    passes_config_overrides : bool
        Whether ``--config.FIELD=VALUE`` arguments pass through to ``main``.
    """
    global _load_at_start
    _load_at_start = os.getloadavg()
    main_module = sys.argv[0]  # absl's name for __main__: the shared flags are listed with the benchmark's.
    flags.DEFINE_bool("quick", False, "Tiny shapes and few steps: every path in seconds, numbers meaningless.",
                      module_name=main_module)
    flags.DEFINE_alias("smoke", "quick", module_name=main_module)
    flags.DEFINE_string("note", "", "Recorded in the JSON: the machine's load, anything that affects timings.",
                        module_name=main_module)
    flags.DEFINE_string("out", "", "Also write the JSON here.", module_name=main_module)
    try:
        define_flags()
    except (AttributeError, KeyError) as error:  # ml_collections applies a default config file's overrides here.
        if not any(argument.startswith(CONFIG_OVERRIDE_PREFIX) for argument in sys.argv[1:]):
            raise
        fail(f"a --config.FIELD override: {_innermost_message(error)}")

    def parse(argv: list[str]) -> list[str]:
        if any(argument in HELP_ARGUMENTS for argument in argv[1:]):
            app.usage(shorthelp=True, writeto_stdout=True)  # absl's own --help exits 1.
            print("Try --helpfull to get a list of all flags.")
            sys.exit(0)
        overrides = [argument for argument in argv[1:]
                     if passes_config_overrides and argument.startswith(CONFIG_OVERRIDE_PREFIX)]
        from attention_jax.commands import config_errors

        remaining = config_errors.parse_flags_or_exit([argument for argument in argv if argument not in overrides])
        if len(remaining) > 1:
            exit_with_error(program_name(argv), f"unexpected arguments {remaining[1:]}; flags are --name=value "
                            f"(see --help){'; --config.FIELD=VALUE pass through' if passes_config_overrides else ''}.")
        return remaining + overrides

    app.run(main, flags_parser=parse)


def _innermost_message(error: BaseException) -> str:
    while error.args and isinstance(error.args[0], BaseException):
        error = error.args[0]
    return str(error.args[0]) if error.args else str(error)


def program_name(argv: list[str] | None = None) -> str:
    """The benchmark's name for its error lines, e.g. ``gpu.py``."""
    argv = sys.argv if argv is None else argv
    return (argv[0].replace("\\", "/").rsplit("/", 1)[-1] or "benchmark") if argv else "benchmark"


def fail(message: str) -> None:
    """End the benchmark with ``<name>: error: <message>`` as one line and exit status 2."""
    exit_with_error(program_name(), message)


def time_calls(call: Callable[[], Any], repeats: int, warmup: int = 0) -> list[float]:
    """Seconds of each of ``repeats`` calls after ``warmup`` untimed ones.

    Parameters
    ----------
    call : Callable[[], Any]
        Must return only when its work is done (wrap JAX calls in ``jax.block_until_ready``).
    repeats, warmup : int
        Timed and untimed calls.

    Returns
    -------
    list[float]
        One duration per timed call, in order.
    """
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):  # Each call timed alone: the median resists a busy neighbour.
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def timing(times: Sequence[float]) -> dict[str, Any]:
    """``median_s``, ``mean_s``, ``min_s`` and every time (``times_s``) of :func:`time_calls`."""
    return {"median_s": statistics.median(times), "mean_s": statistics.fmean(times), "min_s": min(times),
            "times_s": [round(value, 5) for value in times]}


def medians(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``median_<field>`` over ``runs`` of every numeric field that all of them hold."""
    fields = [field for field, value in runs[0].items() if isinstance(value, (int, float))
              and not isinstance(value, bool) and all(isinstance(run.get(field), (int, float)) for run in runs)]
    return {f"median_{field}": statistics.median(run[field] for run in runs) for field in fields}


def machine() -> dict[str, Any]:
    """The machine a report was measured on; JAX's devices only when this process has imported JAX.

    Returns
    -------
    dict[str, Any]
        ``cpu`` (model name), ``cpu_count``, ``platform``, ``python``, ``jax_platforms``, the load average
        when :func:`run` started and now, and ``jax``, ``backend`` and ``device`` where JAX is loaded.
    """
    model = platform.machine()  # /proc/cpuinfo names the model; platform.processor() starts a process.
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            model = next((line.split(":", 1)[1].strip() for line in file if line.startswith("model name")), model)
    except OSError:
        pass
    description: dict[str, Any] = {
        "cpu": model, "cpu_count": os.cpu_count(), "platform": f"{os.uname().sysname} {os.uname().release}",
        "python": platform.python_version(), "jax_platforms": os.environ.get("JAX_PLATFORMS", ""),
        "load_average_before": [round(value, 2) for value in _load_at_start],
        "load_average_after": [round(value, 2) for value in os.getloadavg()]}
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "devices"):
        devices = jax.devices()
        description |= {"jax": jax.__version__, "backend": jax.default_backend(),
                        "device": f"{len(devices)} x {devices[0].device_kind}"}
    return description


def emit(report: dict[str, Any], out: str | os.PathLike[str] = "", note: str | None = None) -> dict[str, Any]:
    """Add ``note`` and ``machine`` to ``report``, print it as JSON and write it to ``out`` when given.

    Parameters
    ----------
    report : dict[str, Any]
        The benchmark's results.
    out : str or PathLike
        JSON file to write (atomically); ``""``: print only.
    note : str or None
        ``--note``; ``None`` reads the flag.

    Returns
    -------
    dict[str, Any]
        The report as printed.
    """
    report = {"note": flags.FLAGS.note if note is None else note, **report}
    report.setdefault("machine", machine())
    print(json.dumps(report, indent=1, ensure_ascii=False))
    if out:
        pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
        run_files.write_json_atomically(str(out), report, indent=1)
    return report


def repository_environment() -> dict[str, str]:
    """This process's environment with the repository root first on ``PYTHONPATH`` (for child processes)."""
    search_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=search_path)


def run_captured(command: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``command`` from the repository root and wait, its output captured; a failure raises nothing."""
    return subprocess.run(command, cwd=REPO_ROOT, env=env or repository_environment(), capture_output=True,
                          text=True, check=False)


def run_json(command: Sequence[str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run a benchmark (or the peer) in a fresh process and parse the JSON it prints.

    Parameters
    ----------
    command : sequence of str
        The program and its arguments.
    env : mapping or None
        The child's environment; default :func:`repository_environment`.

    Returns
    -------
    dict[str, Any]
        The whole of stdout as JSON, else its last line.

    Raises
    ------
    RuntimeError
        The command failed or printed nothing; the message ends with its stderr.
    """
    completed = run_captured(command, env)
    text = completed.stdout.strip()
    if completed.returncode != 0 or not text:
        raise RuntimeError(f"{' '.join(command)} failed (exit {completed.returncode}):\n{completed.stderr[-3000:]}")
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text.splitlines()[-1])
