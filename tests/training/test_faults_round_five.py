"""Issue 89, the fifth fault review: each numbered case refused in one line, or given the right result.

Cases are called in process where the command line itself is not under test; those that need a process
of their own (a kill, a flag's parsing) start one and are marked slow.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil

import numpy as np
import pytest

from attention_jax.checkpointing import checkpoints
from attention_jax.foundation import run_files
from attention_jax.training import train
from tests.support import fake_data


def _train(workdir: pathlib.Path, data: fake_data.FakeData | None = None, **overrides: object) -> dict:
    settings = dict(num_train_steps=2, eval_every_steps=100, checkpoint_every_steps=1, log_every_steps=1)
    return train.train_and_evaluate(fake_data.tiny_experiment(**dict(settings, **overrides)), str(workdir),
                                    data=data or fake_data.FakeData())


# --- Case 1: an extended run resumes ----------------------------------------------------------------------


@pytest.mark.slow  # Trains 7 steps in three sessions.
def test_an_extension_stopped_after_it_rewrote_the_config_resumes_to_its_new_step_count(
        tmp_path: pathlib.Path, cache_dir: str) -> None:
    assert _train(tmp_path)["step"] == 2
    stopped = _train(tmp_path, data=fake_data.FakeData(sigterm_at=3), num_train_steps=5)  # SIGTERM (SLURM requeue).
    assert stopped["finished"] is False and checkpoints.latest_progress(str(tmp_path))[0] in (3, 4)
    assert not (tmp_path / run_files.RESULTS_FILE).exists()  # No finished record beside the longer config.
    resumed = _train(tmp_path, num_train_steps=5)
    assert not resumed.get("already_finished") and resumed["step"] == 5
    assert json.loads((tmp_path / run_files.RESULTS_FILE).read_text())["step"] == 5


@pytest.mark.slow
def test_a_finished_record_older_than_the_config_or_the_newest_checkpoint_does_not_stop_a_rerun(
        tmp_path: pathlib.Path, cache_dir: str) -> None:
    _train(tmp_path)
    # kill -9 right after an extension (a trainer from before this record was discarded) rewrote config.json.
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(num_train_steps=3))
    resumed = _train(tmp_path, num_train_steps=3)
    assert not resumed.get("already_finished") and resumed["step"] == 3


# --- Case 2: a command never writes over another run's files ------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("name", ["tokenizer.model", "config.json", "results.json", "checkpoints/1/x"])
def test_an_output_file_that_is_another_runs_own_is_refused(random_run: pathlib.Path, tmp_path: pathlib.Path,
                                                              name: str) -> None:
    from attention_jax.commands import output_files
    from attention_jax.foundation.user_errors import UserInputError

    other = tmp_path / "runs" / "other"
    shutil.copytree(random_run, other, ignore=shutil.ignore_patterns("checkpoints"))
    (other / "checkpoints" / "1").mkdir(parents=True)
    for flag, check in (("--out", output_files._check_output_file), ("--output", output_files._refuse_run_files)):
        with pytest.raises(UserInputError, match=rf"{flag}=.*{name} is another run's own {name} in .*other"):
            check(str(other / name), flag, (str(random_run),))
    output_files._check_output_file(str(other / "new.safetensors"), "--out", (str(random_run),))
    user_dir = tmp_path / "mine"  # A user's own config.json alone does not make a run.
    user_dir.mkdir()
    (user_dir / "config.json").write_text("{}")
    output_files._check_output_file(str(user_dir / "config.json"), "--out", (str(random_run),))


# --- Case 6: a damaged or incomplete export is refused --------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("name", ["params.safetensors", "tokenizer.model", "config.json"])
def test_a_damaged_export_file_is_named_by_its_hash(random_run: pathlib.Path, tmp_path: pathlib.Path,
                                                    name: str) -> None:
    from attention_jax.decoding import inference
    from attention_jax.foundation.user_errors import UserInputError

    out = tmp_path / "export"
    record = inference.export_run(inference.load_run(str(random_run)), str(out))
    assert record["sha256"][name] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    damaged = bytearray((out / name).read_bytes())
    damaged[-200:] = bytes(255 - byte for byte in damaged[-200:])  # Inverted bytes, as the issue's.
    (out / name).write_bytes(bytes(damaged))
    with pytest.raises(UserInputError, match=rf"{name} does not match the SHA-256 that export.json records"):
        inference.load_run(str(out))
    (out / name).unlink()
    expected = "is an export without its params.safetensors" if name == run_files.EXPORT_PARAMS_FILE else "is missing"
    with pytest.raises(UserInputError, match=expected):
        inference.load_run(str(out))


# --- Case 8: the Python API checks its arguments ------------------------------------------------------------


@pytest.fixture(scope="module")
def translator(random_run: pathlib.Path) -> object:
    from attention_jax.decoding import inference

    return inference.make_translator(inference.load_run(str(random_run)), beam_size=1, batch_size=4)


@pytest.mark.integration
def test_a_str_is_one_sentence_and_wrong_sentences_are_one_line(translator: object) -> None:
    one = translator.translate("the house is small")
    assert isinstance(one, str) and [one] == translator.translate(["the house is small"])
    for sources, message in (([None], r"sources\[0\] is NoneType None, not a str sentence"),
                             (["a", b"the house"], r"sources\[1\] is bytes b'the house', not a str sentence: "
                                                   r"decode it first"),
                             (5, "sources must be a list of str sentences; got int")):
        with pytest.raises(TypeError, match=message) as refused:
            translator.translate(sources)
        assert "\n" not in str(refused.value)
    with pytest.raises(TypeError, match=r"sources is one str; pass a list of sentences"):
        translator.translate_nbest("the house")


@pytest.mark.integration
def test_ids_outside_the_vocabulary_or_not_integers_are_refused(translator: object) -> None:
    vocab_size = translator.tokenizer.vocab_size
    for ids, message in (([[3, vocab_size + 5, 2]], rf"source_ids\[0\]\[1\]={vocab_size + 5} is outside the "
                                                    rf"vocabulary \(ids 0 to {vocab_size - 1}\)"),
                         ([[4, 2], [-5, 3]], r"source_ids\[1\]\[0\]=-5 is outside the vocabulary")):
        with pytest.raises(ValueError, match=message):
            translator.translate_ids(ids)
    for ids, message in (("3 4", "source_ids must be a list of token id lists; got str"),
                         ([[1.5, 2]], r"source_ids\[0\] is list \[1.5, 2\], not a list of integer token ids"),
                         ([None], r"source_ids\[0\] is NoneType None")):
        with pytest.raises(TypeError, match=message):
            translator.translate_ids(ids)
    assert translator.translate_ids([[3, 2], []])[1] == []  # In range, and an empty source, still decode.


@pytest.mark.integration
def test_load_run_make_translator_and_save_safetensors_name_a_wrong_argument(random_run: pathlib.Path,
                                                                             tmp_path: pathlib.Path) -> None:
    from attention_jax.checkpointing import safetensors_params
    from attention_jax.decoding import inference

    with pytest.raises(TypeError, match=r"load_run's workdir must be a path \(str\); got NoneType None"):
        inference.load_run(None)
    with pytest.raises(TypeError, match=r"not a str: make_translator\(load_run\('runs/ref'\)\)"):
        inference.make_translator("runs/ref")
    params = {"dense": {"kernel": np.ones((2, 2), np.float32)}}
    with pytest.raises(TypeError, match=r"save_safetensors's path must be a path \(str\); got dict"):
        safetensors_params.save_safetensors(params, str(tmp_path / "x.safetensors"))
    with pytest.raises(TypeError, match=r"save_safetensors's params must be a parameter tree \(a dict\); got str"):
        safetensors_params.save_safetensors(tmp_path / "x.safetensors", "params")
    safetensors_params.save_safetensors(tmp_path / "x.safetensors", params)  # A pathlib.Path is a path.
    loaded, _ = safetensors_params.load_safetensors(tmp_path / "x.safetensors")
    np.testing.assert_array_equal(loaded["dense"]["kernel"], params["dense"]["kernel"])


# --- Case 5: refused before the machine dies ----------------------------------------------------------------


def test_a_batch_or_decoding_cache_no_device_holds_is_refused_before_compiling() -> None:
    from attention_jax.foundation.user_errors import UserInputError
    from attention_jax.training import setup_checks

    with pytest.raises(UserInputError, match=r"one step needs at least [\d,.]+ GiB per device, more than the .* of "
                                             r"this cpu device; most of it is the activations of 2,147,483,647 "
                                             r"tokens .*lower --config.tokens_per_batch"):
        setup_checks._check_devices(fake_data.tiny_experiment(tokens_per_batch=2**31 - 1))
    long_decoding = fake_data.tiny_experiment(max_decode_extra_len=2**31 - 100)
    with pytest.raises(UserInputError, match=r"most of it is beam search's key/value cache .*lower "
                                             r"--config.max_decode_extra_len"):
        setup_checks._check_memory(long_decoding.fields, 1, 2**40, "gpu device")
    with pytest.raises(UserInputError, match=r"max_len \+ max_decode_extra_len = 2,147,483,679 positions is beyond "
                                             r"2,147,483,647 .*lower max_decode_extra_len"):
        fake_data.tiny_experiment(max_decode_extra_len=2**31 - 1)  # Was an OverflowError at the first evaluation.
    setup_checks._check_devices(fake_data.tiny_experiment())  # The tests' own config fits.


def test_the_step_memory_estimate_counts_each_part_as_written() -> None:
    from attention_jax.models import size_limits
    from attention_jax.training import setup_checks

    fields = dict(fake_data.tiny_experiment().fields)
    tokens, width = fields["tokens_per_batch"], 4
    activations = tokens * (2 * fields["vocab_size"] * width + fields["num_layers"] * width * (
        3 * (4 * fields["d_model"] + fields["num_heads"] * fields["max_len"]) + 2 * fields["d_ff"]))
    cache = fields["beam_size"] * (fields["max_len"] + fields["max_decode_extra_len"]) * fields["d_model"] * 2 * width
    expected = 16 * size_limits.estimated_parameters(fields) + activations + cache * fields["num_layers"]
    assert setup_checks._estimated_step_bytes(fields, 1)[0] == expected
    halved = setup_checks._estimated_step_bytes(fields, 2)[0]  # Tokens split over two devices.
    assert halved == expected - activations + activations // 2
    assert setup_checks._estimated_step_bytes(dict(fields, dtype="bfloat16"), 1)[0] < expected


def test_warmup_beyond_the_run_is_warned_with_the_fraction_of_the_peak_reached(
        caplog: pytest.LogCaptureFixture) -> None:
    from attention_jax.training import setup_checks

    with caplog.at_level("WARNING"):
        setup_checks._warn_unreached_peak(fake_data.tiny_experiment(num_train_steps=3, warmup_steps=1_000_000))
        setup_checks._warn_unreached_peak(fake_data.tiny_experiment(num_train_steps=8, warmup_steps=4))
    warned = [record.getMessage() for record in caplog.records if "warmup_steps" in record.getMessage()]
    assert warned == ["warmup_steps=1000000 is beyond num_train_steps=3: the learning rate rises for the whole run "
                      "and ends at 0.0003% of its peak; lower --config.warmup_steps to reach it."]


# --- Case 9: tracebacks and unclear messages become one line ----------------------------------------------


def test_a_checkpoint_directory_that_is_a_file_and_an_uncreatable_workdir_are_one_line(tmp_path: pathlib.Path) -> None:
    from attention_jax.foundation.user_errors import UserInputError
    from attention_jax.training import workdir_lock

    (tmp_path / "checkpoints").write_text("not a directory")
    with pytest.raises(UserInputError, match=r"checkpoints is a file, not the run's checkpoint directory: move it"):
        checkpoints.finished_steps(str(tmp_path / "checkpoints"))
    with pytest.raises(UserInputError, match=r"--workdir=/proc/x: cannot create a run there \(.*\): choose a "
                                             r"directory on a writable file system"):
        workdir_lock.WorkdirLock("/proc/x").acquire()


def test_a_dangling_symlink_workdir_is_called_a_link_not_a_file(tmp_path: pathlib.Path) -> None:
    from attention_jax.foundation.user_errors import UserInputError

    link = tmp_path / "run"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(UserInputError, match=r"run is a symbolic link to .*gone, which does not exist: create"):
        run_files.check_directory(str(link), "--workdir")


@pytest.mark.parametrize("source, message", [
    ("def broken(:\n", r"importing 'user_mod_\w+' failed at .*user_mod_\w+.py:1 with SyntaxError"),
    ("raise ValueError('attention function x is registered twice')\n",
     r"importing 'user_mod_\w+' failed with ValueError: attention function x is registered twice; fix the module"),
])
def test_a_user_module_that_fails_to_import_is_named_with_the_field(tmp_path: pathlib.Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    source: str, message: str) -> None:
    from attention_jax.experiment import schema

    name = f"user_mod_{abs(hash(source))}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(schema.ConfigError, match=rf"^configs/x.py: user_modules: {message}") as refused:
        schema.import_user_modules({"user_modules": [name]}, "configs/x.py")
    assert "\n" not in str(refused.value)


def test_a_directory_with_the_users_own_config_json_is_not_a_run_directory(tmp_path: pathlib.Path) -> None:
    from attention_jax.experiment import schema

    (tmp_path / "config.json").write_text(json.dumps({"learning_rate": 0.1, "layers": 6}))
    with pytest.raises(schema.ConfigError, match=r"is not a run directory: it holds a config.json that no training "
                                                 r"run wrote, and none of checkpoints, tokenizer.model"):
        checkpoints.read_config(str(tmp_path))
    (tmp_path / "tokenizer.model").write_bytes(b"x")  # A run's own config.json, hand-edited: the field is named.
    with pytest.raises(schema.ConfigError, match=r"learning_rate"):
        checkpoints.read_config(str(tmp_path))


# --- Case 4: damaged bookkeeping is named, never silently replaced -------------------------------------------


@pytest.mark.parametrize("damage", ['{"validation": {"split": "valid', "[1, 2]", '{"validation": 3}'])
def test_a_damaged_data_splits_record_refuses_the_resume_and_a_fresh_run_replaces_it(tmp_path: pathlib.Path,
                                                                                     damage: str) -> None:
    from attention_jax.checkpointing import resume_checks
    from attention_jax.foundation.user_errors import UserInputError
    from attention_jax.training import setup_checks

    data = fake_data.FakeData()
    resume_checks.write_data_splits(str(tmp_path), data.split_fingerprints())
    setup_checks.check_data_splits(str(tmp_path), data)
    (tmp_path / run_files.DATA_SPLITS_FILE).write_text(damage)
    with pytest.raises(UserInputError, match=r"data_splits.json is damaged \(.*\): it records the dev and test "
                                             r"splits .* Restore it from a copy of the run"):
        setup_checks.check_data_splits(str(tmp_path), data)  # Was: no check, and the new split recorded.
    resume_checks.write_data_splits(str(tmp_path), data.split_fingerprints())  # Called for a fresh run only.
    assert resume_checks.read_data_splits(str(tmp_path)) == data.split_fingerprints()


def test_a_resume_keeps_a_garbage_metrics_line_and_says_so(tmp_path: pathlib.Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    from attention_jax.training import metric_writer

    lines = ['{"step": 1, "train/loss": 3.0}\n', "garbage \u00e9 from an editor\n", '{"step": 2, "train/loss": 2.0}\n',
             '{"step": 3, "train/loss": 1.0}\n', '{"step": 4, "train/lo']
    (tmp_path / run_files.METRICS_FILE).write_text("".join(lines))
    with caplog.at_level("WARNING"):
        metric_writer.MetricWriter(str(tmp_path), resumed_step=2, enabled=True).close()
    assert (tmp_path / run_files.METRICS_FILE).read_text() == "".join(lines[:3])
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert "line 2 is not a metrics record" in warned and "kept as it is" in warned
    assert "its last line (5) is not a whole record" in warned


# --- Case 7: readers beside a fast-rotating trainer -----------------------------------------------------------


def _rotating_trainer(run_dir: pathlib.Path, monkeypatch: pytest.MonkeyPatch, rotations: int) -> list[int]:
    """Make each of the first ``rotations`` restores land a newer checkpoint and delete the one being read."""
    from attention_jax.checkpointing import params_checkpoints

    restore, steps_dir, calls = params_checkpoints.restore_params, run_dir / run_files.CHECKPOINT_DIR, []

    def trainer_saves_and_rotates(directory: str, step: int, abstract: object) -> object:
        calls.append(step)
        if len(calls) <= rotations:  # keep_checkpoints=1, a checkpoint every 2 steps.
            shutil.copytree(steps_dir / str(step), steps_dir / str(step + 2))
            shutil.rmtree(steps_dir / str(step))
        return restore(directory, step, abstract)

    monkeypatch.setattr(params_checkpoints, "restore_params", trainer_saves_and_rotates)
    monkeypatch.setattr(checkpoints.time, "sleep", lambda seconds: None)
    return calls


@pytest.mark.integration
def test_translate_and_average_retry_until_a_whole_checkpoint_is_read(random_run: pathlib.Path, tmp_path: pathlib.Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from attention_jax.checkpointing import params_checkpoints
    from attention_jax.decoding import inference

    run_dir = tmp_path / "run"
    shutil.copytree(random_run, run_dir)
    calls = _rotating_trainer(run_dir, monkeypatch, rotations=3)  # One retry was not enough (3 of 4 failed).
    run = inference.load_run(str(run_dir))
    assert calls == [1, 3, 5, 7] and run.checkpoint == "latest"
    calls.clear()
    steps = params_checkpoints.write_average(str(run_dir), 1)  # Was a FileNotFoundError.
    assert calls == [7, 9, 11, 13] and steps == [13]


@pytest.mark.integration
def test_a_reader_that_never_gets_a_whole_checkpoint_says_why(random_run: pathlib.Path, tmp_path: pathlib.Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from attention_jax.decoding import inference
    from attention_jax.foundation.user_errors import UserInputError

    run_dir = tmp_path / "run"
    shutil.copytree(random_run, run_dir)
    monkeypatch.setattr(checkpoints, "ROTATION_ATTEMPTS", 3)
    _rotating_trainer(run_dir, monkeypatch, rotations=100)
    with pytest.raises(UserInputError, match=r"the latest checkpoint of .*checkpoints was rotated away during each "
                                             r"of 3 reads: .*larger config.keep_checkpoints"):
        inference.load_run(str(run_dir))


def test_two_writers_of_an_average_take_turns(tmp_path: pathlib.Path) -> None:
    import threading

    from attention_jax.checkpointing import params_checkpoints

    entered = threading.Event()

    def second_writer() -> None:
        with params_checkpoints._writing_alone(str(tmp_path / "averaged")):
            entered.set()

    with params_checkpoints._writing_alone(str(tmp_path / "averaged")):
        thread = threading.Thread(target=second_writer)
        thread.start()
        assert not entered.wait(0.5)  # It waits for the first writer ...
    assert entered.wait(10)  # ... and writes once it is done.
    thread.join()


# --- Case 3: a sweep report shows what the runs on disk are ---------------------------------------------------

SWEEP_FILE = '''
from configs import tiny


def get_config():
    return tiny.get_config()


def get_sweep():
    return {"a": dict(dropout_rate=DROPOUT), "b": dict(dropout_rate=0.0), "c": dict(dropout_rate=0.2)}
'''


def _sweep_root(tmp_path: pathlib.Path) -> pathlib.Path:
    """Rows a (dropout 0.1), b (0.0) and c (0.2) with two seeds; c's seeds stopped on a non-finite loss."""
    from launch import sweep_record, sweep_spec

    sweep_path = tmp_path / "my_sweep.py"
    sweep_path.write_text(SWEEP_FILE.replace("DROPOUT", "0.1"))
    sweep = sweep_spec.load_sweep(str(sweep_path))
    root = tmp_path / "runs"
    sweep_record.record_launch(str(root), sweep_record.sweep_description(sweep, [], seeds=[0, 1]),
                               list(sweep.row_names), "local", force=False)
    for row, ppl in (("a", 10.0), ("b", 11.0), ("c", None)):
        for seed in (0, 1):
            run_dir = root / row / f"seed_{seed}"
            run_dir.mkdir(parents=True)
            config = sweep.row_config(row)
            config.seed = seed
            (run_dir / "config.json").write_text(config.to_json_best_effort())
            if ppl is None:
                (run_dir / "launch.json").write_text(json.dumps({"returncode": 2}))
                (run_dir / "log.txt").write_text("attention_jax.main: error: non-finite training loss at step 3 "
                                                 "(loss_sum=nan, ...): lower --config.learning_rate_scale\n")
            else:
                (run_dir / "results.json").write_text(json.dumps(dict(step=2, dev_ppl=ppl + seed, wall_s=1.0)))
    sweep_path.write_text(SWEEP_FILE.replace("DROPOUT", "0.3"))  # Row a changed; its runs stay 0.1.
    changed = sweep_spec.load_sweep(str(sweep_path))
    sweep_record.record_launch(str(root), sweep_record.sweep_description(changed, [], seeds=[0, 1]),
                               list(changed.row_names), "local", force=True)
    return root


