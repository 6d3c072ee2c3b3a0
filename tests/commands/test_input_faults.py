"""Every mistake a user can make is one line and exit status 2, with nothing left in the work directory
(issue 36); run files are readable by others like the checkpoints beside them; ``dev`` and
``validation`` name the same split; a parallel text given to ``evaluate`` is checked before it is used.
"""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys

import pytest

from attention_jax.commands import text_io
from attention_jax.decoding import generation
from attention_jax.experiment import sections
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import MissingInputError, UserInputError
from tests.support import fake_data, train_support
from tests.support.sweep_cli import REPO_ROOT

GOOD_LINES = [f"the cat {i}\tdie katze {i}" for i in range(40)]
SMALL_MODEL = ["--config.num_layers=1", "--config.d_model=32", "--config.d_ff=64", "--config.num_heads=2",
               "--config.key_dim=16", "--config.value_dim=16", "--config.num_train_steps=2", "--config.final_bleu=False"]


def _tsv_corpus(directory: pathlib.Path, train_lines: list[str] | None = None, skip: str = "") -> pathlib.Path:
    directory.mkdir(parents=True)
    for name in ("train", "dev", "test"):
        if name != skip:
            lines = train_lines if name == "train" and train_lines is not None else GOOD_LINES
            (directory / f"{name}.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return directory


def _corpus_case(tmp_path: pathlib.Path, name: str) -> list[str]:
    """Flags of a run on a broken corpus ``name`` made under ``tmp_path``."""
    corpus = tmp_path / "corpus"
    flags = [*SMALL_MODEL, f"--config.dataset=tsv:{corpus}", f"--config.data_dir={tmp_path / 'tfds'}"]
    if name == "no_tab":
        _tsv_corpus(corpus, GOOD_LINES + ["a line without a tab"])
    elif name == "two_tabs":
        _tsv_corpus(corpus, GOOD_LINES + ["a\tb\tc"])
    elif name == "empty_train":
        _tsv_corpus(corpus, [])
    elif name == "no_dev":
        _tsv_corpus(corpus, skip="dev")
    elif name == "too_large_vocabulary":
        _tsv_corpus(corpus)
        return [*flags, "--config.vocab_size=5000"]
    elif name == "empty_lm_corpus":
        corpus.mkdir()
        for split in ("train", "dev", "test"):
            (corpus / f"{split}.txt").write_text("" if split == "train" else "ein Text\n", encoding="utf-8")
        return [*SMALL_MODEL, f"--config.dataset=txt:{corpus}", f"--config.data_dir={tmp_path / 'tfds'}"]
    return flags


# (config file, extra flags or a corpus case, text the one line must hold)
MISTAKES = {
    "no_tab": ("configs/tiny.py", "corpus", "found 0 TABs in line 'a line without a tab'"),
    "two_tabs": ("configs/tiny.py", "corpus", "found 2 TABs"),
    "empty_train": ("configs/tiny.py", "corpus", "train.tsv holds no sentence pairs"),
    "no_dev": ("configs/tiny.py", "corpus", "lacks dev.tsv"),
    "no_corpus_directory": ("configs/tiny.py", ["--config.dataset=tsv:/nonexistent/corpus"], "does not exist"),
    "empty_lm_corpus": ("configs/lm_tiny.py", "corpus", "holds no text"),
    "too_large_vocabulary": ("configs/tiny.py", "corpus", "too small for config.vocab_size=5000"),
    "negative_heads": ("configs/tiny.py", ["--config.num_heads=-2"], "num_heads must be positive; got -2"),
    "dropout_above_one": ("configs/tiny.py", ["--config.dropout_rate=1.5"], "dropout_rate must be a probability"),
    "zero_vocabulary": ("configs/tiny.py", ["--config.vocab_size=0"], "vocab_size must be positive; got 0"),
    "zero_batch": ("configs/tiny.py", ["--config.tokens_per_batch=0"], "tokens_per_batch must be positive"),
    "max_len_2": ("configs/tiny.py", ["--config.max_len=2"], "longer than config.max_len=2"),
    "layer_norm_mid": ("configs/tiny.py", ["--config.layer_norm_position=mid"], "layer_norm_position must be one of"),
    "unknown_row": ("configs/table2.py:Z9", [], "unknown Table 2 row 'Z9'; choose one of base"),
    "unknown_row_no_overrides": ("configs/table2.py:Z9", "bare", "unknown Table 2 row 'Z9'; choose one of base"),
    "missing_config_file": ("configs/nope.py", [], "config file configs/nope.py not found"),
}


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_mistake_is_one_line_exit_2_and_leaves_no_workdir(name: str, tmp_path: pathlib.Path) -> None:
    config_file, extra, expected = MISTAKES[name]
    flags = _corpus_case(tmp_path, name) if extra == "corpus" else [] if extra == "bare" else SMALL_MODEL + extra
    workdir = tmp_path / "run"
    completed = subprocess.run(
        [sys.executable, "-m", "attention_jax.main", f"--config={config_file}", f"--workdir={workdir}",
         *flags], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env=train_support.subprocess_env(str(tmp_path / "cache")))
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr, completed.stderr[-3000:]
    errors = [line for line in completed.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and expected in errors[0], completed.stderr[-3000:]
    assert not workdir.exists()  # Neither config.json nor lock.json left behind.


@pytest.mark.end_to_end
def test_a_workdir_that_is_a_file_and_a_bad_average_are_one_line(tmp_path: pathlib.Path) -> None:
    regular_file = tmp_path / "a_file"
    regular_file.write_text("not a run")
    completed = subprocess.run([sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py",
                                f"--workdir={regular_file}"], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=600, env=train_support.subprocess_env(str(tmp_path / "cache")))
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr[-3000:]
    assert f"--workdir={regular_file} is a file, not a directory" in completed.stderr
    for last, expected in (("-1", "--last must be a positive number"), ("100", "asked to average the last 100")):
        averaged = subprocess.run([sys.executable, "-m", "attention_jax.average_checkpoints",
                                   f"--workdir={tmp_path}", f"--last={last}"], cwd=REPO_ROOT, capture_output=True,
                                  text=True, timeout=600, env=train_support.subprocess_env(str(tmp_path / "cache")))
        assert averaged.returncode == 2 and "Traceback" not in averaged.stderr, averaged.stderr[-3000:]
        assert expected in averaged.stderr


def test_corpus_mistakes_are_user_input_errors(tmp_path: pathlib.Path) -> None:
    from attention_jax.data import input_pipeline

    corpus = _tsv_corpus(tmp_path / "corpus", GOOD_LINES + ["a\tb\tc"])
    config = fake_data.tiny_experiment(dataset=f"tsv:{corpus}", data_dir=str(tmp_path / "tfds"), vocab_size=40)
    with pytest.raises(UserInputError, match="found 2 TABs"):
        input_pipeline.get_datasets(config.data)
    with pytest.raises(UserInputError, match="does not exist"):
        input_pipeline.get_datasets(fake_data.tiny_experiment(dataset=f"tsv:{tmp_path / 'none'}").data)
    with pytest.raises(ValueError, match="tokens_per_batch must be positive"):
        sections.build_experiment(fake_data.tiny_config(tokens_per_batch=0), "config")


def test_generate_says_when_new_tokens_do_not_fit() -> None:
    assert generation.length_warning(32, [5], 20) is None
    warning = generation.length_warning(32, [5, 9], 100_000)
    assert warning == ("--max_new_tokens=100000 is more than fits: the model's rows hold 32 positions (BOS and "
                       "the prompt included), so the longest prompt's continuation stops after 22 new tokens.")


# --- Files other people can read ---------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_run_files_follow_the_umask(tmp_path: pathlib.Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        run_files.write_json_atomically(str(tmp_path / run_files.RESULTS_FILE), {"finished": True})
        run_files.write_atomically(str(tmp_path / run_files.TOKENIZER_FILE), b"model")
    finally:
        os.umask(previous)
    for name in (run_files.RESULTS_FILE, run_files.TOKENIZER_FILE):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask, name
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".tmp-")] == []


