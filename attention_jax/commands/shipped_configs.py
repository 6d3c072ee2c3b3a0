"""The repository's configs by name from any directory (``--config=table2:B1``): ``configs/`` beside the package."""

from __future__ import annotations

import os
import re
import sys
from typing import Sequence

import attention_jax
from attention_jax.foundation.user_errors import UserInputError

_NAME = re.compile(r"[A-Za-z_]\w*(\.py)?")  # A module's file name: no folder, no other suffix.


def _configs_dir() -> str | None:
    """Return the ``configs/`` folder beside the imported package (links resolved); ``None`` for a wheel install."""
    package = os.path.dirname(os.path.realpath(attention_jax.__file__))
    directory = os.path.join(os.path.dirname(package), "configs")
    return directory if os.path.isfile(os.path.join(directory, "__init__.py")) else None


def _checkout_root() -> str | None:
    """Return the checkout holding the imported package: the folder above ``configs/`` that also holds ``launch/``."""
    directory = _configs_dir()
    if directory is None:
        return None
    root = os.path.dirname(directory)
    return root if os.path.isfile(os.path.join(root, "launch", "sweep.py")) else None


def use_checkout(what: str) -> str:
    """Put the checkout's root on ``sys.path`` (for ``configs`` and ``launch``), or refuse in one line.

    Parameters
    ----------
    what : str
        What needs the checkout, for the message.

    Returns
    -------
    str
        The checkout's root.

    Raises
    ------
    UserInputError
        When ``attention_jax`` was not installed from a checkout.
    """
    root = _checkout_root()
    if root is None:
        raise UserInputError(f"{what} needs the repository's configs/ and launch/ folders, and this attention_jax "
                             f"({os.path.dirname(attention_jax.__file__)}) was not installed from a checkout: "
                             "clone the repository and pip install -e it, as the README says.")
    if root not in sys.path:
        sys.path.insert(0, root)
    return root


def import_hint(error: BaseException) -> str:
    """Return what to do when a file outside the checkout failed to import ``configs`` or ``launch``.

    Parameters
    ----------
    error : BaseException
        What importing the file raised.

    Returns
    -------
    str
        The hint; ``""`` for other errors.
    """
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return ""
    top = error.name.split(".")[0]
    if top == "configs":
        return (" (configs/ is a folder of the repository checkout, not an installed package: pip install -e the "
                "checkout, and write `from attention_jax.configs import tiny` to use a shipped config from any "
                "directory)")
    if top == "launch":
        return (" (launch/ is a folder of the repository: run the sweep launcher as attention-jax-sweep from any "
                "directory)")
    return ""


def names() -> list[str]:
    """Return the shipped configs' names, sorted.

    Returns
    -------
    list[str]
        The module names of ``configs/*.py`` (not ``__init__``); empty without ``configs/``.
    """
    directory = _configs_dir()
    if directory is None:
        return []
    return sorted(name[:-3] for name in os.listdir(directory) if name.endswith(".py") and name != "__init__.py")


def _is_bare_name(path: str) -> bool:
    """Return whether ``path`` is a config's name (``tiny``, ``tiny.py``) rather than a path."""
    return _NAME.fullmatch(path) is not None


def resolve(spec: str) -> str:
    """Return a ``--config`` value with a shipped config's name replaced by its file's path.

    Parameters
    ----------
    spec : str
        ``PATH`` or ``PATH:ARG``.

    Returns
    -------
    str
        ``<checkout>/configs/<name>.py[:ARG]``; ``spec`` itself for a path or an unknown name.
    """
    path, colon, argument = spec.partition(":")
    directory = _configs_dir()
    if os.path.isfile(path) or not _is_bare_name(path) or directory is None:
        return spec
    shipped = os.path.join(directory, path if path.endswith(".py") else f"{path}.py")
    return f"{shipped}{colon}{argument}" if os.path.isfile(shipped) else spec


def _resolve_argv(argv: Sequence[str], flag_name: str = "config") -> list[str]:
    """Return a command line with each ``--<flag_name>=NAME[:ARG]`` resolved (:func:`resolve`)."""
    prefix = f"--{flag_name}="
    return [prefix + resolve(argument[len(prefix):]) if argument.startswith(prefix) else argument
            for argument in argv]