def test_a_sweep_report_labels_rows_by_their_runs_and_a_diverged_row_is_unstable(tmp_path: pathlib.Path) -> None:
    from attention_jax.reports import comparison, comparison_report, paper_figures, sweep_rows

    root = _sweep_root(tmp_path)
    record, rows = sweep_rows.read_sweep_rows(str(root))
    by_name = {row.row: row for row in rows}
    assert sweep_rows._changed_since_run(by_name["a"], record) == {"dropout_rate": (0.1, 0.3)}
    assert sweep_rows._changed_since_run(by_name["b"], record) == {}
    compared = comparison.compare(str(root), rows, "b")
    report = comparison_report._markdown_report(record, rows, compared, "b", "test")
    assert ("| a | done | 2 of 2 | dropout_rate=0.1 (its runs; the sweep file now says dropout_rate=0.3: rerun the "
            "row in a new --root) |") in report  # Was: dropout_rate=0.3 beside the 0.1 runs' figures.
    assert "| c | diverged | 0 of 2 | dropout_rate=0.2 |" in report
    assert compared["c"]["dev_ppl"].verdict == comparison.UNSTABLE_VERDICT  # Was: pending.
    assert compared["a"]["dev_ppl"].verdict != comparison.UNSTABLE_VERDICT
    assert paper_figures.aggregate(rows, "b")["c"].ppl.diverged == (0, 1)


def test_a_second_launcher_on_a_root_is_refused_naming_the_first(tmp_path: pathlib.Path) -> None:
    from attention_jax.training import workdir_lock

    with workdir_lock.WorkdirLock(str(tmp_path), holder="launch.sweep", flag="--root"):
        with pytest.raises(workdir_lock.WorkdirLockedError, match=r"is in use by another launch.sweep \(host .*, "
                                                                  r"pid \d+, .*\); only one may work in a --root "
                                                                  r"directory.* or use another --root"):
            workdir_lock.WorkdirLock(str(tmp_path), holder="launch.sweep", flag="--root").acquire()
