"""One declaration per config field: the schema, the sections, the resume checks and the docs table follow.

Each field is a pydantic ``Field(...)`` of its section's dataclass (attention_jax/experiment/declarations.py,
read back by attention_jax/experiment/fields.py); these tests check that everything else is derived from it:
a section refuses what the schema refuses, with the same words; no section holds a field the schema does
not know; the resume rules and the old runs' values are those the fields declare; docs/config_fields.md is
the page the declarations render.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import annotated_types
import pytest
from pydantic import Field

from attention_jax.checkpointing import resume_checks
from attention_jax.experiment import fields, schema, sections
from attention_jax.experiment.fields import AS_TUPLE, OldRuns, OneOf, ResumeRule, section
from configs import tiny
from tests.support import config_fields_page

# Fields a section holds that are not config fields of its own: copied from another section or derived.
DERIVED_FIELDS = {"model": {"max_len", "decode"}, "data": {"vocab_size", "fine_tune_from"},
                  "optimizer": {"d_model"}, "decoding": set(), "run": set(), "experiment": set()}


@section
class _Knobs:
    """A section of one's own, declared as the library's are."""

    width: Annotated[int, ResumeRule.MODEL] = Field(8, description="A positive width.", gt=0)
    scale: Annotated[float, OldRuns(0.0)] = Field(0.5, description="A probability.", ge=0, lt=1)
    splits: Annotated[tuple[Annotated[str, OneOf(("dev", "test"))], ...], AS_TUPLE] = Field(
        ("dev",), description="Some splits.")
    copied: int = 3  # Not a config field (no description): left out of the schema.


def test_a_declaration_gives_the_type_range_choices_and_rules() -> None:
    width, scale, splits = fields._records(_Knobs, "knobs")
    assert [(field.name, field.kind) for field in (width, scale, splits)] == [
        ("width", "int"), ("scale", "float"), ("splits", "str_tuple")]
    assert (width.default, width.range_text, width.resume) == (8, "positive", ResumeRule.MODEL)
    assert width.section == "knobs"
    assert scale.old_run_value == 0.0 and width.old_run_value is dataclasses.MISSING
    assert tuple(splits.choices) == ("dev", "test")
    with pytest.raises(ValueError, match=r"^width must be positive; got 0\.$"):
        _Knobs(width=0)
    with pytest.raises(ValueError, match=r"^scale must be a probability in \[0, 1\); got 1\.0\.$"):
        _Knobs(scale=1.0)
    with pytest.raises(ValueError, match=r"^splits must be one of dev, test; got 'xyz' \(an item of "):
        _Knobs(splits=["xyz"])
    with pytest.raises(ValueError, match=r"^width must be an integer; got '8' \(str\)\.$"):
        _Knobs(width="8")
    assert _Knobs(width=2, copied=-5).copied == -5  # Undeclared: its type only.
    assert _Knobs(splits=["test"]).splits == ("test",)  # config.json's list, read as a tuple.


def test_a_field_whose_type_the_schema_cannot_take_is_refused_when_read() -> None:
    @section
    class Bad:
        """A section with a list field."""

        items: list = Field((), description="A list.")

    with pytest.raises(TypeError, match="Bad.items: a config field is an int, float"):
        fields._records(Bad, "bad")


def _outside(field: fields.Record) -> Any:
    """A value just outside the field's range."""
    metadata = field.owner.__pydantic_fields__[field.attribute].metadata
    for bound in metadata:
        if isinstance(bound, (annotated_types.Lt, annotated_types.Le)):
            high = dataclasses.astuple(bound)[0]
            return high if isinstance(bound, annotated_types.Lt) else high + 1
    low = next(dataclasses.astuple(bound)[0] for bound in metadata
               if isinstance(bound, (annotated_types.Gt, annotated_types.Ge)))
    value = low if any(isinstance(bound, annotated_types.Gt) for bound in metadata) else low - 1
    return int(value) if field.kind == "int" else float(value)


