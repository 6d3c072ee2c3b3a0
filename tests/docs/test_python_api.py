"""docs/python_api.md run as the page writes it, and the exports it describes (issue 63, items 3 and 4).

A tiny run (one layer, d_model 32, two training steps on a small TSV corpus, a real SentencePiece
tokenizer) is trained once for the module and placed at ``runs/tiny`` of a scratch directory; every
``python`` block of the page then runs there in order, in one namespace, and each ``bash`` block's
``python -m attention_jax.export`` command runs as a user would. Beyond the page: the safetensors file
holds each leaf of the tree once under its documented name, the ``jax.export`` artifacts reloaded in a
fresh process give the logits and translations of the exporting one, the command's mistakes are one
line and exit status 2 before anything is written, and ``import attention_jax`` imports no JAX.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import textwrap
from typing import Any, Iterator

import jax
import numpy as np
import pytest

import attention_jax
from attention_jax.checkpointing import safetensors_params
from attention_jax.decoding import decode, exported_functions, inference
from attention_jax.experiment import sections
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.training import train
from tests.support import REPO_ROOT, fake_data, train_support

pytestmark = pytest.mark.end_to_end  # The tests that need the trained run are also marked slow.

PAGE = REPO_ROOT / "docs" / "python_api.md"
WORDS_EN = "The small child sleeps because the woman reads a book . dog runs big house".split()
WORDS_DE = "Das kleine Kind schläft , weil die Frau ein Buch liest . Der Hund läuft großes Haus".split()
PAGE_SENTENCES = [("The small child sleeps because the woman reads a book.",
                   "Das kleine Kind schläft, weil die Frau ein Buch liest."), ("The dog runs.", "Der Hund läuft.")]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def _export_commands() -> list[list[str]]:
    commands = [shlex.split(block.replace("\\\n", " ")) for block in _blocks("bash")]
    return [argv[3:] for argv in commands if argv[:3] == ["python", "-m", "attention_jax.export"]]


def _write_corpus(directory: pathlib.Path) -> None:
    rng = np.random.default_rng(0)
    directory.mkdir()
    for name, count in (("train", 80), ("dev", 4), ("test", 4)):
        lines = [f"{source}\t{target}" for source, target in PAGE_SENTENCES]
        for _ in range(count - len(lines)):
            picks = rng.integers(0, len(WORDS_EN), rng.integers(2, 8))
            lines.append(" ".join(WORDS_EN[i] for i in picks) + "\t" + " ".join(WORDS_DE[i] for i in picks))
        (directory / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _working_directory(directory: pathlib.Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(previous)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, cache_dir: str) -> pathlib.Path:
    """A finished two-step run of a one-layer model on a TSV corpus holding the page's sentences."""
    tmp = tmp_path_factory.mktemp("python_api")
    _write_corpus(tmp / "corpus")
    config = fake_data.tiny_config(dataset=f"tsv:{tmp / 'corpus'}", data_dir=str(tmp / "tfds"), vocab_size=128,
                                   max_len=40, tokens_per_batch=320, num_train_steps=2, eval_every_steps=0,
                                   checkpoint_every_steps=2, num_eval_batches=1)
    workdir = tmp / "run"
    assert train.train_and_evaluate(sections.build_experiment(config, "test_python_api"), str(workdir))["finished"]
    return workdir


@pytest.fixture(scope="module")
def page(tiny_run: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], pathlib.Path]:
    """The page's Python blocks run in order in one namespace, from a directory whose ``runs/tiny`` is the run."""
    directory = tmp_path_factory.mktemp("page")
    (directory / "runs").mkdir()
    (directory / "runs" / "tiny").symlink_to(tiny_run, target_is_directory=True)
    namespace: dict[str, Any] = {"__name__": "python_api_page"}
    with _working_directory(directory):
        for number, block in enumerate(_blocks("python")):
            exec(compile(block, f"docs/python_api.md, python block {number + 1}", "exec"), namespace)
    return namespace, directory


@pytest.mark.slow
def test_the_pages_python_blocks_run_as_written(page: tuple[dict[str, Any], pathlib.Path]) -> None:
    namespace, directory = page
    run = namespace["run"]
    assert isinstance(run, attention_jax.TrainedRun) and run.checkpoint == "latest"
    assert len(namespace["translations"]) == 2 and all(isinstance(text, str) for text in namespace["translations"])
    batch, logits = namespace["batch"], namespace["logits"]
    assert logits.shape == (2, batch["targets"].shape[1], run.model_config.vocab_size)
    assert np.all(np.asarray(namespace["sentence_log_probs"]) < 0)
    assert set(namespace["names"]) == set(safetensors_params.tensor_names(run.params))
    assert len(namespace["hypotheses"]["tokens"]) == 2
    for name in ("tiny.safetensors", "tiny_logits.jax_export", "tiny_translate.jax_export"):
        assert (directory / name).is_file()


