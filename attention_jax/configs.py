"""The checkout's shipped configs, importable from a config file in any directory.

``from attention_jax.configs import tiny`` is ``configs/tiny.py`` of the checkout ``attention_jax`` was installed
from (``pip install -e .``): ``configs/`` is a repository folder, not an installed package, so a plain
``from configs import tiny`` works only from the repository root. This is the one place the library reaches
``configs/``, and only on such a request; without a checkout (a wheel install) the import fails in one line.
"""

from __future__ import annotations

import importlib
import types

from attention_jax.commands import shipped_configs
from attention_jax.experiment import schema


def __getattr__(name: str) -> types.ModuleType:
    """``attention_jax.configs.<name>``: the checkout's ``configs/<name>.py``, imported as ``configs.<name>``.

    An unknown name raises ``AttributeError`` (``ImportError`` under ``from ... import``) listing the shipped ones.
    """
    if name.startswith("__"):  # Module machinery (__path__, __file__, ...): not a config.
        raise AttributeError(name)
    shipped_configs.use_checkout(f"from attention_jax.configs import {name}")
    shipped = shipped_configs.names()
    if name not in shipped:
        raise AttributeError(f"attention_jax.configs has no shipped config {name!r}"
                             f"{schema.did_you_mean(name, shipped)}; the shipped configs are {', '.join(shipped)}.")
    return importlib.import_module(f"configs.{name}")
