"""The registry of named variants (attention_jax/foundation/registry.py) and the one did-you-mean hint."""

from __future__ import annotations

import dataclasses

import pytest

from attention_jax.foundation.registry import Registry, did_you_mean


@dataclasses.dataclass(frozen=True)
class _Entry:
    name: str
    settings: type | None = None


def test_entries_register_undo_and_refuse_an_unknown_name_in_one_line() -> None:
    registry: Registry[_Entry] = Registry("flavour", (_Entry("vanilla"), _Entry("mint", settings=dict)))
    assert tuple(registry) == ("vanilla", "mint") and registry.settings_classes() == {"mint": dict}
    with registry.register(_Entry("mango")) as entry:
        assert registry.lookup("mango") is entry
        with pytest.raises(ValueError, match="^flavour 'mango' is registered already"):
            registry.register(_Entry("mango"))
    assert "mango" not in registry
    with pytest.raises(ValueError, match=r"^flavour must be one of \('vanilla', 'mint'\); got 'vanila'\. "
                                         r"Did you mean 'vanilla'\?$"):
        registry.lookup("vanila")


def test_did_you_mean_names_the_closest_candidate_or_nothing() -> None:
    assert did_you_mean("num_head", ["num_heads", "d_model"]) == " (did you mean num_heads?)"
    assert did_you_mean("zzz", ["num_heads", "d_model"]) == ""
