"""The corpus ``config.dataset`` names, opened as random-access TFDS data sources (no TensorFlow).

``synthetic_en_de[/<config>]``, ``tsv:DIR``, or a prepared array_record TFDS dataset (``wmt14_translate/de-en``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow_datasets as tfds
from absl import logging
from tensorflow_datasets.core import constants as tfds_constants
from tensorflow_datasets.core import decode as tfds_decode
from tensorflow_datasets.proto import tf_example_pb2

from attention_jax.data import first_use
from attention_jax.foundation import cache_dirs
from attention_jax.foundation.user_errors import MissingInputError, UserInputError

if TYPE_CHECKING:
    from attention_jax.experiment.sections import DataConfig

SYNTHETIC_DATASET = "synthetic_en_de"
TSV_PREFIX = "tsv:"
CACHE_DIR_NAME = "attention_jax_cache"
_READ_CHUNK = 4096


class _TranslationSource:
    """One translation corpus: a prepared TFDS builder and its source and target features.

    Plain ``tf.train.Example`` records are parsed directly (faster) once the first parses as TFDS decodes it.
    """

    def __init__(
        self, description: str, builder: tfds.core.DatasetBuilder, source_key: str, target_key: str, cache_dir: str
    ) -> None:
        self.description = description
        self.builder = builder
        self.source_key = source_key
        self.target_key = target_key
        self.cache_dir = cache_dir
        self._opened: dict[str, tuple[Sequence[Any], bool]] = {}

    def num_examples(self, split: str) -> int:
        """Return the number of sentence pairs in a split.

        Raises ``MissingInputError``: when the split cannot be read, naming how to prepare the data.
        """
        return len(self._open(split)[0])

    def text_pairs(self, split: str, indices: Sequence[int] | np.ndarray) -> Iterator[tuple[str, str]]:
        """Yield ``(source, target)`` text of the pairs at ``indices`` (invalid UTF-8 replaced), read in chunks."""
        records, is_raw = self._open(split)
        for start in range(0, len(indices), _READ_CHUNK):
            chunk = _read_records(records, [int(index) for index in indices[start : start + _READ_CHUNK]])
            if is_raw:
                yield from (self._parse_raw(record) for record in chunk)
            else:
                yield from ((_as_text(record[self.source_key]), _as_text(record[self.target_key])) for record in chunk)

    def _open(self, split: str) -> tuple[Sequence[Any], bool]:
        if split not in self._opened:
            try:
                decoded = self.builder.as_data_source(split)
            except (KeyError, ValueError, NotImplementedError, FileNotFoundError, OSError) as error:
                raise MissingInputError(_not_prepared_message(self.builder, split, error)) from error
            self._opened[split] = self._raw_records_if_equivalent(split, decoded) or (decoded, False)
        return self._opened[split]

    def _raw_records_if_equivalent(self, split: str, decoded: Sequence[Any]) -> tuple[Sequence[Any], bool] | None:
        """Open the split as raw bytes when direct parsing gives what TFDS's decoding gives."""
        if len(decoded) == 0:
            return None
        try:
            raw = self.builder.as_data_source(split, deserialize_method=tfds_decode.DeserializeMethod.RAW_BYTES)
            reference = decoded[0]
            expected = (_as_text(reference[self.source_key]), _as_text(reference[self.target_key]))
            if self._parse_raw(raw[0]) == expected:
                return raw, True
        except Exception:  # noqa: BLE001  Any surprise in the fast path: use TFDS's decoding.
            pass
        return None

    def _parse_raw(self, serialized: bytes) -> tuple[str, str]:
        features = tf_example_pb2.Example.FromString(serialized).features.feature
        return (
            _as_text(b"".join(features[self.source_key].bytes_list.value)),
            _as_text(b"".join(features[self.target_key].bytes_list.value)),
        )


def _open_translation_source(config: DataConfig) -> _TranslationSource:
    """Open the corpus ``config.dataset`` names.

    Raises ``UserInputError``: for an unknown name or languages the dataset lacks; ``MissingInputError`` (with the
    command) for data not prepared.
    """
    dataset = str(config.dataset).strip()
    data_dir = cache_dirs.data_dir(str(config.data_dir))  # None: TFDS's default.
    if not dataset:
        raise UserInputError("No corpus given: config.dataset is empty. Name one on the command line, e.g. "
                         "--config.dataset=tsv:/path/to/dir (a directory with train.tsv, dev.tsv, test.tsv "
                         "of 'source<TAB>target' lines) or a TFDS translation dataset such as "
                         "--config.dataset=wmt14_translate/de-en.")
    if dataset == SYNTHETIC_DATASET or dataset.startswith(SYNTHETIC_DATASET + "/"):
        builder = _prepared_synthetic_builder(dataset.partition("/")[2], data_dir)
        return _with_languages(dataset, builder, config.source_lang, config.target_lang, data_dir, config.train_split)
    if dataset.startswith(TSV_PREFIX):
        from attention_jax.data import tsv_dataset  # Registers the builder only when used.

        builder = tsv_dataset._prepare_tsv_dataset(dataset[len(TSV_PREFIX) :], data_dir)
        return _build_source(
            dataset, builder, tsv_dataset.SOURCE_KEY, tsv_dataset.TARGET_KEY, data_dir, config.train_split
        )
    builder = _tfds_translation_builder(dataset, data_dir)
    return _with_languages(dataset, builder, config.source_lang, config.target_lang, data_dir, config.train_split)


