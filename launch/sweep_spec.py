"""A sweep as data: load a config file's ``get_sweep()``, pick rows, build each row's command line.

A config file is a sweep when it defines ``get_sweep() -> dict[row name, overrides]`` (rows in order;
``configs/table2.py`` and ``configs/sweeps/attention_impl.py`` are examples). A row's config is
``get_config(row)`` when the file's ``get_config`` takes an argument; otherwise it is ``get_config()``
with the row's overrides applied as ``--config.key=value`` flags (and ``--config.name=<row>``).

Every row runs the training entry point::

    python -m attention_jax.main --config=<file>:<row> --workdir=<root>/<row> [--config.key=value ...]

with the sweep's common overrides appended, so they apply on top of every row.

Seeds: with ``seeds`` (``launch.sweep --seeds=K`` gives 0..K-1, or the sweep file's optional
``get_seeds() -> Sequence[int]``) every row runs once per seed, in its own work directory
``<root>/<row>/seed_<k>`` (:func:`seed_dir_name`), with ``--config.seed=<k>`` after the common overrides.
``config.seed`` drives the parameter initialisation, the dropout keys (split from the same key) and the
order of the training batches, so the seeds of a row differ in all three. Jobs are ordered seed by
seed (every row at seed 0, then every row at seed 1, ...), so an interrupted sweep has whole tables of
the first seeds. Without seeds each row runs once, at its config's own seed, in ``<root>/<row>``.

Corpora: with ``corpora`` (``launch.sweep --corpora=a,b``, or the sweep file's optional ``get_corpora()``)
every run goes to ``<root>/<corpus>/<row>[/seed_<k>]`` with ``--config.corpus=<corpus>`` and its recipe's
fields (:mod:`attention_jax.data.corpora`) after the row's config and before the common overrides;
a field the row itself sets in ``get_sweep()`` stays the row's. The file's optional
``get_corpus_overrides(corpus) -> dict`` adapts a recipe (its keys replace the recipe's). Jobs go seed by
seed, then corpus by corpus, then row by row.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from types import ModuleType
from typing import Any, Sequence

import ml_collections

from attention_jax.commands import shipped_configs
from attention_jax.data import corpora
from attention_jax.data.corpora import Corpus
from attention_jax.experiment import schema, sections
from attention_jax.foundation import python_files
from launch import sweep_file_checks

ROW_NAME_PATTERN = sweep_file_checks.ROW_NAME_PATTERN
MAX_SEEDS = sweep_file_checks.MAX_SEEDS  # Seeds per row, --seeds or get_seeds().
OVERRIDE_PREFIX = "--config."
CORPUS_DATA_FIELDS = ("dataset", "corpus")  # What each corpus's recipe sets and a common override must not.


def seed_dir_name(seed: int) -> str:
    """The name of a seed's work directory inside its row's: ``seed_<seed>``.

    Parameters
    ----------
    seed : int
        The run's ``config.seed`` (>= 0).

    Returns
    -------
    str
        E.g. ``"seed_2"``.
    """
    return f"seed_{seed}"


def check_seeds(seeds: Sequence[int], where: str) -> tuple[int, ...]:
    """Validate a list of seeds: non-negative integers without repeats.

    Parameters
    ----------
    seeds : Sequence[int]
        The seeds.
    where : str
        What to name in the error (a flag or a file).

    Returns
    -------
    tuple[int, ...]
        The seeds, in the order given.

    Notes
    -----
    Raises ``ValueError`` for an empty list, more than ``MAX_SEEDS`` seeds, a seed that is no integer in
    ``config.seed``'s range, or a repeated one.
    """
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError(f"{where}: no seeds.")
    if len(seeds) > sweep_file_checks.MAX_SEEDS:
        raise ValueError(f"{where}: {len(seeds)} seeds per row; at most {sweep_file_checks.MAX_SEEDS}.")
    if any(not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= sweep_file_checks.MAX_SEED
           for seed in seeds):
        raise ValueError(f"{where}: seeds must be integers in [0, {sweep_file_checks.MAX_SEED}] (config.seed's "
                         f"range); got {list(seeds)[:10]}.")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{where}: repeated seeds in {list(seeds)}.")
    return seeds


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The rows of one sweep config file.

    Attributes
    ----------
    config_file : str
        The file as given to the command line (relative to the repository root when inside it).
    row_overrides : dict[str, dict]
        Row name -> the row's overrides of the file's base config, in the sweep's order.
    takes_row_argument : bool
        Whether ``get_config(row)`` builds a row (``--config=<file>:<row>``); otherwise the row's
        overrides are passed as ``--config.key=value`` flags.
    module : ModuleType
        The imported config file.
    seeds : tuple[int, ...] or None
        The file's ``get_seeds()`` (each row runs once per seed), or None when it defines none.
    reference : str or None
        The file's optional ``get_reference()``: the row the report compares every other row with (None:
        the first row).
    paper_figures : dict or None
        The file's optional ``get_paper_figures()``: row -> the paper's figures for it (``dev_ppl``,
        ``dev_bleu``, ``params_millions``; e.g. ``configs/table2.py``). Only then does the report show the
        paper's columns and judge each row against the paper's direction. None: the file defines none.
    corpora : tuple[str, ...] or None
        The file's optional ``get_corpora()``: the corpora it runs on by default (None: none).
    """

    config_file: str
    row_overrides: dict[str, dict]
    takes_row_argument: bool
    module: ModuleType = dataclasses.field(repr=False, compare=False)
    seeds: tuple[int, ...] | None = None
    reference: str | None = None
    paper_figures: dict[str, dict[str, float | None]] | None = None
    corpora: tuple[str, ...] | None = None

    @property
    def row_names(self) -> tuple[str, ...]:
        """All rows, in the sweep's order."""
        return tuple(self.row_overrides)

    def row_config(self, row: str) -> ml_collections.ConfigDict:
        """Build the config of ``row`` (without the common overrides).

        Parameters
        ----------
        row : str
            One of :attr:`row_names`.

        Returns
        -------
        ml_collections.ConfigDict
            What ``attention_jax.main`` would build for the row before command-line overrides.

        Notes
        -----
        Raises :class:`schema.ConfigError` naming the file and the row for a row override the schema
        does not know, or for ``get_config`` failing.
        """
        where = f"{self.config_file} row {row}"
        try:
            if self.takes_row_argument:
                config = self.module.get_config(row)
            else:
                config = self.module.get_config()
                schema.check_keys(self.row_overrides[row], where)
                config.update(self.row_overrides[row])
                config.name = row
        except schema.ConfigError:
            raise
        except Exception as error:  # A typed ConfigDict refusing a value of another type, ...
            raise schema.ConfigError(f"{where}: {type(error).__name__}: {error}") from None
        if not isinstance(config, ml_collections.ConfigDict):
            raise schema.ConfigError(f"{where}: get_config() returned a {type(config).__name__}, not an "
                                     "ml_collections.ConfigDict.")
        return config

    def corpus_overrides(self, row: str | None, corpus: Corpus) -> list[str]:
        """The ``"key=value"`` overrides that put ``row`` on ``corpus``, ``corpus=<name>`` first.

        Parameters
        ----------
        row : str or None
            One of :attr:`row_names` (None: the recipe's fields, none left to a row).
        corpus : Corpus
            The recipe.

        Returns
        -------
        list[str]
            The recipe's fields, adapted by the file's ``get_corpus_overrides``, less those the row sets.

        Raises
        ------
        ValueError
            When ``get_corpus_overrides`` returns no dict or changes ``corpus``.
        """
        fields = corpus.overrides()
        hook = getattr(self.module, "get_corpus_overrides", None)
        if callable(hook):
            adapted = hook(corpus.name)
            if not isinstance(adapted, dict) or "corpus" in adapted:
                raise ValueError(f"{self.config_file}: get_corpus_overrides({corpus.name!r}) must return a dict "
                                 f"of config fields other than corpus, got {adapted!r}.")
            fields.update(adapted)
        return [f"{key}={sweep_file_checks.flag_text(value)}" for key, value in fields.items()
                if row is None or key not in self.row_overrides[row]]


