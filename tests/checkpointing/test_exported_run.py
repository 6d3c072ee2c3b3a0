"""A run exported as a directory (weights, config, tokenizer) opens with ``load_run`` and translates as the run.

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
from safetensors.numpy import load_file

from attention_jax.checkpointing import exported_run
from attention_jax.decoding import inference
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from tests.support import REPO_ROOT, decoding_runs, train_support

pytestmark = pytest.mark.end_to_end

SENTENCES = ["the house is small", "my cat sleeps", "a big green dog runs"]


def _export(run: inference.TrainedRun, out: pathlib.Path) -> dict:
    return inference.export_run(run, str(out), step=decoding_runs.STEPS[-1])


def test_an_export_loads_with_load_run_and_translates_as_the_run(workdir, tmp_path):
    run = inference.load_run(str(workdir))
    out = tmp_path / "export"
    record = _export(run, out)
    assert sorted(os.listdir(out)) == sorted(record["files"])
    assert exported_run.is_export_directory(str(out)) and not exported_run.is_export_directory(str(workdir))
    exported = inference.load_run(str(out))
    assert exported.checkpoint == f"exported (latest, step {decoding_runs.STEPS[-1]})"
    assert exported.model_config == run.model_config and exported.config.decoding == run.config.decoding
    assert jax.tree.structure(exported.params) == jax.tree.structure(run.params)
    jax.tree.map(np.testing.assert_array_equal, exported.params, run.params)
    assert [exported.tokenizer.encode(text) for text in SENTENCES] == [run.tokenizer.encode(text) for text in SENTENCES]
    translations = inference.make_translator(run, beam_size=2, batch_size=4).translate(SENTENCES)
    assert inference.make_translator(exported, beam_size=2, batch_size=4).translate(SENTENCES) == translations


def test_plain_safetensors_json_and_sentencepiece_read_an_export(workdir, tmp_path):
    run = inference.load_run(str(workdir))
    out = tmp_path / "export"
    _export(run, out)
    tensors = load_file(str(out / exported_run.PARAMS_FILE))
    config = json.loads((out / run_files.CONFIG_FILE).read_text())
    tokenizer = spm.SentencePieceProcessor(model_file=str(out / run_files.TOKENIZER_FILE))
    embedding = tensors["shared_embedding/embedding"]
    assert embedding.shape == (tokenizer.get_piece_size(), config["d_model"]) and embedding.dtype == np.float32
    np.testing.assert_array_equal(embedding, run.params["shared_embedding"]["embedding"])
    ids = tokenizer.encode(SENTENCES[0], add_eos=True)
    assert ids == run.tokenizer.encode(SENTENCES[0])


def test_an_export_refuses_other_checkpoints_and_unsafe_targets(workdir, tmp_path):
    run = inference.load_run(str(workdir))
    out = tmp_path / "export"
    _export(run, out)
    with pytest.raises(UserInputError, match=r"is an export of one checkpoint .* checkpoint 'averaged' is not in it"):
        inference.load_run(str(out), "averaged")
    with pytest.raises(UserInputError, match="--average_last=2 is not in it"):
        inference.load_run(str(out), average_last=2)
    assert inference.load_run(str(out), exported_run.EXPORTED_CHECKPOINT).checkpoint.startswith("exported")
    with pytest.raises(UserInputError, match="holding other files .* name a new or empty directory"):
        inference.export_run(run, str(workdir))  # A training run: its config.json would be overwritten.
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(UserInputError, match="is a file"):
        exported_run.check_export_target(str(tmp_path / "a_file"))
    (tmp_path / "empty").mkdir()
    for fine in (out, tmp_path / "empty", tmp_path / "new"):  # An earlier export is replaced; new ones made.
        exported_run.check_export_target(str(fine))


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
    assert record["bytes"] == os.path.getsize(out / exported_run.PARAMS_FILE)
    translated = command("attention_jax.translate", f"--workdir={out}", "--beam_size=2",
                         stdin="\n".join(SENTENCES).encode() + b"\n")
    assert translated.returncode == 0, translated.stderr.decode()[-3000:]
    expected = inference.make_translator(inference.load_run(str(workdir)), beam_size=2).translate(SENTENCES)
    assert translated.stdout.decode().splitlines() == expected
    refused = command("attention_jax.export", f"--workdir={workdir}", "--format=directory", f"--out={workdir}")
    assert refused.returncode == 2
    assert refused.stderr.decode().strip().startswith(f"attention_jax.export: error: --out={workdir} is a directory")
