"""The config schema (attention_jax/experiment): every key and value checked at every entry point.

A misspelt or wrongly typed key in a sweep row, in a config file or on the command line is one line,
exit status 2, with nothing written, from both ``attention_jax.main`` and ``launch.sweep``; every
committed run directory in ``docs/`` still loads.
"""

from __future__ import annotations

import glob
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import ml_collections
import pytest

from attention_jax.checkpointing import checkpoints
from attention_jax.commands import config_errors
from attention_jax.experiment import schema, sections
from attention_jax.experiment.fields import _check_value
from configs import base, tiny
from tests.support import REPO_ROOT


def _fields(**changes: object) -> dict:
    fields = sections.plain_fields(tiny.get_config())
    fields.update(changes)
    return fields


# --- The table -------------------------------------------------------------------------------------

def test_every_field_has_a_section_a_meaning_and_a_default_that_passes_its_own_check() -> None:
    assert len(schema.FIELDS_BY_NAME) == len(schema.FIELDS), "a field is listed twice"
    for field in schema.FIELDS:
        assert field.section in schema.SECTION_CLASSES, field.name
        assert field.doc.strip() and "\n" not in field.doc, field.name
        assert _check_value(field, field.default) is None, field.name
    assert {field.section for field in schema.FIELDS} == set(schema.SECTION_CLASSES)


def test_base_config_is_the_schemas_defaults_and_every_shipped_config_builds() -> None:
    assert sections.plain_fields(base.get_config()) == {**schema.default_config(), "name": "base",
                                                         "paper": dict(dev_ppl=4.92, dev_bleu=25.8,
                                                                       params_millions=65)}
    experiment = sections.build_experiment(base.get_config(), "configs/base.py")
    assert (experiment.model.num_layers, experiment.model.d_model, experiment.model.num_heads) == (6, 512, 8)
    assert experiment.model.max_len == 256 + 50  # Positions for the longest input plus the decoding margin.
    assert (experiment.optimizer.adam_b2, experiment.optimizer.adam_eps) == (0.98, 1e-9)
    assert (experiment.decoding.beam_size, experiment.decoding.length_penalty_alpha) == (4, 0.6)
    assert experiment.paper.dev_ppl == 4.92 and experiment.paper.test_bleu is None
    for path in sorted(glob.glob(str(REPO_ROOT / "configs" / "*.py"))):
        if path.endswith("__init__.py") or "get_sweep" in pathlib.Path(path).read_text():
            continue
        sections.build_experiment(config_errors._load_config_file(os.path.relpath(path, REPO_ROOT)), path)


def test_sections_hold_every_field_of_their_section() -> None:
    experiment = sections.build_experiment(tiny.get_config(), "tiny")
    objects = {"model": experiment.model, "data": experiment.data, "optimizer": experiment.optimizer,
               "decoding": experiment.decoding, "run": experiment.run}
    for section, holder in objects.items():
        for name in schema.SECTION_FIELDS[section]:
            assert hasattr(holder, name), f"{section} section lacks {name}"
    given = sections.plain_fields(tiny.get_config())
    assert given["positional_encoding_settings"] == {"relative": {"max_distance": 16, "add_to_values": True}}
    given["positional_encoding_settings"] = {}  # config.json records the chosen entry's settings: sinusoidal has none.
    assert dict(experiment.fields) == given
    json.dumps(experiment.to_json_dict())  # config.json's flat form.


@pytest.mark.parametrize("changes, message", [
    (dict(num_head=2), "unknown config field 'num_head' (did you mean num_heads?)"),
    (dict(num_heads="8"), "num_heads must be an integer; got '8' (str)"),
    (dict(dropout_rate=True), "dropout_rate must be a number; got True (bool)"),
    (dict(dropout_rate=1.0), "dropout_rate must be a probability in [0, 1); got 1.0"),
    (dict(learning_rate_scale=-1.0), "learning_rate_scale must be >= 0; got -1.0"),
    (dict(learning_rate_scale=float("inf")), "learning_rate_scale must be a number; got inf"),
    (dict(num_train_steps=0), "num_train_steps must be positive; got 0"),
    (dict(eval_every_steps=-1), "eval_every_steps must be >= 0; got -1"),
    (dict(attention_function="adittive"), "got 'adittive' (did you mean additive?)"),
    (dict(mesh_shape=(2, "x")), "mesh_shape"),
    (dict(final_bleu_splits=("dev", "tset")), "final_bleu_splits must be one of"),
    (dict(paper=dict(dev_pll=4.9)), "paper has no figure 'dev_pll' (did you mean dev_ppl?)"),
    (dict(packing=True, attention_window=8), "packing=True needs full attention"),
    (dict(mesh_shape=(1, 1)), "one entry per mesh axis"),
])
def test_a_bad_key_or_value_is_one_line_naming_where(changes: dict, message: str) -> None:
    with pytest.raises(schema.ConfigError) as raised:
        sections.build_experiment(_fields(**changes), "configs/mine.py row r1")
    text = str(raised.value)
    assert text.startswith("configs/mine.py row r1: ") and message in text and "\n" not in text


