"""Issue 73, the fourth fault review: each numbered case refused in one line, or recorded as it happened.

The cases call a command's functions in process where the command line itself is not under test; the few
that need a command line of their own (a flag's parsing, a pipe, a signal) start one and are marked slow.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from launch import sweep_file_checks, sweep_spec
from tests.support.sweep_cli import REPO_ROOT


def _sweep_file(tmp_path: pathlib.Path, sweep_body: str, *, takes_row: bool = False) -> str:
    path = tmp_path / "my_sweep.py"
    get_config = ("def get_config(row):\n    return tiny.get_config()\n" if takes_row else
                  "def get_config():\n    return tiny.get_config()\n")
    path.write_text(f"from configs import tiny\ndef get_sweep():\n    return {sweep_body}\n{get_config}")
    return str(path)


# --- Cases 3, 4, 9: what get_sweep() returns ----------------------------------------------------------


@pytest.mark.parametrize("body, message", [
    ("[{'num_heads': 1}]", r"get_sweep\(\) returned a list, not a dict; get_sweep\(\) returns \{row name"),
    ("{'a': 5}", r"row a's overrides are a int \(5\), not a dict of fields"),
    ("{1: {'num_heads': 1}, '1': {'num_heads': 2}}", r"two rows named '1' \(1 and '1'\)"),
    ("{'a': {3: 1}}", r"row a has override keys \[3\] that are not field names"),
])
def test_a_sweep_file_returning_the_wrong_shape_is_one_line(tmp_path: pathlib.Path, body: str,
                                                             message: str) -> None:
    config_file = _sweep_file(tmp_path, body)
    with pytest.raises(ValueError, match=message) as refused:
        sweep_spec.load_sweep(config_file)
    assert "\n" not in str(refused.value) and str(refused.value).startswith(config_file)


def test_get_seeds_that_is_not_a_list_is_one_line(tmp_path: pathlib.Path) -> None:
    config_file = _sweep_file(tmp_path, "{'a': {}}")
    with open(config_file, "a") as file:
        file.write("def get_seeds():\n    return 3\n")
    with pytest.raises(ValueError, match=r"get_seeds\(\) returned a int \(3\); return a list of seeds"):
        sweep_spec.load_sweep(config_file)


# --- Case 10: the dry run's check and the command it writes agree -----------------------------------


def test_a_tuple_of_strings_is_written_as_a_flag_that_reads_back_as_the_tuple(tmp_path: pathlib.Path) -> None:
    config_file = _sweep_file(tmp_path, "{'r': {'final_bleu_splits': ('test',), 'mesh_axes': ('data', 'model')}}")
    sweep = sweep_spec.load_sweep(config_file)
    argv = sweep_spec.row_argv(sweep, "r", "w", [], python="python", main_module="attention_jax.main")
    assert "--config.final_bleu_splits=('test',)" in argv
    assert "--config.mesh_axes=('data','model')" in argv


@pytest.mark.parametrize("field, value", [("dataset", "'two\\nlines'"), ("dataset", "b'tsv:x'"),
                                          ("dataset", "object()"), ("dataset", "None")])
def test_a_row_value_no_flag_can_carry_is_refused(tmp_path: pathlib.Path, field: str, value: str) -> None:
    config_file = _sweep_file(tmp_path, f"{{'r': {{'{field}': {value}}}}}")
    with pytest.raises(ValueError, match=rf"row r: {field}=.* cannot be passed to the trainer as a flag"):
        sweep_spec.load_sweep(config_file)


def test_flag_text_quotes_strings_only_inside_tuples() -> None:
    assert sweep_file_checks.flag_text("tsv:data/x") == "tsv:data/x"
    assert sweep_file_checks.flag_text((1, -1)) == "(1,-1)"
    assert sweep_file_checks.flag_text(["dev"]) == "('dev',)"
    assert sweep_file_checks.flag_text(()) == "()"


@pytest.mark.slow  # Starts the trainer: its flags parser is the one under test.
def test_the_trainer_reads_the_generated_tuple_back_as_the_dry_run_checked(tmp_path: pathlib.Path) -> None:
    config_file = _sweep_file(tmp_path, "{'r': {'final_bleu_splits': ('test',), 'mesh_axes': ('data', 'model')}}")
    sweep = sweep_spec.load_sweep(config_file)
    workdir = tmp_path / "r"
    # mesh_shape=(3,) on one CPU is refused after the whole config passed its check, before anything is
    # written: the refusal names the mesh, not final_bleu_splits or mesh_axes, only if both read back.
    argv = sweep_spec.row_argv(sweep, "r", str(workdir), ["mesh_shape=(3,1)"], python=sys.executable,
                               main_module="attention_jax.main")
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{tmp_path}"})
    assert result.returncode == 2, result.stderr
    assert "config.mesh_shape=(3, 1) needs 3 devices" in result.stderr, result.stderr
    assert not workdir.exists()


# --- Cases 1 and 2, and num_train_steps=10**29: sizes no run can have ------------------------------


@pytest.mark.parametrize("overrides, message", [
    (dict(num_layers=10**40), r"num_layers=1e\+40 is beyond 2,147,483,647 \(2\*\*31 - 1\), JAX's int32"),
    (dict(num_train_steps=10**29), r"num_train_steps=1e\+29 is beyond 2,147,483,647"),
    (dict(warmup_steps=2**31), r"warmup_steps=2,147,483,648 is beyond"),
    (dict(mesh_shape=(-1, 2**40)), r"mesh_shape=\(-1, 1.1e\+12\) is beyond"),
    (dict(num_layers=2**20, d_model=4096, d_ff=16384), r"about 2.83e\+14 parameters, beyond the limit of 1e\+11: "
                                                       r"lower num_layers=1,048,576"),
    (dict(tokens_per_batch=2**30, vocab_size=2**14), r"the output logits, tokens_per_batch x vocab_size: about"),
    (dict(beam_size=2**20, max_len=2**10, max_decode_extra_len=2**10, d_model=2**10, num_layers=2**4),
     r"beam search's key/value cache"),
    (dict(seed=2**63), r"seed must be in \[0, 4294967295\]; got 9223372036854775808"),
    (dict(seed=2**32), r"seed must be in \[0, 4294967295\]"),
])
def test_a_size_no_run_can_have_is_refused_before_anything_is_built(overrides: dict, message: str) -> None:
    from attention_jax.experiment import schema, sections
    from tests.support import fake_data

    config = fake_data.tiny_config()
    config.update(overrides)
    with pytest.raises(schema.ConfigError, match=message) as refused:
        sections.build_experiment(config, "--config=tiny")
    assert "\n" not in str(refused.value)


def test_the_largest_sizes_that_fit_still_pass() -> None:
    from attention_jax.experiment import sections
    from tests.support import fake_data

    config = fake_data.tiny_config()
    config.update(num_train_steps=2**31 - 1, seed=2**32 - 1)  # Each at its limit.
    experiment = sections.build_experiment(config, "--config=tiny")
    assert (experiment.run.num_train_steps, experiment.seed) == (2**31 - 1, 2**32 - 1)


@pytest.mark.parametrize("config_name, overrides", [
    ("tiny", {}),
    ("base", {}),
    ("big", {}),
    ("tiny", dict(share_embeddings=False, positional_encoding="learned", key_dim=0, value_dim=0)),
    ("lm_tiny", {}),
])
def test_the_parameter_estimate_agrees_with_the_built_models_shapes(config_name: str, overrides: dict) -> None:
    import importlib

    from attention_jax.experiment import sections
    from attention_jax.models import language_model, model, size_limits

    config = importlib.import_module(f"configs.{config_name}").get_config()
    config.update(overrides)
    experiment = sections.build_experiment(config, config_name)
    built = model.count_params(language_model.abstract_params(experiment.model, experiment.model_kind))
    estimate = size_limits.estimated_parameters(experiment.fields)
    assert 0.97 * built <= estimate <= built, (estimate, built)  # Norms, biases left out: a little under.


# --- Cases 5, 6 and 14: files a command writes or reads --------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("name", ["tokenizer.model", "config.json", "results.json", "checkpoints/1/x",
                                  "metrics.jsonl", "averaged/params"])
def test_an_output_file_that_is_the_runs_own_is_refused(random_run: pathlib.Path, name: str) -> None:
    from attention_jax.commands import output_files
    from attention_jax.foundation.user_errors import UserInputError

    with pytest.raises(UserInputError, match=rf"--out=.*{name} is the run's own {name} in .*writing over it "
                                             r"would break the run"):
        output_files._check_output_file(str(random_run / name), "--out", (str(random_run),))
    link = random_run.parent / "run_link"  # The same run by another name.
    if not link.exists():
        link.symlink_to(random_run)
    with pytest.raises(UserInputError, match="is the run's own"):
        output_files._refuse_run_files(str(link / name), "--output", (str(random_run),))


def test_a_new_output_file_beside_the_run_or_elsewhere_is_fine(random_run: pathlib.Path,
                                                               tmp_path: pathlib.Path) -> None:
    from attention_jax.commands import output_files

    output_files._check_output_file(str(random_run / "tiny.safetensors"), "--out", (str(random_run),))
    output_files._check_output_file(str(tmp_path / "new" / "dir" / "x.jax_export"), "--out", (str(random_run),))
    existing = tmp_path / "old.safetensors"
    assert output_files._replacement_note(str(existing), "--out") is None
    existing.write_bytes(b"x")
    assert output_files._replacement_note(str(existing), "--out") == f"note: --out={existing} exists and is replaced."


@pytest.mark.slow
def test_an_output_file_in_a_read_only_directory_is_refused_before_any_work(tmp_path: pathlib.Path) -> None:
    from attention_jax.commands import output_files
    from attention_jax.foundation.user_errors import UserInputError
    from tests.support.read_only import read_only

    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked), pytest.raises(UserInputError, match=r"--out=.*locked.*(read-only|not writable)"):
        output_files._check_output_file(str(locked / "x.safetensors"), "--out")


@pytest.mark.parametrize("code, fix", [("ENOSPC", "free space and rerun"), ("EDQUOT", "free space and rerun"),
                                       ("EROFS", "name a file in a writable directory")])
def test_a_failed_write_is_one_line_naming_the_file_and_the_fix(code: str, fix: str) -> None:
    import errno
    import os

    from attention_jax.commands import output_files

    number = getattr(errno, code)
    message = output_files._write_error_message(OSError(number, os.strerror(number), "/x/.tmp"), "/x/a.bin", "--out")
    assert message == f"cannot write --out=/x/a.bin: {os.strerror(number)} ({code}); {fix}."
    assert output_files._write_error_message(OSError(errno.EBADF, "bad"), "/x/a.bin", "--out") is None


def _damaged_copy(run: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(run, damaged, symlinks=True)
    model = damaged / "tokenizer.model"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])  # Truncated, as a copy cut short.
    return damaged


def test_a_truncated_tokenizer_is_named_as_damaged_by_load_run(random_run: pathlib.Path,
                                                               tmp_path: pathlib.Path) -> None:
    from attention_jax.decoding import inference

    damaged = _damaged_copy(random_run, tmp_path)
    with pytest.raises(ValueError, match=rf"{damaged}/tokenizer.model is not a readable SentencePiece model "
                                         r"\(\d+ bytes: .*\): the file is damaged or truncated\. Restore it"):
        inference.load_run(str(damaged))


def test_the_trainer_names_a_truncated_tokenizer_as_damaged(random_run: pathlib.Path,
                                                            tmp_path: pathlib.Path) -> None:
    import types

    from attention_jax.checkpointing import checkpoints
    from attention_jax.foundation.user_errors import UserInputError
    from attention_jax.training import setup_checks

    damaged = _damaged_copy(random_run, tmp_path)
    data = types.SimpleNamespace(tokenizer=types.SimpleNamespace(
        model_proto=(random_run / "tokenizer.model").read_bytes()))
    with pytest.raises(UserInputError, match="is not a readable SentencePiece model") as refused:
        setup_checks._check_tokenizer(checkpoints.read_config(str(damaged)), str(damaged), data, step=1)
    assert "differs from" not in str(refused.value)


def test_a_binary_file_copied_over_config_json_is_named(random_run: pathlib.Path, tmp_path: pathlib.Path) -> None:
    from attention_jax.checkpointing import checkpoints
    from attention_jax.experiment import schema

    damaged = _damaged_copy(random_run, tmp_path)
    (damaged / "config.json").write_bytes((random_run / "tokenizer.model").read_bytes())
    with pytest.raises(schema.ConfigError, match=rf"{damaged}/config.json is not valid JSON .*restore it"):
        checkpoints.read_config(str(damaged))


@pytest.mark.slow  # Starts the export and translate commands: their command lines are under test.
def test_the_commands_refuse_a_runs_own_file_and_a_damaged_tokenizer_in_one_line(
        random_run: pathlib.Path, tmp_path: pathlib.Path) -> None:
    tokenizer_bytes = (random_run / "tokenizer.model").read_bytes()
    damaged = _damaged_copy(random_run, tmp_path)
    commands = [
        (["attention_jax.export", f"--workdir={random_run}", f"--out={random_run}/tokenizer.model"],
         "is the run's own tokenizer.model"),
        (["attention_jax.translate", f"--workdir={damaged}"], "is not a readable SentencePiece model"),
        (["attention_jax.evaluate", f"--workdir={random_run}", f"--output={random_run}/config.json"],
         "--output=" + f"{random_run}/config.json is the run's own config.json"),
    ]
    for argv, message in commands:
        result = subprocess.run([sys.executable, "-m", *argv], cwd=REPO_ROOT, input="hello\n", capture_output=True,
                                text=True, timeout=300)
        errors = [line for line in result.stderr.splitlines() if "error:" in line]
        assert result.returncode == 2 and len(errors) == 1 and message in errors[0], result.stderr[-2000:]
        assert "Traceback" not in result.stderr
    assert (random_run / "tokenizer.model").read_bytes() == tokenizer_bytes


# --- Cases 7 and 8: a closed pipe and Ctrl-C -------------------------------------------------------


def test_a_closed_pipe_ends_the_block_with_status_141_and_a_silenced_stdout(tmp_path: pathlib.Path) -> None:
    from attention_jax.foundation import user_errors

    with open(tmp_path / "stdout", "w") as stdout:
        with pytest.raises(SystemExit) as leaving, user_errors.quiet_pipe_and_interrupt(stdout):
            raise BrokenPipeError(32, "Broken pipe")
        assert leaving.value.code == 141 and leaving.value.__suppress_context__
        stdout.write("written after the pipe closed")  # Goes to /dev/null now: the last flush cannot fail.
    assert (tmp_path / "stdout").read_text() == ""


def test_ctrl_c_ends_the_block_with_status_130_and_other_errors_pass() -> None:
    from attention_jax.foundation import user_errors

    with pytest.raises(SystemExit) as leaving, user_errors.quiet_pipe_and_interrupt():
        raise KeyboardInterrupt
    assert leaving.value.code == 130
    with pytest.raises(ValueError), user_errors.quiet_pipe_and_interrupt():
        raise ValueError("a programming error keeps its traceback")


@pytest.mark.slow  # Starts translate: a real pipe closed by its reader, a real SIGINT.
def test_translate_ends_quietly_when_its_reader_goes_away_or_on_ctrl_c(random_run: pathlib.Path) -> None:
    import signal

    argv = [sys.executable, "-m", "attention_jax.translate", f"--workdir={random_run}", "--buffer_size=1",
            "--format=jsonl", "--batch_size=1"]  # Text and jsonl lines leave through the same writes.
    # `translate | head -1`: the reader takes one line and leaves while lines are still coming.
    with subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as translate:
        assert translate.stdin is not None and translate.stdout is not None and translate.stderr is not None
        translate.stdin.write(b"hello world\n" * 200)
        translate.stdin.close()
        assert translate.stdout.readline()
        translate.stdout.close()
        stderr = translate.stderr.read().decode()
        assert translate.wait(timeout=300) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr
    # Ctrl-C while it waits for the next line of input.
    with subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as translate:
        assert translate.stdin is not None and translate.stdout is not None and translate.stderr is not None
        translate.stdin.write(b"hello world\n")
        translate.stdin.flush()
        assert translate.stdout.readline()  # Translated: it now waits in _read_lines.
        translate.send_signal(signal.SIGINT)
        stderr = translate.stderr.read().decode()
        assert translate.wait(timeout=120) == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr


# --- Cases 11 and 12: what an evaluation during training scored ------------------------------------


@pytest.mark.slow  # Trains two steps and decodes the sampled BLEU: compiles the train step and beam search.
def test_results_record_the_bleu_sentences_decoded_not_the_configs_number(tmp_path: pathlib.Path) -> None:
    from attention_jax.training import train
    from tests.support import fake_data

    data = fake_data.FakeData()
    decodable = len(data.text_pairs("validation"))
    experiment = fake_data.tiny_experiment(num_train_steps=2, eval_every_steps=2, num_bleu_examples=500, beam_size=1)
    results = train.train_and_evaluate(experiment, str(tmp_path), data=data)
    assert decodable < 500 and results["bleu"] is not None
    assert results["bleu_num_examples"] == decodable


def _data_with_dev(pairs: int, too_long: int, empty: int = 0) -> object:
    import types

    return types.SimpleNamespace(tokenizer=types.SimpleNamespace(vocab_size=10), stats={
        "examples": {"train": 50, "validation": pairs, "test": pairs},
        "dropped_too_long": {"train": 0, "validation": too_long, "test": 0},
        "dropped_empty": {"train": 0, "validation": empty, "test": 0}})


def test_a_dev_split_with_no_pair_within_max_len_is_refused_before_training() -> None:
    from attention_jax.foundation.user_errors import UserInputError
    from attention_jax.training import setup_checks
    from tests.support import fake_data

    experiment = fake_data.tiny_experiment(max_len=3, tokens_per_batch=300)
    with pytest.raises(UserInputError, match=r"none of the 100 dev pairs fits config.max_len=3 tokens \(EOS "
                                             r"included; 99 are longer, 1 have an empty side\): every evaluation"):
        setup_checks._check_data(experiment, _data_with_dev(100, too_long=99, empty=1))
    setup_checks._check_data(experiment, _data_with_dev(100, too_long=99))  # One pair scores: no refusal.


# --- Case 13: evaluate on pairs longer than the model takes ----------------------------------------


def _strict_json(path: pathlib.Path) -> object:
    import json

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_an_evaluation_that_scores_no_pair_says_so_and_writes_null(random_run: pathlib.Path,
                                                                   tmp_path: pathlib.Path) -> None:
    from attention_jax.decoding import inference
    from attention_jax.evaluation import translation_quality

    translator = inference.make_translator(inference.load_run(str(random_run)), beam_size=1, batch_size=4)
    long_side = " ".join(["hello world"] * 40)  # Far beyond the model's 24 positions.
    none_fit = translation_quality.evaluate(translator, [(long_side, long_side), ("hello", long_side)])
    assert none_fit.num_target_tokens == 0 and none_fit.num_skipped_for_perplexity == 2
    assert translation_quality.perplexity_line(none_fit) == (
        "perplexity = none: no pair could be scored (2 of 2 pairs skipped: a side longer than the model takes); "
        "the report holds null.")
    report = tmp_path / "eval.json"
    translation_quality.write_report(str(report), none_fit.summary(), none_fit.hypotheses)
    written = _strict_json(report)
    assert isinstance(written, dict) and written["perplexity"] is None and written["cross_entropy"] is None
    some_fit = translation_quality.evaluate(translator, [(long_side, long_side), ("hello", "hallo")])
    line = translation_quality.perplexity_line(some_fit)
    assert some_fit.num_target_tokens > 0 and line.startswith(f"perplexity = {some_fit.perplexity:.3f}  (")
    assert line.endswith(f"{some_fit.num_target_tokens} tokens); 1 of 2 pairs skipped: a side longer than the "
                         "model takes")


def test_finite_or_none_replaces_only_non_finite_floats() -> None:
    from attention_jax.evaluation import translation_quality

    assert translation_quality._finite_or_none({"a": float("nan"), "b": [1.5, float("inf"), "x"], "c": 3}) == \
        {"a": None, "b": [1.5, None, "x"], "c": 3}


# --- Minor: a flag over a field its config sets to None --------------------------------------------


def test_a_flag_over_a_none_field_is_one_line_in_the_trainer_and_in_the_sweeps_check(tmp_path: pathlib.Path) -> None:
    from attention_jax.commands import config_errors
    from attention_jax.experiment import schema

    ml_collections_error = ("Type <class 'NoneType'> of field config.paper.dev_ppl is not supported for overriding. "
                            "Currently supported types are: dict_keys([<class 'float'>, ...]).")
    assert config_errors._none_field_message(ml_collections_error, ["main", "--config=configs/tiny.py"]) == (
        "--config.paper.dev_ppl: --config=configs/tiny.py sets paper.dev_ppl to None, and ml_collections cannot "
        "infer a flag's type from None: set paper.dev_ppl in the config file (or a copy of it) instead of on the "
        "command line.")
    assert config_errors._none_field_message("another error", ["main"]) is None
    sweep = sweep_spec.load_sweep(_sweep_file(tmp_path, "{'r': {'num_heads': 2}}"))
    with pytest.raises(schema.ConfigError, match=r"row r: --config.paper.dev_ppl: the row's config sets "
                                                 r"paper.dev_ppl to None"):
        sweep_spec.check_overrides(sweep, ["r"], ["paper.dev_ppl=4.5"])
    sweep_spec.check_overrides(sweep, ["r"], ["num_layers=1"])


# --- Minor: an unreadable checkpoint's warning ------------------------------------------------------


def test_an_unreadable_checkpoint_is_named_in_one_short_line(random_run: pathlib.Path, tmp_path: pathlib.Path) -> None:
    import shutil

    from attention_jax.checkpointing import checkpoints, params_checkpoints

    damaged = tmp_path / "damaged_checkpoint"
    shutil.copytree(random_run, damaged, symlinks=True)
    for array_file in (damaged / "checkpoints" / "1").rglob("*"):
        if array_file.is_file() and ("d" in array_file.parts or array_file.parent.name == "d"):
            array_file.write_bytes(b"")  # The array data cut to nothing, as a full disk leaves it.
    abstract = params_checkpoints.abstract_inference_params(checkpoints.read_config(str(damaged)))
    with pytest.raises(Exception) as failed:  # Whatever orbax and TensorStore raise for the damaged files.
        params_checkpoints.restore_params(str(damaged / "checkpoints"), 1, abstract)
    line = checkpoints.reason_line(failed.value)
    assert len(str(failed.value)) > 1000  # TensorStore's own message: the spec, the source locations.
    assert "\n" not in line and len(line) <= checkpoints.REASON_LIMIT + 40 and "tensorstore_spec" not in line
    assert line.startswith(type(failed.value).__name__ + ": ")


def test_reason_line_drops_tensorstore_annotations_and_collapses_lines() -> None:
    from attention_jax.checkpointing import checkpoints

    error = ValueError('NOT_FOUND: Error opening "zarr3" driver:\n  Error reading "d/0" '
                       "[source locations='tensorstore/x.cc:1'] [tensorstore_spec='{\n \"driver\": \"zarr3\"\n}']")
    assert checkpoints.reason_line(error) == 'ValueError: NOT_FOUND: Error opening "zarr3" driver: Error reading "d/0"'
    assert checkpoints.reason_line(RuntimeError("x" * 400)) == "RuntimeError: " + "x" * 300 + "..."


def test_seeds_beyond_config_seeds_range_or_too_many_are_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"seeds must be integers in \[0, 4294967295\]"):
        sweep_spec.check_seeds([0, 2**32], "get_seeds()")
    with pytest.raises(ValueError, match=r"1001 seeds per row; at most 1000"):
        sweep_spec.check_seeds(range(1001), "get_seeds()")
    assert sweep_spec.check_seeds([0, 2**32 - 1], "get_seeds()") == (0, 2**32 - 1)
    loaded = sweep_spec.load_sweep(_sweep_file(tmp_path, "{'a': {}}"))
    with pytest.raises(ValueError, match=r"--seeds=1000000000000: give the number of seeds per row \(1 to 1000\)"):
        sweep_spec.resolve_seeds(loaded, 10**12, [])  # Refused before a trillion seeds are listed.
