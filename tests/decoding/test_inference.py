"""A run exported as a directory (weights, config, tokenizer) opens with ``load_run`` and translates as the run;
its export.json and safetensors metadata name the run by its absolute path.

The run holds random parameters of a one-layer model (tests/support/decoding_runs.py): what is checked is
that the export carries everything translation needs, unchanged, and that plain ``safetensors``, ``json``
and ``sentencepiece`` read it without this package.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest
import sentencepiece as spm
from safetensors import safe_open
from safetensors.numpy import load_file

from attention_jax.decoding import inference
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from tests.support import REPO_ROOT, decoding_runs, train_support
from tests.support.fake_data import tiny_experiment

SENTENCES = ["the house is small", "my cat sleeps", "a big green dog runs"]


def _export(run: inference.TrainedRun, out: pathlib.Path) -> dict:
    return inference.export_run(run, str(out), step=decoding_runs.STEPS[-1])


@pytest.mark.end_to_end
def test_an_export_loads_with_load_run_and_translates_as_the_run(workdir, tmp_path):
    run = inference.load_run(str(workdir))
    out = tmp_path / "export"
    record = _export(run, out)
    assert sorted(os.listdir(out)) == sorted(record["files"])
    assert inference._is_export_directory(str(out)) and not inference._is_export_directory(str(workdir))
    exported = inference.load_run(str(out))
    assert exported.checkpoint == f"exported (latest, step {decoding_runs.STEPS[-1]})"
    assert exported.model_config == run.model_config and exported.config.decoding == run.config.decoding
    assert jax.tree.structure(exported.params) == jax.tree.structure(run.params)
    jax.tree.map(np.testing.assert_array_equal, exported.params, run.params)
    assert [exported.tokenizer.encode(text) for text in SENTENCES] == [run.tokenizer.encode(text) for text in SENTENCES]
    translations = inference.make_translator(run, beam_size=2, batch_size=4).translate(SENTENCES)
    assert inference.make_translator(exported, beam_size=2, batch_size=4).translate(SENTENCES) == translations


@pytest.mark.end_to_end
def test_plain_safetensors_json_and_sentencepiece_read_an_export(workdir, tmp_path):
    run = inference.load_run(str(workdir))
    out = tmp_path / "export"
    _export(run, out)
    tensors = load_file(str(out / run_files.EXPORT_PARAMS_FILE))
    config = json.loads((out / run_files.CONFIG_FILE).read_text())
    tokenizer = spm.SentencePieceProcessor(model_file=str(out / run_files.TOKENIZER_FILE))
    embedding = tensors["shared_embedding/embedding"]
    assert embedding.shape == (tokenizer.get_piece_size(), config["d_model"]) and embedding.dtype == np.float32
    np.testing.assert_array_equal(embedding, run.params["shared_embedding"]["embedding"])
    ids = tokenizer.encode(SENTENCES[0], add_eos=True)
    assert ids == run.tokenizer.encode(SENTENCES[0])


@pytest.mark.end_to_end
def test_an_export_refuses_other_checkpoints_and_unsafe_targets(workdir, tmp_path):
    run = inference.load_run(str(workdir))
    out = tmp_path / "export"
    _export(run, out)
    with pytest.raises(UserInputError, match=r"is an export of one checkpoint .* checkpoint 'averaged' is not in it"):
        inference.load_run(str(out), "averaged")
    with pytest.raises(UserInputError, match="--average_last=2 is not in it"):
        inference.load_run(str(out), average_last=2)
    assert inference.load_run(str(out), inference.EXPORTED_CHECKPOINT).checkpoint.startswith("exported")
    with pytest.raises(UserInputError, match="holding other files .* name a new or empty directory"):
        inference.export_run(run, str(workdir))  # A training run: its config.json would be overwritten.
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(UserInputError, match="is a file"):
        inference.check_export_target(str(tmp_path / "a_file"))
    (tmp_path / "empty").mkdir()
    for fine in (out, tmp_path / "empty", tmp_path / "new"):  # An earlier export is replaced; new ones made.
        inference.check_export_target(str(fine))


@pytest.mark.end_to_end
@pytest.mark.slow
def test_export_and_translate_commands_on_an_export_directory(workdir, tmp_path):
    environment = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
                       XLA_FLAGS=train_support.child_xla_flags())

    def command(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, env=environment, input=stdin,
                              capture_output=True, timeout=600)

    out = tmp_path / "export"
    exported = command("attention_jax.export", f"--workdir={workdir}", "--format=directory", f"--out={out}")
    assert exported.returncode == 0, exported.stderr.decode()[-3000:]
    record = json.loads(exported.stdout.decode().strip().splitlines()[-1])
    assert record["format"] == "directory" and record["step"] == decoding_runs.STEPS[-1]
    assert record["bytes"] == os.path.getsize(out / run_files.EXPORT_PARAMS_FILE)
    translated = command("attention_jax.translate", f"--workdir={out}", "--beam_size=2",
                         stdin="\n".join(SENTENCES).encode() + b"\n")
    assert translated.returncode == 0, translated.stderr.decode()[-3000:]
    expected = inference.make_translator(inference.load_run(str(workdir)), beam_size=2).translate(SENTENCES)
    assert translated.stdout.decode().splitlines() == expected
    refused = command("attention_jax.export", f"--workdir={workdir}", "--format=directory", f"--out={workdir}")
    assert refused.returncode == 2
    assert refused.stderr.decode().strip().startswith(f"attention_jax.export: error: --out={workdir} is a directory")


def test_export_json_names_the_run_by_an_absolute_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    tokenizer = tmp_path / "runs" / "tiny" / "tokenizer.model"
    tokenizer.write_bytes(b"not a real model; copied as it is")
    monkeypatch.chdir(tmp_path)  # The command line's --workdir=runs/tiny, relative to here.
    params = {"dense": {"kernel": np.ones((2, 3), np.float32)}}
    inference._write_export_directory("out", params, tiny_experiment(), str(tokenizer), workdir="runs/tiny",
                                     checkpoint="latest", step=4)
    monkeypatch.chdir(tmp_path / "runs")  # Read from elsewhere, the record still finds the run.
    record = json.loads((tmp_path / "out" / run_files.EXPORT_RECORD_FILE).read_text())
    assert record["workdir"] == str(tmp_path / "runs" / "tiny") and pathlib.Path(record["workdir"]).is_dir()
    with safe_open(str(tmp_path / "out" / run_files.EXPORT_PARAMS_FILE), framework="numpy") as tensors:
        assert tensors.metadata()["workdir"] == record["workdir"]
