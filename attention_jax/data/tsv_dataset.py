"""A directory of tab-separated sentence pairs as a TFDS dataset (``config.dataset = "tsv:/path/to/dir"``).

The directory holds ``train.tsv``, ``dev.tsv`` and ``test.tsv``; each line is ``source<TAB>target`` in
UTF-8. :func:`prepare_tsv_dataset` checks the files, then writes them once as an array_record TFDS dataset
(builder :class:`TsvTranslation`) under the TFDS data directory and reuses it afterwards. The TFDS split
names are those of the WMT datasets, so the rest of the pipeline treats both alike:

==========  ============
file        TFDS split
==========  ============
train.tsv   train
dev.tsv     validation
test.tsv    test
==========  ============

Records are ``{"source": bytes, "target": bytes}`` in file order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Iterator

import tensorflow_datasets as tfds
from absl import logging
from etils import epath

from attention_jax.data import first_use
from attention_jax.foundation.user_errors import MissingInputError, UserInputError

TSV_FILE_OF_SPLIT = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}
SOURCE_KEY = "source"
TARGET_KEY = "target"


@dataclasses.dataclass(frozen=True)
class TsvFileSummary:
    """What a check of one TSV file found.

    Attributes
    ----------
    path : str
        The file.
    num_pairs : int
        Sentence pairs (lines) in it.
    num_invalid_utf8_lines : int
        Lines with bytes that are not UTF-8; those bytes became U+FFFD.
    longest_line_chars : int
        Characters in the longest line (the pipeline later drops pairs over ``config.max_len`` tokens).
    """

    path: str
    num_pairs: int
    num_invalid_utf8_lines: int
    longest_line_chars: int


def read_tsv_pairs(path: str) -> Iterator[tuple[int, str, str, bool]]:
    """Yield the sentence pairs of one TSV file.

    Parameters
    ----------
    path : str
        A UTF-8 file with one ``source<TAB>target`` pair per line (LF or CRLF line ends).

    Returns
    -------
    Iterator[tuple[int, str, str, bool]]
        ``(line_number, source, target, had_invalid_utf8)`` per line, line numbers from 1.

    Notes
    -----
    Raises ValueError naming ``path:line`` for a line without exactly one TAB (empty lines included).
    Bytes that are not UTF-8 are replaced by U+FFFD rather than raising.
    """
    with open(path, "rb") as tsv_file:
        for line_number, raw_line in enumerate(tsv_file, start=1):
            raw_line = raw_line.rstrip(b"\n").rstrip(b"\r")
            try:
                line, had_invalid_utf8 = raw_line.decode("utf-8"), False
            except UnicodeDecodeError:
                line, had_invalid_utf8 = raw_line.decode("utf-8", errors="replace"), True
            num_tabs = line.count("\t")
            if num_tabs != 1:
                preview = line[:60] + ("..." if len(line) > 60 else "")
                raise UserInputError(
                    f"{path}:{line_number}: expected 'source<TAB>target' (exactly one TAB), found {num_tabs} "
                    f"TABs in line {preview!r}. Fix or remove that line."
                )
            source, target = line.split("\t")
            yield line_number, source, target, had_invalid_utf8


def require_tsv_files(tsv_dir: str) -> None:
    """Raise FileNotFoundError unless ``tsv_dir`` holds ``train.tsv``, ``dev.tsv`` and ``test.tsv``.

    Parameters
    ----------
    tsv_dir : str
        Directory expected to hold the three files.

    Returns
    -------
    None
    """
    if not os.path.isdir(tsv_dir):
        raise MissingInputError(
            f"TSV dataset directory {tsv_dir!r} does not exist; expected a directory with "
            f"{', '.join(TSV_FILE_OF_SPLIT.values())} (config.dataset = 'tsv:/path/to/dir')."
        )
    missing = [name for name in TSV_FILE_OF_SPLIT.values() if not os.path.isfile(os.path.join(tsv_dir, name))]
    if missing:
        raise MissingInputError(
            f"TSV dataset directory {tsv_dir!r} lacks {', '.join(missing)}; it needs "
            f"{', '.join(TSV_FILE_OF_SPLIT.values())}, one 'source<TAB>target' pair per line."
        )


def check_tsv_dir(tsv_dir: str) -> dict[str, TsvFileSummary]:
    """Check that a TSV directory is complete and every line is well formed.

    Parameters
    ----------
    tsv_dir : str
        Directory expected to hold ``train.tsv``, ``dev.tsv`` and ``test.tsv``.

    Returns
    -------
    dict[str, TsvFileSummary]
        One summary per TFDS split name (``train``, ``validation``, ``test``).

    Notes
    -----
    Raises FileNotFoundError naming the missing directory or files, ValueError for a malformed line
    (``file:line``) or a file without any sentence pair. Invalid UTF-8 only logs a warning.
    """
    require_tsv_files(tsv_dir)
    summaries = {split: _summarize_tsv_file(os.path.join(tsv_dir, name)) for split, name in TSV_FILE_OF_SPLIT.items()}
    for summary in summaries.values():
        if summary.num_invalid_utf8_lines:
            logging.warning(
                "%s: %d lines hold bytes that are not UTF-8; they were replaced by U+FFFD.",
                summary.path,
                summary.num_invalid_utf8_lines,
            )
    return summaries


def _summarize_tsv_file(path: str) -> TsvFileSummary:
    num_pairs = num_invalid_utf8_lines = longest_line_chars = 0
    for _, source, target, had_invalid_utf8 in read_tsv_pairs(path):
        num_pairs += 1
        num_invalid_utf8_lines += had_invalid_utf8
        longest_line_chars = max(longest_line_chars, len(source) + len(target) + 1)
    if num_pairs == 0:
        raise UserInputError(f"{path} holds no sentence pairs; every split needs at least one "
                             "'source<TAB>target' line.")
    return TsvFileSummary(path, num_pairs, num_invalid_utf8_lines, longest_line_chars)


def tsv_dir_fingerprint(tsv_dir: str) -> str:
    """Hash the contents of a TSV directory's three files.

    Parameters
    ----------
    tsv_dir : str
        The TSV directory.

    Returns
    -------
    str
        12 hex digits that change whenever any of the files changes.
    """
    digest = hashlib.sha256()
    for name in TSV_FILE_OF_SPLIT.values():
        digest.update(name.encode())
        with open(os.path.join(tsv_dir, name), "rb") as tsv_file:
            for block in iter(lambda: tsv_file.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:12]


class TsvTranslation(tfds.core.GeneratorBasedBuilder):
    """TFDS builder for a directory of ``train.tsv``/``dev.tsv``/``test.tsv`` sentence pairs.

    Parameters
    ----------
    tsv_dir : str
        The TSV directory.
    **builder_kwargs
        Passed to ``tfds.core.GeneratorBasedBuilder`` (``data_dir``, ``file_format``).

    Notes
    -----
    The builder config is named after the directory and a hash of its contents, so a changed file is
    prepared anew and an unchanged one is reused. Use :func:`prepare_tsv_dataset`, which checks the
    files before TFDS writes anything.
    """

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First version."}

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> epath.Path:
        """Return this file's path (TFDS's own lookup needs the ``importlib_resources`` backport, not installed)."""
        return epath.Path(__file__)

    def __init__(self, *, tsv_dir: str, **builder_kwargs: object) -> None:
        self._tsv_dir = os.path.abspath(tsv_dir)
        directory_name = re.sub(r"[^a-z0-9_]+", "_", os.path.basename(self._tsv_dir).lower()).strip("_") or "tsv"
        config = tfds.core.BuilderConfig(
            name=f"{directory_name}-{tsv_dir_fingerprint(self._tsv_dir)}",
            description=f"Sentence pairs from {self._tsv_dir}",
        )
        super().__init__(config=config, **builder_kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=f"Tab-separated sentence pairs from {self._tsv_dir} (train.tsv, dev.tsv, test.tsv).",
            features=tfds.features.Translation(languages=(SOURCE_KEY, TARGET_KEY)),
            supervised_keys=(SOURCE_KEY, TARGET_KEY),
            disable_shuffling=True,  # Keep file order: test outputs line up with test.tsv.
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Iterator]:
        del dl_manager  # Nothing to download.
        return {
            split: self._generate_examples(os.path.join(self._tsv_dir, file_name))
            for split, file_name in TSV_FILE_OF_SPLIT.items()
        }

    def _generate_examples(self, path: str) -> Iterator[tuple[int, dict[str, str]]]:
        for line_number, source, target, _ in read_tsv_pairs(path):
            yield line_number, {SOURCE_KEY: source, TARGET_KEY: target}


def prepare_tsv_dataset(tsv_dir: str, data_dir: str | None) -> TsvTranslation:
    """Check a TSV directory and prepare it as an array_record TFDS dataset (once, in one process).

    Parameters
    ----------
    tsv_dir : str
        Directory with ``train.tsv``, ``dev.tsv`` and ``test.tsv``.
    data_dir : str or None
        TFDS data directory to write into; None for TFDS's default.

    Returns
    -------
    TsvTranslation
        A prepared builder; read a split with ``builder.as_data_source("train")``.

    Notes
    -----
    Raises the errors of :func:`check_tsv_dir`. An already prepared dataset with the same contents
    is reused without reading the files again beyond hashing them. Processes that find it unprepared
    at the same time prepare it once (:func:`attention_jax.data.first_use.prepare_once`): the others
    wait, then read it; what a killed preparation left behind is removed first.
    """
    require_tsv_files(tsv_dir)
    builder = TsvTranslation(tsv_dir=tsv_dir, data_dir=data_dir, file_format="array_record")

    def prepare() -> None:
        check_tsv_dir(tsv_dir)
        first_use.remove_incomplete_tfds_dirs(str(builder.data_dir))
        logging.info("Preparing %s into %s", tsv_dir, builder.data_dir)
        first_use.prepare_local_builder(builder)

    waited = not builder.is_prepared()
    prepared_here = first_use.prepare_once(
        str(builder.data_dir) + first_use.LOCK_SUFFIX, f"the corpus {tsv_dir}", builder.is_prepared, prepare)
    if waited and not prepared_here:  # Another process wrote it: read its dataset_info afresh.
        builder = TsvTranslation(tsv_dir=tsv_dir, data_dir=data_dir, file_format="array_record")
    return builder