def test_a_missing_field_is_refused() -> None:
    fields = _fields()
    del fields["beam_size"]
    with pytest.raises(schema.ConfigError, match="has no field beam_size"):
        sections.build_experiment(fields, "here")


@pytest.mark.parametrize("key, text, value", [
    ("num_heads", "16", 16), ("dropout_rate", "0.3", 0.3), ("packing", "True", True), ("packing", "false", False),
    ("dataset", "tsv:/data", "tsv:/data"), ("mesh_shape", "(2,-1)", (2, -1)), ("final_bleu_splits", "('dev',)", ("dev",)),
    ("paper.dev_ppl", "4.9", 4.9),
])
def test_flag_values_parse_as_the_entry_point_parses_them(key: str, text: str, value: object) -> None:
    assert schema.parse_flag_value(key, text, "--config") == value


def test_a_flag_value_that_is_no_literal_is_refused() -> None:
    with pytest.raises(schema.ConfigError, match="packing must be True or False"):
        schema.parse_flag_value("packing", "yes please", "--config.packing")
    with pytest.raises(schema.ConfigError, match="is not a int value"):
        schema.parse_flag_value("num_heads", "eight", "--config.num_heads")


# --- Old run directories ---------------------------------------------------------------------------

def test_every_committed_run_directory_still_loads() -> None:
    paths = sorted(glob.glob(str(REPO_ROOT / "docs" / "**" / "config.json"), recursive=True))
    assert len(paths) >= 100, "the committed runs moved: update this test's glob"
    for path in paths:
        experiment = checkpoints.read_config(os.path.dirname(path))  # Old-run defaults, then the schema.
        assert isinstance(experiment, sections.Experiment) and experiment.model.d_model > 0


def test_old_run_defaults_say_how_the_old_runs_behaved() -> None:
    oldest = json.loads((REPO_ROOT / "docs/table2_small_superseded/C3/seed_1/config.json").read_text())
    assert "attention_function" not in oldest and "cpu_kernels" not in oldest  # Written before those fields.
    upgraded = schema.with_old_run_defaults(oldest)
    assert upgraded["attention_function"] == "scaled_dot_product" and upgraded["cpu_kernels"] is True
    assert schema.with_old_run_defaults({})["tokens_per_batch_unit"] == "slots"  # Before "real" was the default.
    assert schema.with_old_run_defaults({"tokens_per_batch_unit": "real"})["tokens_per_batch_unit"] == "real"
    for name in schema.OLD_RUN_DEFAULTS:
        assert name in schema.FIELDS_BY_NAME


