"""The files of a run directory and of a sweep root, by name, and the one way they are written atomically.

A run directory (``WORKDIR``, written by ``python -m attention_jax.main``)::

    config.json                      the run's config (checked when the run resumes)
    tokenizer.model                  the run's SentencePiece model, so decoding needs no corpus
    data_splits.json                 the dev and test splits the run evaluates on (checked when it resumes)
    fine_tuned_from.json             a fine-tuned run's source: its work directory, checkpoint and step
    checkpoints/<step>/              orbax checkpoints (see :mod:`attention_jax.checkpointing.checkpoints`)
    checkpoints_corrupt/<step>/      checkpoints that failed to restore, moved aside
    averaged/<step>/                 the average of the last checkpoints (``average_checkpoints``)
    best/<step>/                     with early stopping: the parameters of the best dev evaluations
    metrics.jsonl                    one JSON line per logged train or eval step
    tensorboard/                     the same scalars as TensorBoard event files
    results.json                     final metrics of the run
    lock.json                        the trainer holding the directory (empty when none; see workdir_lock)
    eval_<split>.json                the run's final evaluation (``config.final_bleu``), translations in
    eval_<split>.hypotheses.txt      one per line, in split order, and with source and reference in
    eval_<split>.translations.jsonl  one JSON object per line
    lm_eval_<split>.json             a language model's perplexity and bits per byte (``generate --eval_split``)
    length_buckets.json              perplexity and BLEU per target-length bucket, with the translations in
    length_buckets.<bucket>.hypotheses.txt   (``attention_jax.evaluation.length_bucket_evaluation``)
    position_losses.json             the loss by target position on those buckets (``evaluation.position_losses``)
    eval_<split>.<checkpoint>.json   ``evaluate``'s report per checkpoint (``latest``, ``averaged``,
                                     ``step1200``, ``average_last5``), with its ``.hypotheses.txt`` and
                                     ``.translations.jsonl``; ``eval_<split>_first<N>.<checkpoint>.json``
                                     for the first N pairs only, ``eval_file_<stem>...`` for ``--source``
                                     (``eval_file_<stem>_<hash>...`` when another file took that stem)

A sweep root (``ROOT``, written by ``python -m attention_jax.sweep``)::

    sweep.json                       the sweep: config file, rows, overrides and launches
    <row>/                           one run directory per row, plus
    <row>/launch.json                the launcher's last action on the row
    <row>/log.txt                    the row's output
    <report_name>.md, .csv, .png     ``python -m attention_jax.report ROOT``
    attention_functions.md, ...      the same, when the rows use more than one attention function
    <corpus>/<row>/                  a sweep over corpora: one sweep root per corpus, plus
    transfer.md, .csv, .png          each row's change on every corpus (``reports.transfer_report``)

Every file that a crash must not leave half-written goes through :func:`write_atomically`; a command
checks the directory it will write into with :func:`check_directory` before it does any work.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import uuid
from typing import Any, Sequence

from attention_jax.foundation.user_errors import UserInputError

FINAL_BLEU_SPLITS = ("dev", "test")  # The splits config.final_bleu decodes, by default all of them.


def final_bleu_splits(names: Sequence[str]) -> tuple[str, ...]:
    """The splits that ``config.final_bleu`` decodes when training ends, checked.

    Parameters
    ----------
    names : Sequence[str]
        ``config.final_bleu_splits`` (``RunConfig.final_bleu_splits``).

    Returns
    -------
    tuple[str, ...]
        A subset of ``("dev", "test")``: ``config.eval_split`` and ``config.test_split`` decoded whole.

    Notes
    -----
    Raises a ValueError naming the valid choices for anything else; ``"validation"`` is taken for
    ``"dev"``. Ablation sweeps judge rows on dev (the paper's Table 2 reports newstest2013 only) and can
    leave the test split undecoded.
    """
    splits = tuple("dev" if split == "validation" else split for split in names)  # Both names of dev.
    if not splits or not set(splits) <= set(FINAL_BLEU_SPLITS) or len(set(splits)) != len(splits):
        raise ValueError(f"config.final_bleu_splits={splits!r} must name some of {FINAL_BLEU_SPLITS} once each, "
                         "e.g. --config.final_bleu_splits='(\"dev\",)'; to decode none, set --config.final_bleu=False.")
    return splits


def data_split(name: str) -> str:
    """The data pipeline's name of a split given on a command line: ``"dev"`` is ``"validation"``.

    Parameters
    ----------
    name : str
        ``"dev"``, ``"validation"``, ``"test"``, ``"train"`` or a split name of the corpus.

    Returns
    -------
    str
        ``"validation"`` for ``"dev"``; any other name unchanged.
    """
    return "validation" if name == "dev" else name


CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.model"
DATA_SPLITS_FILE = "data_splits.json"
FINE_TUNED_FROM_FILE = "fine_tuned_from.json"
CHECKPOINT_DIR = "checkpoints"
CORRUPT_DIR = "checkpoints_corrupt"
AVERAGED_DIR = "averaged"
BEST_DIR = "best"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
RESULTS_FILE = "results.json"
LOCK_FILE = "lock.json"
LENGTH_BUCKETS_FILE = "length_buckets.json"  # Per-length-bucket evaluation (docs/positions.md).
POSITION_LOSSES_FILE = "position_losses.json"  # Loss by target position on the length buckets.

# Exit status of `attention_jax.main` after it checkpointed and stopped on SIGTERM/SIGINT: resume by
# rerunning (or requeueing) the same command. 75 is EX_TEMPFAIL of sysexits.h.
STOPPED_EXIT_STATUS = 75

SWEEP_FILE = "sweep.json"
LAUNCH_FILE = "launch.json"
LOG_FILE = "log.txt"


def lm_eval_report_path(workdir: str, split: str) -> str:
    """``WORKDIR/lm_eval_<split>.json``: a language model's perplexity and bits per byte on a split.

    Parameters
    ----------
    workdir : str
        The run directory.
    split : str
        The evaluated split.

    Returns
    -------
    str
        The path.
    """
    return os.path.join(workdir, f"lm_eval_{split}.json")


def eval_report_path(workdir: str, split: str, checkpoint: str | None = None, first: int = 0) -> str:
    """Where an evaluation report goes: ``WORKDIR/eval_<split>[_first<N>][.<checkpoint>].json``.

    Parameters
    ----------
    workdir : str
        The run directory.
    split : str
        The evaluated split (``"validation"``, ``"test"``, ``"train"``), or what :func:`parallel_text_name`
        makes of a parallel text's source file.
    checkpoint : str, optional
        Which parameters were evaluated, as :func:`checkpoint_label` names them (``evaluate``);
        ``None`` for the training run's own final evaluation (``config.final_bleu``).
    first : int
        With a positive ``first``, the report covers only the split's first this many pairs (``evaluate
        --num_examples``, fewer than the split holds), and its name says so: ``eval_validation_first100.latest.json``.
        0: the whole split.

    Returns
    -------
    str
        The report's path; reports of different checkpoints never overwrite each other, and a partial
        evaluation never takes the name of the whole split's.
    """
    partial = f"_first{first}" if first > 0 else ""
    suffix = f".{checkpoint}" if checkpoint else ""
    return os.path.join(workdir, f"eval_{split}{partial}{suffix}.json")


def parallel_text_name(source_file: str, workdir: str | None = None) -> str:
    """The name an evaluation of a parallel text is filed under: ``file_<source file's stem>``.

    Parameters
    ----------
    source_file : str
        ``evaluate --source``, e.g. ``newstest2014.en``.
    workdir : str, optional
        The run directory the report goes to. When it already holds a report of that name for another
        source file (``wmt14/test.en`` and then ``wmt16/test.en``), the name gets a suffix of the source
        file's path hash, ``file_test_<8 hex digits>``, so neither report overwrites the other.

    Returns
    -------
    str
        E.g. ``file_newstest2014`` (characters other than letters, digits, ``-`` and ``_`` become ``_``),
        for :func:`eval_report_path`; the prefix keeps a file named ``test.en`` from taking the name of
        the run's test split.

    Notes
    -----
    The first source file evaluated under a stem keeps the plain name, and evaluating it again reuses it;
    each report records its ``source_file`` (an absolute path), which is what is compared.
    """
    stem = os.path.splitext(os.path.basename(source_file.rstrip(os.sep)))[0]
    name = "file_" + (re.sub(r"[^A-Za-z0-9_-]", "_", stem) or "text")
    if workdir is None:
        return name
    source_path = os.path.abspath(source_file)
    for report in glob.glob(os.path.join(glob.escape(workdir), f"eval_{name}[._]*json")):
        if not re.fullmatch(rf"eval_{re.escape(name)}(_first\d+)?\.[^.]+\.json", os.path.basename(report)):
            continue  # Another stem that starts with this one, or a .translations.jsonl.
        try:
            with open(report, encoding="utf-8") as report_file:
                recorded = json.load(report_file).get("source_file")
        except (OSError, ValueError, AttributeError):
            continue
        if recorded and recorded != source_path:
            return f"{name}_{hashlib.sha256(source_path.encode()).hexdigest()[:8]}"
    return name


def checkpoint_label(checkpoint: str, average_last: int = 0) -> str:
    """A file-name label for evaluated parameters: ``latest``, ``averaged``, ``best``, ``step1200``,
    ``average_last5``.

    Parameters
    ----------
    checkpoint : str
        ``--checkpoint``: ``latest``, ``averaged``, ``best`` or a step number.
    average_last : int
        ``--average_last`` (when positive, it overrides ``checkpoint``).

    Returns
    -------
    str
        The label.
    """
    if average_last > 0:
        return f"average_last{average_last}"
    return f"step{checkpoint}" if checkpoint.isdigit() else checkpoint


def hypotheses_path(report_path: str) -> str:
    """The translations file beside an evaluation report: ``<report without .json>.hypotheses.txt``.

    Parameters
    ----------
    report_path : str
        The report's JSON file.

    Returns
    -------
    str
        The hypotheses file's path.
    """
    return os.path.splitext(report_path)[0] + ".hypotheses.txt"


def translations_path(report_path: str) -> str:
    """The source, reference and translation of each pair beside a report: ``<report>.translations.jsonl``.

    Parameters
    ----------
    report_path : str
        The report's JSON file.

    Returns
    -------
    str
        The translations file's path (one JSON object per line, in the evaluated order).
    """
    return os.path.splitext(report_path)[0] + ".translations.jsonl"


DEFAULT_NAME_MAX = 255  # Bytes per file or directory name where the file system does not say (ext4, XFS, NFS).


def _nearest_existing(path: str) -> str:
    """``path`` or its closest ancestor that exists (``/`` at worst)."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def check_directory(directory: str, flag: str, *, writable: bool = False, instead: str = "") -> None:
    """Refuse, before any work, a directory a command cannot use: a file, an overlong name, no write access.

    Parameters
    ----------
    directory : str
        The directory the user named (it may not exist yet: the command would create it).
    flag : str
        How the user named it, for the message: ``"--workdir"``, ``"--root"``, ``"--to"``, ``"--out"``.
    writable : bool
        Also require that the command can create files there: in ``directory`` when it exists, else in
        its closest existing ancestor (where the command would create it).
    instead : str
        What else the user can do when it is not writable, ending the message (e.g. ``"pass --out=DIR"``).

    Returns
    -------
    None

    Notes
    -----
    Raises :class:`attention_jax.foundation.user_errors.UserInputError`, one line naming the path and the fix, when
    ``directory`` or one of its ancestors is a file or a dangling link, when a name in it is longer than its file system
    allows (``ENAMETOOLONG``, typically 255 bytes), or with ``writable`` when the directory is read-only
    (permissions, or a read-only file system). Nothing is written: write access is asked of the kernel
    (``access(2)``, which also answers ``EROFS`` for read-only mounts), so the check never leaves a
    probe file in a run another process may be using. URL-like paths (``gs://``) are not checked.
    """
    if "://" in directory:
        return
    path = os.path.abspath(directory)
    existing = _nearest_existing(path)
    if os.path.islink(existing) and not os.path.exists(existing):
        raise UserInputError(f"{flag}={directory}: {existing} is a symbolic link to {os.readlink(existing)}, which "
                             f"does not exist: create the link's target, or name another directory.")
    if not os.path.isdir(existing):
        what = "is a file" if existing == path else f"lies under {existing}, which is a file"
        raise UserInputError(f"{flag}={directory} {what}, not a directory: name a new or existing directory.")
    try:
        name_max = int(os.pathconf(existing, "PC_NAME_MAX"))
    except (OSError, ValueError):
        name_max = DEFAULT_NAME_MAX
    for name in path.split(os.sep):
        if len(os.fsencode(name)) > name_max:
            raise UserInputError(
                f"{flag}={directory[:60]}...: the name {name[:24]}... is {len(os.fsencode(name))} bytes long and "
                f"the file system allows at most {name_max} per file or directory name (ENAMETOOLONG); choose "
                f"shorter names.")
    if writable and not os.access(existing, os.W_OK | os.X_OK):
        statvfs = os.statvfs(existing)
        why = "is on a read-only file system" if statvfs.f_flag & os.ST_RDONLY else "is not writable by this user"
        where = existing if existing == path else f"{existing} (where it would be created)"
        raise UserInputError(f"{flag}={directory}: {where} {why}; nothing was written. "
                             + (instead or "Choose a writable directory, or fix its permissions."))


