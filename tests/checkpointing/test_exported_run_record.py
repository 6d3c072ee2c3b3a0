"""An export directory's export.json and safetensors metadata name the run by its absolute path."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from safetensors import safe_open

from attention_jax.checkpointing import exported_run
from tests.support.fake_data import tiny_experiment


def test_export_json_names_the_run_by_an_absolute_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    tokenizer = tmp_path / "runs" / "tiny" / "tokenizer.model"
    tokenizer.write_bytes(b"not a real model; copied as it is")
    monkeypatch.chdir(tmp_path)  # The command line's --workdir=runs/tiny, relative to here.
    params = {"dense": {"kernel": np.ones((2, 3), np.float32)}}
    exported_run.write_export_directory("out", params, tiny_experiment(), str(tokenizer), workdir="runs/tiny",
                                        checkpoint="latest", step=4)
    monkeypatch.chdir(tmp_path / "runs")  # Read from elsewhere, the record still finds the run.
    record = json.loads((tmp_path / "out" / exported_run.RECORD_FILE).read_text())
    assert record["workdir"] == str(tmp_path / "runs" / "tiny") and pathlib.Path(record["workdir"]).is_dir()
    with safe_open(str(tmp_path / "out" / exported_run.PARAMS_FILE), framework="numpy") as tensors:
        assert tensors.metadata()["workdir"] == record["workdir"]
