"""The text corpus a language model's ``config.dataset`` names, read as lists of documents.

``synthetic_en_de`` (its ``target_lang`` side), ``txt:DIR`` (a document a line) or a TFDS text dataset (``lm1b``).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import tensorflow_datasets as tfds
from tensorflow_datasets.core import constants as tfds_constants

from attention_jax.data import data_sources
from attention_jax.data.data_config import DataConfig
from attention_jax.foundation import cache_dirs
from attention_jax.foundation.user_errors import MissingInputError, UserInputError

TXT_PREFIX = "txt:"
TXT_FILES = {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"}


class TextSource:
    """A language-model corpus: the documents of each split, read on demand and kept.

    Parameters
    ----------
    description : str
        The ``config.dataset`` string.
    read_split : callable
        ``read_split(split) -> list[str]``.
    cache_root : str
        Derived files are cached under it, per corpus fingerprint.
    """

    def __init__(self, description: str, read_split: Any, cache_root: str) -> None:
        self.description = description
        self._read_split = read_split
        self._documents: dict[str, list[str]] = {}
        self._cache_root = cache_root

    def documents(self, split: str) -> list[str]:
        """Return a split's non-empty documents, in corpus order.

        Parameters
        ----------
        split : str
            TFDS split name or slice; for ``txt:`` ``train``, ``validation`` or ``test``.

        Returns
        -------
        list[str]
            The documents.
        """
        if split not in self._documents:
            self._documents[split] = [text for text in self._read_split(split) if text.strip()]
        return self._documents[split]

    def cache_dir(self, train_split: str) -> str:
        """Return the directory of this corpus's derived files, by a fingerprint of its training documents.

        Parameters
        ----------
        train_split : str
            The training split.

        Returns
        -------
        str
            The directory.

        Raises
        ------
        UserInputError
            When the training split holds no text.
        """
        documents = self.documents(train_split)
        if not documents:
            raise UserInputError(f"The training split {train_split!r} of {self.description} holds no text (no "
                                 "non-empty line): a language model needs documents to train on.")
        digest = hashlib.sha256(f"{self.description}:{train_split}:{len(documents)}".encode())
        for index in sorted({0, len(documents) // 3, len(documents) // 2, len(documents) - 1}):
            digest.update(documents[index].encode("utf-8", errors="replace") + b"\n")
        return os.path.join(self._cache_root, "lm", digest.hexdigest()[:12])


def open_text_source(config: DataConfig) -> TextSource:
    """Open the language-model corpus ``config.dataset`` names.

    Parameters
    ----------
    config : DataConfig
        The experiment's data section.

    Returns
    -------
    TextSource
        The opened corpus.

    Raises
    ------
    UserInputError
        For an unknown name or split; ``MissingInputError`` for data not prepared.
    ValueError
        For a TFDS dataset without ``config.text_feature``.
    """
    dataset = str(config.dataset).strip()
    data_dir = cache_dirs.data_dir(str(config.data_dir))  # None: TFDS's default.
    cache_root = os.path.join(data_dir or tfds_constants.DATA_DIR, data_sources.CACHE_DIR_NAME)
    if dataset.startswith(TXT_PREFIX):
        directory = dataset[len(TXT_PREFIX):]
        _require_txt_files(directory)
        return TextSource(dataset, lambda split: _read_txt(directory, split), cache_root)
    if dataset == data_sources.SYNTHETIC_DATASET or dataset.startswith(data_sources.SYNTHETIC_DATASET + "/"):
        translation = data_sources.open_translation_source(config)
        return TextSource(dataset, lambda split: [target for _, target in translation.text_pairs(
            split, range(translation.num_examples(split)))], cache_root)
    builder = _tfds_text_builder(dataset, data_dir)
    feature = config.text_feature
    if feature not in builder.info.features:
        raise ValueError(f"TFDS dataset {dataset!r} has no feature {feature!r} (it has "
                         f"{sorted(builder.info.features.keys())}): set --config.text_feature to the one "
                         "holding the text.")
    return TextSource(dataset, lambda split: _read_tfds(builder, split, feature), cache_root)


def _require_txt_files(directory: str) -> None:
    missing = [name for name in TXT_FILES.values() if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise MissingInputError(
            f"config.dataset='txt:{directory}' needs {', '.join(TXT_FILES.values())} (one document per "
            f"line) in that directory; missing: {', '.join(missing)}.")


def _read_txt(directory: str, split: str) -> list[str]:
    if split not in TXT_FILES:
        raise UserInputError(f"A txt: corpus has the splits {list(TXT_FILES)}; got {split!r} (set "
                         "config.train_split, eval_split and test_split to those).")
    with open(os.path.join(directory, TXT_FILES[split]), encoding="utf-8", errors="replace") as file:
        return [line.rstrip("\n") for line in file]


def _tfds_text_builder(name: str, data_dir: str | None) -> tfds.core.DatasetBuilder:
    try:
        return tfds.builder(name, data_dir=data_dir, file_format="array_record")
    except tfds.core.registered.DatasetNotFoundError as error:
        raise UserInputError(
            f"Unknown config.dataset {name!r} for a language model. Use 'synthetic_en_de' (embedded), "
            f"'{TXT_PREFIX}/path/to/dir' (train.txt, dev.txt, test.txt) or a TFDS text dataset such as "
            "'lm1b'.") from error


def _read_tfds(builder: tfds.core.DatasetBuilder, split: str, feature: str) -> list[str]:
    try:
        records = builder.as_data_source(split=split)
    except Exception as error:  # noqa: BLE001  TFDS raises several types for unprepared data.
        raise MissingInputError(data_sources.not_prepared_message(builder, split, error)) from error
    return [data_sources.as_text(records[index][feature]) for index in range(len(records))]
