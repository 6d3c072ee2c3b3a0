"""Launch a sweep (e.g. Table 2) locally, on SLURM, or on a Cloud TPU VM slice.

Usage, from the repository root::

    python -m attention_jax.sweep --config=configs/table2.py --rows=all|A1,B2,... \\
        --executor=local|slurm|tpu --root=ROOT [--seeds=K] [--dry_run] [--parallel=N] [--nopin_cpus] \\
        [--force] [--config.key=value ...]

Each row runs ``python -m attention_jax.main --config=<file>:<row> --workdir=ROOT/<row>`` followed by
the common ``--config.key=value`` overrides (they apply on top of every row: a tiny model for a local
trial, a dataset, a step count). Examples::

    # A two-row local trial of Table 2 at toy size, then the report (written automatically):
    python -m attention_jax.sweep --config=configs/table2.py --rows=base,A1 --executor=local \\
        --root=runs/table2_toy --config.dataset=synthetic_en_de --config.vocab_size=1000 \\
        --config.num_layers=1 --config.d_model=64 --config.d_ff=256 --config.num_train_steps=200
    # The whole table on a SLURM cluster, 2 nodes x 8 GPUs per row (print the scripts first):
    python -m attention_jax.sweep --config=configs/table2.py --executor=slurm --root=/shared/runs/table2 \\
        --nodes=2 --gpus_per_node=8 --time=24:00:00 --partition=gpu --dry_run
    # On a TPU VM slice, rows one after another, outputs on GCS:
    python -m attention_jax.sweep --config=configs/table2.py --executor=tpu --root=runs/table2 \\
        --tpu_name=my-v4-32 --zone=us-central2-b --remote_root=gs://my-bucket/table2

With ``--seeds=K`` (or a sweep file defining ``get_seeds()``) every row runs K times, with
``--config.seed=0`` .. ``K-1`` appended, each in ``ROOT/<row>/seed_<k>``; ``config.seed`` sets the
initialisation, the dropout keys and the order of the training batches. The runs go seed by seed (every
row at seed 0 first), so an interrupted sweep holds whole tables of its first seeds, and the report
aggregates the seeds (mean, standard deviation, change against base paired by seed, a verdict per
row). A larger K later adds seeds to the same root.

With ``--corpora=messages_en_de,gnome_help_en_de`` (or a sweep file defining ``get_corpora()``) every row
(and seed) runs on each corpus, in ``ROOT/<corpus>/<row>[/seed_<k>]``, with ``--config.corpus=<corpus>``
and the corpus recipe's fields (``attention_jax/data/corpora.py``) between the row's config and
the common overrides; ``ROOT/<corpus>`` is a sweep root of its own (its ``sweep.json``, its report). The
runs go seed by seed, then corpus by corpus. An unknown corpus is refused before anything is written.

Rerunning the same command skips finished rows (``ROOT/<row>/results.json``, or
``ROOT/<row>/seed_<k>/results.json`` per seed) and resumes the others.
``ROOT/sweep.json`` records the sweep; then ``python -m attention_jax.report ROOT`` writes the table.
Exit status: 0 when every row finished (or was submitted), 1 when a row failed or was stopped, 2 for
bad input (among it a ``--root`` that is a file, holds an overlong name or cannot be written: refused before
anything is written). SIGINT/SIGTERM (Ctrl-C) to the sweep is passed on to the running rows, which checkpoint and
exit; the sweep waits for them, starts no new row, and a rerun resumes each row once.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable, Sequence

from absl import app, flags

from attention_jax.data import corpora
from attention_jax.foundation import run_files, user_errors
from attention_jax.reports import all_reports, paper_figures
from attention_jax.training import workdir_lock
from launch import local_executor, row_processes, slurm_executor, sweep_record, sweep_spec, tpu_executor
from launch.sweep_spec import RowJob, RowOutcome

_CONFIG = flags.DEFINE_string("config", None,
                              "Sweep config file (defines get_sweep()), e.g. configs/table2.py.")
_ROWS = flags.DEFINE_string("rows", "all", "'all' or comma-separated row names, e.g. A1,B2.")
_ROOT = flags.DEFINE_string("root", None, "Sweep root: ROOT/<row> is each row's work directory.")
_SEEDS = flags.DEFINE_integer("seeds", 0, "Run every row with config.seed = 0..K-1, each seed in "
                               "ROOT/<row>/seed_<k> (0: the sweep file's get_seeds() if it has one, else "
                               "one run per row in ROOT/<row> at the row's own seed).", lower_bound=0)
_CORPORA = flags.DEFINE_string("corpora", "", "Comma-separated corpus recipes to run every row on, each in "
                                "ROOT/<corpus>/ (empty: the sweep file's get_corpora() if it has one, else none).")
_DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print the commands / scripts; run and write nothing.")
_FORCE = flags.DEFINE_bool("force", False,
                           "Replace a different sweep's record in ROOT and rerun finished rows.")
_PARALLEL = flags.DEFINE_integer("parallel", 1, "local: rows run at the same time.", lower_bound=1)
_PIN_CPUS = flags.DEFINE_bool("pin_cpus", True, "local, --parallel > 1: keep each running row to its own "
                              "share of this machine's CPUs (launch.local_executor.cpu_slots).")
_PYTHON = flags.DEFINE_string("python", "", "Python on the machines that run rows (default: this "
                              "interpreter; python3 on TPU VMs).")
_MAIN = flags.DEFINE_string("main", "attention_jax.main", "Entry point module each row runs.")
_REPO_DIR = flags.DEFINE_string("repo_dir", "", "Repository root where rows run (default: the current "
                                "directory; 'attention_jax' under the login directory on TPU VMs).")
_SETUP = flags.DEFINE_multi_string("setup", [], "slurm/tpu: shell line run before training, e.g. "
                                   "'source ~/venv/bin/activate' (repeatable).")
_REPORT = flags.DEFINE_bool("report", True,
                            "Write the report (attention_jax.report) when rows finished here.")
# SLURM
_NODES = flags.DEFINE_integer("nodes", 1, "slurm: nodes per row.", lower_bound=1)
_TASKS_PER_NODE = flags.DEFINE_integer("tasks_per_node", 1, "slurm: training processes per node (e.g. one "
                                      "per GPU; default one process driving all of the node's devices).", lower_bound=1)
_GPUS_PER_NODE = flags.DEFINE_integer("gpus_per_node", 0, "slurm: GPUs per node.", lower_bound=0)
_TIME = flags.DEFINE_string("time", "", "slurm: time limit per row, e.g. 24:00:00.")
_PARTITION = flags.DEFINE_string("partition", "", "slurm: partition.")
_ACCOUNT = flags.DEFINE_string("account", "", "slurm: account.")
_CPUS_PER_TASK = flags.DEFINE_integer("cpus_per_task", 0, "slurm: CPUs per process.")
_MEM = flags.DEFINE_string("mem", "", "slurm: memory per node, e.g. 64G.")
_SBATCH_OPTION = flags.DEFINE_multi_string("sbatch_option", [],
                                            "slurm: extra #SBATCH option, e.g. --qos=high (repeatable).")
_WAIT = flags.DEFINE_bool("wait", False, "slurm: poll squeue until the jobs end, then summarize.")
_POLL_S = flags.DEFINE_float("poll_s", 30.0, "slurm --wait: seconds between squeue polls.")
# TPU
_TPU_NAME = flags.DEFINE_string("tpu_name", "", "tpu: TPU VM name.")
_ZONE = flags.DEFINE_string("zone", "", "tpu: zone of the TPU VM.")
_PROJECT = flags.DEFINE_string("project", "", "tpu: Google Cloud project (default: gcloud's).")
_REMOTE_ROOT = flags.DEFINE_string("remote_root", "", "tpu: sweep root as seen on the TPU hosts "
                                   "(e.g. gs://bucket/table2; default: --root).")


@dataclasses.dataclass(frozen=True)
class Plan:
    """A sweep resolved from the flags: what runs where.

    Attributes
    ----------
    sweep : sweep_spec.Sweep
        The loaded sweep file.
    rows : list[str]
        The chosen rows, in the sweep's order.
    overrides : list[str]
        Common ``"key=value"`` overrides.
    root : str
        Absolute local sweep root.
    repo_dir : str
        Repository root where the rows run.
    jobs : list[RowJob]
        One per chosen row (and seed).
    description : dict
        The sweep's record for ``ROOT/sweep.json`` (``sweep_record.sweep_description``).
    seeds : tuple[int, ...] or None
        The seeds every row runs with (None: one run per row in ``ROOT/<row>``).
    corpora : tuple[str, ...] or None
        The corpora every row runs on (None: none, ``ROOT/<row>``).
    records : dict[str, dict]
        Each sweep record's root -> its ``sweep.json`` description: ``{root: description}``, or one per
        corpus, ``{ROOT/<corpus>: ...}``.
    """

    sweep: sweep_spec.Sweep
    rows: list[str]
    overrides: list[str]
    root: str
    repo_dir: str
    jobs: list[RowJob]
    description: dict
    seeds: tuple[int, ...] | None = None
    corpora: tuple[str, ...] | None = None
    records: dict[str, dict] = dataclasses.field(default_factory=dict)


def _check_layout(root: str, corpus_names: Sequence[str] | None) -> None:
    """Refuse to mix a sweep without corpora (``ROOT/sweep.json``) and one over corpora in one root."""
    if corpus_names is not None and os.path.isfile(os.path.join(root, run_files.SWEEP_FILE)):
        raise ValueError(f"--root={root} holds a sweep without corpora (ROOT/<row>); use a new --root for "
                         "a sweep over corpora.")
    mixed = [name for name in corpora.CORPORA if os.path.isfile(os.path.join(root, name, run_files.SWEEP_FILE))]
    if corpus_names is None and mixed:
        raise ValueError(f"--root={root} holds a sweep over corpora ({', '.join(mixed)}); use a new --root, "
                         "or give --corpora.")


def _relative_to_cwd(path: str) -> str:
    absolute = os.path.abspath(path)
    inside = os.path.commonpath([absolute, os.getcwd()]) == os.getcwd()
    return os.path.relpath(absolute) if inside else absolute


def build_plan(overrides: Sequence[str]) -> Plan:
    """Resolve the flags into a :class:`Plan` (loads the sweep file, checks rows and overrides).

    Parameters
    ----------
    overrides : Sequence[str]
        Common ``"key=value"`` overrides.

    Returns
    -------
    Plan
        Rows, their commands and the sweep's record.

    Notes
    -----
    Raises ``ValueError`` / ``FileNotFoundError`` naming the bad flag.
    """
    if _CONFIG.value is None or _ROOT.value is None:
        raise ValueError("--config and --root are required, "
                         "e.g. --config=configs/table2.py --root=runs/table2")
    if _EXECUTOR.value not in EXECUTORS:
        raise ValueError(f"unknown --executor={_EXECUTOR.value}; choose one of {', '.join(EXECUTORS)}.")
    sweep = sweep_spec.load_sweep(_relative_to_cwd(_CONFIG.value))
    rows = sweep_spec.select_rows(sweep, _ROWS.value)
    recipes = sweep_spec.resolve_corpora(sweep, _CORPORA.value, overrides)
    seeds = sweep_spec.resolve_seeds(sweep, _SEEDS.value, overrides)
    root = os.path.abspath(_ROOT.value)
    run_files.check_directory(root, "--root")  # A file or an overlong name, dry run or not.
    _check_layout(root, None if recipes is None else [recipe.name for recipe in recipes])
    records = {}
    for recipe in recipes or [None]:
        sweep_spec.check_overrides(sweep, rows, overrides, recipe)
        record_root = root if recipe is None else os.path.join(root, recipe.name)
        records[record_root] = sweep_record.sweep_description(sweep, overrides, seeds, recipe)
    remote = EXECUTORS[_EXECUTOR.value].remote
    repo_dir = _REPO_DIR.value or ("attention_jax" if remote else os.getcwd())
    python = _PYTHON.value or ("python3" if remote else sys.executable)
    run_root = (_REMOTE_ROOT.value or root) if remote else root
    jobs = sweep_spec.row_jobs(sweep, rows, overrides, root=root, run_root=run_root, python=python,
                               main_module=_MAIN.value, seeds=seeds, corpora_to_run=recipes)
    corpus_names = None if recipes is None else tuple(recipe.name for recipe in recipes)
    return Plan(sweep, rows, list(overrides), root, repo_dir, jobs, next(iter(records.values())), seeds,
                corpus_names, records)


def _slurm_resources() -> slurm_executor.SlurmResources:
    return slurm_executor.SlurmResources(
        nodes=_NODES.value, tasks_per_node=_TASKS_PER_NODE.value, gpus_per_node=_GPUS_PER_NODE.value,
        time=_TIME.value, partition=_PARTITION.value, account=_ACCOUNT.value,
        cpus_per_task=_CPUS_PER_TASK.value, mem=_MEM.value, extra_options=tuple(_SBATCH_OPTION.value),
        setup=tuple(_SETUP.value))


def _tpu_target(plan: Plan) -> tpu_executor.TpuTarget:
    return tpu_executor.TpuTarget(tpu_name=_TPU_NAME.value, zone=_ZONE.value, project=_PROJECT.value,
                                  repo_dir=plan.repo_dir, setup=tuple(_SETUP.value))


def _describe_local(plan: Plan) -> str:
    return local_executor.describe_local(plan.jobs, repo_dir=plan.repo_dir)


def _run_local(plan: Plan) -> list[RowOutcome]:
    return local_executor.run_local(plan.jobs, repo_dir=plan.repo_dir, parallel=_PARALLEL.value, force=_FORCE.value,
                                    pin_cpus=_PIN_CPUS.value)


def _describe_slurm(plan: Plan) -> str:
    return slurm_executor.describe_slurm(plan.jobs, _slurm_resources(), repo_dir=plan.repo_dir,
                                         name_prefix=plan.description["report_name"])


def _check_slurm(plan: Plan) -> None:
    del plan
    slurm_executor.require_binary("sbatch")
    slurm_executor.require_binary("squeue")


def _run_slurm(plan: Plan) -> list[RowOutcome]:
    outcomes = slurm_executor.submit_slurm(plan.jobs, _slurm_resources(), repo_dir=plan.repo_dir,
                                           name_prefix=plan.description["report_name"], force=_FORCE.value)
    if _WAIT.value:
        outcomes = slurm_executor.wait_for_jobs(plan.jobs, outcomes, poll_s=_POLL_S.value)
    return outcomes


def _describe_tpu(plan: Plan) -> str:
    return tpu_executor.describe_tpu(plan.jobs, _tpu_target(plan))


def _check_tpu(plan: Plan) -> None:
    tpu_executor.require_gcloud()
    _tpu_target(plan)


def _run_tpu(plan: Plan) -> list[RowOutcome]:
    return tpu_executor.run_tpu(plan.jobs, _tpu_target(plan), force=_FORCE.value)


@dataclasses.dataclass(frozen=True)
class Executor:
    """Where a sweep's rows run: how to print, check and carry out a plan there.

    Parameters
    ----------
    describe : Callable[[Plan], str]
        The commands or job scripts, for ``--dry_run``.
    check_tools : Callable[[Plan], None]
        Raises before anything is written when a tool or flag the executor needs is missing.
    execute : Callable[[Plan], list[RowOutcome]]
        Runs or submits the rows; one outcome per row.
    remote : bool
        Rows run on other machines that have their own repository, Python and root (TPU VMs).
    """

    describe: Callable[[Plan], str]
    check_tools: Callable[[Plan], None]
    execute: Callable[[Plan], list[RowOutcome]]
    remote: bool = False


def _no_tools_needed(plan: Plan) -> None:
    del plan


EXECUTORS: dict[str, Executor] = {
    "local": Executor(_describe_local, _no_tools_needed, _run_local),
    "slurm": Executor(_describe_slurm, _check_slurm, _run_slurm),
    "tpu": Executor(_describe_tpu, _check_tpu, _run_tpu, remote=True),
}
_EXECUTOR = flags.DEFINE_string("executor", "local", "Where rows run: " + " | ".join(EXECUTORS) + ".")


def describe(plan: Plan) -> str:
    """What the sweep would do (``--dry_run``): a header, then commands or job scripts.

    Parameters
    ----------
    plan : Plan
        The resolved sweep.

    Returns
    -------
    str
        Text to print.
    """
    seeds = "" if plan.seeds is None else f" x seeds {', '.join(map(str, plan.seeds))}"
    seeds += "" if plan.corpora is None else f" x corpora {', '.join(plan.corpora)}"
    header = (f"# {plan.sweep.config_file}: {len(plan.rows)} row(s) {', '.join(plan.rows)}{seeds} -> {plan.root} "
              f"(executor {_EXECUTOR.value}; overrides: {' '.join(plan.overrides) or 'none'})")
    return header + "\n" + EXECUTORS[_EXECUTOR.value].describe(plan)


def check_tools(plan: Plan) -> None:
    """Check that the executor's commands exist before anything is written.

    Parameters
    ----------
    plan : Plan
        The resolved sweep.

    Notes
    -----
    Raises ``FileNotFoundError`` saying what to install when ``sbatch``/``squeue`` (slurm) or
    ``gcloud`` (tpu) is missing, and ``ValueError`` for missing TPU flags.
    """
    EXECUTORS[_EXECUTOR.value].check_tools(plan)


def execute(plan: Plan) -> list[RowOutcome]:
    """Run or submit the rows with the chosen executor.

    Parameters
    ----------
    plan : Plan
        The resolved sweep (already recorded in ``ROOT/sweep.json``).

    Returns
    -------
    list[RowOutcome]
        One per run (row, or row and seed).
    """
    return EXECUTORS[_EXECUTOR.value].execute(plan)


def summarize(outcomes: Sequence[RowOutcome]) -> str:
    """One summary line per status, failed rows named with their details.

    Parameters
    ----------
    outcomes : Sequence[RowOutcome]
        The rows' outcomes.

    Returns
    -------
    str
        E.g. ``"Summary: 18 done, 1 skipped, 1 failed\\n  failed A1: exit 1, log: ..."``.
    """
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    lines = ["Summary: " + ", ".join(f"{count} {status}" for status, count in counts.items())]
    lines += [f"  {outcome.status} {outcome.row}: {outcome.detail}" for outcome in outcomes if not outcome.ok]
    return "\n".join(lines)


def _print_error(message: str) -> None:
    """One error line on stderr, prefixed as every command's (``launch.sweep: error: ...``)."""
    line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"{user_errors.program_name('launch.sweep')}: error: {line}", file=sys.stderr)