@dataclasses.dataclass(frozen=True)
class RowJob:
    """One row of a sweep, ready to run.

    Attributes
    ----------
    row : str
        The row name.
    index, total : int
        Position (from 1) among the selected rows, and their number (for progress lines).
    workdir : str
        The row's work directory where it runs (``<root>/<row>``, or ``<remote_root>/<row>``; with
        seeds ``.../<row>/seed_<k>``).
    record_dir : str
        Local directory for the launcher's files of this run (log, job script, launch record): the
        local counterpart of ``workdir``.
    argv : tuple[str, ...]
        The command that trains the row, run from the repository root.
    seed : int or None
        The run's ``config.seed`` in a sweep with seeds; None without.
    corpus : str or None
        The run's corpus in a sweep over corpora; None without.
    """

    row: str
    index: int
    total: int
    workdir: str
    record_dir: str
    argv: tuple[str, ...]
    seed: int | None = None
    corpus: str | None = None

    @property
    def row_key(self) -> str:
        """The row, as ``<corpus>/<row>`` in a sweep over corpora (runs of one key cost about the same)."""
        return self.row if self.corpus is None else f"{self.corpus}/{self.row}"

    @property
    def name(self) -> str:
        """The run's name in progress lines, outcomes and job names: ``[<corpus>/]<row>[/seed_<k>]``."""
        return self.row_key if self.seed is None else f"{self.row_key}/{seed_dir_name(self.seed)}"


