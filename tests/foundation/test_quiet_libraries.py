"""Log lines 'HH:MM:SS L message' (absl's with --log_format=absl), and quiet by default (issue 63): a
command logs its own progress and everyone's warnings; other libraries' INFO lines only at
``--verbosity=1``; a corpus prepared from local files prints no TFDS download banner."""

from __future__ import annotations

import logging as python_logging
import pathlib
import re
import time

import pytest
from absl import logging
from absl.testing import flagsaver

from attention_jax.commands import entry_points
from attention_jax.data import first_use, tsv_dataset
from attention_jax.foundation import quiet_libraries

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "attention_jax"  # Not quiet_libraries.py's own folder.
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
    quiet = quiet_libraries._QuietLibraries()
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
    builder = tsv_dataset._prepare_tsv_dataset(str(corpus), str(tmp_path / "tfds"))
    assert builder.is_prepared() and len(builder.as_data_source("train")) == 20
    printed = capfd.readouterr()
    assert "Downloading and preparing" not in printed.out + printed.err
    assert "downloaded and prepared" not in printed.out + printed.err


def _tfds_warning(message: str, library_file: str = "tensorflow_datasets/core/file_utils.py"
                  ) -> python_logging.LogRecord:
    return python_logging.LogRecord("absl", python_logging.WARNING, f"{LIBRARY}/{library_file}", 1, message,
                                    None, None)


def test_tfds_routine_warnings_show_only_at_verbosity_one(absl_verbosity) -> None:
    quiet = quiet_libraries._QuietLibraries()
    routine = ("Variant folder /data/tsv_translation/x/1.0.0 has no dataset_info.json",
               "Using custom data configuration: BuilderConfig(name='messages_en_de-4093b391c2f4')")
    absl_verbosity(logging.INFO)
    for message in routine:
        record = _tfds_warning(message)
        assert not quiet.filter(record), message
        assert record.levelno == python_logging.DEBUG and record.levelname == "DEBUG"
    other = _tfds_warning("Dataset messages_en_de is corrupted: the splits differ")  # Any other TFDS warning stays.
    assert quiet.filter(other) and other.levelno == python_logging.WARNING
    ours = python_logging.LogRecord("absl", python_logging.WARNING, str(PACKAGE / "data" / "tsv_dataset.py"), 1,
                                    "Using custom data configuration", None, None)
    assert quiet.filter(ours) and ours.levelno == python_logging.WARNING  # Only TFDS's own lines are lowered.
    absl_verbosity(logging.DEBUG)
    assert all(quiet.filter(_tfds_warning(message)) for message in routine)


class _Stream:
    """A stand-in for stderr that is or is not a terminal."""

    def __init__(self, is_terminal: bool) -> None:
        self.is_terminal = is_terminal

    def isatty(self) -> bool:
        return self.is_terminal


def test_tfds_progress_bars_are_off_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorflow_datasets.core.utils import tqdm_utils

    monkeypatch.setattr(tqdm_utils, "_active", True)  # Restored after the test.
    assert first_use._progress_bars_for(_Stream(is_terminal=True)) and tqdm_utils._active
    assert not first_use._progress_bars_for(_Stream(is_terminal=False)) and not tqdm_utils._active
    assert not first_use._progress_bars_for(object())  # No isatty at all (a test double): no bars.


def test_a_tsv_corpus_prepared_into_a_file_has_no_progress_bar_escapes(
        tmp_path: pathlib.Path, capfd: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorflow_datasets.core.utils import tqdm_utils

    monkeypatch.setattr(tqdm_utils, "_active", True)  # As a fresh process starts; pytest's stderr is no terminal.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, count in (("train", 20), ("dev", 3), ("test", 3)):
        (corpus / f"{split}.tsv").write_text("".join(f"a dog {i}\tein hund {i}\n" for i in range(count)))
    tsv_dataset._prepare_tsv_dataset(str(corpus), str(tmp_path / "tfds"))
    printed = capfd.readouterr()
    assert "\r" not in printed.err and "\x1b[A" not in printed.err and "Generating splits" not in printed.err


def _progress_record(level: int, message: str, *args: object) -> python_logging.LogRecord:
    return python_logging.LogRecord("absl", level, "/x/attention_jax/training/progress.py", 81, message, args, None)


def test_short_lines_are_time_level_letter_and_message_and_absl_is_a_flag_away() -> None:
    formatter = quiet_libraries._ShortFormatter(logging.PythonFormatter(), entry_points.long_log_format)
    record = _progress_record(python_logging.INFO, "step %d/%d | loss %.4f", 150, 2400, 3.25)
    assert formatter.format(record) == time.strftime("%H:%M:%S", time.localtime(record.created)) + \
        " I step 150/2400 | loss 3.2500"
    warning = _progress_record(python_logging.WARNING, "disk nearly full")
    assert re.fullmatch(r"\d\d:\d\d:\d\d W disk nearly full", formatter.format(warning))
    assert formatter.format(_progress_record(python_logging.ERROR, "x")).split(" ")[1] == "E"
    with flagsaver.flagsaver(log_format="absl"):  # I1205 23:44:46.869700 140090122574720 progress.py:81] ...
        assert re.fullmatch(r"I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ progress\.py:81\] step 150/2400 \| loss 3\.2500",
                            formatter.format(record))


def test_install_gives_absl_s_handler_the_short_format_once() -> None:
    handler = logging.get_absl_handler().python_handler
    before = handler.formatter
    try:
        quiet_libraries._install_short_format()
        quiet_libraries._install_short_format()
        assert isinstance(handler.formatter, quiet_libraries._ShortFormatter)
        assert not isinstance(handler.formatter._long, quiet_libraries._ShortFormatter)  # Not wrapped twice.
    finally:
        handler.setFormatter(before)