def _as_text(value: Any) -> str:
    """Return a TFDS text feature value (bytes, str, or a 0-d array of either) as ``str``, invalid UTF-8 replaced."""
    if isinstance(value, np.ndarray):
        value = value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _prepared_synthetic_builder(builder_config: str, data_dir: str | None) -> tfds.core.DatasetBuilder:
    from attention_jax.data import synthetic_en_de  # Registers the builder only when used.

    config_kwargs = {"config": builder_config} if builder_config else {}

    def _make_builder() -> tfds.core.DatasetBuilder:
        return synthetic_en_de.SyntheticEnDe(data_dir=data_dir, file_format="array_record", **config_kwargs)

    builder = _make_builder()

    def _prepare() -> None:
        first_use._remove_incomplete_tfds_dirs(str(builder.data_dir))
        logging.info("Generating the synthetic corpus %s into %s (once)", builder.info.full_name, builder.data_dir)
        first_use._prepare_local_builder(builder)

    waited = not builder.is_prepared()
    prepared_here = first_use._prepare_once(str(builder.data_dir) + first_use.LOCK_SUFFIX,
                                           f"the corpus {builder.info.full_name}", builder.is_prepared, _prepare)
    return _make_builder() if waited and not prepared_here else builder  # Another process's dataset_info.


def _tfds_translation_builder(name: str, data_dir: str | None) -> tfds.core.DatasetBuilder:
    """Create the TFDS builder for ``name``; translation builders register on import, without TF."""
    import tensorflow_datasets.translate  # noqa: F401  Registers wmt14_translate, wmt_t2t_translate, ...

    try:
        return tfds.builder(name, data_dir=data_dir, file_format="array_record")
    except tfds.core.registered.DatasetNotFoundError as error:
        raise UserInputError(_unknown_dataset_message(name)) from error


def _with_languages(
    dataset: str,
    builder: tfds.core.DatasetBuilder,
    source_lang: str,
    target_lang: str,
    data_dir: str | None,
    train_split: str,
) -> _TranslationSource:
    languages = sorted(builder.info.features.keys())
    for role, language in (("source_lang", source_lang), ("target_lang", target_lang)):
        if language not in languages:
            raise UserInputError(
                f"config.{role}={language!r} is not a language of {dataset}, which has {languages}. "
                f"Set config.source_lang and config.target_lang to two of those."
            )
    if source_lang == target_lang:
        raise UserInputError(f"config.source_lang and config.target_lang are both {source_lang!r}; pick two languages.")
    return _build_source(dataset, builder, source_lang, target_lang, data_dir, train_split)


def _build_source(
    dataset: str,
    builder: tfds.core.DatasetBuilder,
    source_key: str,
    target_key: str,
    data_dir: str | None,
    train_split: str,
) -> _TranslationSource:
    source = _TranslationSource(dataset, builder, source_key, target_key, cache_dir="")
    source.cache_dir = os.path.join(
        data_dir or tfds_constants.DATA_DIR,
        CACHE_DIR_NAME,
        builder.info.full_name,
        _split_fingerprint(source, train_split),
    )
    return source


def _split_fingerprint(source: _TranslationSource, split: str) -> str:
    """Hash a split's name, size and a few pairs, so caches of different data never collide."""
    num_pairs = source.num_examples(split)
    if num_pairs == 0:
        raise UserInputError(f"Split {split!r} of {source.description} is empty; there is nothing to train on.")
    digest = hashlib.sha256(f"{split}:{num_pairs}".encode())
    for pair in source.text_pairs(split, sorted({0, num_pairs // 3, num_pairs // 2, num_pairs - 1})):
        digest.update("\t".join(pair).encode("utf-8", errors="replace") + b"\n")
    return digest.hexdigest()[:12]


def _split_contents_fingerprint(source: _TranslationSource, split: str) -> dict[str, str | int]:
    """Return a split's name, size (``pairs``) and SHA-256 of every pair's text, in order."""
    num_pairs = source.num_examples(split)
    digest = hashlib.sha256()
    for pair in source.text_pairs(split, range(num_pairs)):
        digest.update("\t".join(pair).encode("utf-8", errors="replace") + b"\n")
    return {"split": split, "pairs": num_pairs, "sha256": digest.hexdigest()}


def _read_records(records: Sequence[Any], indices: list[int]) -> list[Any]:
    """Read several records in one call (array_record reads them together)."""
    try:
        return list(records.__getitems__(indices))  # type: ignore[attr-defined]  # array_record's batched read.
    except (AttributeError, TypeError):  # No batched read (tfds.testing.mock_data's sources lack one).
        return [records[index] for index in indices]


def _not_prepared_message(builder: tfds.core.DatasetBuilder, split: str, error: Exception) -> str:
    """Return what to run to prepare ``builder``'s data (a text corpus's too) when ``split`` cannot be read."""
    name = builder.info.full_name.rsplit("/", 1)[0]  # "wmt14_translate/de-en/1.0.0" without the version.
    data_root = str(builder.data_dir_root)
    return (
        f"Cannot read split {split!r} of TFDS dataset {name!r} from {builder.data_dir} ({type(error).__name__}: "
        f"{error}). The data must be prepared beforehand in array_record format (this project does not "
        f"download). On a machine with network access run:\n"
        f"  python -c \"import tensorflow_datasets as tfds, tensorflow_datasets.translate; "
        f"tfds.builder('{name}', data_dir='{data_root}', file_format='array_record').download_and_prepare()\"\n"
        f"then copy {data_root} here and set config.data_dir to it."
    )


def _unknown_dataset_message(dataset: str) -> str:
    return (
        f"Unknown config.dataset {dataset!r}. Use {SYNTHETIC_DATASET!r} (or '{SYNTHETIC_DATASET}/small'), "
        f"'{TSV_PREFIX}/path/to/dir' (a directory "
        f"with train.tsv, dev.tsv, test.tsv) or a TFDS translation dataset such as 'wmt14_translate/de-en'."
    )
