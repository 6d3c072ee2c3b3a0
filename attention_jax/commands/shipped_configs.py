"""The repository's configs by name, from any directory: ``--config=tiny``, ``--config=table2:B1``.

``--config`` takes a file's path, ``configs/tiny.py`` from the repository root. A bare name, a config's
file name without its folder (``tiny``, ``tiny.py``, ``table2:B1``), names the file of that name in the
repository's ``configs/`` folder, which is found beside the ``attention_jax`` package: in a checkout and
after ``pip install -e .`` (the package is then imported from the checkout), whatever the working
directory. A path that names an existing file is always taken as it is, so
``--config=configs/tiny.py`` from the root, and a file of one's own, work as before; a folder of the same
name in the working directory (``./tiny/``, a run's work directory, say) does not hide the shipped config.

``configs/`` is not installed as a package (``pyproject.toml``: no top-level ``configs`` beside other
projects' in site-packages), so a wheel install has no shipped configs: pass a config file's path there.
The configs import each other (``from configs import base``);
:func:`attention_jax.commands.entry_points.add_config_import_paths` puts the folder above ``configs/``
on ``sys.path`` for a resolved name as for a path.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Sequence

import attention_jax
from attention_jax.foundation.user_errors import UserInputError

_NAME = re.compile(r"[A-Za-z_]\w*(\.py)?")  # A module's file name: no folder, no other suffix.


def configs_dir() -> str | None:
    """The repository's ``configs/`` folder beside the imported ``attention_jax`` package, if there is one.

    Returns
    -------
    str or None
        ``<checkout>/configs`` (symbolic links resolved) when it holds a ``configs`` package (its
        ``__init__.py``), else ``None`` (a wheel install).
    """
    package = os.path.dirname(os.path.realpath(attention_jax.__file__))
    directory = os.path.join(os.path.dirname(package), "configs")
    return directory if os.path.isfile(os.path.join(directory, "__init__.py")) else None


def checkout_root() -> str | None:
    """The repository checkout that holds the imported ``attention_jax`` package, if there is one.

    Returns
    -------
    str or None
        The folder above ``configs/`` (:func:`configs_dir`) when it also holds ``launch/``; None for a
        wheel install.
    """
    directory = configs_dir()
    if directory is None:
        return None
    root = os.path.dirname(directory)
    return root if os.path.isfile(os.path.join(root, "launch", "sweep.py")) else None


def use_checkout(what: str) -> str:
    """Put the checkout's root on ``sys.path`` (for ``configs`` and ``launch``), or refuse in one line.

    Parameters
    ----------
    what : str
        What needs the checkout, for the message (e.g. ``"the sweep launcher"``).

    Returns
    -------
    str
        The checkout's root.

    Notes
    -----
    Raises :class:`attention_jax.foundation.user_errors.UserInputError` when ``attention_jax`` was not installed from a
    checkout (``pip install -e .``, as the README says): ``configs/`` and ``launch/`` are folders of the
    repository, not installed packages.
    """
    root = checkout_root()
    if root is None:
        raise UserInputError(f"{what} needs the repository's configs/ and launch/ folders, and this attention_jax "
                             f"({os.path.dirname(attention_jax.__file__)}) was not installed from a checkout: "
                             "clone the repository and pip install -e it, as the README says.")
    if root not in sys.path:
        sys.path.insert(0, root)
    return root


def import_hint(error: BaseException) -> str:
    """What to do when a config or sweep file outside the checkout failed to import ``configs`` or ``launch``.

    Parameters
    ----------
    error : BaseException
        What importing the file raised.

    Returns
    -------
    str
        For ``No module named 'configs'`` (or ``'configs.<name>'``: a wheel install, or a command that does
        not add the checkout to ``sys.path``): install from a checkout and write ``from attention_jax.configs
        import <name>``; for ``'launch'``: run the launcher as ``attention-jax-sweep``; ``""`` otherwise.
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
    """The shipped configs' names (``base``, ``big``, ``tiny``, ...), sorted; empty without a ``configs/`` folder.

    Returns
    -------
    list[str]
        The module names of ``configs/*.py`` (``__init__`` left out).
    """
    directory = configs_dir()
    if directory is None:
        return []
    return sorted(name[:-3] for name in os.listdir(directory) if name.endswith(".py") and name != "__init__.py")


def is_bare_name(path: str) -> bool:
    """Whether ``path`` is a config's name rather than a path: a module name, ``.py`` or not, without a folder.

    Parameters
    ----------
    path : str
        The ``PATH`` of ``--config=PATH[:ARG]``.

    Returns
    -------
    bool
        True for ``tiny`` and ``tiny.py``; False for ``configs/tiny.py``, ``./tiny.py`` and ``tiny.json``.
    """
    return _NAME.fullmatch(path) is not None


def resolve(spec: str) -> str:
    """A ``--config`` value with a shipped config's name replaced by its file's path.

    Parameters
    ----------
    spec : str
        ``PATH`` or ``PATH:ARG`` as given on the command line.

    Returns
    -------
    str
        ``spec`` itself when ``PATH`` is a file (relative to the working directory) or is not a bare name
        (:func:`is_bare_name`), or when no shipped config has that name (the flags parser then reports
        the missing file); otherwise ``<checkout>/configs/<name>.py`` followed by ``:ARG`` if given.
    """
    path, colon, argument = spec.partition(":")
    directory = configs_dir()
    if os.path.isfile(path) or not is_bare_name(path) or directory is None:
        return spec
    shipped = os.path.join(directory, path if path.endswith(".py") else f"{path}.py")
    return f"{shipped}{colon}{argument}" if os.path.isfile(shipped) else spec


def resolve_argv(argv: Sequence[str], flag_name: str = "config") -> list[str]:
    """A command line with each ``--<flag_name>=NAME[:ARG]`` of a shipped config resolved (:func:`resolve`).

    Parameters
    ----------
    argv : Sequence[str]
        The command line (program name first).
    flag_name : str
        The config flag's name.

    Returns
    -------
    list[str]
        A new list; other arguments are unchanged.
    """
    prefix = f"--{flag_name}="
    return [prefix + resolve(argument[len(prefix):]) if argument.startswith(prefix) else argument
            for argument in argv]