def test_the_page_shows_every_part_of_the_api() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name in attention_jax.__all__:
        assert f"`{name}`" in text or f"attention_jax.{name}(" in text, f"docs/python_api.md never names {name}"
    assert "ocp.args.Composite" in text
    assert [argv[0] for argv in _export_commands()] == ["--workdir=runs/tiny"] * 3


def test_import_attention_jax_imports_no_jax_and_names_resolve_on_use() -> None:
    code = textwrap.dedent("""
        import sys
        import attention_jax
        heavy = sorted(name for name in ("jax", "flax", "orbax", "tensorflow") if name in sys.modules)
        from attention_jax.decoding import inference
        assert attention_jax.load_run is inference.load_run
        print(heavy)
    """)
    completed = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip() == "[]"


def test_every_api_name_is_documented_and_resolves() -> None:
    assert set(attention_jax.__all__) == set(attention_jax._EXPORTS)
    for name in attention_jax.__all__:
        value = getattr(attention_jax, name)
        assert value.__doc__ and value.__module__ == attention_jax._EXPORTS[name], name
    assert set(attention_jax.__all__) <= set(dir(attention_jax))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        attention_jax.nothing_here  # noqa: B018


@pytest.mark.slow
def test_safetensors_holds_each_leaf_once_under_its_path(tiny_run: pathlib.Path, tmp_path: pathlib.Path) -> None:
    from safetensors.numpy import load_file

    run = inference.load_run(str(tiny_run))
    path = str(tmp_path / "run.safetensors")
    safetensors_params.save_safetensors(path, run.params, safetensors_params.run_metadata(run.config,
                                                                                         checkpoint=run.checkpoint))
    tensors = load_file(path)
    leaves = jax.tree_util.tree_flatten_with_path(run.params)[0]
    assert len(tensors) == len(leaves)
    for key_path, leaf in leaves:
        name = "/".join(key.key for key in key_path)
        np.testing.assert_array_equal(tensors[name], leaf)
        assert tensors[name].dtype == np.float32
    assert [name for name in tensors if "embedding" in name] == ["shared_embedding/embedding"]  # Shared: once.
    params, metadata = safetensors_params.load_safetensors(path)
    assert jax.tree.structure(params) == jax.tree.structure(run.params)
    jax.tree.map(np.testing.assert_array_equal, params, run.params)
    assert metadata["format"] == safetensors_params.FORMAT and metadata["checkpoint"] == "latest"
    assert safetensors_params.experiment_of(metadata).model == run.model_config
    (tmp_path / "not.safetensors").write_text("not a safetensors file")
    with pytest.raises(UserInputError, match="is not a safetensors file"):
        safetensors_params.load_safetensors(str(tmp_path / "not.safetensors"))
    with pytest.raises(UserInputError, match="no safetensors file"):
        safetensors_params.load_safetensors(str(tmp_path / "missing.safetensors"))


@pytest.mark.slow
def test_exported_functions_reload_in_a_fresh_process_with_the_same_outputs(
        page: tuple[dict[str, Any], pathlib.Path], cache_dir: str, tmp_path: pathlib.Path) -> None:
    namespace, directory = page
    run, fixed = namespace["run"], namespace["fixed"]
    np.savez(tmp_path / "batch.npz", **fixed)
    code = textwrap.dedent(f"""
        import jax
        import numpy as np
        batch = np.load({str(tmp_path / 'batch.npz')!r})
        with open("tiny_logits.jax_export", "rb") as file:
            logits = jax.export.deserialize(bytearray(file.read())).call(batch["inputs"], batch["targets"])
        with open("tiny_translate.jax_export", "rb") as file:
            hypotheses = jax.export.deserialize(bytearray(file.read())).call(batch["inputs"])
        np.savez({str(tmp_path / 'outputs.npz')!r}, logits=logits, **hypotheses)
    """)
    completed = subprocess.run([sys.executable, "-c", code], cwd=directory, capture_output=True, text=True,
                               timeout=600, env=train_support.subprocess_env(cache_dir))
    assert completed.returncode == 0, completed.stderr[-3000:]
    outputs = np.load(tmp_path / "outputs.npz")
    # The same artifact called here, in the exporting process.
    np.testing.assert_array_equal(outputs["logits"], namespace["exported_output"])
    for key in ("tokens", "lengths", "scores", "log_probs"):
        np.testing.assert_array_equal(outputs[key], namespace["hypotheses"][key])
    # And the model's own functions on the same batch.
    applied = attention_jax.Transformer(run.model_config).apply({"params": run.params}, fixed["inputs"],
                                                                fixed["targets"])
    np.testing.assert_allclose(outputs["logits"], applied, rtol=1e-5, atol=1e-5)
    settings = run.config.decoding
    max_decode_len = exported_functions._output_length(run.model_config, settings, fixed["inputs"].shape[1])
    max_lengths = ((fixed["inputs"] != 0).sum(axis=1) + settings.max_decode_extra_len).astype(np.int32)
    searched = decode.decode_batch(run.params, fixed["inputs"], max_lengths,
                                   model_config=run.model_config.replace(decode=False), beam_size=settings.beam_size,
                                   alpha=settings.length_penalty_alpha, max_decode_len=max_decode_len)
    np.testing.assert_array_equal(outputs["tokens"], searched.tokens)
    np.testing.assert_allclose(outputs["scores"], searched.scores, rtol=1e-5, atol=1e-5)
    translator = inference.make_translator(run)
    best = [run.tokenizer.decode(tokens[0]) for tokens in outputs["tokens"]]
    assert best == translator.translate(namespace["sources"])


