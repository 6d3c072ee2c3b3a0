"""The package's layers (docs/design.md): every import points down the layer order, no module is too long."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "attention_jax"
# Lowest first. The top-level entry points (attention_jax/<command>.py) sit with commands.
LAYERS = ("foundation", "data", "cpu_kernels", "models", "experiment", "checkpointing", "decoding", "evaluation", "training",
          "reports", "commands")
FOUNDATION_MODULES = ("run_files", "user_errors", "field_declarations", "entry_settings", "full_disk", "cache_dirs", "log_format",
                      "quiet_libraries", "quiet_exits")  # Below everything: file names, error types, how a config field and a registry
# entry's own settings are declared, and how every command's process reports (a full disk, libraries' chatter, pipes).
MAX_MODULE_LINES = 600


def _layer_of(module: str) -> str:
    """The layer of a dotted module name inside attention_jax (``attention_jax.models.model`` -> ``models``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "commands"  # ``from attention_jax import X`` names X below; the package itself is empty.
    name = parts[1]
    if name in FOUNDATION_MODULES:
        return "foundation"
    if name in LAYERS:
        return name
    return "commands"  # attention_jax/<command>.py entry points.


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every attention_jax module imported anywhere in ``path`` (function-level imports included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "attention_jax":
            if node.module == "attention_jax":
                found += [(node.lineno, f"attention_jax.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "attention_jax"]
    return found


def _module_layer(path: pathlib.Path) -> str:
    relative = path.relative_to(PACKAGE)
    if len(relative.parts) == 1:
        return "foundation" if relative.stem in FOUNDATION_MODULES else "commands"
    return relative.parts[0]


def test_every_import_points_down_the_layers() -> None:
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = _module_layer(path)
        assert layer in LAYERS, f"{path.relative_to(REPO_ROOT)} is in no layer; add its folder to LAYERS and docs/design.md"
        for line, module in _imports(path):
            target = _layer_of(module)
            if LAYERS.index(target) > LAYERS.index(layer):
                violations.append(f"{path.relative_to(REPO_ROOT)}:{line} ({layer}) imports {module} ({target})")
    assert not violations, "imports up the layers:\n" + "\n".join(violations)


def test_no_module_is_longer_than_the_limit() -> None:
    long_modules = {str(path.relative_to(REPO_ROOT)): count for path in PACKAGE.rglob("*.py")
                    if (count := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long_modules, f"over {MAX_MODULE_LINES} lines: {long_modules}"


def test_the_layer_check_sees_an_upward_import(tmp_path: pathlib.Path) -> None:
    # The checker itself: a models module importing training is caught, run_files importing nothing is not.
    source = tmp_path / "example.py"
    source.write_text("def f():\n    from attention_jax.training import train\n    import attention_jax.run_files\n")
    targets = [_layer_of(module) for _, module in _imports(source)]
    assert targets == ["training", "foundation"]
    assert LAYERS.index("training") > LAYERS.index("models")


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