# --- dev and validation --------------------------------------------------------------------------------

def test_dev_and_validation_name_the_same_split() -> None:
    assert run_files.data_split("dev") == "validation" and run_files.data_split("test") == "test"
    assert run_files.final_bleu_splits(("validation", "test")) == ("dev", "test")
    with pytest.raises(ValueError, match="final_bleu_splits"):
        run_files.final_bleu_splits(("dev", "validation"))
    with pytest.raises(ValueError, match="final_bleu_splits"):
        fake_data.tiny_experiment(final_bleu_splits=("dev", "validation"))  # Refused before anything runs.


# --- a parallel text for evaluate ----------------------------------------------------------------------

def test_a_parallel_text_is_read_line_by_line_and_its_mistakes_name_the_file(tmp_path: pathlib.Path) -> None:
    source, reference = tmp_path / "news.en", tmp_path / "news.de"
    source.write_bytes(b"The house.\r\n\nA \xff dog.\n")
    reference.write_text("Das Haus.\nNichts.\nEin Hund.", encoding="utf-8")  # No newline at the end.
    assert text_io._read_parallel_text(str(source), str(reference)) == [
        ("The house.", "Das Haus."), ("", "Nichts."), ("A \ufffd dog.", "Ein Hund.")]
    short, empty, blank = tmp_path / "short.de", tmp_path / "empty.de", tmp_path / "blank.de"
    short.write_text("Das Haus.\nNichts.\n", encoding="utf-8")
    empty.write_text("", encoding="utf-8")
    blank.write_text("\n \n\n", encoding="utf-8")
    with pytest.raises(UserInputError, match=rf"--source={source} has 3 lines but --reference={short} has 2"):
        text_io._read_parallel_text(str(source), str(short))
    for path in (empty, blank):
        with pytest.raises(UserInputError, match=rf"--reference={path} is empty"):
            text_io._read_parallel_text(str(source), str(path))
    with pytest.raises(MissingInputError, match=rf"--source={tmp_path / 'none.en'} does not exist"):
        text_io._read_parallel_text(str(tmp_path / "none.en"), str(reference))
    with pytest.raises(UserInputError, match=rf"--reference={tmp_path} is a directory"):
        text_io._read_parallel_text(str(source), str(tmp_path))