@dataclasses.dataclass(frozen=True)
class RowOutcome:
    """What happened to one row.

    Attributes
    ----------
    row : str
        The run's name (:attr:`RowJob.name`: the row, or ``row/seed_<k>``).
    status : str
        ``done``, ``skipped`` (already finished), ``failed``, ``incomplete`` (exited 0 without results),
        ``stopped`` (checkpointed on a stop signal, or not started after one), ``submitted`` / ``queued``
        (SLURM) or ``planned`` (dry run).
    detail : str
        Wall time, job id, or the log to read.
    """

    row: str
    status: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Whether the row finished or is on its way (not failed, not incomplete)."""
        return self.status not in ("failed", "incomplete", "stopped")


def _import_config_file(path: str) -> ModuleType:
    if ":" in os.path.basename(path):
        raise ValueError(
            f"--config={path}: give the sweep file without a row argument (rows are chosen with --rows)."
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(f"sweep config file {path} not found (run from the repository root).")
    try:
        return python_files.import_python_file(path, "_sweep_config_", os.getcwd())
    except python_files.PythonFileError as error:
        raise schema.ConfigError(f"{error}{shipped_configs.import_hint(error.error)}") from None


PAPER_FIGURE_KEYS = ("dev_ppl", "dev_bleu", "params_millions")
"""What ``get_paper_figures()`` may give for a row: the figures the report shows beside ours."""


def checked_paper_figures(config_file: str, figures: Any, rows: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Check a sweep file's ``get_paper_figures()``: rows of the sweep, each a mapping of known figures.

    Parameters
    ----------
    config_file : str
        The sweep file (named in the errors).
    figures : Any
        What ``get_paper_figures()`` returned.
    rows : Sequence[str]
        The sweep's rows.

    Returns
    -------
    dict[str, dict[str, float or None]]
        Row -> figure -> value (a number, or None where the paper gives none), in the sweep's row order.

    Notes
    -----
    Raises ``ValueError`` for a row that is not in the sweep, a key outside :data:`PAPER_FIGURE_KEYS` or a
    value that is not a number or None.
    """
    where = f"{config_file}: get_paper_figures()"
    if not isinstance(figures, dict):
        raise ValueError(f"{where} returned a {type(figures).__name__}, not {{row: {{figure: value}}}}.")
    unknown = [row for row in figures if row not in rows]
    if unknown:
        raise ValueError(f"{where}: {', '.join(map(str, unknown))} not a row of get_sweep() ({', '.join(rows)}).")
    checked: dict[str, dict[str, float | None]] = {}
    for row in (row for row in rows if row in figures):
        values = figures[row]
        if not isinstance(values, dict) or any(key not in PAPER_FIGURE_KEYS for key in values):
            raise ValueError(f"{where}: row {row} must map some of {', '.join(PAPER_FIGURE_KEYS)} to numbers, got "
                             f"{values!r}.")
        for key, value in values.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"{where}: row {row} {key}={value!r} is not a number or None.")
        checked[row] = {key: values[key] for key in PAPER_FIGURE_KEYS if key in values}
    return checked


