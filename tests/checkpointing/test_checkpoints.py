"""Checkpoints: round trip with the data state, atomicity, fallback, resume checks, inference loading."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.checkpointing import checkpoints, params_checkpoints, resume_checks
from attention_jax.commands import average_checkpoints
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.training import train, train_state
from tests.support import fake_data, train_support


def _state(step: int, params: dict) -> train_state.TrainState:
    return train_state.TrainState(step=jnp.int32(step), params=params, opt_state=(jnp.arange(3.0) * step,),
                            rng=jax.random.key_data(jax.random.key(step)))


def _abstract(state: train_state.TrainState) -> train_state.TrainState:
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=device), state)


def _small(step: int) -> train_state.TrainState:
    return _state(step, {"w": jnp.full((4,), float(step)), "b": {"c": jnp.ones((2, 3)) * step}})


def _save_steps(workdir: pathlib.Path, steps: list[int], make=_small, keep: int = 5) -> None:
    manager = checkpoints.TrainingCheckpoints(str(workdir), keep=keep)
    for step in steps:
        manager.save(make(step), data_state={"index": 10 * step}, progress={"wall_s": 1.5 * step})
    manager.close()


def test_round_trip_restores_state_data_state_and_progress(tmp_path: pathlib.Path) -> None:
    _save_steps(tmp_path, [1, 2])
    restored = checkpoints.TrainingCheckpoints(str(tmp_path), keep=5).restore_latest(_abstract(_small(0)))
    assert restored.step == 2 and int(restored.state.step) == 2
    for want, have in zip(jax.tree.leaves(_small(2)), jax.tree.leaves(restored.state)):
        np.testing.assert_array_equal(np.asarray(have), np.asarray(want))
    assert restored.data_state == {"index": 20}
    assert restored.progress["wall_s"] == 3.0 and restored.progress["step"] == 2


def test_bytes_iterator_state_round_trips(tmp_path: pathlib.Path) -> None:
    manager = checkpoints.TrainingCheckpoints(str(tmp_path), keep=2)
    manager.save(_small(1), data_state=b"\x00grain\xff", progress={})
    manager.close()
    restored = checkpoints.TrainingCheckpoints(str(tmp_path), keep=2).restore_latest(_abstract(_small(0)))
    assert restored.data_state == b"\x00grain\xff"
    assert "process_0-of-1.json" in os.listdir(tmp_path / "checkpoints" / "1" / "data")


def test_keeps_only_the_newest_checkpoints(tmp_path: pathlib.Path) -> None:
    _save_steps(tmp_path, [1, 2, 3, 4], keep=2)
    assert checkpoints.finished_steps(str(tmp_path / "checkpoints")) == [3, 4]


def test_half_written_checkpoint_is_never_picked_up(tmp_path: pathlib.Path) -> None:
    """A save killed mid-way leaves only orbax's temporary directory, which is not a step."""
    _save_steps(tmp_path, [1, 2])
    shutil.copytree(tmp_path / "checkpoints" / "2", tmp_path / "checkpoints" / "3.orbax-checkpoint-tmp-17")
    manager = checkpoints.TrainingCheckpoints(str(tmp_path), keep=5)
    assert manager._all_steps() == [1, 2] and manager.latest_step() == 2
    assert manager.restore_latest(_abstract(_small(0))).step == 2
    manager.close()
    assert checkpoints.finished_steps(str(tmp_path / "checkpoints")) == [1, 2]