# Each decoding command on a run that is not there, and with a mistyped or missing flag (absl's own parser
# printed "FATAL Flags parsing error" and a second line, then exited 1, the status of a crash).
DECODING_COMMAND_MISTAKES = {
    "translate-no_run": (["attention_jax.translate"], "No work directory"),
    "evaluate-no_run": (["attention_jax.evaluate"], "No work directory"),
    "generate-no_run": (["attention_jax.generate", "--prompt=Hallo"], "No work directory"),
    "plot_attention-no_run": (["attention_jax.plot_attention", "--text=Hallo"], "No work directory"),
    "translate-mistyped_flag": (["attention_jax.translate", "--beam_sise=4"], "Unknown command line flag 'beam_sise'"),
    "plot_attention-missing_flag": (["attention_jax.plot_attention"], "--text must have a value"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(DECODING_COMMAND_MISTAKES))
def test_a_decoding_commands_mistake_is_one_line_with_exit_2(case: str, tmp_path: pathlib.Path) -> None:
    command, text = DECODING_COMMAND_MISTAKES[case]
    out = tmp_path / "out"
    args = [sys.executable, "-m", *command, f"--workdir={tmp_path / 'no_run'}"]
    if command[0] == "attention_jax.plot_attention":
        args.append(f"--out={out}.png")
    completed = subprocess.run(args, cwd=REPO_ROOT, input="Hallo\n", capture_output=True, text=True, timeout=300,
                               env=train_support.subprocess_env(str(tmp_path / "cache")))
    lines = completed.stderr.strip().splitlines()
    program = command[0]  # As typed after python -m (user_errors.program_name).
    assert completed.returncode == 2 and len(lines) == 1, completed.stderr[-3000:]
    assert lines[0].startswith(f"{program}: error: ") and text in lines[0], lines
    assert not (tmp_path / "no_run").exists() and not pathlib.Path(f"{out}.png").exists()  # Nothing written.


# A command line's usage mistake (a required flag left out, an argument no command takes): absl's
# app.run printed the module's whole docstring before the message and exited 1, the status of a crash.
USAGE_MISTAKES = {
    "main-no_workdir": (["attention_jax.main", "--config=configs/tiny.py"], "attention_jax.main",
                        "--config and --workdir are required"),
    "translate-extra_argument": (["attention_jax.translate", "--workdir=no_run", "hello"], "attention_jax.translate",
                                 "Unexpected arguments: ['hello']"),
    "report-no_root": (["attention_jax.report"], "attention_jax.report", "usage: python -m attention_jax.report ROOT"),
    "count_params-no_config": (["attention_jax.count_params"], "attention_jax.count_params", "--config is required"),
    "count_params-bad_value": (["attention_jax.count_params", "--config=configs/tiny.py", "--config.num_heads=0"],
                               "attention_jax.count_params", "bad config: --config: num_heads must be positive; got 0"),
    "export_results-no_root": (["launch.export_results"], "launch.export_results", "pass --root=SWEEP_ROOT"),
    # The modules run with python -m outside attention_jax.commands: absl's parser printed two lines, exit 1.
    **{f"{module.rpartition('.')[2]}-mistyped_flag": ([module, "--wrokdir=no_run"], module,
                                                      "Unknown command line flag 'wrokdir'")
       for module in ("attention_jax.evaluation.length_bucket_evaluation", "attention_jax.data.length_buckets",
                      "launch.export_results",
                      "attention_jax.data.gettext_corpus", "attention_jax.evaluation.position_losses")},
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(USAGE_MISTAKES))
def test_a_usage_mistake_is_one_line_with_exit_2(case: str, tmp_path: pathlib.Path) -> None:
    command, program, text = USAGE_MISTAKES[case]
    completed = subprocess.run([sys.executable, "-m", *command], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=300, env=train_support.subprocess_env(str(tmp_path / "cache")))
    lines = completed.stderr.strip().splitlines()
    assert completed.returncode == 2 and len(lines) == 1, completed.stderr[-3000:]
    assert lines[0].startswith(f"{program}: error: ") and text in lines[0], lines
