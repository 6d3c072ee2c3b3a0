"""Every notebook under notebooks/ executes top to bottom without raising.

The notebooks check their own claims with ``assert`` / ``np.testing`` in their cells, so a notebook that
runs is a notebook whose checks pass. Each runs in a fresh ``python3`` kernel (the interpreter running
pytest: jupyter_client substitutes ``sys.executable`` for the kernelspec's ``python``) with the
repository root as working directory and on ``PYTHONPATH``, so ``import attention_jax`` works.
"""

import os
import pathlib

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
QUICKSTART_NOTEBOOK_PREFIX = "02_"  # Notebook 02 inspects the quickstart's trained model.
CELL_TIMEOUT_S = 300  # Per cell; the notebooks are meant to run in about a minute in total on a CPU.


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("notebook_path", [
    # The notebook that reads the quickstart's run shares its pytest-xdist work unit (tests/conftest.py).
    pytest.param(path, id=path.name, marks=[pytest.mark.xdist_group("quickstart")]
                 if path.name.startswith(QUICKSTART_NOTEBOOK_PREFIX) else [])
    for path in NOTEBOOKS])
def test_notebook_executes(notebook_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                           request: pytest.FixtureRequest) -> None:
    if notebook_path.name.startswith(QUICKSTART_NOTEBOOK_PREFIX):
        monkeypatch.setenv("ATTENTION_JAX_TINY_WORKDIR", str(request.getfixturevalue("tiny_workdir")))
    python_path = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(python_path))  # Inherited by the kernel process.
    # CPU unless asked otherwise: the pytest process may already hold the accelerator's memory.
    monkeypatch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", "cpu"))
    notebook = nbformat.read(notebook_path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(REPO_ROOT)}},  # The kernel's working directory.
    )
    client.execute()  # Raises CellExecutionError, naming the cell, when any cell raises.
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.execution_count is not None for cell in code_cells)