def test_a_hand_edited_config_json_is_named_in_one_line(tmp_path: pathlib.Path) -> None:
    fields = sections.build_experiment(tiny.get_config(), "tiny").to_json_dict()
    (tmp_path / "config.json").write_text(json.dumps({**fields, "num_layer": 3}))
    with pytest.raises(schema.ConfigError, match=r"config.json: unknown config field 'num_layer' \(did you mean"):
        checkpoints.read_config(str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(schema.ConfigError, match="is not valid JSON"):
        checkpoints.read_config(str(tmp_path))


# --- Entry points, as a user runs them -------------------------------------------------------------

def _write(directory: pathlib.Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def _assert_refused(result: subprocess.CompletedProcess, message: str, written: pathlib.Path) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and message in lines[0], result.stderr[-2000:]
    assert not written.exists(), f"{written} was written"


@pytest.fixture(scope="module")
def user_configs(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("user_configs")
    _write(directory, "typo_sweep.py", """
        from configs import tiny

        def get_config():
            return tiny.get_config()

        def get_sweep():
            return {"base": {}, "heads2": dict(num_head=2)}
    """)
    _write(directory, "typo_config.py", """
        from configs import tiny

        def get_config():
            config = tiny.get_config()
            config.update(dict(num_head=2))
            return config
    """)
    _write(directory, "typed_sweep.py", """
        from configs import tiny

        def get_config(row):
            config = tiny.get_config()
            config.name = row
            if row == "narrow":
                config.d_model = 64
                config.dropout_rate = 0.0
                config.update(dict(num_heads=0))
            return config

        def get_sweep():
            return {"base": {}, "narrow": {}}
    """)
    return directory


@pytest.mark.end_to_end
@pytest.mark.parametrize("case", ["sweep_row", "config_file", "flag", "flag_type"])
def test_main_refuses_a_bad_key_in_one_line_and_writes_nothing(case: str, user_configs: pathlib.Path,
                                                                tmp_path: pathlib.Path) -> None:
    workdir = tmp_path / "run"
    args, message = {
        "sweep_row": ([f"--config={user_configs}/typed_sweep.py:narrow"], "num_heads must be positive; got 0"),
        "config_file": ([f"--config={user_configs}/typo_config.py"],
                        "unknown config field 'num_head' (did you mean num_heads?)"),
        "flag": (["--config=configs/tiny.py", "--config.num_head=2"], "has no field num_head (did you mean num_heads?)"),
        "flag_type": (["--config=configs/tiny.py", "--config.learning_rate_scale=-1"],
                      "learning_rate_scale must be >= 0; got -1.0"),
    }[case]
    _assert_refused(_run("attention_jax.main", *args, f"--workdir={workdir}"), message, workdir)


@pytest.mark.end_to_end
@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize("case", ["row_key", "row_value", "flag_key", "flag_value"])
def test_sweep_refuses_a_bad_key_in_one_line_and_writes_nothing(case: str, dry_run: bool, user_configs: pathlib.Path,
                                                                 tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"
    args, message = {
        "row_key": ([f"--config={user_configs}/typo_sweep.py"],
                    "typo_sweep.py row heads2: unknown config field 'num_head' (did you mean num_heads?)"),
        "row_value": ([f"--config={user_configs}/typed_sweep.py"], "typed_sweep.py row narrow: num_heads must be positive"),
        "flag_key": (["--config=configs/table2.py", "--rows=A1", "--config.warmup_step=10"],
                     "unknown config field 'warmup_step' (did you mean warmup_steps?)"),
        "flag_value": (["--config=configs/table2.py", "--rows=A1", "--config.num_heads='8'"],
                       "configs/table2.py row A1: num_heads must be an integer; got '8' (str)"),
    }[case]
    args += ["--executor=local", f"--root={root}"] + (["--dry_run"] if dry_run else [])
    _assert_refused(_run("launch.sweep", *args), message, root)


def test_a_config_file_that_does_not_run_is_one_line(tmp_path: pathlib.Path) -> None:
    broken = _write(tmp_path, "broken.py", "def get_config(:\n")
    with pytest.raises(schema.ConfigError, match="line 1: SyntaxError"):
        config_errors._load_config_file(broken)
    not_a_config = _write(tmp_path, "dict.py", "def get_config():\n    return {'num_layers': 2}\n")
    with pytest.raises(schema.ConfigError, match="returned a dict, not an ml_collections.ConfigDict"):
        config_errors._load_config_file(not_a_config)
    with pytest.raises(schema.ConfigError, match="has no rows"):
        config_errors._load_config_file("configs/tiny.py:A1")
    with pytest.raises(schema.ConfigError, match="is a directory"):
        config_errors._load_config_file("configs")
    assert isinstance(config_errors._load_config_file("configs/tiny.py"), ml_collections.ConfigDict)


@pytest.mark.end_to_end
def test_sweep_refuses_a_bad_sweep_flag_before_writing_its_record(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"  # --parallel=0 used to leave sweep.json behind, refusing the corrected command.
    result = _run("launch.sweep", "--config=configs/table2.py", "--rows=A1", "--executor=local", f"--root={root}",
                  "--parallel=0")
    _assert_refused(result, "--parallel=0: 0 is not a positive integer", root)
