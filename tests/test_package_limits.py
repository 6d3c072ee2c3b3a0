"""What the package's layout keeps besides its layers (those are `lint-imports`' contracts, pyproject.toml):
no module is too long, and configs, sweeps and reports load no framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

PACKAGE = REPO_ROOT / "attention_jax"
MAX_MODULE_LINES = 600


def test_no_module_is_longer_than_the_limit() -> None:
    long_modules = {str(path.relative_to(REPO_ROOT)): count for path in PACKAGE.rglob("*.py")
                    if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long_modules, f"over {MAX_MODULE_LINES} lines: {long_modules}"


@pytest.mark.slow
def test_configs_sweeps_and_reports_load_no_framework() -> None:
    frameworks = ("jax", "jaxlib", "flax", "optax", "orbax", "tensorflow", "tensorflow_datasets", "torch")
    # One process per command module: each defines its own absl flags (--root in two of them).
    for modules in (("configs.table2", "configs.sweeps.positions", "attention_jax.experiment.sections",
                     "launch.sweep"), ("launch.export_results",), ("attention_jax.report",)):
        probe = (f"import sys; import {', '.join(modules)}; "
                 f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({frameworks!r})))")
        imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                                  cwd=REPO_ROOT)
        assert imported.returncode == 0, imported.stderr[-2000:]
        assert imported.stdout.strip() == "[]", (modules, imported.stdout)
