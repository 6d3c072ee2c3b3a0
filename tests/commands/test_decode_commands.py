"""The translate / evaluate / plot_attention commands on a workdir, and loading runs for inference.

The workdir follows the training contract (``config.json`` + orbax checkpoints written with the training
side's ``checkpoints`` module) and holds random parameters of a one-layer model on a tiny TSV corpus:
the commands' plumbing, ordering, averaging and error messages are what is checked, not quality.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest
import sacrebleu

from attention_jax.checkpointing import checkpoints, params_checkpoints
from attention_jax.commands import evaluation_scalars
from attention_jax.data import input_pipeline
from attention_jax.decoding import inference
from attention_jax.foundation import run_files
from tests.support import REPO_ROOT, event_files, train_support
from tests.support.decoding_runs import STEPS

pytestmark = pytest.mark.end_to_end


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
    assert b"the first 4 of the 6 pairs of the test split" in completed.stdout
    # Four of the six test pairs: the report says so in its name and never stands for the whole split.
    assert not (workdir / "eval_test.average_last2.json").exists()
    report = json.loads((workdir / "eval_test_first4.average_last2.json").read_text())
    assert report["checkpoint"] == f"average of steps {list(STEPS)}"
    assert report["num_examples"] == 4 and report["beam_size"] == 2
    assert report["partial"] is True and report["available_examples"] == 6 and report["split"] == "test"
    assert 0.0 <= report["bleu"] <= 100.0 and report["perplexity"] > 1.0
    assert 0.0 <= report["chrf"] <= 100.0 and report["ter"] >= 0.0 and "tok:tercom" in report["ter_signature"]
    assert len((workdir / "eval_test_first4.average_last2.hypotheses.txt").read_text(encoding="utf-8").split("\n")) == 5
    translations = (workdir / "eval_test_first4.average_last2.translations.jsonl").read_text(encoding="utf-8")
    test_pairs = [line.split("\t") for line in (workdir.parent / "corpus" / "test.tsv").read_text().splitlines()]
    assert [[row["source"], row["reference"]] for row in map(json.loads, translations.splitlines())] == test_pairs[:4]


def _parallel_text(workdir: pathlib.Path, directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """The run's dev pairs as two files in ``directory``, ``news.en`` and ``news.de``, one sentence per line."""
    pairs = [line.split("\t") for line in (workdir.parent / "corpus" / "dev.tsv").read_text().splitlines()]
    source, reference = directory / "news.en", directory / "news.de"
    source.write_text("".join(english + "\n" for english, _ in pairs), encoding="utf-8")
    reference.write_text("".join(german + "\n" for _, german in pairs), encoding="utf-8")
    return source, reference


