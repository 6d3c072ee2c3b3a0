"""The gettext corpus builder on catalogs written here in the .mo format, byte by byte."""

from __future__ import annotations

import pathlib
import struct

import pytest

from attention_jax.data import gettext_corpus


def _write_mo(path: pathlib.Path, messages: dict[str, str]) -> None:
    """A little-endian GNU .mo file: header, two offset tables, then the NUL-terminated strings."""
    keys = sorted(messages)
    originals = [key.encode() for key in keys]
    translations = [messages[key].encode() for key in keys]
    count = len(keys)
    header_size = 7 * 4
    data_start = header_size + 2 * count * 8
    blobs, table_original, table_translation, offset = b"", [], [], data_start
    for table, strings in ((table_original, originals), (table_translation, translations)):
        for string in strings:
            table.append((len(string), offset))
            blobs += string + b"\0"
            offset += len(string) + 1
    header = struct.pack("<7I", 0x950412DE, 0, count, header_size, header_size + count * 8, 0, 0)
    tables = b"".join(struct.pack("<2I", *entry) for entry in table_original + table_translation)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + tables + blobs)


def _locale(tmp_path: pathlib.Path, count: int) -> pathlib.Path:
    locale = tmp_path / "locale"
    first = {"": "Content-Type: text/plain; charset=UTF-8\n", "Open": "Ouvrir", "Same": "Same",
             "menu\x04Quit": "Quitter", "Save  the\nfile": "Enregistrer le fichier", "Untranslated": ""}
    first.update({f"Message {i}": f"Le message {i}" for i in range(count)})
    _write_mo(locale / "fr" / "LC_MESSAGES" / "alpha.mo", first)
    _write_mo(locale / "fr" / "LC_MESSAGES" / "beta.mo",  # Its "Open" comes second: the first one wins.
              {"": "Content-Type: text/plain; charset=UTF-8\n", "Open": "Ouvrir (beta)", "Close": "Fermer"})
    return locale


def test_catalog_pairs_skip_header_identical_and_untranslated(tmp_path: pathlib.Path) -> None:
    locale = _locale(tmp_path, count=3)
    pairs = dict(gettext_corpus._catalog_pairs(str(locale / "fr" / "LC_MESSAGES" / "alpha.mo")))
    assert pairs["Open"] == "Ouvrir" and pairs["Quit"] == "Quitter"  # Context dropped.
    assert pairs["Save the file"] == "Enregistrer le fichier"  # Whitespace collapsed.
    assert "Same" not in pairs and "Untranslated" not in pairs and "" not in pairs
    assert len(pairs) == 3 + 3


def test_corpus_is_deduplicated_split_and_written(tmp_path: pathlib.Path) -> None:
    locale = _locale(tmp_path, count=2000)
    corpus = gettext_corpus.build_corpus("fr", str(locale))
    assert [len(corpus.pairs[name]) for name in ("dev", "test", "train")] == [200, 200, 2004 - 400]
    every = [pair for pairs in corpus.pairs.values() for pair in pairs]
    assert len({english for english, _ in every}) == len(every) == 2004
    assert dict(every)["Open"] == "Ouvrir" and dict(every)["Close"] == "Fermer"
    assert corpus.packages == ("alpha", "beta")
    assert gettext_corpus.build_corpus("fr", str(locale)).pairs == corpus.pairs  # Deterministic.
    gettext_corpus.write_corpus(corpus, str(tmp_path / "out"), "fr")
    lines = (tmp_path / "out" / "train.tsv").read_text(encoding="utf-8").splitlines()
    assert [tuple(line.split("\t")) for line in lines] == corpus.pairs["train"]
    assert "2 installed packages" in (tmp_path / "out" / "README.md").read_text()


def test_missing_or_tiny_language_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match="no gettext catalogs"):
        gettext_corpus.build_corpus("xx", str(tmp_path))
    with pytest.raises(ValueError, match="too few"):
        gettext_corpus.build_corpus("fr", str(_locale(tmp_path, count=10)))
