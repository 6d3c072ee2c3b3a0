"""Every notebook under notebooks/ executes top to bottom without raising (tests/support/notebooks.py).

Notebook 02 reads the quickstart's trained run, so ``tests/test_quickstart.py`` runs it: with
``--dist=loadfile`` that keeps every reader of the run in one pytest-xdist work unit, trained once.
"""

import pathlib

import pytest

from tests.support.notebooks import NOTEBOOKS, QUICKSTART_NOTEBOOK, execute_notebook


def test_the_quickstart_notebook_exists() -> None:
    assert QUICKSTART_NOTEBOOK in NOTEBOOKS, f"{QUICKSTART_NOTEBOOK} is gone; update tests/support/notebooks.py"


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("notebook_path", [path for path in NOTEBOOKS if path != QUICKSTART_NOTEBOOK],
                         ids=lambda path: path.name)
def test_notebook_executes(notebook_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    execute_notebook(notebook_path, monkeypatch)