@pytest.mark.slow
def test_evaluate_on_two_files_prints_bleu_chrf_and_ter(workdir, tmp_path):
    source, reference = _parallel_text(workdir, tmp_path)
    completed = _run(["attention_jax.evaluate", f"--workdir={workdir}", f"--source={source}",
                      f"--reference={reference}", "--beam_size=2"])
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    stdout = completed.stdout.decode("utf-8")
    report_path = workdir / "eval_file_news.latest.json"
    report = json.loads(report_path.read_text())
    assert report["split"] is None and report["partial"] is False and report["num_examples"] == 6
    assert (report["source_file"], report["reference_file"]) == (str(source), str(reference))
    rows = [json.loads(line) for line in
            (workdir / "eval_file_news.latest.translations.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["source"] for row in rows] == source.read_text(encoding="utf-8").splitlines()
    assert [row["reference"] for row in rows] == reference.read_text(encoding="utf-8").splitlines()
    hypotheses = (workdir / "eval_file_news.latest.hypotheses.txt").read_text(encoding="utf-8").splitlines()
    assert [row["hypothesis"] for row in rows] == hypotheses
    references = [reference.read_text(encoding="utf-8").splitlines()]
    for name, label, metric in (("bleu", "BLEU", sacrebleu.metrics.BLEU()), ("chrf", "chrF2", sacrebleu.metrics.CHRF()),
                                ("ter", "TER", sacrebleu.metrics.TER())):
        expected = metric.corpus_score(hypotheses, references).score  # sacrebleu on the files written.
        assert report[name] == pytest.approx(expected, abs=1e-9)
        assert report[f"{name}_signature"] == str(metric.get_signature())
        assert f"{label} = {expected:.2f}  ({metric.get_signature()})" in stdout
    assert f"wrote {report_path}" in stdout
    # Another directory's news.en gets a report of its own; the first one's is left as it was.
    (tmp_path / "other").mkdir()
    other_source, other_reference = tmp_path / "other" / "news.en", tmp_path / "other" / "news.de"
    other_source.write_text("".join(source.read_text(encoding="utf-8").splitlines(True)[:3]), encoding="utf-8")
    other_reference.write_text("".join(reference.read_text(encoding="utf-8").splitlines(True)[:3]), encoding="utf-8")
    first_report = report_path.read_bytes()
    completed = _run(["attention_jax.evaluate", f"--workdir={workdir}", f"--source={other_source}",
                      f"--reference={other_reference}", "--beam_size=2"])
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    other_path = workdir / f"eval_{run_files.parallel_text_name(str(other_source), str(workdir))}.latest.json"
    assert other_path != report_path and f"wrote {other_path}" in completed.stdout.decode("utf-8")
    other_report = json.loads(other_path.read_text())
    assert other_report["source_file"] == str(other_source) and other_report["num_examples"] == 3
    assert report_path.read_bytes() == first_report


@pytest.mark.slow
def test_evaluate_refuses_a_bad_parallel_text_or_a_partial_report_under_a_whole_splits_name(workdir, tmp_path):
    source, reference = _parallel_text(workdir, tmp_path)
    reference.write_text("".join(reference.read_text().splitlines(keepends=True)[:-1]))  # One line short.
    before = sorted(path.name for path in workdir.iterdir())
    cases = [([f"--source={source}", f"--reference={reference}"], f"--source={source} has 6 lines but "
              f"--reference={reference} has 5"),
             ([f"--source={source}"], "--source needs --reference"),
             (["--split=test", "--num_examples=2", f"--output={workdir / 'eval_test.json'}"],
              f"--output={workdir / 'eval_test.json'} is the name of the whole test split's report")]
    for flags, expected in cases:
        completed = _run(["attention_jax.evaluate", f"--workdir={workdir}", *flags])
        stderr = completed.stderr.decode()
        errors = [line for line in stderr.splitlines() if "evaluate: error:" in line]
        assert completed.returncode == 2 and "Traceback" not in stderr, stderr[-3000:]
        assert len(errors) == 1 and expected in errors[0], stderr[-3000:]
    assert sorted(path.name for path in workdir.iterdir()) == before  # Nothing written.


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


@pytest.mark.slow
def test_a_whole_split_evaluation_adds_its_figures_to_the_runs_tensorboard(workdir, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(workdir, run_dir)
    completed = _run(["attention_jax.evaluate", f"--workdir={run_dir}", "--split=test"])
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    report = json.loads((run_dir / "eval_test.latest.json").read_text())
    scalars = event_files.scalars(run_dir / run_files.TENSORBOARD_DIR)
    assert scalars.keys() == {"evaluate/test/bleu", "evaluate/test/perplexity"}
    [(step, bleu)] = scalars["evaluate/test/bleu"]
    [(_, perplexity)] = scalars["evaluate/test/perplexity"]
    assert step == STEPS[-1]  # The latest checkpoint's step.
    assert bleu == pytest.approx(report["bleu"], rel=1e-6, abs=1e-6)
    assert perplexity == pytest.approx(report["perplexity"], rel=1e-6)
    assert b"added evaluate/test/bleu and evaluate/test/perplexity at step 20" in completed.stdout
    assert not (run_dir / run_files.METRICS_FILE).exists()  # Training's record is not touched.


def test_evaluation_series_and_steps_name_the_parameters_and_settings(workdir):
    assert evaluation_scalars.series("validation", "latest") == "evaluate/validation"
    assert evaluation_scalars.series("test", "10") == "evaluate/test"
    assert evaluation_scalars.series("test", "averaged") == "evaluate/test/averaged"
    assert evaluation_scalars.series("test", "latest", 5, {"beam": 1}) == "evaluate/test/average_last5/beam1"
    assert evaluation_scalars.series("test", "best", 0, {"beam": 8, "alpha": 1.0}) == "evaluate/test/best/beam8_alpha1"
    assert evaluation_scalars._checkpoint_step(str(workdir), "latest") == STEPS[-1]
    assert evaluation_scalars._checkpoint_step(str(workdir), str(STEPS[0])) == STEPS[0]
    assert evaluation_scalars._checkpoint_step(str(workdir), "latest", average_last=2) == STEPS[-1]


def _files(directory: pathlib.Path) -> dict[str, int]:
    return {str(path.relative_to(directory)): path.stat().st_mtime_ns for path in directory.rglob("*")}


def _error_lines(stderr: bytes) -> list[str]:
    """The command's own lines on stderr, without log lines (short ``12:00:00 I ...``, absl's ``I1201 ...``)."""
    short = re.compile(r"^\d\d:\d\d:\d\d [DIWE] ")
    return [line for line in stderr.decode("utf-8", "replace").splitlines()
            if line.strip() and not (line[:1] in "IWE" and line[1:5].isdigit()) and not short.match(line)]


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


def _info_line_sources(stderr: bytes) -> set[str]:
    """The files named by absl's INFO lines (``I1201 12:00:00.000 123 train.py:45] ...``) in ``stderr``."""
    pattern = rb"^I\d{4} [\d:.]+ +\d+ ([\w.]+):\d+\]"
    return {match.group(1).decode() for match in re.finditer(pattern, stderr, re.MULTILINE)}


@pytest.mark.slow
def test_commands_log_only_their_own_info_lines_unless_verbosity_asks(workdir, tmp_path):
    ours = {path.name for directory in ("attention_jax", "launch") for path in (REPO_ROOT / directory).rglob("*.py")}
    run_dir = tmp_path / "run"
    shutil.copytree(workdir, run_dir)
    absl_format = "--log_format=absl"  # The long prefix names each line's source file.
    averaged = _run(["attention_jax.average_checkpoints", f"--workdir={run_dir}", "--last=2", absl_format])
    assert averaged.returncode == 0, averaged.stderr.decode()[-3000:]
    assert _info_line_sources(averaged.stderr) <= ours, averaged.stderr.decode()[-3000:]  # No orbax INFO.
    assert len(averaged.stderr.decode().splitlines()) < 15, averaged.stderr.decode()
    evaluated = _run(["attention_jax.evaluate", f"--workdir={run_dir}", "--split=test", "--num_examples=2",
                      "--beam_size=1", absl_format])
    assert evaluated.returncode == 0, evaluated.stderr.decode()[-3000:]
    assert _info_line_sources(evaluated.stderr) <= ours, evaluated.stderr.decode()[-3000:]  # No orbax/TFDS INFO.
    verbose = _run(["attention_jax.average_checkpoints", f"--workdir={run_dir}", "--last=2", "--verbosity=1",
                    absl_format])
    assert verbose.returncode == 0, verbose.stderr.decode()[-3000:]
    assert _info_line_sources(verbose.stderr) - ours, verbose.stderr.decode()[-3000:]  # Everything at --verbosity=1.