def _takes_argument(get_config: Any) -> bool:
    parameters = inspect.signature(get_config).parameters.values()
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def load_sweep(config_file: str) -> Sweep:
    """Load the sweep defined by a config file.

    Parameters
    ----------
    config_file : str
        Path of a config file defining ``get_sweep()`` and ``get_config``.

    Returns
    -------
    Sweep
        Its rows and how to build them.

    Notes
    -----
    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a file that is not a sweep
    (no ``get_sweep``), an empty sweep, row names that cannot be directory names, a bad
    ``get_seeds()`` (optional: the seeds every row runs with) or a ``get_reference()`` (optional: the
    report's reference row) that is not a row, a ``get_paper_figures()`` (optional: the paper's figures
    per row, :func:`checked_paper_figures`) that is malformed, or a ``get_corpora()`` (optional) naming an
    unregistered corpus.
    """
    module = _import_config_file(config_file)
    if not callable(getattr(module, "get_sweep", None)):
        raise ValueError(
            f"{config_file} defines no get_sweep(): a sweep file returns {{row name: overrides}} from "
            f"get_sweep() (see configs/table2.py or configs/sweeps/attention_impl.py)."
        )
    if not callable(getattr(module, "get_config", None)):
        raise ValueError(f"{config_file} defines no get_config(); every config file needs one.")
    row_overrides = sweep_file_checks.checked_rows(config_file, module.get_sweep())
    seeds = None
    if callable(getattr(module, "get_seeds", None)):
        seeds = check_seeds(sweep_file_checks.seeds_as_list(config_file, module.get_seeds()),
                            f"{config_file}: get_seeds()")
    reference = None
    if callable(getattr(module, "get_reference", None)):
        reference = str(module.get_reference())
        if reference not in row_overrides:
            raise ValueError(f"{config_file}: get_reference() returned {reference!r}, not a row of get_sweep() "
                             f"({', '.join(row_overrides)}).")
    sweep_corpora = None
    if callable(getattr(module, "get_corpora", None)):
        returned = module.get_corpora()
        names = [returned] if isinstance(returned, str) else list(returned)
        sweep_corpora = tuple(corpus.name for corpus in corpora.lookup_corpora(names, f"{config_file}: get_corpora()"))
    paper_figures = None
    if callable(getattr(module, "get_paper_figures", None)):
        paper_figures = checked_paper_figures(config_file, module.get_paper_figures(), list(row_overrides))
    takes_row_argument = _takes_argument(module.get_config)
    if not takes_row_argument:  # The rows reach the trainer as flags: they must read back as checked.
        sweep_file_checks.check_flags_read_back(config_file, row_overrides)
    return Sweep(config_file=config_file, row_overrides=row_overrides,
                 takes_row_argument=takes_row_argument, seeds=seeds, module=module, reference=reference,
                 paper_figures=paper_figures, corpora=sweep_corpora)


def select_rows(sweep: Sweep, rows: str) -> list[str]:
    """Parse ``--rows``: ``all`` or a comma-separated list of row names.

    Parameters
    ----------
    sweep : Sweep
        The loaded sweep.
    rows : str
        ``"all"`` or e.g. ``"A1,B2"``.

    Returns
    -------
    list[str]
        The chosen rows in the sweep's order, without repeats.

    Notes
    -----
    Raises ``ValueError`` naming unknown rows and listing the valid ones.
    """
    if rows.strip() == "all":
        return list(sweep.row_names)
    wanted = [name.strip() for name in rows.split(",") if name.strip()]
    if not wanted:
        raise ValueError("--rows is empty; give 'all' or row names such as " + ",".join(sweep.row_names[:2]))
    unknown = [name for name in wanted if name not in sweep.row_overrides]
    if unknown:
        raise ValueError(
            f"unknown row(s) {', '.join(unknown)} in {sweep.config_file}; valid rows: "
            f"{', '.join(sweep.row_names)} (or --rows=all)."
        )
    return [name for name in sweep.row_names if name in wanted]