def _export(argv: list[str], cwd: pathlib.Path, cache_dir: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_jax.export", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=train_support.subprocess_env(cache_dir))


@pytest.mark.slow
def test_the_pages_export_commands_write_what_it_says(page: tuple[dict[str, Any], pathlib.Path], cache_dir: str,
                                                      tmp_path: pathlib.Path) -> None:
    namespace, directory = page
    run = namespace["run"]
    work = tmp_path / "commands"
    work.mkdir()
    (work / "runs").symlink_to(directory / "runs", target_is_directory=True)
    by_format = {next(arg for arg in argv if arg.startswith("--format=")): argv for argv in _export_commands()}
    safetensors_command, jax_export_command = by_format["--format=safetensors"], by_format["--format=jax_export"]
    assert by_format["--format=directory"]  # Run by tests/decoding/test_inference.py.
    completed = _export(safetensors_command, work, cache_dir)
    assert completed.returncode == 0, completed.stderr[-3000:]
    record = json.loads(completed.stdout.strip().splitlines()[-1])
    assert record["format"] == "safetensors" and record["tensors"] == len(namespace["names"])
    params, metadata = attention_jax.load_safetensors(str(work / "tiny.safetensors"))
    jax.tree.map(np.testing.assert_array_equal, params, run.params)
    assert metadata["workdir"] == str(work / "runs" / "tiny")  # Absolute: the command ran in work.
    assert json.loads(metadata["config"]) == json.loads(json.dumps(run.config.to_json_dict()))
    completed = _export(jax_export_command, work, cache_dir)
    assert completed.returncode == 0, completed.stderr[-3000:]
    record = json.loads(completed.stdout.strip().splitlines()[-1])
    assert record["function"] == "logits" and record["input_shapes"] == [[2, 32], [2, 32]]
    exported = attention_jax.load_exported(str(work / "tiny_logits.jax_export"))
    fixed = namespace["fixed"]
    np.testing.assert_array_equal(exported.call(fixed["inputs"], fixed["targets"]), namespace["exported_output"])


@pytest.mark.slow
@pytest.mark.parametrize("flags, message", [
    (["--format=onnx"], "--format must be one of safetensors, jax_export, directory; got 'onnx'."),
    (["--format=jax_export", "--function=translate", "--source_len=41"], "--source_len=41 must be between 1 and 40"),
])
def test_export_mistakes_are_one_line_and_exit_2_before_writing(flags: list[str], message: str,
                                                                 tiny_run: pathlib.Path, cache_dir: str,
                                                                 tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out" / "model.file"
    completed = _export([f"--workdir={tiny_run}", f"--out={out}", *flags], tmp_path, cache_dir)
    assert completed.returncode == 2, completed.stderr[-3000:]
    errors = [line for line in completed.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("attention_jax.export: error: ") and message in errors[0], \
        completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr
    assert not out.parent.exists()


@pytest.mark.slow
def test_library_export_checks_shapes_before_lowering(tiny_run: pathlib.Path) -> None:
    run = inference.load_run(str(tiny_run))
    with pytest.raises(UserInputError, match="target_len=49 must be between 1 and 48"):
        attention_jax.export_function(run.model_config, run.params, "logits", batch_size=1, source_len=4,
                                      target_len=49)
    with pytest.raises(UserInputError, match="--function must be one of logits, translate; got 'beam'."):
        attention_jax.export_function(run.model_config, run.params, "beam", batch_size=1, source_len=4)
    with pytest.raises(UserInputError, match="--platforms: gpu unknown"):
        attention_jax.export_function(run.model_config, run.params, "logits", batch_size=1, source_len=4,
                                      target_len=4, platforms=["gpu"])
    with pytest.raises(ValueError, match="row 0 has"):
        attention_jax.encode_batch(run.tokenizer, ["The small child sleeps because the woman reads a book."],
                                   source_len=2)