def test_corrupt_latest_falls_back_to_previous(tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    _save_steps(tmp_path, [1, 2, 3])
    for path in (tmp_path / "checkpoints" / "3" / "params").rglob("*"):
        if path.is_file():
            path.write_bytes(b"")  # Truncated files, as after a crash of the file system.
    manager = checkpoints.TrainingCheckpoints(str(tmp_path), keep=5)
    with caplog.at_level("WARNING"):
        restored = manager.restore_latest(_abstract(_small(0)))
    assert restored.step == 2 and float(restored.state.params["w"][0]) == 2.0
    assert any("step 3 is unreadable" in record.getMessage() for record in caplog.records)
    # The damaged checkpoint was moved aside, so step 3 can be written again.
    assert manager._all_steps() == [1, 2]
    assert [p.name.split("-")[0] for p in (tmp_path / "checkpoints_corrupt").iterdir()] == ["3"]
    manager.save(_small(3), data_state={"index": 30}, progress={})
    manager.close()
    assert checkpoints.finished_steps(str(tmp_path / "checkpoints")) == [1, 2, 3]


def test_no_readable_checkpoint_raises(tmp_path: pathlib.Path) -> None:
    _save_steps(tmp_path, [1])
    shutil.rmtree(tmp_path / "checkpoints" / "1" / "params")
    with pytest.raises(RuntimeError, match="none of the checkpoints") as raised:
        checkpoints.TrainingCheckpoints(str(tmp_path), keep=5).restore_latest(_abstract(_small(0)))
    assert isinstance(raised.value, UserInputError)  # One line with exit 2 from the commands (issue 89, case 9).


@pytest.mark.slow
def test_different_model_config_refuses_to_resume(tmp_path: pathlib.Path) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment())
    _save_steps(tmp_path, [1], make=_real_shaped)
    changed = fake_data.tiny_experiment(d_model=64, num_heads=4, num_train_steps=99)
    with pytest.raises(ValueError, match="different model") as raised:
        train.train_and_evaluate(changed, str(tmp_path), data=fake_data.FakeData())
    message = str(raised.value)
    assert "d_model: 32 in the workdir, 64 now" in message and "num_heads: 2" in message
    assert "num_train_steps" not in message  # Not a model field.
    assert checkpoints.read_config(str(tmp_path)).model.d_model == 32  # The workdir is left untouched.


