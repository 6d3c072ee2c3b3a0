"""Importing a Python file by path: a failure is one line naming the file and the error."""

from __future__ import annotations

import pathlib

import pytest

from attention_jax.foundation import python_files


def test_a_file_imports_as_a_module(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "good.py"
    path.write_text("VALUE = 3\n")
    assert python_files.import_python_file(str(path), "_test_", str(tmp_path)).VALUE == 3


@pytest.mark.parametrize("text, message", [
    ("def broken(:\n", r"bad.py line 1: SyntaxError: "),
    ("raise KeyError('x')\n", r"importing .*bad.py raised KeyError: 'x'$"),
])
def test_a_file_that_fails_is_one_line(tmp_path: pathlib.Path, text: str, message: str) -> None:
    path = tmp_path / "bad.py"
    path.write_text(text)
    with pytest.raises(python_files.PythonFileError, match=message) as raised:
        python_files.import_python_file(str(path), "_test_", str(tmp_path))
    assert isinstance(raised.value.error, (SyntaxError, KeyError))
