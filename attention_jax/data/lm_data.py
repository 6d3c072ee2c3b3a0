"""Language-model data: documents -> BPE ids -> packed rows of ``L = config.max_len`` -> batches.

Segment ids and positions restart at each document and row, so attention never crosses documents. The corpus is
``synthetic_en_de`` (its ``target_lang`` side), ``txt:DIR`` (a document a line) or a TFDS text dataset (``lm1b``).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import grain
import numpy as np
import tensorflow_datasets as tfds
from absl import logging
from tensorflow_datasets.core import constants as tfds_constants

from attention_jax.data import data_sources
from attention_jax.data import tokenizer as tokenizer_lib
from attention_jax.foundation import cache_dirs
from attention_jax.foundation.user_errors import MissingInputError, UserInputError

if TYPE_CHECKING:
    from attention_jax.experiment.sections import DataConfig

ROLES = ("train", "validation", "test")
TXT_PREFIX = "txt:"
TXT_FILES = {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"}
_PREFETCH_BATCHES = 8


class _PackedRows:
    """A split's token stream (each document's ids, EOS included) cut into ``[num_rows, L]`` rows.

    ``targets``, ``segmentation``, ``positions``: int32 ``[num_rows, L]``; segment 0 is the padding after the end.
    """

    def __init__(self, documents: Sequence[Sequence[int]], length: int) -> None:
        lengths = np.array([len(document) for document in documents], np.int64)
        self.document_lengths = lengths
        self.num_tokens = int(lengths.sum())
        num_rows = max(1, math.ceil(self.num_tokens / length))
        flat = np.zeros(num_rows * length, np.int32)
        flat[:self.num_tokens] = np.concatenate([np.asarray(d, np.int32) for d in documents]) if documents else []
        starts = np.zeros(num_rows * length, bool)  # A new segment begins here: document or row start.
        starts[np.cumsum(lengths)[:-1]] = True
        starts[::length] = True
        segment = np.cumsum(starts)  # Global segment number of each slot.
        segment_start = np.flatnonzero(starts)[segment - 1]
        positions = np.arange(num_rows * length) - segment_start
        row_first_segment = segment[::length]
        segmentation = segment - np.repeat(row_first_segment, length) + 1
        padding = np.arange(num_rows * length) >= self.num_tokens
        segmentation[padding] = 0
        positions[padding] = 0
        self.targets = flat.reshape(num_rows, length)
        self.segmentation = segmentation.astype(np.int32).reshape(num_rows, length)
        self.positions = positions.astype(np.int32).reshape(num_rows, length)

    @property
    def num_rows(self) -> int:
        """Return the rows of the split."""
        return self.targets.shape[0]

    def documents(self) -> list[np.ndarray]:
        """Return each document's token ids (EOS included) whole, in corpus order."""
        stream = self.targets.reshape(-1)[:self.num_tokens]
        return np.split(stream, np.cumsum(self.document_lengths)[:-1]) if len(self.document_lengths) else []

    def batch(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Return the int32 ``[B, L]`` batch of the given ``[B]`` rows; row ``-1`` gives an all-padding row."""
        keep = (rows >= 0)[:, None]
        safe = np.maximum(rows, 0)
        return {"targets": np.where(keep, self.targets[safe], 0),
                "targets_segmentation": np.where(keep, self.segmentation[safe], 0),
                "targets_position": np.where(keep, self.positions[safe], 0)}


def _local_rows(global_rows: int, process_index: int, process_count: int) -> slice:
    """Return this process's slice of a global batch's rows."""
    return slice(process_index * global_rows // process_count, (process_index + 1) * global_rows // process_count)


class _TrainSteps(Sequence):
    """Step ``i`` -> this process's rows of global batch ``i``: endless, reshuffled every epoch."""

    def __init__(self, rows: _PackedRows, global_rows: int, seed: int, process_index: int,
                 process_count: int) -> None:
        self._rows = rows
        self._global_rows = global_rows
        self._seed = seed
        self._local = _local_rows(global_rows, process_index, process_count)
        self.batches_per_epoch = rows.num_rows // global_rows

    def __len__(self) -> int:
        return sys.maxsize  # Endless; Grain's iterator state is the next step.

    # Grain reads one step at a time: an endless Sequence has no slices to give (hence the narrower type).
    def __getitem__(self, step: int) -> dict[str, np.ndarray]:  # type: ignore[override]
        epoch, index = divmod(int(step), self.batches_per_epoch)
        order = np.random.default_rng([self._seed, epoch]).permutation(self._rows.num_rows)
        chosen = order[index * self._global_rows:(index + 1) * self._global_rows]
        return self._rows.batch(chosen[self._local])


class LanguageModelData:
    """Tokenizer, training iterator and evaluation batches of a language-model corpus; see :func:`get_datasets`.

    Parameters
    ----------
    tokenizer : tokenizer_lib.Tokenizer
        The BPE vocabulary.
    rows : dict[str, _PackedRows]
        Per role (``train``, ``validation``, ``test``).
    documents : dict[str, int]
        Documents per role.
    split_names : dict[str, str]
        Role -> configured split name.
    split_bytes : dict[str, int]
        UTF-8 bytes per role (for bits per byte).
    global_rows : int
        Rows of every global batch.
    process_index, process_count : int
        This process and the processes in the run.
    num_threads : int
        Grain reader threads.
    split_sha256 : dict[str, str], optional
        Digests of the dev and test splits.
    """

    def __init__(self, *, tokenizer: tokenizer_lib.Tokenizer, rows: dict[str, _PackedRows],
                 documents: dict[str, int], split_names: dict[str, str], split_bytes: dict[str, int],
                 global_rows: int, process_index: int, process_count: int, num_threads: int,
                 split_sha256: dict[str, str] | None = None) -> None:
        self.tokenizer = tokenizer
        self._rows = rows
        self._split_names = split_names
        self._split_sha256 = dict(split_sha256 or {})
        self._documents = dict(documents)
        self._global_rows = global_rows
        self._process_index = process_index
        self._process_count = process_count
        self._num_threads = num_threads
        self.split_bytes = split_bytes
        length = rows["train"].targets.shape[1]
        self.stats = {
            "examples": documents,
            "tokens": {role: packed.num_tokens for role, packed in rows.items()},
            "rows": {role: packed.num_rows for role, packed in rows.items()},
            "utf8_bytes": split_bytes,
            "batches_per_epoch": {role: self._num_batches(role) for role in rows},
            "local_batch_shapes": [[global_rows // process_count, length]],
            "packing": True,
        }

    def train_iterator(self, seed: int) -> grain.DatasetIterator:
        """Return an endless iterator over this process's training batches.

        Parameters
        ----------
        seed : int
            Epoch ``e`` shuffles the rows with ``(seed, e)``.

        Returns
        -------
        grain.DatasetIterator
            Resumes exactly through ``get_state``/``set_state``.
        """
        steps = _TrainSteps(self._rows["train"], self._global_rows, seed, self._process_index,
                            self._process_count)
        options = grain.ReadOptions(num_threads=self._num_threads, prefetch_buffer_size=_PREFETCH_BATCHES)
        return iter(grain.MapDataset.source(steps).to_iter_dataset(options))

    def eval_batches(self, split: str, max_batches: int = 0) -> list[dict[str, np.ndarray]]:
        """Return the batches covering a split's rows once, in order, the last padded with empty rows.

        Parameters
        ----------
        split : str
            A role or its configured split name.
        max_batches : int
            Keep only the first this many (0: all).

        Returns
        -------
        list[dict[str, np.ndarray]]
            This process's rows of each global batch.
        """
        role = self.role_of(split)
        count = self._num_batches(role) if max_batches <= 0 else min(max_batches, self._num_batches(role))
        local = _local_rows(self._global_rows, self._process_index, self._process_count)
        batches = []
        for index in range(count):
            rows = np.arange(index * self._global_rows, (index + 1) * self._global_rows)
            rows[rows >= self._rows[role].num_rows] = -1
            batches.append(self._rows[role].batch(rows[local]))
        return batches

    def documents(self, split: str) -> list[np.ndarray]:
        """Return each document of a split whole (int32 ids, EOS included), in corpus order.

        Parameters
        ----------
        split : str
            A role or its configured split name.

        Returns
        -------
        list[np.ndarray]
            The documents.
        """
        return self._rows[self.role_of(split)].documents()

    def text_pairs(self, split: str, max_pairs: int = 0) -> list[tuple[str, str]]:
        """Return no sentence pairs: documents have no source side (``split`` is checked, ``max_pairs`` ignored).

        Parameters
        ----------
        split : str
            A role or its configured split name.
        max_pairs : int
            Ignored.

        Returns
        -------
        list[tuple[str, str]]
            Always empty.
        """
        self.role_of(split)
        return []

    def split_fingerprints(self) -> dict[str, dict[str, str | int]]:
        """Return the dev and test splits' names, document counts and digests, which a run refuses to resume without.

        Returns
        -------
        dict[str, dict]
            ``validation`` and ``test`` -> ``split``, ``documents``, ``sha256``.
        """
        return {role: {"split": self._split_names[role], "documents": self._documents[role],
                       "sha256": self._split_sha256[role]}
                for role in ("validation", "test") if role in self._split_sha256}

    @property
    def row_length(self) -> int:
        """Return ``L`` (``config.max_len``), the longest context the model was trained on.

        Returns
        -------
        int
            Tokens per row.
        """
        return int(self._rows["train"].targets.shape[1])

    @property
    def rows_per_batch(self) -> int:
        """Return the global rows of every batch.

        Returns
        -------
        int
            The rows.
        """
        return self._global_rows

    def role_of(self, split: str) -> str:
        """Return ``"train"``, ``"validation"`` or ``"test"`` for a role or a configured split name.

        Parameters
        ----------
        split : str
            A role or split name.

        Returns
        -------
        str
            The role.

        Raises
        ------
        ValueError
            For an unknown split.
        """
        if split in self._rows:
            return split
        for role, name in self._split_names.items():
            if split == name:
                return role
        raise ValueError(f"Unknown split {split!r}; use one of {list(ROLES)}.")

    def _num_batches(self, role: str) -> int:
        return math.ceil(self._rows[role].num_rows / self._global_rows)


def _rows_per_batch(config: DataConfig, row_multiple: int) -> int:
    """Return ``tokens_per_batch // max_len`` global rows, rounded down to ``row_multiple`` (at least one multiple)."""
    rows = int(config.tokens_per_batch) // int(config.max_len)
    return max(row_multiple, rows // row_multiple * row_multiple)


def get_datasets(config: DataConfig, *, process_index: int = 0, process_count: int = 1,
                 rows_multiple: int = 1) -> LanguageModelData:
    """Open ``config.dataset``, train or load its BPE vocabulary, and pack every split into rows of ``max_len``.

    Parameters
    ----------
    config : DataConfig
        The experiment's data section.
    process_index, process_count : int
        This process and the processes in the run.
    rows_multiple : int
        Global rows of a batch are a multiple of this (data-parallel devices).

    Returns
    -------
    LanguageModelData
        What the training loop reads.

    Raises
    ------
    UserInputError
        When the training split fills fewer rows than one batch, or is far too small for ``vocab_size``.
    """
    source = _open_text_source(config)
    tokenizer = _load_or_train_tokenizer(source, config)
    names = {"train": config.train_split, "validation": config.eval_split, "test": config.test_split}
    row_multiple = int(np.lcm(rows_multiple, process_count))
    global_rows = _rows_per_batch(config, row_multiple)
    rows, documents, split_bytes, split_sha256 = {}, {}, {}, {}
    for role, name in names.items():
        texts = source.documents(name)
        rows[role] = _PackedRows(tokenizer.encode_batch(texts, add_eos=True), int(config.max_len))
        documents[role] = len(texts)
        split_bytes[role] = sum(len(text.encode("utf-8")) + 1 for text in texts)  # + the newline ending each.
        if role != "train":
            split_sha256[role] = _documents_sha256(texts)
    _warn_of_overlap({role: source.documents(name) for role, name in names.items()}, names)
    if rows["train"].num_rows < global_rows:
        raise UserInputError(
            f"The training split of {config.dataset} fills {rows['train'].num_rows} rows of max_len="
            f"{config.max_len} tokens, fewer than one batch of {global_rows} rows: lower "
            f"config.tokens_per_batch (now {config.tokens_per_batch}) or config.max_len, or use more text.")
    return LanguageModelData(tokenizer=tokenizer, rows=rows, documents=documents, split_names=names,
                             split_bytes=split_bytes, global_rows=global_rows, process_index=process_index,
                             process_count=process_count, num_threads=config.data_threads,
                             split_sha256=split_sha256)


def _documents_sha256(documents: Sequence[str]) -> str:
    """Return the SHA-256 of a split's documents, each followed by a newline, in corpus order."""
    digest = hashlib.sha256()
    for text in documents:
        digest.update(text.encode("utf-8", errors="replace") + b"\n")
    return digest.hexdigest()


def _warn_of_overlap(documents: dict[str, list[str]], names: dict[str, str]) -> None:
    """Warn in one line when dev or test documents also occur in the training split."""
    train_documents = set(documents["train"])
    counts = {role: sum(text in train_documents for text in documents[role]) for role in ("validation", "test")}
    if not any(counts.values()):
        return
    logging.warning(
        "%d of %d dev documents (split %r) and %d of %d test documents (split %r) also occur in the training "
        "split %r: their perplexity is not measured on held-out text. Remove them from the training data, or "
        "choose other splits (config.eval_split, config.test_split).", counts["validation"],
        len(documents["validation"]), names["validation"], counts["test"], len(documents["test"]), names["test"],
        names["train"])


def _load_or_train_tokenizer(source: _TextSource, config: DataConfig) -> tokenizer_lib.Tokenizer:
    if (fine_tuned := tokenizer_lib._tokenizer_for(config.fine_tune_from)) is not None:
        return fine_tuned  # The source run's vocabulary, whatever this text would train.
    max_sentences = config.tokenizer_max_sentences
    split_name = re.sub(r"[^A-Za-z0-9_.\-]+", "_", config.train_split)
    model_path = os.path.join(source.cache_dir(config.train_split),
                              f"spm-bpe-{config.vocab_size}-{split_name}-{max_sentences}.model")

    def _training_documents() -> list[str]:
        documents = source.documents(config.train_split)
        if len(documents) <= max_sentences:
            return documents
        chosen = np.sort(np.random.default_rng(0).choice(len(documents), size=max_sentences, replace=False))
        return [documents[index] for index in chosen]

    tokenizer = tokenizer_lib.load_or_train_tokenizer(model_path, _training_documents, config.vocab_size)
    if tokenizer.vocab_size < config.vocab_size // 2:
        raise UserInputError(f"The training split of {config.dataset} is too small for config.vocab_size="
                         f"{config.vocab_size}: its BPE vocabulary stops at {tokenizer.vocab_size} pieces. "
                         f"Set --config.vocab_size={tokenizer.vocab_size} or less, or train on more text.")
    return tokenizer


class _TextSource:
    """A language-model corpus: each split's documents (``read_split(split) -> list[str]``), read once and kept."""

    def __init__(self, description: str, read_split: Any, cache_root: str) -> None:
        self.description = description
        self._read_split = read_split
        self._documents: dict[str, list[str]] = {}
        self._cache_root = cache_root

    def documents(self, split: str) -> list[str]:
        """Return a split's non-empty documents, in corpus order."""
        if split not in self._documents:
            self._documents[split] = [text for text in self._read_split(split) if text.strip()]
        return self._documents[split]

    def cache_dir(self, train_split: str) -> str:
        """Return the directory of this corpus's derived files, by a fingerprint of its training documents."""
        documents = self.documents(train_split)
        if not documents:
            raise UserInputError(f"The training split {train_split!r} of {self.description} holds no text (no "
                                 "non-empty line): a language model needs documents to train on.")
        digest = hashlib.sha256(f"{self.description}:{train_split}:{len(documents)}".encode())
        for index in sorted({0, len(documents) // 3, len(documents) // 2, len(documents) - 1}):
            digest.update(documents[index].encode("utf-8", errors="replace") + b"\n")
        return os.path.join(self._cache_root, "lm", digest.hexdigest()[:12])


def _open_text_source(config: DataConfig) -> _TextSource:
    """Open the language-model corpus ``config.dataset`` names (see the module docstring)."""
    dataset = str(config.dataset).strip()
    data_dir = cache_dirs.data_dir(str(config.data_dir))  # None: TFDS's default.
    cache_root = os.path.join(data_dir or tfds_constants.DATA_DIR, data_sources.CACHE_DIR_NAME)
    if dataset.startswith(TXT_PREFIX):
        directory = dataset[len(TXT_PREFIX):]
        _require_txt_files(directory)
        return _TextSource(dataset, lambda split: _read_txt(directory, split), cache_root)
    if dataset == data_sources.SYNTHETIC_DATASET or dataset.startswith(data_sources.SYNTHETIC_DATASET + "/"):
        translation = data_sources._open_translation_source(config)
        return _TextSource(dataset, lambda split: [target for _, target in translation.text_pairs(
            split, range(translation.num_examples(split)))], cache_root)
    builder = _tfds_text_builder(dataset, data_dir)
    feature = config.text_feature
    if feature not in builder.info.features:
        raise ValueError(f"TFDS dataset {dataset!r} has no feature {feature!r} (it has "
                         f"{sorted(builder.info.features.keys())}): set --config.text_feature to the one "
                         "holding the text.")
    return _TextSource(dataset, lambda split: _read_tfds(builder, split, feature), cache_root)


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
        raise MissingInputError(data_sources._not_prepared_message(builder, split, error)) from error
    return [data_sources._as_text(records[index][feature]) for index in range(len(records))]