def _logged_warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Collect the messages ``checkpoints`` logs as warnings during the test."""
    messages: list[str] = []
    monkeypatch.setattr(checkpoints.logging, "warning", lambda message, *args: messages.append(message % args))
    return messages


def test_model_change_without_checkpoint_starts_afresh(tmp_path: pathlib.Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment())
    changed = fake_data.tiny_experiment(d_model=64, num_heads=4)
    differences = resume_checks.model_config_differences(checkpoints.read_config(str(tmp_path)), changed)
    assert set(differences) == {"d_model", "num_heads"}  # Another model, but no checkpoint to lose:
    warnings = _logged_warnings(monkeypatch)
    assert resume_checks.check_resume_compatible(str(tmp_path), changed) is None  # accepted,
    assert len(warnings) == 1 and "starting afresh" in warnings[0]  # and said so.


def test_non_model_changes_may_resume(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment())
    _save_steps(tmp_path, [1])
    changed = fake_data.tiny_experiment(num_train_steps=99, dtype="bfloat16", log_every_steps=7)
    assert resume_checks.model_config_differences(checkpoints.read_config(str(tmp_path)), changed) == {}
    warnings = _logged_warnings(monkeypatch)
    assert resume_checks.check_resume_compatible(str(tmp_path), changed) is None  # The run resumes,
    assert len(warnings) == 1  # naming what changed.
    assert all(name in warnings[0] for name in ("dtype", "log_every_steps", "num_train_steps"))


def _real_shaped(step: int) -> train_state.TrainState:
    """A state whose parameters have the shapes of the tiny test model, all equal to ``step``."""
    abstract = params_checkpoints.abstract_inference_params(fake_data.tiny_experiment())
    return _state(step, jax.tree.map(lambda leaf: jnp.full(leaf.shape, float(step), leaf.dtype), abstract))


@pytest.mark.integration
def test_load_for_inference_and_averaging(tmp_path: pathlib.Path) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment())
    _save_steps(tmp_path, [1, 2, 4], make=_real_shaped)
    params, config = params_checkpoints.load_for_inference(str(tmp_path))
    assert config.model.d_model == 32
    kernel = params["encoder_0"]["ffn"]["inner"]["kernel"]
    assert kernel.shape == (32, 64) and float(kernel[0, 0]) == 4.0
    params, _ = params_checkpoints.load_for_inference(str(tmp_path), "2")
    assert all(float(np.asarray(leaf).ravel()[0]) == 2.0 for leaf in jax.tree.leaves(params))

    averaged, steps = params_checkpoints.average_last_params(str(tmp_path), 2)
    assert steps == [2, 4]
    assert all(np.all(leaf == 3.0) and leaf.dtype == np.float32 for leaf in jax.tree.leaves(averaged))
    average_checkpoints.write_averaged(str(tmp_path), 3)
    params, _ = params_checkpoints.load_for_inference(str(tmp_path), "averaged")
    assert all(np.allclose(np.asarray(leaf), 7.0 / 3.0) for leaf in jax.tree.leaves(params))
    with pytest.raises(ValueError, match="holds 3"):
        params_checkpoints.average_last_params(str(tmp_path), 4)


@pytest.mark.slow
def test_average_checkpoints_command(tmp_path: pathlib.Path) -> None:
    config = fake_data.tiny_experiment(average_last_checkpoints=2)
    checkpoints.write_config(str(tmp_path), config)
    _save_steps(tmp_path, [1, 3], make=_real_shaped)
    completed = train_support.run_python(
        ["-m", "attention_jax.average_checkpoints", f"--workdir={tmp_path}"],
        train_support.subprocess_env(str(tmp_path / "cache")))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout.strip().splitlines()[-1])["steps"] == [1, 3]
    assert (f"averaged the 2 newest checkpoints (config.average_last_checkpoints=2 of the run): steps [1, 3], "
            f"into {tmp_path / 'averaged'}") in completed.stdout
    params, _ = params_checkpoints.load_for_inference(str(tmp_path), "averaged")
    assert all(np.all(np.asarray(leaf) == 2.0) for leaf in jax.tree.leaves(params))


@pytest.mark.slow
def test_average_checkpoints_needs_last_on_a_run_that_scores_one_checkpoint(tmp_path: pathlib.Path) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(average_last_checkpoints=1))  # As tiny.py.
    _save_steps(tmp_path, [1, 3], make=_real_shaped)
    env = train_support.subprocess_env(str(tmp_path / "cache"))
    refused = train_support.run_python(["-m", "attention_jax.average_checkpoints", f"--workdir={tmp_path}"], env)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    errors = [line for line in refused.stderr.splitlines() if "average_checkpoints: error:" in line]
    assert len(errors) == 1 and "config.average_last_checkpoints=1" in errors[0] and "pass --last=N" in errors[0]
    assert not (tmp_path / "averaged").exists()
    asked = train_support.run_python(["-m", "attention_jax.average_checkpoints", f"--workdir={tmp_path}",
                                      "--last=2"], env)
    assert asked.returncode == 0, asked.stderr[-3000:]
    assert "averaged the 2 newest checkpoints (--last=2): steps [1, 3]" in asked.stdout
    assert json.loads(asked.stdout.strip().splitlines()[-1]) == {
        "averaged": str(tmp_path / "averaged"), "steps": [1, 3], "last": 2}


def test_load_for_inference_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        params_checkpoints.load_for_inference(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="config.json"):
        params_checkpoints.load_for_inference(str(tmp_path))
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment())
    with pytest.raises(FileNotFoundError, match="no finished checkpoint"):
        params_checkpoints.load_for_inference(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="average_checkpoints"):
        params_checkpoints.load_for_inference(str(tmp_path), "averaged")
    _save_steps(tmp_path, [2], make=_real_shaped)
    with pytest.raises(FileNotFoundError, match=r"steps: \[2\]"):
        params_checkpoints.load_for_inference(str(tmp_path), "5")
    with pytest.raises(ValueError, match="which must be"):
        params_checkpoints.load_for_inference(str(tmp_path), "newest")
    with pytest.raises(FileNotFoundError, match="early_stopping_patience > 0"):
        params_checkpoints.load_for_inference(str(tmp_path), "best")
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(d_model=48, num_heads=3))
    with pytest.raises(ValueError, match=r"does not fit the model.*\['out'\]\['bias'\]: \(32,\) in "
                                         r"the checkpoint, \(48,\) expected"):
        params_checkpoints.load_for_inference(str(tmp_path))
