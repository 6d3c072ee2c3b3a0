"""Import a Python file given by path (a config or sweep file) as a module, its failure one line."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from types import ModuleType

from attention_jax.foundation.user_errors import UserInputError


class PythonFileError(UserInputError):
    """A Python file that raised while it was imported; ``error`` is what it raised.

    Parameters
    ----------
    message : str
        The one-line message (names the file and the error).
    error : BaseException
        What importing the file raised.
    """

    def __init__(self, message: str, error: BaseException):
        super().__init__(message)
        self.error = error


def import_python_file(path: str, prefix: str, import_root: str) -> ModuleType:
    """Import the Python file ``path`` as a new module (not kept in ``sys.modules``).

    Parameters
    ----------
    path, prefix : str
        The file; the module name's prefix (the path, made an identifier, follows it).
    import_root : str
        Put on ``sys.path`` when missing: config files import ``configs.base`` from the repository root.

    Returns
    -------
    ModuleType
        The module, executed.

    Raises
    ------
    PythonFileError
        For a ``SyntaxError`` or any exception the file raised, in one line naming the file.
    """
    spec = importlib.util.spec_from_file_location(prefix + re.sub(r"\W", "_", os.path.abspath(path)), path)
    assert spec is not None and spec.loader is not None  # A .py path always has a loader.
    module = importlib.util.module_from_spec(spec)
    if import_root not in sys.path:
        sys.path.insert(0, import_root)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        raise PythonFileError(f"{path} line {error.lineno}: SyntaxError: {error.msg}.", error) from None
    except Exception as error:  # Whatever the file raised while it was imported.
        raise PythonFileError(f"importing {path} raised {type(error).__name__}: {error}", error) from None
    return module
