"""Run a notebook under notebooks/ top to bottom, as the notebook tests do.

Notes
-----
Each notebook runs in a fresh ``python3`` kernel (the interpreter running pytest: jupyter_client
substitutes ``sys.executable`` for the kernelspec's ``python``) with the repository root as working
directory and on ``PYTHONPATH``, so ``import attention_jax`` works. The notebooks check their own claims
with ``assert`` / ``np.testing`` in their cells, so a notebook that runs is a notebook whose checks pass.
"""

from __future__ import annotations

import os
import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
# Reads the quickstart's trained run, so tests/test_quickstart.py runs it (one pytest-xdist work unit).
QUICKSTART_NOTEBOOK = REPO_ROOT / "notebooks" / "02_inside_a_trained_model.ipynb"
CELL_TIMEOUT_S = 300  # Per cell; the notebooks are meant to run in about a minute in total on a CPU.


def execute_notebook(notebook_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                     environment: dict[str, str] | None = None) -> None:
    """Execute every cell of a notebook, failing the test with the cell that raised.

    Parameters
    ----------
    notebook_path
        The ``.ipynb`` file.
    monkeypatch
        The test's monkeypatch; the kernel inherits the environment it sets.
    environment
        Extra environment variables for the kernel (e.g. ``ATTENTION_JAX_TINY_WORKDIR``).

    Notes
    -----
    The kernel runs on the CPU unless ``JAX_PLATFORMS`` says otherwise: the pytest process may already
    hold the accelerator's memory.
    """
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    for name, value in (environment or {}).items():
        monkeypatch.setenv(name, value)
    python_path = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(python_path))
    monkeypatch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", "cpu"))
    notebook = nbformat.read(notebook_path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO_ROOT)}})  # Working dir.
    client.execute()  # Raises CellExecutionError, naming the cell, when any cell raises.
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.execution_count is not None for cell in code_cells), (
        f"{notebook_path.name}: not every code cell ran")
