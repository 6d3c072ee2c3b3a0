"""The files of a run directory and of a sweep root, by name (docs/checkpoints.md), and the atomic writer."""

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
    """Return the splits ``config.final_bleu`` decodes when training ends, checked.

    Parameters
    ----------
    names : Sequence[str]
        ``config.final_bleu_splits``; ``"validation"`` means ``"dev"``.

    Returns
    -------
    tuple[str, ...]
        A subset of ``("dev", "test")``.

    Raises
    ------
    ValueError
        For anything else.
    """
    splits = tuple("dev" if split == "validation" else split for split in names)
    if not splits or not set(splits) <= set(FINAL_BLEU_SPLITS) or len(set(splits)) != len(splits):
        raise ValueError(f"config.final_bleu_splits={splits!r} must name some of {FINAL_BLEU_SPLITS} once each, "
                         "e.g. --config.final_bleu_splits='(\"dev\",)'; to decode none, set --config.final_bleu=False.")
    return splits


def data_split(name: str) -> str:
    """Return the data pipeline's name of a command line's split (``"dev"`` is ``"validation"``).

    Parameters
    ----------
    name : str
        The split as given.

    Returns
    -------
    str
        The pipeline's name.
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
EXPORT_PARAMS_FILE = "params.safetensors"  # An export directory's weights (decoding/inference.py).
EXPORT_RECORD_FILE = "export.json"  # What the export came from.

# Exit status of `attention_jax.main` after it checkpointed and stopped on SIGTERM/SIGINT: resume by
# rerunning (or requeueing) the same command. 75 is EX_TEMPFAIL of sysexits.h.
STOPPED_EXIT_STATUS = 75

SWEEP_FILE = "sweep.json"
LAUNCH_FILE = "launch.json"
LOG_FILE = "log.txt"


def lm_eval_report_path(workdir: str, split: str) -> str:
    """Return ``WORKDIR/lm_eval_<split>.json``, a language model's perplexity and bits per byte.

    Parameters
    ----------
    workdir, split : str
        The run directory and the evaluated split.

    Returns
    -------
    str
        The path.
    """
    return os.path.join(workdir, f"lm_eval_{split}.json")


def eval_report_path(workdir: str, split: str, checkpoint: str | None = None, first: int = 0) -> str:
    """Return ``WORKDIR/eval_<split>[_first<N>][.<checkpoint>].json``: no report overwrites another checkpoint's.

    Parameters
    ----------
    workdir, split : str
        The run directory; the evaluated split, or a :func:`parallel_text_name`.
    checkpoint : str, optional
        A :func:`checkpoint_label`; ``None`` for the run's own final evaluation.
    first : int
        The split's first this many pairs only; 0: all.

    Returns
    -------
    str
        The path.
    """
    partial = f"_first{first}" if first > 0 else ""
    suffix = f".{checkpoint}" if checkpoint else ""
    return os.path.join(workdir, f"eval_{split}{partial}{suffix}.json")


def parallel_text_name(source_file: str, workdir: str | None = None) -> str:
    """Return the name an evaluation of a parallel text is filed under: ``file_<stem>``.

    The prefix keeps ``test.en`` from taking the test split's name; a name another file's report holds gets a hash.

    Parameters
    ----------
    source_file : str
        ``evaluate --source``.
    workdir : str, optional
        The run directory the report goes to.

    Returns
    -------
    str
        The name, made of letters, digits, ``-`` and ``_``.
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
    """Return a file-name label for evaluated parameters (``latest``, ``step1200``, ``average_last5``).

    Parameters
    ----------
    checkpoint : str
        ``--checkpoint``.
    average_last : int
        ``--average_last``; when positive, it overrides ``checkpoint``.

    Returns
    -------
    str
        The label.
    """
    if average_last > 0:
        return f"average_last{average_last}"
    return f"step{checkpoint}" if checkpoint.isdigit() else checkpoint


def hypotheses_path(report_path: str) -> str:
    """Return the translations file beside an evaluation report (``.hypotheses.txt``).

    Parameters
    ----------
    report_path : str
        The report's JSON file.

    Returns
    -------
    str
        The path.
    """
    return os.path.splitext(report_path)[0] + ".hypotheses.txt"


def translations_path(report_path: str) -> str:
    """Return the source, reference and translation file beside a report (``.translations.jsonl``).

    Parameters
    ----------
    report_path : str
        The report's JSON file.

    Returns
    -------
    str
        The path.
    """
    return os.path.splitext(report_path)[0] + ".translations.jsonl"


DEFAULT_NAME_MAX = 255  # Bytes per file or directory name where the file system does not say (ext4, XFS, NFS).


def _nearest_existing(path: str) -> str:
    """Return ``path`` or its closest existing ancestor."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def check_directory(directory: str, flag: str, *, writable: bool = False, instead: str = "") -> None:
    """Refuse, before any work, a directory a command cannot use; URLs (``gs://``) are not checked.

    Write access is asked of the kernel (``access(2)``): no probe file lands in a run another process uses.

    Parameters
    ----------
    directory, flag : str
        The directory named (it may not exist yet); its flag, for the message.
    writable : bool
        Also require write access there or in the closest existing ancestor.
    instead : str
        What else the user can do, ending the message.

    Raises
    ------
    UserInputError
        For a file or dangling link on the path, a name over the file system's limit, or a read-only place.
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
    """Write ``payload`` to ``path`` so that readers see the old file or the whole new one.

    Temporary file, ``fsync``, ``os.replace``; mode ``0666`` less the umask (not ``mkstemp``'s ``0600``):
    others on a shared disk read run files.

    Parameters
    ----------
    path : str
        Destination file; its directory is created when missing.
    payload : bytes or str
        Contents; text as UTF-8.
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
    """Write ``value`` as indented JSON and a newline with :func:`write_atomically`.

    Parameters
    ----------
    path : str
        Destination file.
    value, **dump_options : Any
        A JSON-serializable value; further ``json.dumps`` options.
    """
    dump_options.setdefault("indent", 2)
    write_atomically(path, json.dumps(value, **dump_options) + "\n")


def read_fine_tuned_from(workdir: str) -> dict[str, Any] | None:
    """Return a fine-tuned run's ``fine_tuned_from.json``.

    Parameters
    ----------
    workdir : str
        The run directory.

    Returns
    -------
    dict or None
        The record; ``None`` for a run not fine-tuned.
    """
    path = os.path.join(workdir, FINE_TUNED_FROM_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as record_file:
        return json.loads(record_file.read())


def read_length_buckets(workdir: str) -> dict[str, Any]:
    """Return a run's ``length_buckets.json``, the scores per length bucket.

    Parameters
    ----------
    workdir : str
        The run directory.

    Returns
    -------
    dict
        The scores; ``{}`` when the run has not been scored.
    """
    path = os.path.join(workdir, LENGTH_BUCKETS_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as results_file:
        return json.load(results_file)


def read_trained_step(workdir: str) -> int | None:
    """Return the ``step`` of a finished run's ``results.json``, what a score of it is keyed on.

    Parameters
    ----------
    workdir : str
        The run directory.

    Returns
    -------
    int or None
        The step; ``None`` when there is none.
    """
    path = os.path.join(workdir, RESULTS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as results_file:
        return json.load(results_file).get("step")
