"""Quiet by default (issue 63): a command logs its own progress and everyone's warnings; other
libraries' INFO lines only at ``--verbosity=1``; a corpus prepared from local files prints no TFDS
download banner."""

from __future__ import annotations

import logging as python_logging
import pathlib

import pytest
from absl import logging

from attention_jax.commands import quiet_libraries
from attention_jax.data import tsv_dataset

PACKAGE = pathlib.Path(quiet_libraries.__file__).resolve().parents[1]
LIBRARY = "/venv/lib/python3.11/site-packages"


def _record(pathname: str, level: int = python_logging.INFO) -> python_logging.LogRecord:
    return python_logging.LogRecord("absl", level, pathname, 1, "a message", None, None)


@pytest.fixture
def absl_verbosity():
    """Set absl's verbosity for one test and restore it afterwards."""
    before = logging.get_verbosity()
    yield logging.set_verbosity
    logging.set_verbosity(before)


def test_only_our_info_lines_pass_unless_verbosity_asks_for_more(absl_verbosity) -> None:
    quiet = quiet_libraries.QuietLibraries()
    absl_verbosity(logging.INFO)  # The default: --verbosity=0.
    assert quiet.filter(_record(str(PACKAGE / "training" / "train.py")))
    assert quiet.filter(_record(str(PACKAGE.parent / "launch" / "sweep.py")))
    for library in ("tensorflow_datasets/core/dataset_info.py", "jax/_src/compiler.py",
                    "orbax/checkpoint/checkpoint_manager.py", "absl/logging/__init__.py"):
        assert not quiet.filter(_record(f"{LIBRARY}/{library}")), library
        assert quiet.filter(_record(f"{LIBRARY}/{library}", python_logging.WARNING)), library  # Warnings stay.
    absl_verbosity(logging.DEBUG)  # --verbosity=1: every library's INFO lines too (orbax's own chatter aside).
    assert quiet.filter(_record(f"{LIBRARY}/tensorflow_datasets/core/dataset_info.py"))
    assert quiet.filter(_record(f"{LIBRARY}/jax/_src/compiler.py"))


def test_a_local_tsv_corpus_prints_no_download_banner(tmp_path: pathlib.Path,
                                                      capfd: pytest.CaptureFixture) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, count in (("train", 20), ("dev", 3), ("test", 3)):
        (corpus / f"{split}.tsv").write_text("".join(f"the cat {i}\tdie katze {i}\n" for i in range(count)))
    builder = tsv_dataset.prepare_tsv_dataset(str(corpus), str(tmp_path / "tfds"))
    assert builder.is_prepared() and len(builder.as_data_source("train")) == 20
    printed = capfd.readouterr()
    assert "Downloading and preparing" not in printed.out + printed.err
    assert "downloaded and prepared" not in printed.out + printed.err
