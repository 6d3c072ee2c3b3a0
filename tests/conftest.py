"""Shared pytest fixtures: the real parallel corpus in ../shared (skipped when absent)."""

from __future__ import annotations

import os
import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def shared_dir() -> pathlib.Path:
    """The ``shared/`` folder beside the repository (or ``$ATTENTION_JAX_SHARED``)."""
    return pathlib.Path(os.environ.get("ATTENTION_JAX_SHARED", REPO_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def messages_en_de() -> pathlib.Path:
    """Directory of the real EN-DE corpus (train/dev/test.tsv); skips the test when it is absent."""
    path = shared_dir() / "data" / "messages_en_de"
    if not (path / "train.tsv").is_file():
        pytest.skip(f"real corpus not found at {path} (needs ../shared beside the repository)")
    return path


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    """The repository root (configs/ and the package live there)."""
    return REPO_ROOT