def test_a_built_section_refuses_what_the_schema_refuses_in_the_same_words() -> None:
    experiment = sections.build_experiment(tiny.get_config(), "tiny")
    built = {"model": experiment.model, "data": experiment.data, "optimizer": experiment.optimizer,
             "decoding": experiment.decoding, "run": experiment.run}
    checked = 0
    for field in schema.FIELDS:
        if field.section not in built or field.kind not in ("int", "float"):
            continue
        if not field.range_text:
            continue
        bad = _outside(field)
        expected = fields._check_value(field, bad)
        assert expected, field.name
        with pytest.raises(ValueError) as raised:
            dataclasses.replace(built[field.section], **{field.name: bad})
        assert str(raised.value) == f"{expected}.", field.name
        with pytest.raises(schema.ConfigError) as refused:
            sections.build_experiment({**experiment.fields, field.name: bad}, "here")
        assert str(refused.value) == f"here: {expected}.", field.name
        checked += 1
    assert checked >= 40  # Every ranged number of every section.


def test_every_field_of_a_section_is_declared_or_derived() -> None:
    for section, section_class in schema.SECTION_CLASSES.items():
        names = {field.name for field in dataclasses.fields(section_class)}
        assert names - set(schema.SECTION_FIELDS[section]) == DERIVED_FIELDS[section], section


def test_the_resume_rules_are_the_declared_ones() -> None:
    assert resume_checks.DATA_IDENTITY_FIELDS == ("dataset", "source_lang", "target_lang", "train_split",
                                                  "tokenizer_max_sentences", "fine_tune_from")
    assert resume_checks.RUN_IDENTITY_FIELDS == ("seed",)
    assert resume_checks.OPTIMIZER_STATE_FIELDS == ("grad_clip_norm", "weight_decay")
    assert resume_checks.SCHEDULE_FIELDS == ("lr_schedule",)
    assert resume_checks.POSITION_FIELDS == ("max_len", "max_decode_extra_len")
    assert set(schema.FIELDS_BY_RULE[ResumeRule.COMPUTE]) == {"dtype", "attention_implementation", "cpu_kernels"}
    model_fields = set(schema.SECTION_FIELDS["model"]) - {"dtype", "attention_implementation", "cpu_kernels"}
    assert set(resume_checks.MODEL_FIELDS) == model_fields | {"model_kind"}


def test_old_runs_read_the_values_their_fields_declare() -> None:
    assert dict(schema.OLD_RUN_DEFAULTS) == {
        "attention_function": "scaled_dot_product", "cpu_kernels": True, "cache_stages": 2, "fine_tune_from": "",
        "corpus": "",
        "fine_tune_checkpoint": "latest", "num_sample_translations": 3, "peak_tflops_per_device": 0.0,
        "early_stopping_min_steps": 0, "text_feature": "text", "tokens_per_batch_unit": "slots", "user_modules": (),
        "positional_encoding_settings": {}, "grad_clip_norm": 0.0, "weight_decay": 0.0,
        "normalization": "layer_norm", "normalization_settings": {}, "residual_connections": True,
        "attention_function_settings": {}, "feed_forward": "relu", "feed_forward_bias": True,
        "feed_forward_match_params": True, "lr_schedule": "paper"}


def test_the_docs_table_is_the_declarations() -> None:
    assert config_fields_page.PAGE.read_text() == config_fields_page.fields_page(), (
        "docs/config_fields.md is stale: python -m tests.support.config_fields_page")
    page = config_fields_page.fields_page()
    for field in schema.FIELDS:
        assert f"| `{field.name}` |" in page and field.doc.replace("|", "\\|") in page, field.name


def test_the_extending_pages_field_example_is_the_libraries_declaration() -> None:
    page = (config_fields_page.PAGE.parent / "extending.md").read_text()
    section = page.split("## A config field", 1)[1].split("\n## ", 1)[0]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    source = (config_fields_page.PAGE.parents[1] / "attention_jax" / "experiment" / "declarations.py").read_text()
    assert block.strip() and block in source  # The page shows weight_decay's declaration as it is written.
    assert "weight_decay" in schema.SECTION_FIELDS["optimizer"]
