"""The TFDS builder ``synthetic_en_de`` (layout of wmt14_translate; array_record, no TensorFlow)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator

import tensorflow_datasets as tfds

from attention_jax.data.synthetic_en_de.splits import SPLITS, default_split_sizes, generate_splits


@dataclasses.dataclass(eq=False)
class SyntheticEnDeConfig(tfds.core.BuilderConfig):
    """Builder config: the number of pairs per split (None: the module constants at build time)."""

    train_size: int | None = None
    validation_size: int | None = None
    test_size: int | None = None

    def _split_sizes(self) -> dict[str, int]:
        """The pairs per split for this config."""
        sizes = default_split_sizes()
        given = {"train": self.train_size, "validation": self.validation_size, "test": self.test_size}
        return {split: sizes[split] if size is None else size for split, size in given.items()}


_DESCRIPTION = (
    "Synthetic English->German translation from a small grammar: gender/case agreement, plurals and "
    "numbers, verb-second and verb-final word order, separable and modal verbs, negation. Generated "
    "by attention_jax.data.synthetic_en_de; no download.")


class SyntheticEnDe(tfds.core.GeneratorBasedBuilder):
    """TFDS builder "synthetic_en_de": ``{"de": str, "en": str}`` examples; configs "default" and "small" (smoke tests).

    Parameters
    ----------
    file_format : str
        "array_record" when None (``as_data_source``, no TensorFlow).
    **kwargs
        Passed to ``tfds.core.GeneratorBasedBuilder``.
    """

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS = [
        SyntheticEnDeConfig(name="default", description="Full size (module constants)."),
        SyntheticEnDeConfig(name="small", description="10k/100/100 pairs for smoke tests.",
                            train_size=10_000, validation_size=100, test_size=100),
    ]

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> None:
        """No source path: TFDS 4.9.10 would seek checksums through an undeclared backport (datasets#11212)."""
        return None

    def __init__(self, *, file_format: str | None = None, **kwargs: typing.Any) -> None:
        """Create the builder."""
        super().__init__(file_format=file_format or "array_record", **kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        """Features, supervised keys and description."""
        return tfds.core.DatasetInfo(
            builder=self,
            description=_DESCRIPTION,
            features=tfds.features.Translation(languages=("de", "en")),
            supervised_keys=("en", "de"),
            disable_shuffling=True,  # Keep generate_split's order.
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        """All splits from one pass over the stream; nothing is downloaded."""
        del dl_manager
        pairs = generate_splits(self.builder_config._split_sizes())
        return {split: self._generate_examples(pairs[split]) for split in SPLITS}

    def _generate_examples(self, pairs: list[tuple[str, str]]) -> Iterator[tuple[int, dict[str, str]]]:
        """Yield (index, {"de": german, "en": english})."""
        for index, (english, german) in enumerate(pairs):
            yield index, {"de": german, "en": english}
