"""The persistent compilation cache: where it goes, and that a second process loads instead of compiling."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from attention_jax.checkpointing import compilation_cache

from tests.support import REPO_ROOT


# Compiles one jitted function with the cache in argv[1] (every entry written: no minimum compile time)
# and prints which cache events JAX reported: a miss writes the entry, a hit loads it.
_PROBE = """
import sys, jax, jax.numpy as jnp
from attention_jax.checkpointing import compilation_cache
events = []
jax.monitoring.register_event_listener(lambda name, **kwargs: events.append(name))
compilation_cache.MIN_COMPILE_SECONDS = 0.0
print("directory", compilation_cache.enable(sys.argv[1]))
step = jax.jit(lambda x: jnp.tanh(x @ x.T).sum(axis=0))
step(jnp.ones((32, 32))).block_until_ready()
print("hits", events.count("/jax/compilation_cache/cache_hits"))
print("misses", events.count("/jax/compilation_cache/cache_misses"))
"""


def _probe(cache_dir: pathlib.Path) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key != "JAX_COMPILATION_CACHE_DIR"}
    environment.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT))
    completed = subprocess.run([sys.executable, "-c", _PROBE, str(cache_dir)], env=environment,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return dict(line.split(" ", 1) for line in completed.stdout.splitlines())


@pytest.mark.slow
def test_second_process_loads_what_the_first_compiled(tmp_path: pathlib.Path) -> None:
    cache_dir = tmp_path / "cache"
    first, second = _probe(cache_dir), _probe(cache_dir)
    assert first["directory"] == second["directory"] == str(cache_dir)
    assert int(first["misses"]) >= 1 and int(first["hits"]) == 0
    assert int(second["hits"]) >= 1 and int(second["misses"]) == 0
    assert any(cache_dir.iterdir())


def test_directory_from_environment_config_or_default(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("ATTENTION_JAX_CACHE_DIR", raising=False)
    default = os.path.abspath(os.path.expanduser(compilation_cache.DEFAULT_DIRECTORY))
    assert compilation_cache._resolve_directory("default") == default
    assert compilation_cache._resolve_directory(None) == default  # An older run's config has no field.
    assert compilation_cache._resolve_directory("") is None
    assert compilation_cache._resolve_directory(str(tmp_path / "mine")) == str(tmp_path / "mine")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "from_env"))
    assert compilation_cache._resolve_directory("") == str(tmp_path / "from_env")  # The environment wins.


def test_unwritable_directory_warns_and_runs_without_cache(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with caplog.at_level("WARNING"):
        assert compilation_cache.enable(str(blocker / "cache")) is None
    assert "No compilation cache" in caplog.text and "compilation_cache_dir" in caplog.text