def write_atomically(path: str, payload: bytes | str) -> None:
    """Write ``payload`` to ``path`` so that readers see the old file or the whole new one, never a part.

    Parameters
    ----------
    path : str
        Destination file; its directory is created when missing.
    payload : bytes or str
        File contents; text is written as UTF-8.

    Returns
    -------
    None

    Notes
    -----
    The payload goes to a temporary file in the same directory (so the rename stays on one file
    system), is flushed to disk with ``fsync``, then replaces ``path`` with ``os.replace``. A failed
    write removes its temporary file. The file gets the permissions of any new file of the process
    (``0666`` less the umask, e.g. ``0644``), not ``tempfile.mkstemp``'s private ``0600``: teammates
    and report scripts on a shared disk read run files like the checkpoints beside them.
    """
    data = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary_path = os.path.join(directory, f".tmp-{os.path.basename(path)}-{uuid.uuid4().hex}")
    descriptor = os.open(temporary_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # The umask applies.
    try:
        with os.fdopen(descriptor, "wb") as temporary_file:
            temporary_file.write(data)
            temporary_file.flush()
            os.fsync(temporary_file.fileno())
        os.replace(temporary_path, path)
    except BaseException:
        if os.path.exists(temporary_path):
            os.remove(temporary_path)
        raise


def write_json_atomically(path: str, value: Any, **dump_options: Any) -> None:
    """Write ``value`` as indented JSON (and a final newline) with :func:`write_atomically`.

    Parameters
    ----------
    path : str
        Destination file.
    value : Any
        A JSON-serializable value.
    **dump_options : Any
        Further ``json.dumps`` options (e.g. ``sort_keys=True``); ``indent`` defaults to 2.

    Returns
    -------
    None
    """
    dump_options.setdefault("indent", 2)
    write_atomically(path, json.dumps(value, **dump_options) + "\n")


def read_fine_tuned_from(workdir: str) -> dict[str, Any] | None:
    """A fine-tuned run's ``fine_tuned_from.json``, else ``None``.

    Parameters
    ----------
    workdir : str
        A training work directory.

    Returns
    -------
    dict or None
        The source's work directory, checkpoint name, directory and step, and its tokenizer's SHA-256
        (written by ``training.fine_tuning``).
    """
    path = os.path.join(workdir, FINE_TUNED_FROM_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as record_file:
        return json.loads(record_file.read())


def read_length_buckets(workdir: str) -> dict[str, Any]:
    """A run's ``length_buckets.json`` (the positions experiment's scores per length bucket), or ``{}``.

    Parameters
    ----------
    workdir : str
        The run directory.

    Returns
    -------
    dict
        As :func:`attention_jax.evaluation.length_bucket_evaluation.evaluate_run` writes it; ``{}`` when
        the run has not been scored.
    """
    path = os.path.join(workdir, LENGTH_BUCKETS_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as results_file:
        return json.load(results_file)


def read_trained_step(workdir: str) -> int | None:
    """The step a finished run's ``results.json`` records, or ``None`` when it has none.

    Parameters
    ----------
    workdir : str
        The run directory.

    Returns
    -------
    int or None
        ``results.json``'s ``step``: what a score computed from the run's last checkpoint is keyed on.
    """
    path = os.path.join(workdir, RESULTS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as results_file:
        return json.load(results_file).get("step")
