"""A small parallel corpus from this machine's gettext catalogs (``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``).

Made ``../shared/data/messages_en_de``: ``python -m attention_jax.data.gettext_corpus --language=fr --out=DIR``.
"""

from __future__ import annotations

import dataclasses
import gettext
import glob
import os
import random
import sys
from collections.abc import Iterable

from attention_jax.foundation import run_files

DEFAULT_LOCALE_DIR = "/usr/share/locale"
SPLIT_SIZES = {"dev": 2000, "test": 2000}  # Pairs held out, each at most a tenth of the corpus.


@dataclasses.dataclass(frozen=True)
class Corpus:
    """``train``/``dev``/``test`` pairs of ``(english, translation)``, and the packages they came from."""

    pairs: dict[str, list[tuple[str, str]]]
    packages: tuple[str, ...]


def _clean(text: str) -> str:
    return " ".join(text.split())  # One line, single spaces: the TSV format has no escapes.


def _catalog_pairs(path: str) -> list[tuple[str, str]]:
    """Return a ``.mo`` catalog's translated singular messages, whitespace collapsed (no header, plural or context)."""
    with open(path, "rb") as catalog_file:
        catalog = gettext.GNUTranslations(catalog_file)._catalog  # type: ignore[attr-defined]  # No public reader.
    pairs = []
    for message, translation in catalog.items():
        if not isinstance(message, str):  # (msgid, n): a plural form.
            continue
        english, translated = _clean(message.split("\x04", 1)[-1]), _clean(translation)
        if english and translated and english != translated:
            pairs.append((english, translated))
    return pairs


def build_corpus(language: str, locale_dir: str = DEFAULT_LOCALE_DIR, seed: int = 918) -> Corpus:
    """Collect every catalog of ``language`` (sorted, first translation wins), deduplicate, split at random.

    Parameters
    ----------
    language, locale_dir : str
        Locale directory name (``"fr"``, ``"pt_BR"``); where the locales are.
    seed : int
        Seed of the split.

    Returns
    -------
    Corpus
        The split pairs.

    Raises
    ------
    FileNotFoundError
        When there are no catalogs for ``language``.
    ValueError
        When they hold too few pairs.
    """
    paths = sorted(glob.glob(os.path.join(locale_dir, language, "LC_MESSAGES", "*.mo")))
    if not paths:
        raise FileNotFoundError(f"no gettext catalogs in {os.path.join(locale_dir, language, 'LC_MESSAGES')}: "
                                f"pick a language listed in {locale_dir}, or install translated packages.")
    by_english: dict[str, str] = {}
    packages = []
    for path in paths:
        try:
            found = _catalog_pairs(path)
        except (OSError, UnicodeDecodeError) as error:  # A damaged or oddly encoded catalog: skip it.
            print(f"skipping {path}: {error}", file=sys.stderr)
            continue
        new = [(english, translated) for english, translated in found if english not in by_english]
        by_english.update(new)
        if new:
            packages.append(os.path.splitext(os.path.basename(path))[0])
    pairs = sorted(by_english.items())
    random.Random(seed).shuffle(pairs)
    held_out = {name: min(size, len(pairs) // 10) for name, size in SPLIT_SIZES.items()}
    if min(held_out.values()) < 100:
        raise ValueError(f"only {len(pairs)} pairs for {language!r}: too few for train, dev and test splits.")
    dev_end = held_out["dev"]
    test_end = dev_end + held_out["test"]
    return Corpus(pairs={"dev": pairs[:dev_end], "test": pairs[dev_end:test_end], "train": pairs[test_end:]},
                  packages=tuple(packages))


def _write_tsv(path: str, pairs: Iterable[tuple[str, str]]) -> None:
    run_files.write_atomically(path, "".join(f"{english}\t{translated}\n" for english, translated in pairs))


def write_corpus(corpus: Corpus, directory: str, language: str) -> None:
    """Write ``train.tsv``, ``dev.tsv``, ``test.tsv`` and a README listing the packages.

    Parameters
    ----------
    corpus : Corpus
        From :func:`build_corpus`.
    directory, language : str
        Output directory (created); the target language, for the README.
    """
    os.makedirs(directory, exist_ok=True)
    for name, pairs in corpus.pairs.items():
        _write_tsv(os.path.join(directory, f"{name}.tsv"), pairs)
    counts = ", ".join(f"{name} {len(pairs):,}" for name, pairs in corpus.pairs.items())
    readme = (f"# English-{language} gettext messages\n\nBuilt by `python -m attention_jax.data.gettext_corpus "
              f"--language={language}` from the catalogs of {len(corpus.packages)} installed packages: "
              f"{', '.join(corpus.packages)}.\n\nPairs: {counts}. Translations carry their packages' licenses.\n")
    run_files.write_atomically(os.path.join(directory, "README.md"), readme)


if __name__ == "__main__":  # The command (its flags) is in attention_jax/commands/.
    from attention_jax.commands import gettext_corpus as command

    command.run()