def _write_report(plan: Plan, outcomes: Sequence[RowOutcome]) -> None:
    finished_here = _EXECUTOR.value == "local" or (_EXECUTOR.value == "slurm" and _WAIT.value)
    if not (_REPORT.value and finished_here and any(o.status in ("done", "skipped") for o in outcomes)):
        for record_root in plan.records:
            print(f"Report: python -m attention_jax.report {record_root}")
        return
    for record_root in plan.records:  # ROOT, or ROOT/<corpus> per corpus.
        try:
            paths = all_reports.write_reports(record_root, record_root)  # What `attention_jax.report ROOT` writes.
        except (ValueError, OSError) as error:  # A damaged results.json (UserInputError), a full disk: summary stands.
            _print_error(f"no report: {error}")
            continue
        print("Report: " + ", ".join(paths))


def _parse_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    try:
        remaining, overrides = sweep_spec.split_override_flags(argv[1:])
        positional = flags.FLAGS([argv[0], *remaining])
    except (ValueError, flags.Error) as error:
        _print_error(f"{error} (see python -m attention_jax.sweep --help)")
        sys.exit(2)
    return positional, overrides


def main(parsed: tuple[list[str], list[str]]) -> int:
    """Entry point: resolve, record and run the sweep; print a summary.

    Parameters
    ----------
    parsed : tuple[list[str], list[str]]
        Positional arguments and common overrides, from the flags parser.

    Returns
    -------
    int
        Exit status: 0 all rows fine, 1 some row failed, 2 bad input.
    """
    positional, overrides = parsed
    if len(positional) > 1:
        _print_error(f"unexpected arguments {positional[1:]}")
        return 2
    try:
        plan = build_plan(overrides)
        for setting in paper_figures.overridden_row_settings(dict(plan.description, rows=plan.rows)):
            print(f"note: a common override replaces row setting {setting}", file=sys.stderr)
        if plan.seeds is not None:
            for row in plan.rows:
                own_seed = plan.sweep.row_overrides[row].get("seed")
                if own_seed is not None:
                    print(f"note: the seeds replace row setting {row} seed={own_seed}", file=sys.stderr)
        if _DRY_RUN.value:
            print(describe(plan))
            return 0
        check_tools(plan)
        run_files.check_directory(plan.root, "--root", writable=True)  # A read-only root: before anything runs.
        # A second launcher on the root is refused: each called "failed" the rows the other was training.
        with workdir_lock.WorkdirLock(plan.root, holder="launch.sweep", flag="--root"):
            for record_root, description in plan.records.items():
                sweep_record.record_launch(record_root, description, plan.rows, _EXECUTOR.value, force=_FORCE.value)
            row_processes.forward_stop_signals()
            outcomes = execute(plan)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        _print_error(str(error))
        return 2
    print(summarize(outcomes))
    _write_report(plan, outcomes)
    return 0 if all(outcome.ok for outcome in outcomes) else 1


def run() -> None:
    """``attention-jax-sweep`` and ``python -m attention_jax.sweep`` (:mod:`attention_jax.sweep`): parse flags, run."""
    with user_errors.quiet_pipe_and_interrupt():  # `--dry_run | head`, Ctrl-C before rows run: 141 / 130.
        app.run(main, flags_parser=_parse_flags)


if __name__ == "__main__":
    run()
