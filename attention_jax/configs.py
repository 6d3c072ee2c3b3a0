"""The repository's shipped configs from a config or sweep file in any directory, in one line.

A config file of one's own, anywhere, builds on a shipped one with::

    from attention_jax.configs import tiny

which is the module ``configs/tiny.py`` of the checkout that ``attention_jax`` was installed from
(``pip install -e .``, as the README says), whatever the working directory: ``configs/`` is a folder of
the repository, not an installed package (``pyproject.toml``), so a plain ``from configs import tiny``
works only from the repository root. Any shipped config's name works (``base``, ``table2``, ...; the
list: ``python -m attention_jax.main --config=nosuch``).

Notes
-----
This module is the one place the library reaches ``configs/``, and only when a user's file asks for a
config by name: nothing in the library imports it. Without a checkout (a wheel install) the import fails
with one line saying so (:func:`attention_jax.commands.shipped_configs.use_checkout`).
"""

from __future__ import annotations

import importlib
import types

from attention_jax.commands import shipped_configs
from attention_jax.experiment import schema


def __getattr__(name: str) -> types.ModuleType:
    """``attention_jax.configs.<name>``: the checkout's ``configs/<name>.py``, imported as ``configs.<name>``.

    Parameters
    ----------
    name : str
        A shipped config's module name, e.g. ``"tiny"``.

    Returns
    -------
    types.ModuleType
        The config module (its ``get_config``).

    Notes
    -----
    Raises ``AttributeError`` (``ImportError`` under ``from ... import``) naming the shipped configs for an
    unknown name, and :class:`attention_jax.foundation.user_errors.UserInputError` without a checkout.
    """
    if name.startswith("__"):  # Module machinery (__path__, __file__, ...): not a config.
        raise AttributeError(name)
    shipped_configs.use_checkout(f"from attention_jax.configs import {name}")
    shipped = shipped_configs.names()
    if name not in shipped:
        raise AttributeError(f"attention_jax.configs has no shipped config {name!r}"
                             f"{schema.did_you_mean(name, shipped)}; the shipped configs are {', '.join(shipped)}.")
    return importlib.import_module(f"configs.{name}")
