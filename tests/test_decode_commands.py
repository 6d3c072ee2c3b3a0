"""The translate / evaluate / plot_attention commands on a workdir, and loading runs for inference.

The workdir follows the training contract (``config.json`` + orbax checkpoints written with the training
side's ``checkpoints`` module) and holds random parameters of a one-layer model on a tiny TSV corpus:
the commands' plumbing, ordering, averaging and error messages are what is checked, not quality.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest

from attention_jax import run_files
from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.data import input_pipeline
from attention_jax.decoding import inference
from tests.support import decoding_runs, train_support
from tests.support.decoding_runs import STEPS

pytestmark = pytest.mark.end_to_end

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> pathlib.Path:
    return decoding_runs.make_random_run(tmp_path_factory.mktemp("decode_commands"))


def _run(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess:
    environment = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
                       XLA_FLAGS=train_support.child_xla_flags())
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, env=environment, input=stdin,
                          capture_output=True, timeout=600)


def test_load_run_and_average_last_checkpoints(workdir):
    run = inference.load_run(str(workdir))
    assert run.checkpoint == "latest" and run.model_config.num_layers == 1
    first, _ = params_checkpoints.load_for_inference(str(workdir), str(STEPS[0]))
    second, _ = params_checkpoints.load_for_inference(str(workdir), str(STEPS[1]))
    jax.tree_util.tree_map(np.testing.assert_array_equal, run.params, second)
    averaged = inference.load_run(str(workdir), average_last=2)
    assert averaged.checkpoint == f"average of steps {list(STEPS)}"
    jax.tree_util.tree_map(lambda mean, a, b: np.testing.assert_allclose(mean, (np.asarray(a) + b) / 2, rtol=1e-6),
                           averaged.params, first, second)
    with pytest.raises(ValueError, match="holds 2"):
        inference.load_run(str(workdir), average_last=3)


def test_load_run_errors_name_the_problem(workdir, tmp_path):
    with pytest.raises(FileNotFoundError, match="No work directory"):
        inference.load_run(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="step 7"):
        inference.load_run(str(workdir), "7")
    with pytest.raises(FileNotFoundError, match="averaged"):
        inference.load_run(str(workdir), "averaged")
    other = tmp_path / "other_config"
    shutil.copytree(workdir, other)
    config = json.loads((other / "config.json").read_text())
    config["d_model"] = 48
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="does not fit the model"):
        inference.load_run(str(other))
    with pytest.raises(ValueError, match="does not fit the model"):
        inference.load_run(str(other), average_last=2)


@pytest.mark.slow
def test_translate_command(workdir):
    long_line = " ".join(["the big green house"] * 12)
    lines = ["the house is small", "", "my \udcff dog runs", long_line, "a cat sleeps"]
    stdin = b"the house is small\n\nmy \xff dog runs\r\n" + long_line.encode() + b"\na cat sleeps"
    completed = _run(["attention_jax.translate", f"--workdir={workdir}", "--batch_size=2"], stdin)
    stderr = completed.stderr.decode("utf-8", "replace")
    assert completed.returncode == 0, stderr[-3000:]
    outputs = completed.stdout.decode("utf-8").split("\n")
    assert len(outputs) == len(lines) + 1 and outputs[-1] == ""
    assert outputs[1] == ""
    assert "line 3 is not valid UTF-8" in stderr and "truncated" in stderr
    translator = inference.make_translator(inference.load_run(str(workdir)), batch_size=2)
    lines[2] = "my \ufffd dog runs"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert outputs[:-1] == translator.translate(lines)


@pytest.mark.slow
def test_translate_command_reports_a_missing_workdir(tmp_path):
    completed = _run(["attention_jax.translate", f"--workdir={tmp_path / 'nothing'}"], b"hello\n")
    assert completed.returncode != 0
    assert b"No work directory" in completed.stderr and b"Traceback" not in completed.stderr


@pytest.mark.slow
def test_evaluate_command(workdir):
    completed = _run(["attention_jax.evaluate", f"--workdir={workdir}", "--split=test", "--num_examples=4",
                      "--average_last=2", "--beam_size=2"])
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    assert b"BLEU = " in completed.stdout and b"tok:13a" in completed.stdout
    report = json.loads((workdir / "eval_test.average_last2.json").read_text())
    assert report["checkpoint"] == f"average of steps {list(STEPS)}"
    assert report["num_examples"] == 4 and report["beam_size"] == 2
    assert 0.0 <= report["bleu"] <= 100.0 and report["perplexity"] > 1.0
    assert len((workdir / "eval_test.average_last2.hypotheses.txt").read_text(encoding="utf-8").split("\n")) == 5


@pytest.mark.slow
def test_plot_attention_command(workdir, tmp_path):
    out = tmp_path / "cross.png"
    completed = _run(["attention_jax.plot_attention", f"--workdir={workdir}", "--text=the house is small",
                      f"--out={out}", "--kind=cross", "--head=all"])
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"the house is small -> " in completed.stdout


def test_a_workdir_with_its_tokenizer_opens_no_corpus(workdir, tmp_path, monkeypatch):
    own = tmp_path / "own_tokenizer"
    shutil.copytree(workdir, own)
    data = input_pipeline.get_datasets(checkpoints.read_config(str(own)).data)
    checkpoints.write_tokenizer(str(own), data.tokenizer.model_proto)

    def no_corpus(*args, **kwargs):
        raise AssertionError("load_run opened the corpus although the workdir has tokenizer.model")

    monkeypatch.setattr(input_pipeline, "get_datasets", no_corpus)
    run = inference.load_run(str(own))
    sentence = "the big dog runs"
    assert run.tokenizer.encode(sentence) == data.tokenizer.encode(sentence)
    translator = inference.make_translator(run, beam_size=2)
    assert len(translator.translate([sentence, ""])) == 2
    with pytest.raises(AssertionError, match="opened the corpus"):
        run.data  # Opened only on first use (evaluate needs it; translation does not).


def test_translate_benchmark_compares_stagings_on_a_run(workdir, tmp_path):
    out = tmp_path / "translate.json"
    completed = _run(["benchmarks.translate", f"--workdir={workdir}", "--checkpoint=latest",
                      f"--sources={workdir.parent / 'corpus' / 'dev.tsv'}", "--cache_stages=1,2",
                      "--batch_size=4", f"--out={out}"])
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    report = json.loads(out.read_text())
    assert report["num_sentences"] == 6 and report["identical_translations"]
    assert [run["cache_stages"] for run in report["runs"]] == [1, 2]
    for run in report["runs"]:
        assert run["compile_s"] == pytest.approx(run["cold_s"] - run["warm_s"], abs=0.011)
    missing = _run(["benchmarks.translate", f"--workdir={workdir}", "--sources=/nonexistent.tsv"])
    assert missing.returncode != 0 and b"No sources file" in missing.stderr


def _files(directory: pathlib.Path) -> dict[str, int]:
    return {str(path.relative_to(directory)): path.stat().st_mtime_ns for path in directory.rglob("*")}


def _error_lines(stderr: bytes) -> list[str]:
    """The command's own lines on stderr, without absl's log lines (``I1201 ...``, ``W1201 ...``)."""
    return [line for line in stderr.decode("utf-8", "replace").splitlines()
            if line.strip() and not (line[:1] in "IWE" and line[1:5].isdigit())]


@pytest.mark.slow
def test_a_run_without_its_tokenizer_is_refused_in_one_line(workdir, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(workdir, run_dir)
    (run_dir / run_files.TOKENIZER_FILE).unlink()  # The corpus may have changed since: no rebuilt tokenizer.
    with pytest.raises(FileNotFoundError, match="tokenizer.model is missing"):
        inference.load_run(str(run_dir))
    before = _files(run_dir)
    translated = _run(["attention_jax.translate", f"--workdir={run_dir}"], b"the house is small\n")
    evaluated = _run(["attention_jax.evaluate", f"--workdir={run_dir}", "--split=dev", "--num_examples=2"])
    for completed in (translated, evaluated):
        assert completed.returncode == 2 and completed.stdout == b"", completed.stderr.decode()[-3000:]
        errors = _error_lines(completed.stderr)
        assert len(errors) == 1 and "tokenizer.model is missing" in errors[0], errors
    assert _files(run_dir) == before


def test_latest_checkpoint_rotated_away_while_read_loads_the_newest(workdir, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    shutil.copytree(workdir, run_dir)
    steps_dir = run_dir / run_files.CHECKPOINT_DIR
    shutil.rmtree(steps_dir / str(STEPS[0]))  # keep_checkpoints=1: the trainer keeps one checkpoint.
    restore = params_checkpoints.restore_params
    calls = []

    def trainer_saves_and_rotates(directory, step, abstract):  # A newer save lands, the one being read goes.
        calls.append(step)
        if len(calls) == 1:
            shutil.copytree(steps_dir / str(step), steps_dir / "30")
            shutil.rmtree(steps_dir / str(step))
        return restore(directory, step, abstract)

    monkeypatch.setattr(params_checkpoints, "restore_params", trainer_saves_and_rotates)
    run = inference.load_run(str(run_dir))
    assert calls == [STEPS[1], 30] and run.checkpoint == "latest"
    expected, _ = params_checkpoints.load_for_inference(str(workdir), str(STEPS[1]))
    jax.tree_util.tree_map(np.testing.assert_array_equal, run.params, expected)


@pytest.mark.slow
def test_evaluate_on_a_read_only_run_prints_its_figures_then_fails_in_one_line(workdir, tmp_path):
    from tests.support.read_only import read_only

    run_dir = tmp_path / "run"
    shutil.copytree(workdir, run_dir)
    before = _files(run_dir)
    with read_only(run_dir):
        completed = _run(["attention_jax.evaluate", f"--workdir={run_dir}", "--split=dev", "--num_examples=2",
                          "--beam_size=1"])
    assert completed.returncode == 2, completed.stderr.decode()[-3000:]
    assert b"BLEU = " in completed.stdout and b"perplexity = " in completed.stdout
    errors = _error_lines(completed.stderr)
    assert len(errors) == 1 and "evaluate: error: cannot write the report" in errors[0], errors
    assert "--output" in errors[0] and _files(run_dir) == before


@pytest.mark.slow
def test_average_checkpoints_refuses_a_read_only_run_before_reading_it(workdir, tmp_path):
    from tests.support.read_only import read_only

    run_dir = tmp_path / "run"
    shutil.copytree(workdir, run_dir)
    before = _files(run_dir)
    with read_only(run_dir):
        completed = _run(["attention_jax.average_checkpoints", f"--workdir={run_dir}", "--last=2"])
    assert completed.returncode == 2, completed.stderr.decode()[-3000:]
    errors = _error_lines(completed.stderr)
    assert len(errors) == 1 and ("read-only file system" in errors[0] or "not writable" in errors[0]), errors
    assert "Traceback" not in completed.stderr.decode() and _files(run_dir) == before
