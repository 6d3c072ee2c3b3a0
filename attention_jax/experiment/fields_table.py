"""The table of config fields in ``docs/config_fields.md``, rendered from the fields' declarations.

``tests/test_config_fields.py`` compares the committed page with :func:`fields_page`, so the page cannot
drift from the declarations; after adding or changing a field, write it again with::

    python -c "from attention_jax.experiment import fields_table; fields_table.write_page()"
"""

from __future__ import annotations

import pathlib

from attention_jax.experiment import schema
from attention_jax.field_declarations import NO_OLD_RUN_VALUE, Field, ResumeRule

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "config_fields.md"

_RESUME_WORDS = {
    ResumeRule.FREE: "may change", ResumeRule.MODEL: "refused (another model)",
    ResumeRule.COMPUTE: "may change (same model)", ResumeRule.DATA: "refused (another corpus)",
    ResumeRule.SEED: "refused (another start)", ResumeRule.OPTIMIZER_STATE: "not switched on or off",
    ResumeRule.POSITIONS: "refused if the positions change",
}

_HEADER = """# Config fields

Every field a config file, a sweep row or a `--config.FIELD=VALUE` flag may set, section by section:
its type, the paper's default, the values it takes, what a changed value means when a run directory is
resumed, and its meaning. Each row is one declaration in the section's dataclass
(`setting(...)` in [`attention_jax/field_declarations.py`](../attention_jax/field_declarations.py));
this page is written from them by `attention_jax/experiment/fields_table.py` (a test compares them), so
it is never edited by hand. "Old runs" is what a `config.json` written before the field existed meant.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _allowed(field: Field) -> str:
    allowed = field.allowed()
    if allowed is not None:
        return ", ".join(f"`{value}`" for value in allowed)
    return field.range_text()


def _row(field: Field) -> str:
    old = "" if field.old_run_value is NO_OLD_RUN_VALUE else f"`{field.old_run_value!r}`"
    kind = f"tuple of {field.kind.removesuffix('_tuple')}" if field.kind.endswith("_tuple") else field.kind
    cells = (f"`{field.name}`", kind, f"`{field.default!r}`", _allowed(field),
             _RESUME_WORDS[field.resume], old, field.doc)
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def fields_page() -> str:
    """The whole of ``docs/config_fields.md``: one table per section of :data:`schema.SECTIONS`.

    Returns
    -------
    str
        Markdown, ending in a newline.
    """
    parts = [_HEADER]
    for section in schema.SECTIONS:
        class_name = schema.SECTION_CLASSES[section].__name__
        parts.append(f"\n## {section} (`{class_name}`)\n\n"
                     "| field | type | default | values | on resume | old runs | meaning |\n"
                     "|---|---|---|---|---|---|---|\n")
        parts.append("".join(_row(field) + "\n" for field in schema.FIELDS if field.section == section))
    return "".join(parts)


def write_page() -> None:
    """Write :func:`fields_page` to ``docs/config_fields.md``.

    Notes
    -----
    Only the built-in registry entries are listed as choices: run it without ``user_modules``.
    """
    PAGE.write_text(fields_page())
