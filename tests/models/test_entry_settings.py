"""Registry entries own their settings (issue 75, item 2): declared on the entry, checked, recorded, reloaded.

The relative encoding's ``max_distance`` and ``add_to_values`` (``positional_encoding_settings.relative``,
until issue 75 the top-level ``relative_max_distance`` and ``relative_values``); an attention function's
and a normalisation's settings registered for the test; the schema's one-line refusals; ``config.json``
recording the chosen entry's settings and reading them back; old runs' keys read where they live now,
the committed ``docs/positions`` runs among them.
"""

from __future__ import annotations

import json
from typing import Annotated

import ml_collections
import pydantic
import pytest

from attention_jax.checkpointing import resume_checks
from attention_jax.experiment import schema, sections
from attention_jax.experiment.fields import OneOf, section
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import attention_registry, normalization_registry, positional_encodings
from attention_jax.models.positional_encodings import AttentionPositions, RelativeSettings
from launch import sweep_spec
from tests.support import config_fields_page as fields_table
from tests.models.test_attention_registry import TEMPERATURE_ATTENTION, TemperatureSettings
from tests.support import REPO_ROOT

POSITION_RUNS = sorted((REPO_ROOT / "docs" / "positions").glob("*/seed_*/config.json"))


def _config(**changes: object) -> dict:
    config = schema.default_config()
    config.update(num_layers=1, d_model=16, d_ff=32, num_heads=2, key_dim=0, value_dim=0, vocab_size=64,
                  max_len=16, tokens_per_batch=64, **changes)
    return config


def _refusal(config: dict) -> str:
    with pytest.raises(schema.ConfigError) as raised:
        sections.build_experiment(config, "row r")
    message = str(raised.value)
    assert "\n" not in message
    return message


# --- Declared on the entry -------------------------------------------------------------------------

def test_the_relative_encoding_owns_its_two_settings() -> None:
    assert positional_encodings.POSITIONAL_ENCODINGS.settings_classes() == {"relative": RelativeSettings}
    assert attention_registry.ATTENTION_FUNCTIONS.settings_classes() == {}
    assert normalization_registry.NORMALIZATIONS.settings_classes() == {}
    assert RelativeSettings() == RelativeSettings(max_distance=16, add_to_values=True)  # Shaw et al.'s.
    assert not any(name.startswith("relative_") for name in schema.FIELDS_BY_NAME)
    relative = TransformerConfig(positional_encoding="relative")
    assert relative.positional_encoding_settings == RelativeSettings()
    assert TransformerConfig().positional_encoding_settings is None  # Sinusoidal has no settings.
    assert relative.replace(positional_encoding="rotary").positional_encoding_settings is None
    k3 = relative.replace(positional_encoding_settings=RelativeSettings(max_distance=3))
    assert k3.replace(num_heads=4).positional_encoding_settings.max_distance == 3  # Kept while the entry is.
    assert AttentionPositions("relative") == AttentionPositions("relative", RelativeSettings())
    with pytest.raises(pydantic.ValidationError, match="max_distance"):  # A plain pydantic dataclass.
        RelativeSettings(max_distance=0)


# --- Checked by the schema -------------------------------------------------------------------------

@pytest.mark.parametrize("settings, message", [
    ({"relative": {"max_distance": 0}}, "row r: positional_encoding_settings.relative.max_distance must be >= 1; "
                                        "got 0."),
    ({"relative": {"max_distance": 2.5}}, "row r: positional_encoding_settings.relative.max_distance must be an "
                                          "integer; got 2.5 (float)."),
    ({"relative": {"add_to_values": "yes"}}, "row r: positional_encoding_settings.relative.add_to_values must be "
                                             "True or False; got 'yes' (str)."),
    ({"relative": {"max_distanse": 8}}, "row r: positional_encoding_settings.relative has no setting "
                                        "'max_distanse' (did you mean max_distance?); its settings: max_distance, "
                                        "add_to_values."),
    ({"relativ": {"max_distance": 8}}, "row r: positional_encoding_settings has no entry 'relativ' (did you mean "
                                       "relative?); the positional_encoding entries with settings: relative."),
    ({"rotary": {}}, "row r: positional_encoding_settings has no entry 'rotary'; the positional_encoding entries "
                     "with settings: relative."),
    (8, "row r: positional_encoding_settings must be a dict of {entry: {setting: value}}; got 8 (int)."),
])
def test_a_bad_setting_is_refused_in_one_line(settings: object, message: str) -> None:
    assert _refusal(_config(positional_encoding="relative", positional_encoding_settings=settings)) == message
    # Every entry's settings are checked, the chosen one's or not: a typo waits for no row that uses it.
    assert _refusal(_config(positional_encoding_settings=settings)) == message


