"""The restore cache: a warm ``translate`` reads the parameters Orbax restored, never those of an older checkpoint."""

from __future__ import annotations

import os
import shutil

import jax
import numpy as np
import pytest

from attention_jax.checkpointing import params_checkpoints, restored_params
from attention_jax.decoding import background_warm_up, inference
from attention_jax.foundation import run_files


@pytest.fixture
def cache_dir(tmp_path):
    """A compilation cache directory of the test's own, JAX's setting restored after it."""
    previous = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "cache"))
    yield str(tmp_path / "cache")
    jax.config.update("jax_compilation_cache_dir", previous)


@pytest.fixture
def run_copy(workdir, tmp_path):
    """A copy of the module's run that a test may change."""
    return str(shutil.copytree(workdir, tmp_path / "run"))


def _assert_same_params(found, expected):
    assert jax.tree.structure(found) == jax.tree.structure(expected)
    for leaf, other in zip(jax.tree.leaves(found), jax.tree.leaves(expected)):
        assert leaf.shape == other.shape and leaf.dtype == other.dtype
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(other))


def _no_restore(*args, **kwargs):
    raise AssertionError("Orbax restored the parameters: the cache was not read.")


@pytest.mark.parametrize(("checkpoint", "average_last"), [("latest", 0), ("10", 0), ("latest", 2)])
def test_cached_params_equal_the_orbax_restore(run_copy, cache_dir, monkeypatch, checkpoint, average_last):
    expected = inference.load_run(run_copy, checkpoint, average_last=average_last)
    first = background_warm_up.load_run(run_copy, checkpoint, average_last)  # Restores and keeps them.
    assert os.path.isfile(restored_params.entry_path(cache_dir, run_copy, checkpoint, average_last))
    monkeypatch.setattr(params_checkpoints, "load_for_inference", _no_restore)
    second = background_warm_up.load_run(run_copy, checkpoint, average_last)
    for run in (first, second):
        _assert_same_params(run.params, expected.params)
        assert run.checkpoint == expected.checkpoint and run.model_config == expected.model_config
        assert run.config == expected.config and run.workdir == expected.workdir


def test_a_new_or_rewritten_checkpoint_is_never_served_from_a_stale_entry(run_copy, cache_dir):
    checkpoints_dir = os.path.join(run_copy, run_files.CHECKPOINT_DIR)
    background_warm_up.load_run(run_copy)  # Keeps step 20's parameters.
    shutil.copytree(os.path.join(checkpoints_dir, "10"), os.path.join(checkpoints_dir, "30"))  # Step 10's as 30.
    _assert_same_params(background_warm_up.load_run(run_copy).params, inference.load_run(run_copy, "10").params)
    identity = restored_params.run_identity(run_copy, "latest", 0)
    some_file = next(os.path.join(folder, name) for folder, _, names in os.walk(os.path.join(checkpoints_dir, "30"))
                     for name in names)
    stat = os.stat(some_file)
    os.utime(some_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # Rewritten in place, same size.
    assert restored_params.run_identity(run_copy, "latest", 0) != identity
    shutil.rmtree(os.path.join(checkpoints_dir, "30"))  # Rotated away: step 20 is the latest again.
    _assert_same_params(background_warm_up.load_run(run_copy).params, inference.load_run(run_copy, "20").params)


def test_a_stale_or_damaged_entry_is_not_read(run_copy, cache_dir):
    background_warm_up.load_run(run_copy)
    path = restored_params.entry_path(cache_dir, run_copy, "latest", 0)
    assert restored_params.load(path, "another identity") is None
    identity = restored_params.run_identity(run_copy, "latest", 0)
    assert restored_params.load(path, identity) is not None
    with open(path, "r+b") as file:
        file.write(b"damaged")
    assert restored_params.load(path, identity) is None
    _assert_same_params(background_warm_up.load_run(run_copy).params, inference.load_run(run_copy).params)
