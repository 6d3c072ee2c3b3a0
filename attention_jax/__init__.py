"""The Transformer of "Attention Is All You Need" in JAX/Flax: the Python API of a trained run.

``attention_jax.make_translator(attention_jax.load_run("runs/tiny")).translate(["The house is small."])``.
The names import on first use (``import attention_jax`` imports no JAX); docs/python_api.md shows them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "load_run": "attention_jax.decoding.inference",
    "TrainedRun": "attention_jax.decoding.inference",
    "make_translator": "attention_jax.decoding.inference",
    "export_run": "attention_jax.decoding.inference",
    "attention_maps": "attention_jax.evaluation.run_attention",
    "Translator": "attention_jax.decoding.decode",
    "Transformer": "attention_jax.models.model",
    "TransformerConfig": "attention_jax.experiment.declarations",
    "encode_batch": "attention_jax.decoding.text_batches",
    "save_safetensors": "attention_jax.checkpointing.safetensors_params",
    "load_safetensors": "attention_jax.checkpointing.safetensors_params",
    "tensor_names": "attention_jax.checkpointing.safetensors_params",
    "export_function": "attention_jax.decoding.exported_functions",
    "save_exported": "attention_jax.decoding.exported_functions",
    "load_exported": "attention_jax.decoding.exported_functions",
}
__all__ = ["Transformer", "TransformerConfig", "TrainedRun", "Translator", "attention_maps", "encode_batch",
           "export_function", "export_run", "load_exported", "load_run", "load_safetensors", "make_translator",
           "save_exported", "save_safetensors", "tensor_names"]

if TYPE_CHECKING:  # What the names are, for type checkers and editors; at run time __getattr__ imports them.
    from attention_jax.checkpointing.safetensors_params import load_safetensors, save_safetensors, tensor_names
    from attention_jax.decoding.decode import Translator
    from attention_jax.decoding.exported_functions import export_function, load_exported, save_exported
    from attention_jax.decoding.inference import TrainedRun, export_run, load_run, make_translator
    from attention_jax.decoding.text_batches import encode_batch
    from attention_jax.evaluation.run_attention import attention_maps
    from attention_jax.experiment.sections import TransformerConfig
    from attention_jax.models.model import Transformer


def __getattr__(name: str) -> Any:
    """Import a name of the API from its module on first access (PEP 562); others raise ``AttributeError``."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'attention_jax' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Return the module's names and the API's (``dir(attention_jax)``, tab completion)."""
    return sorted(set(globals()) | set(__all__))