def test_an_old_key_set_anew_is_refused_with_where_it_lives_now() -> None:
    message = _refusal(_config(relative_max_distance=8))
    assert message == ("row r: unknown config field 'relative_max_distance' (it moved: set "
                       "positional_encoding_settings.relative.max_distance instead); the fields are listed in "
                       "attention_jax/experiment/schema.py.")
    with pytest.raises(schema.ConfigError, match=r"'relative_values' \(it moved: set "
                                                 r"positional_encoding_settings.relative.add_to_values instead\)"):
        schema.check_keys(["relative_values"], "--config.relative_values")


def test_a_flag_or_row_names_a_setting_by_entry() -> None:
    key = "positional_encoding_settings.relative.max_distance"
    assert key in schema.flag_keys()
    schema.check_keys([key, "paper.dev_ppl"], "flags")
    assert sweep_spec.parse_override(f"{key}=8", "--config") == (key, 8)
    assert schema.parse_flag_value("positional_encoding_settings.relative.add_to_values", "false", "f") is False
    with pytest.raises(schema.ConfigError, match=r"\(did you mean positional_encoding_settings.relative."
                                                 r"max_distance\?\)"):
        schema.check_keys(["positional_encoding_settings.relative.max_distanc"], "flags")
    # A config file's ConfigDict holds every entry's settings, so --config.<...>=8 has a field to set.
    config = ml_collections.ConfigDict(_config(positional_encoding="relative"))
    config.positional_encoding_settings.relative.max_distance = 8
    assert sections.build_experiment(config, "cfg").model.positional_encoding_settings == RelativeSettings(8, True)


# --- Recorded and reloaded -------------------------------------------------------------------------

def test_config_json_records_the_chosen_entrys_settings_and_reads_them_back() -> None:
    config = _config(positional_encoding="relative",
                     positional_encoding_settings={"relative": {"max_distance": 8, "add_to_values": False}})
    experiment = sections.build_experiment(config, "cfg")
    saved = json.loads(json.dumps(experiment.to_json_dict()))
    assert saved["positional_encoding_settings"] == {"relative": {"max_distance": 8, "add_to_values": False}}
    assert saved["attention_function_settings"] == saved["normalization_settings"] == {}
    reread = sections.build_experiment(schema.with_old_run_defaults(saved), "config.json")
    assert reread.model == experiment.model
    assert reread.model.positional_encoding_settings == RelativeSettings(max_distance=8, add_to_values=False)
    rotary = sections.build_experiment({**config, "positional_encoding": "rotary"}, "cfg")
    assert rotary.to_json_dict()["positional_encoding_settings"] == {}  # Another entry's settings: not its own.
    other_k = sections.build_experiment(
        {**config, "positional_encoding_settings": {"relative": {"max_distance": 4, "add_to_values": False}}}, "cfg")
    assert resume_checks.model_config_differences(experiment, other_k) == {"positional_encoding_settings": (
        {"max_distance": 8, "add_to_values": False}, {"max_distance": 4, "add_to_values": False})}


@pytest.mark.parametrize("encoding, old_keys, expected", [
    ("relative", {"relative_max_distance": 5, "relative_values": False}, RelativeSettings(5, False)),
    ("relative", {"relative_max_distance": 16, "relative_values": True}, RelativeSettings(16, True)),
    ("relative", {}, RelativeSettings(16, True)),  # Before the relative encoding: Shaw et al.'s defaults.
    ("sinusoidal", {"relative_max_distance": 5, "relative_values": False}, None),  # Unused then, unused now.
])
def test_an_old_runs_keys_mean_the_same_settings(encoding: str, old_keys: dict, expected: object) -> None:
    saved = sections.build_experiment(_config(positional_encoding=encoding), "cfg").to_json_dict()
    for name in ("positional_encoding_settings", "attention_function_settings", "normalization_settings"):
        del saved[name]  # An old run's config.json had none of these.
    saved.update(old_keys)
    experiment = sections.build_experiment(schema.with_old_run_defaults(json.loads(json.dumps(saved))), "old")
    assert experiment.model.positional_encoding_settings == expected
    assert not any(key.startswith("relative_") for key in experiment.fields)


