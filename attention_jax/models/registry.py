"""The models' registries name their built-ins' JAX code (:func:`jax_hook`) instead of importing it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def jax_hook(module: str, function: str) -> Callable[..., Any]:
    """Return a hook calling ``attention_jax.models.<module>.<function>``, imported on first call.

    Naming the JAX code keeps config checks framework-free and avoids import cycles.

    Parameters
    ----------
    module, function : str
        Module under ``attention_jax/models/`` and function in it.

    Returns
    -------
    callable
        The hook, named ``function``.
    """
    def _hook(*arguments: Any, **keywords: Any) -> Any:
        return getattr(importlib.import_module(f"attention_jax.models.{module}"), function)(*arguments, **keywords)

    _hook.__name__ = _hook.__qualname__ = function
    return _hook