def split_override_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Separate ``--config.key=value`` flags (common overrides) from the other arguments.

    Parameters
    ----------
    argv : Sequence[str]
        Command-line arguments.

    Returns
    -------
    tuple[list[str], list[str]]
        The remaining arguments, and the overrides as ``"key=value"`` strings in the order given.

    Notes
    -----
    Raises ``ValueError`` for an override without ``=value`` (write ``--config.key=value``).
    """
    remaining, overrides = [], []
    for argument in argv:
        if argument.startswith(OVERRIDE_PREFIX):
            override = argument[len(OVERRIDE_PREFIX):]
            if "=" not in override or not override.split("=", 1)[0]:
                raise ValueError(f"{argument}: write overrides as --config.key=value (one argument).")
            overrides.append(override)
        else:
            remaining.append(argument)
    return remaining, overrides


def parse_override(override: str, where: str) -> tuple[str, Any]:
    """Parse one ``"key=value"`` common override as the entry point's flags parser will.

    Parameters
    ----------
    override : str
        ``"key=value"``, the text after ``--config.``.
    where : str
        Named first in an error.

    Returns
    -------
    tuple[str, Any]
        The field (dotted for ``paper.<figure>``) and its value.

    Notes
    -----
    Raises :class:`schema.ConfigError` for a key the schema does not know (with a did-you-mean) and for
    a value that does not parse as the field's type.
    """
    key, _, text = override.partition("=")
    schema.check_keys([key], where)
    return key, schema.parse_flag_value(key, text, where)


def check_overrides(sweep: Sweep, rows: Sequence[str], overrides: Sequence[str],
                    corpus: Corpus | None = None) -> None:
    """Check every chosen row's whole config, the common overrides applied, against the schema.

    Parameters
    ----------
    sweep : Sweep
        The loaded sweep.
    rows : Sequence[str]
        The chosen rows.
    overrides : Sequence[str]
        ``"key=value"`` strings.
    corpus : Corpus, optional
        The corpus whose overrides (:meth:`Sweep.corpus_overrides`) apply before ``overrides``.

    Notes
    -----
    Raises :class:`schema.ConfigError`, one line naming the file, the row and the field, for an unknown
    key (set by the file, the row or an override), a value of the wrong type or out of range, or fields
    that do not go together: before the sweep writes anything or starts a run.
    """
    for row in rows:
        where = f"{sweep.config_file} row {row}" + ("" if corpus is None else f" on corpus {corpus.name}")
        own = [] if corpus is None else sweep.corpus_overrides(row, corpus)
        parsed = [parse_override(override, f"--config.{override}") for override in [*own, *overrides]]
        row_config = sweep.row_config(row)
        sweep_file_checks.refuse_flags_over_none(row_config, [key for key, _ in parsed], where)
        fields = sections.plain_fields(row_config)
        for key, value in parsed:  # Dotted: paper.<figure>, <registry>_settings.<entry>.<setting>.
            *parents, leaf = key.split(".")
            target = fields
            for part in parents:
                target[part] = dict(target.get(part) or {})
                target = target[part]
            target[leaf] = value
        sections.build_experiment(fields, where)


def row_argv(sweep: Sweep, row: str, workdir: str, overrides: Sequence[str], *, python: str,
             main_module: str, config_path: str | None = None, seed: int | None = None,
             corpus: Corpus | None = None) -> tuple[str, ...]:
    """The command line that trains one row.

    Parameters
    ----------
    sweep : Sweep
        The loaded sweep.
    row : str
        The row.
    workdir : str
        The row's work directory.
    overrides : Sequence[str]
        Common ``"key=value"`` overrides, applied after the row's own.
    python : str
        The Python interpreter on the machine that runs the row.
    main_module : str
        The entry point module (``attention_jax.main``).
    config_path : str, optional
        How the config file is named on that machine (default ``sweep.config_file``).
    seed : int, optional
        Appends ``--config.seed=<seed>`` (after the common overrides).
    corpus : Corpus, optional
        Its overrides (:meth:`Sweep.corpus_overrides`) go after the row's, before the common ones.

    Returns
    -------
    tuple[str, ...]
        ``python -m <main> --config=<file>[:<row>] --workdir=<workdir> [--config.key=value ...]``.
    """
    config_path = config_path or sweep.config_file
    argv = [python, "-m", main_module]
    if sweep.takes_row_argument:
        argv += [f"--config={config_path}:{row}", f"--workdir={workdir}"]
    else:
        argv += [f"--config={config_path}", f"--workdir={workdir}"]
        argv += [f"{OVERRIDE_PREFIX}{key}={sweep_file_checks.flag_text(value)}"
                 for key, value in sweep.row_overrides[row].items()]
        argv.append(f"{OVERRIDE_PREFIX}name={row}")
    if corpus is not None:
        argv += [OVERRIDE_PREFIX + override for override in sweep.corpus_overrides(row, corpus)]
    argv += [OVERRIDE_PREFIX + override for override in overrides]
    if seed is not None:
        argv.append(f"{OVERRIDE_PREFIX}seed={seed}")
    return tuple(argv)


def row_jobs(sweep: Sweep, rows: Sequence[str], overrides: Sequence[str], *, root: str, run_root: str,
             python: str, main_module: str, seeds: Sequence[int] | None = None,
             corpora_to_run: Sequence[Corpus] | None = None) -> list[RowJob]:
    """Build the jobs of the chosen rows.

    Parameters
    ----------
    sweep : Sweep
        The loaded sweep.
    rows : Sequence[str]
        The chosen rows, in order.
    overrides : Sequence[str]
        Common ``"key=value"`` overrides.
    root : str
        Local sweep root: each row's launcher files go to ``root/<row>``.
    run_root : str
        The root as seen where rows run (``root`` itself for local and SLURM jobs; a path or
        ``gs://`` URL on the TPU VM hosts).
    python : str
        Python interpreter on the machine that runs the rows.
    main_module : str
        Entry point module.
    seeds : Sequence[int], optional
        Run every row once per seed, in ``<root>/<row>/seed_<k>`` with ``--config.seed=<k>``; the jobs
        go seed by seed (all rows at the first seed, then all rows at the next).
    corpora_to_run : Sequence[Corpus], optional
        Run every row (and seed) on each, in ``<root>/<corpus>/<row>[/seed_<k>]``; within a seed the jobs go
        corpus by corpus.

    Returns
    -------
    list[RowJob]
        One job per row (and seed, and corpus).
    """
    runs = [(seed, corpus, row) for seed in (seeds if seeds is not None else [None])
            for corpus in (corpora_to_run if corpora_to_run is not None else [None]) for row in rows]
    jobs = []
    for index, (seed, corpus, row) in enumerate(runs, start=1):
        parts = [part for part in (corpus and corpus.name, row, None if seed is None else seed_dir_name(seed)) if part]
        workdir = "/".join([run_root.rstrip("/"), *parts])
        argv = row_argv(sweep, row, workdir, overrides, python=python, main_module=main_module, seed=seed,
                        corpus=corpus)
        jobs.append(RowJob(row=row, index=index, total=len(runs), workdir=workdir,
                           record_dir=os.path.join(root, *parts), argv=argv, seed=seed,
                           corpus=None if corpus is None else corpus.name))
    return jobs


def resolve_corpora(sweep: Sweep, names: str, overrides: Sequence[str] = ()) -> tuple[Corpus, ...] | None:
    """The corpora of a sweep: ``--corpora=a,b``, or (empty) the sweep file's ``get_corpora()``.

    Parameters
    ----------
    sweep : Sweep
        The loaded sweep (its file may have registered corpora of its own).
    names : str
        ``--corpora``: comma-separated names, or ``""``.
    overrides : Sequence[str]
        Common ``"key=value"`` overrides: with corpora, none may set a recipe's ``dataset`` or ``corpus``
        (applied after the recipe, it would put every corpus's runs on the same data).

    Returns
    -------
    tuple[Corpus, ...] or None
        The recipes, or None for a sweep without corpora (``<root>/<row>``).

    Raises
    ------
    ValueError
        For an unknown or repeated name (:func:`attention_jax.data.corpora.lookup_corpora`), or an
        override of the corpus's data.
    """
    if not names.strip():
        recipes = None if sweep.corpora is None else corpora.lookup_corpora(sweep.corpora, sweep.config_file)
    else:
        recipes = corpora.lookup_corpora([name.strip() for name in names.split(",") if name.strip()],
                                         f"--corpora={names}")
    given = [key for key in (override.split("=", 1)[0] for override in overrides) if key in CORPUS_DATA_FIELDS]
    if recipes is not None and given:
        raise ValueError(f"--config.{given[0]} cannot be combined with corpora (--corpora or the sweep file's "
                         f"get_corpora()): it would train every corpus on the same data; drop it, or register a "
                         f"corpus recipe (attention_jax.data.corpora.register_corpus) for that data.")
    return recipes


def resolve_seeds(sweep: Sweep, count: int, overrides: Sequence[str]) -> tuple[int, ...] | None:
    """The seeds of a sweep: ``--seeds=K`` gives 0..K-1; 0 takes the sweep file's ``get_seeds()``.

    Parameters
    ----------
    sweep : Sweep
        The loaded sweep.
    count : int
        ``--seeds``.
    overrides : Sequence[str]
        Common overrides (``seed=`` among them would contradict the seeds).

    Returns
    -------
    tuple[int, ...] or None
        The seeds, or None for one run per row at its own seed.

    Notes
    -----
    Raises ``ValueError`` for a negative count, or a common ``--config.seed`` together with seeds.
    """
    if count < 0 or count > MAX_SEEDS:
        raise ValueError(f"--seeds={count}: give the number of seeds per row (1 to {MAX_SEEDS}), "
                         "or 0 for none.")
    seeds = tuple(range(count)) if count else sweep.seeds
    if seeds is not None and any(override.split("=", 1)[0] == "seed" for override in overrides):
        raise ValueError("--config.seed cannot be combined with seeds (--seeds or the sweep file's "
                         "get_seeds()): each seed's run sets config.seed itself.")
    return seeds
