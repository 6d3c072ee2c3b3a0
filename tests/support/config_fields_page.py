"""``docs/config_fields.md``, rendered from the config fields' declarations (attention_jax/experiment/declarations.py).

``tests/experiment/test_fields.py`` compares the committed page with :func:`fields_page`; after adding or
changing a field, write it again from the repository root with ``python -m tests.support.config_fields_page``.
"""

from __future__ import annotations

import dataclasses

from attention_jax.experiment import schema
from attention_jax.experiment.fields import Record, ResumeRule, _records
from attention_jax.models import feed_forward_registry
from tests.support import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "config_fields.md"

_RESUME_WORDS = {
    ResumeRule.FREE: "may change", ResumeRule.MODEL: "refused (another model)",
    ResumeRule.COMPUTE: "may change (same model)", ResumeRule.DATA: "refused (another corpus)",
    ResumeRule.SEED: "refused (another start)", ResumeRule.OPTIMIZER_STATE: "not switched on or off",
    ResumeRule.POSITIONS: "refused if the positions change", ResumeRule.SCHEDULE: "refused (another schedule)",
}

_HEADER = """# Config fields

Every field a config file, a sweep row or a `--config.FIELD=VALUE` flag may set, section by section:
its type, the paper's default, the values it takes, what a changed value means when a run directory is
resumed, and its meaning. Each row is one declaration in the section's pydantic dataclass
(`Field(...)` in
[`attention_jax/experiment/declarations.py`](../attention_jax/experiment/declarations.py));
this page is written from them by `python -m tests.support.config_fields_page` (a test compares them),
so it is never edited by hand. "Old runs" is what a `config.json` written before the field existed meant.
A registry entry's own settings (an attention function's, a positional encoding's, a normalisation's) are
declared on its entry and listed after its section's table, keyed by entry as a config sets them:
`--config.positional_encoding_settings.relative.max_distance=8`. Keys an old run's `config.json` may
hold that have moved are read where they live now; they are listed at the end.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _allowed(field: Record) -> str:
    if field.choices is not None:
        return ", ".join(f"`{value}`" for value in field.choices)
    return field.range_text


def _row(field: Record) -> str:
    old = "" if field.old_run_value is dataclasses.MISSING else f"`{field.old_run_value!r}`"
    kind = f"tuple of {field.kind.removesuffix('_tuple')}" if field.kind.endswith("_tuple") else field.kind
    default, allowed = f"`{field.default!r}`", _allowed(field)
    if field.kind == "entry_settings":
        assert field.by_entry is not None
        kind, default = f"settings of `{field.by_entry.registry.field}` entries", "each entry's"
        entries = field.by_entry.registry.settings_classes()
        allowed = ", ".join(f"`{entry}`" for entry in entries) or "(no entry has settings)"
    cells = (f"`{field.name}`", kind, default, allowed, _RESUME_WORDS[field.resume], old, field.doc)
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _settings_rows(section: str) -> str:
    """The entries' own settings of a section's registries: one row per setting, ``""`` when none has any."""
    rows = []
    for field in schema.FIELDS:
        if field.section != section or field.by_entry is None:
            continue
        for entry, settings_class in field.by_entry.registry.settings_classes().items():
            for setting in _records(settings_class, ""):
                cells = (f"`{field.name}.{entry}.{setting.name}`", setting.kind, f"`{setting.default!r}`",
                         _allowed(setting), setting.doc)
                rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |\n")
    if not rows:
        return ""
    return ("\nThe entries' own settings (what a changed one means for a resumed run, and for old runs, is "
            "their settings field's):\n\n| setting | type | default | values | meaning |\n|---|---|---|---|---|\n"
            + "".join(rows))


def _feed_forward_section() -> str:
    """The feed-forward variants: what each computes, its hidden width and parameters at two sizes."""
    sizes = ((512, 2048), (128, 512))  # The paper's base model; the small-corpus recipe.

    def cells(entry: feed_forward_registry.FeedForwardVariant) -> str:
        widths = []
        for d_model, d_ff in sizes:
            params = feed_forward_registry._feed_forward_params(entry.name, d_model=d_model, d_ff=d_ff)
            paper = feed_forward_registry._feed_forward_params("relu", d_model=d_model, d_ff=d_ff)
            width = feed_forward_registry._hidden_width(entry.name, d_ff)
            widths.append(f"{width} ({params / paper - 1:+.2%})")
        gated = "yes" if entry.gated else "no"
        return f"| `{entry.name}` | {gated} | {' | '.join(widths)} | {_cell(entry.summary)} |\n"

    return ("\n## Feed-forward variants (`feed_forward`)\n\nThe entries of "
            "`attention_jax/models/feed_forward_registry.py`. "
            "A gated one has a third matrix (`gate`, W; `inner` is V); with `feed_forward_match_params` its hidden "
            f"width is 2/3 d_ff rounded to a multiple of {feed_forward_registry.GATED_WIDTH_MULTIPLE}. Hidden width "
            "(parameters against `relu`, biases included) per layer:\n\n"
            "| entry | gated | d_model 512, d_ff 2048 | d_model 128, d_ff 512 | computes |\n|---|---|---|---|---|\n"
            + "".join(cells(entry) for entry in feed_forward_registry.FEED_FORWARDS.values()))


def _renamed_rows() -> str:
    rows = "".join(f"| `{old}` | `{'.'.join(path)}` |\n" for old, path in schema.RENAMED_FIELDS.items())
    return ("\n## Moved keys\n\nAn old run's `config.json` holding one of these is read with its value where "
            "it lives now (the same model); a config file, row or flag that sets one is refused with the new "
            "key.\n\n| old key | now |\n|---|---|\n" + rows)


def fields_page() -> str:
    """Return the whole of ``docs/config_fields.md``: one table per section, Markdown ending in a newline."""
    parts = [_HEADER]
    for section in schema.SECTION_CLASSES:
        class_name = schema.SECTION_CLASSES[section].__name__
        parts.append(f"\n## {section} (`{class_name}`)\n\n"
                     "| field | type | default | values | on resume | old runs | meaning |\n"
                     "|---|---|---|---|---|---|---|\n")
        parts.append("".join(_row(field) + "\n" for field in schema.FIELDS if field.section == section))
        parts.append(_settings_rows(section))
    parts.append(_feed_forward_section())
    parts.append(_renamed_rows())
    return "".join(parts)


def write_page() -> None:
    """Write :func:`fields_page` to ``docs/config_fields.md`` (the built-in registry entries only)."""
    PAGE.write_text(fields_page())


if __name__ == "__main__":
    write_page()
