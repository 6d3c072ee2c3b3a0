"""ATTENTION_JAX_CACHE_DIR moves the data, tokenizer and compilation caches together; a per-cache setting wins."""

from __future__ import annotations

import pathlib

import pytest

from attention_jax.checkpointing import compilation_cache
from attention_jax.data import data_sources
from attention_jax.foundation import cache_dirs
from attention_jax.training import device_peaks
from tests.support.fake_data import data_config


@pytest.fixture
def cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    for variable in ("TFDS_DATA_DIR", "JAX_COMPILATION_CACHE_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ATTENTION_JAX_CACHE_DIR", str(tmp_path / "caches"))
    return tmp_path / "caches"


def test_one_variable_moves_the_prepared_data_its_token_caches_and_compiled_programs(
        cache_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, count in (("train", 12), ("dev", 3), ("test", 3)):
        (corpus / f"{split}.tsv").write_text("".join(f"file {i} saved\tDatei {i} gespeichert\n" for i in range(count)))
    source = data_sources._open_translation_source(data_config(dataset=f"tsv:{corpus}", data_dir=""))
    assert source.num_examples("train") == 12
    assert pathlib.Path(source.cache_dir).is_relative_to(cache_root / "tensorflow_datasets")  # Tokenizer, token ids.
    assert any((cache_root / "tensorflow_datasets").glob("tsv_translation/*"))  # The prepared corpus itself.
    assert compilation_cache._resolve_directory("default") == str(cache_root / "jax_compilation_cache")
    assert device_peaks._peak_cache_path() == str(cache_root / "device_peaks.json")  # MFU's measured peak.
    line = cache_dirs.describe("", str(cache_root / "jax_compilation_cache"))
    assert f"in {cache_root / 'tensorflow_datasets'};" in line and str(cache_root / "jax_compilation_cache") in line
    assert f"ATTENTION_JAX_CACHE_DIR={cache_root}" in line


def test_a_setting_for_one_cache_wins_for_that_cache(cache_root: pathlib.Path, tmp_path: pathlib.Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_dirs.data_dir(str(tmp_path / "mine")) == str(tmp_path / "mine")  # --config.data_dir.
    assert compilation_cache._resolve_directory(str(tmp_path / "jit")) == str(tmp_path / "jit")
    assert compilation_cache._resolve_directory("") is None  # --config.compilation_cache_dir='': off.
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert cache_dirs.data_dir("") is None  # TFDS reads its own variable.
    assert f"in {tmp_path / 'tfds'};" in cache_dirs.describe("", None)
    assert compilation_cache._resolve_directory("default") == str(tmp_path / "jax")
    monkeypatch.delenv("ATTENTION_JAX_CACHE_DIR")
    monkeypatch.delenv("TFDS_DATA_DIR")
    line = cache_dirs.describe("", None)
    assert f"in {pathlib.Path.home() / 'tensorflow_datasets'};" in line and "compilation cache off" in line
    assert "ATTENTION_JAX_CACHE_DIR=DIR moves both" in line
