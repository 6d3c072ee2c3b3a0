"""A directory of tab-separated sentence pairs as a TFDS dataset (``config.dataset = "tsv:/path/to/dir"``).

``train.tsv``, ``dev.tsv``, ``test.tsv`` (``source<TAB>target``) become ``train``, ``validation``, ``test``.
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
class _TsvFileSummary:
    """What a check of one TSV file found: pairs, lines with invalid UTF-8, longest line."""

    path: str
    num_pairs: int
    num_invalid_utf8_lines: int
    longest_line_chars: int


def _read_tsv_pairs(path: str) -> Iterator[tuple[int, str, str, bool]]:
    """Yield ``(line_number, source, target, had_invalid_utf8)`` per line (LF or CRLF) of a TSV file, from 1.

    Raises ``UserInputError``: naming ``path:line`` for a line without exactly one TAB.
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


def _require_tsv_files(tsv_dir: str) -> None:
    """Refuse a directory that lacks ``train.tsv``, ``dev.tsv`` or ``test.tsv``.

    Raises ``MissingInputError``: naming the missing directory or files.
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


def _check_tsv_dir(tsv_dir: str) -> dict[str, _TsvFileSummary]:
    """Check that a TSV directory is complete and every line well formed; warn of invalid UTF-8."""
    _require_tsv_files(tsv_dir)
    summaries = {split: _summarize_tsv_file(os.path.join(tsv_dir, name)) for split, name in TSV_FILE_OF_SPLIT.items()}
    for summary in summaries.values():
        if summary.num_invalid_utf8_lines:
            logging.warning(
                "%s: %d lines hold bytes that are not UTF-8; they were replaced by U+FFFD.",
                summary.path,
                summary.num_invalid_utf8_lines,
            )
    return summaries


def _summarize_tsv_file(path: str) -> _TsvFileSummary:
    num_pairs = num_invalid_utf8_lines = longest_line_chars = 0
    for _, source, target, had_invalid_utf8 in _read_tsv_pairs(path):
        num_pairs += 1
        num_invalid_utf8_lines += had_invalid_utf8
        longest_line_chars = max(longest_line_chars, len(source) + len(target) + 1)
    if num_pairs == 0:
        raise UserInputError(f"{path} holds no sentence pairs; every split needs at least one "
                             "'source<TAB>target' line.")
    return _TsvFileSummary(path, num_pairs, num_invalid_utf8_lines, longest_line_chars)


def _tsv_dir_fingerprint(tsv_dir: str) -> str:
    """Return 12 hex digits of a hash of the directory's three files."""
    digest = hashlib.sha256()
    for name in TSV_FILE_OF_SPLIT.values():
        digest.update(name.encode())
        with open(os.path.join(tsv_dir, name), "rb") as tsv_file:
            for block in iter(lambda: tsv_file.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:12]


class TsvTranslation(tfds.core.GeneratorBasedBuilder):
    """TFDS builder for a TSV directory, its config named by a hash of the contents (a changed file: prepared anew).

    Use :func:`_prepare_tsv_dataset`, which checks the files first.

    Parameters
    ----------
    tsv_dir : str
        The TSV directory.
    **builder_kwargs : object
        Passed to ``tfds.core.GeneratorBasedBuilder``.
    """

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "First version."}

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> epath.Path:
        """Return this file's path (TFDS's own lookup needs an uninstalled backport).

        Returns
        -------
        epath.Path
            The path.
        """
        return epath.Path(__file__)

    def __init__(self, *, tsv_dir: str, **builder_kwargs: object) -> None:
        self._tsv_dir = os.path.abspath(tsv_dir)
        directory_name = re.sub(r"[^a-z0-9_]+", "_", os.path.basename(self._tsv_dir).lower()).strip("_") or "tsv"
        config = tfds.core.BuilderConfig(
            name=f"{directory_name}-{_tsv_dir_fingerprint(self._tsv_dir)}",
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
        for line_number, source, target, _ in _read_tsv_pairs(path):
            yield line_number, {SOURCE_KEY: source, TARGET_KEY: target}


def _prepare_tsv_dataset(tsv_dir: str, data_dir: str | None) -> TsvTranslation:
    """Check a TSV directory and prepare it as an array_record TFDS dataset, once across processes, or reuse it.

    Raises ``UserInputError``: for missing files, a malformed line or a file without pairs.
    """
    _require_tsv_files(tsv_dir)
    builder = TsvTranslation(tsv_dir=tsv_dir, data_dir=data_dir, file_format="array_record")

    def _prepare() -> None:
        _check_tsv_dir(tsv_dir)
        first_use._remove_incomplete_tfds_dirs(str(builder.data_dir))
        logging.info("Preparing %s into %s", tsv_dir, builder.data_dir)
        first_use._prepare_local_builder(builder)

    waited = not builder.is_prepared()
    prepared_here = first_use._prepare_once(
        str(builder.data_dir) + first_use.LOCK_SUFFIX, f"the corpus {tsv_dir}", builder.is_prepared, _prepare)
    if waited and not prepared_here:  # Another process wrote it: read its dataset_info afresh.
        builder = TsvTranslation(tsv_dir=tsv_dir, data_dir=data_dir, file_format="array_record")
    return builder