def test_the_committed_position_runs_load_as_they_were_trained() -> None:
    assert len(POSITION_RUNS) == 18  # Six encodings, three seeds.
    for path in POSITION_RUNS:
        saved = json.loads(path.read_text())
        assert (saved["relative_max_distance"], saved["relative_values"]) == (16, True)  # Written before issue 75.
        experiment = sections.build_experiment(schema.with_old_run_defaults(saved), str(path))
        relative = saved["positional_encoding"] == "relative"
        assert experiment.model.positional_encoding_settings == (RelativeSettings(16, True) if relative else None)
        assert experiment.model.positional_encoding == path.parents[1].name


# --- Any registry's entry --------------------------------------------------------------------------

@section
class _OffsetSettings:
    offset: float = pydantic.Field(0.5, description="A constant the test normalisation declares.", gt=0)
    mode: Annotated[str, OneOf(("fixed", "learned"))] = pydantic.Field("fixed", description="How it is applied.")


_OFFSET_NORM = normalization_registry.Normalization(
    name="offset_none", summary="no norm, with settings", build=lambda config, name: None,
    params_per_norm=lambda d_model: 0, settings=_OffsetSettings)


def test_an_attention_function_and_a_normalization_declare_settings_too() -> None:
    with attention_registry.register_attention_function(TEMPERATURE_ATTENTION), \
            normalization_registry._register_normalization(_OFFSET_NORM):
        defaults = schema.default_config()
        assert defaults["attention_function_settings"] == {"temperature_dot_product": {"temperature": 2.0}}
        assert defaults["normalization_settings"] == {"offset_none": {"offset": 0.5, "mode": "fixed"}}
        page = fields_table.fields_page()
        temperature = "attention_function_settings.temperature_dot_product.temperature"
        assert f"| `{temperature}` | float | `2.0` | positive |" in page
        assert "| `normalization_settings.offset_none.mode` | str | `'fixed'` | `fixed`, `learned` |" in page
        config = _config(attention_function="temperature_dot_product", normalization="offset_none",
                         attention_function_settings={"temperature_dot_product": {"temperature": 0.5}},
                         normalization_settings={"offset_none": {"mode": "learned"}})
        experiment = sections.build_experiment(config, "cfg")
        assert experiment.model.attention_function_settings == TemperatureSettings(temperature=0.5)
        assert experiment.model.normalization_settings == _OffsetSettings(offset=0.5, mode="learned")
        assert experiment.to_json_dict()["normalization_settings"] == {"offset_none": {"offset": 0.5,
                                                                                       "mode": "learned"}}
        assert _refusal({**config, "attention_function_settings": {"temperature_dot_product": {"temperature": 0}}}) \
            == "row r: attention_function_settings.temperature_dot_product.temperature must be positive; got 0."
        assert _refusal({**config, "normalization_settings": {"offset_none": {"mode": "learnt"}}}) == (
            "row r: normalization_settings.offset_none.mode must be one of fixed, learned; got 'learnt' (did you "
            "mean learned?).")
    assert fields_table.fields_page() == fields_table.PAGE.read_text()  # Gone after the block.


def test_the_positions_sweep_builds_the_models_its_committed_runs_were() -> None:
    sweep = sweep_spec.load_sweep("configs/sweeps/positions.py")
    for row in ("relative", "rotary", "sinusoidal"):
        now = sections.build_experiment(sweep.row_config(row), row).model
        saved = json.loads((REPO_ROOT / "docs" / "positions" / row / "seed_0" / "config.json").read_text())
        assert now == sections.build_experiment(schema.with_old_run_defaults(saved), row).model, row
    sweep_spec.check_overrides(sweep, ["relative"], ["positional_encoding_settings.relative.max_distance=4"])
    with pytest.raises(schema.ConfigError, match=r"^configs/sweeps/positions.py row relative: "
                                                 r"positional_encoding_settings.relative.max_distance must be >= 1"):
        sweep_spec.check_overrides(sweep, ["relative"], ["positional_encoding_settings.relative.max_distance=0"])


def test_a_flagged_user_module_is_imported_before_the_config_file_runs() -> None:
    from attention_jax.commands import config_errors

    with pytest.raises(schema.ConfigError, match=r"^--config.user_modules: user_modules: cannot import "
                                                 r"'no_such_module_of_entries'"):
        config_errors._import_flagged_user_modules(["main", "--config=configs/tiny.py",
                                                   "--config.user_modules=('no_such_module_of_entries',)"])
    config_errors._import_flagged_user_modules(["main", "--config=configs/tiny.py"])  # None named: nothing to do.
