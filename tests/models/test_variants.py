"""Variants are asked for by enum member, never by name spelt as a string (models/variants.py, the registries).

``model_kind``, ``layer_norm_position`` and ``attention_implementation`` are config strings (``config.json``
stores them so); each has an enum whose members compare equal to them, and the library compares with the
members. A scan of the library's syntax trees finds any comparison with one of the names written out.
"""

from __future__ import annotations

import ast
import json
import pathlib

from attention_jax.experiment import schema
from attention_jax.models import variants
from attention_jax.models.attention_registry import ATTENTION_IMPLEMENTATIONS, AttentionImplementation
from attention_jax.models.variants import LayerNormPosition, ModelKind

LIBRARY = pathlib.Path(__file__).resolve().parents[2] / "attention_jax"
VARIANT_NAMES = {*variants.values(ModelKind), *variants.values(LayerNormPosition), *ATTENTION_IMPLEMENTATIONS}
# "post" and "pre" also name other things (no config value); they are checked where a comparison reads a
# layer_norm_position.
AMBIGUOUS = set(variants.values(LayerNormPosition))


def _string_constants(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [value for item in node.elts for value in _string_constants(item)]
    return []


def _comparisons_with_variant_names(path: pathlib.Path, root: pathlib.Path = LIBRARY.parent) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        text = ast.unparse(node)
        names = [name for operand in (node.left, *node.comparators) for name in _string_constants(operand)]
        if any(name in VARIANT_NAMES and (name not in AMBIGUOUS or "layer_norm_position" in text) for name in names):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {text}")
    return found


def test_no_library_module_compares_a_variant_name_spelt_as_a_string() -> None:
    found = [line for path in sorted(LIBRARY.rglob("*.py")) for line in _comparisons_with_variant_names(path)]
    assert not found, "compare with the enum member instead:\n" + "\n".join(found)


def test_the_scan_finds_a_comparison_written_with_a_string(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('def f(config, kind):\n    return config.layer_norm_position == "pre" or kind != "decoder_only"'
                      ' or config.attention_implementation in ("einsum", "xla")\n')
    found = _comparisons_with_variant_names(module, tmp_path)
    assert len(found) == 3 and all(line.startswith("module.py:2: ") for line in found)


def test_a_member_is_its_config_string_and_the_fields_choices_are_the_members() -> None:
    assert ModelKind.DECODER_ONLY == "decoder_only" and json.dumps(ModelKind.DECODER_ONLY) == '"decoder_only"'
    assert LayerNormPosition("pre") is LayerNormPosition.PRE
    assert AttentionImplementation("fused") is AttentionImplementation.FUSED
    for name, variant in (("model_kind", ModelKind), ("layer_norm_position", LayerNormPosition),
                          ("attention_implementation", AttentionImplementation)):
        assert tuple(schema.FIELDS_BY_NAME[name].choices) == variants.values(variant), name
        assert schema.FIELDS_BY_NAME[name].default in variants.values(variant), name
