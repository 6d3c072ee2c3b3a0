"""Run a notebook under notebooks/ top to bottom, as the notebook tests do, or refresh its committed outputs.

The notebooks are committed with the outputs of one run (printed tables and plots), so that they read
where the repository is browsed. The tests execute a copy in memory and never write it back; to refresh
the committed outputs after editing a notebook, from the repository root::

    python -m tests.support.notebooks notebooks/03_ablations.ipynb

Notes
-----
Each notebook runs in a fresh ``python3`` kernel (the interpreter running pytest: jupyter_client
substitutes ``sys.executable`` for the kernelspec's ``python``) with the repository root as working
directory and on ``PYTHONPATH``, so ``import attention_jax`` works. The notebooks check their own claims
with ``assert`` / ``np.testing`` in their cells, so a notebook that runs is a notebook whose checks pass.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import time
from typing import Any

import pytest

from tests.support import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
# Reads the quickstart's trained run, so tests/end_to_end/test_quickstart.py runs it (one pytest-xdist work unit).
QUICKSTART_NOTEBOOK = REPO_ROOT / "notebooks" / "02_inside_a_trained_model.ipynb"
CELL_TIMEOUT_S = 300  # Per cell; the notebooks are meant to run in about a minute in total on a CPU.
# Log lines (12:00:00 I ... from our commands, I0101 12:00:00.000 ... from C++, INFO:absl:... from Python),
# dropped from stderr when outputs are committed: noise there.
ABSL_LOG_LINE = re.compile(r"^(\d\d:\d\d:\d\d [DIWEC] |[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ |(INFO|WARNING):absl:)")


def kernel_environment(environment: dict[str, str] | None = None) -> dict[str, str]:
    """The environment variables a notebook's kernel gets on top of the caller's.

    Parameters
    ----------
    environment : dict[str, str] or None
        Extra variables (e.g. ``ATTENTION_JAX_TINY_WORKDIR``).

    Returns
    -------
    dict[str, str]
        ``environment``, ``PYTHONPATH`` with the repository root first, and ``JAX_PLATFORMS`` (``cpu``
        unless already set: the calling process may hold the accelerator's memory).
    """
    python_path = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**(environment or {}), "PYTHONPATH": os.pathsep.join(python_path),
            "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}


def run_notebook(notebook_path: pathlib.Path, record_timing: bool = True, coalesce_streams: bool = False) -> Any:
    """Execute every cell of a notebook in a fresh kernel and return the executed notebook (not saved).

    Parameters
    ----------
    notebook_path : pathlib.Path
        The ``.ipynb`` file; it is read, never written.
    record_timing : bool
        Whether nbclient records each cell's start and end times in its metadata.
    coalesce_streams : bool
        Whether a cell's consecutive stdout (or stderr) outputs are merged into one.

    Returns
    -------
    nbformat.NotebookNode
        The notebook with its outputs.

    Notes
    -----
    The kernel inherits this process's environment: set :func:`kernel_environment` first. Raises
    ``nbclient.exceptions.CellExecutionError``, naming the cell, when any cell raises.
    """
    import nbclient
    import nbformat

    notebook = nbformat.read(notebook_path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     record_timing=record_timing, coalesce_streams=coalesce_streams,
                                     resources={"metadata": {"path": str(REPO_ROOT)}})  # Working dir.
    client.execute()
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.execution_count is not None for cell in code_cells), (
        f"{notebook_path.name}: not every code cell ran")
    return notebook


def execute_notebook(notebook_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                     environment: dict[str, str] | None = None) -> Any:
    """Execute every cell of a notebook, failing the test with the cell that raised.

    Parameters
    ----------
    notebook_path : pathlib.Path
        The ``.ipynb`` file; it is executed in memory and never written back.
    monkeypatch : pytest.MonkeyPatch
        The test's monkeypatch; the kernel inherits the environment it sets.
    environment : dict[str, str] or None
        Extra environment variables for the kernel (e.g. ``ATTENTION_JAX_TINY_WORKDIR``).

    Returns
    -------
    nbformat.NotebookNode
        The executed notebook, with its outputs.

    Notes
    -----
    The kernel runs on the CPU unless ``JAX_PLATFORMS`` says otherwise: the pytest process may already
    hold the accelerator's memory.
    """
    pytest.importorskip("nbclient")
    pytest.importorskip("nbformat")
    for name, value in kernel_environment(environment).items():
        monkeypatch.setenv(name, value)
    return run_notebook(notebook_path)


def strip_log_lines(notebook: Any) -> int:
    """Drop absl log lines from the notebook's stderr outputs, and stderr outputs left empty.

    Parameters
    ----------
    notebook : nbformat.NotebookNode
        An executed notebook, changed in place.

    Returns
    -------
    int
        How many lines were dropped.
    """
    dropped = 0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        kept_outputs = []
        for output in cell.outputs:
            if output.output_type == "stream" and output.name == "stderr":
                lines = output.text.splitlines(keepends=True)
                kept = [line for line in lines if not ABSL_LOG_LINE.match(line)]
                dropped += len(lines) - len(kept)
                if not kept:
                    continue
                output.text = "".join(kept)
            kept_outputs.append(output)
        cell.outputs = kept_outputs
    return dropped


def refresh_outputs(notebook_path: pathlib.Path) -> float:
    """Execute a notebook as the tests do and save it in place with its outputs.

    Parameters
    ----------
    notebook_path : pathlib.Path
        The ``.ipynb`` file to execute and overwrite.

    Returns
    -------
    float
        Seconds the execution took.

    Notes
    -----
    Cells keep no timing metadata, a cell's printed lines are one output, and stderr keeps no absl log
    lines, so that a refresh changes only what the notebook shows.
    """
    import nbformat

    os.environ.update(kernel_environment())
    start = time.perf_counter()
    notebook = run_notebook(notebook_path, record_timing=False, coalesce_streams=True)
    seconds = time.perf_counter() - start
    dropped = strip_log_lines(notebook)
    nbformat.write(notebook, notebook_path)
    print(f"{notebook_path}: executed in {seconds:.0f} s, outputs saved"
          + (f" ({dropped} absl log lines dropped)" if dropped else ""))
    return seconds


def main() -> None:
    """``python -m tests.support.notebooks NOTEBOOK...``: refresh each notebook's committed outputs."""
    parser = argparse.ArgumentParser(description=refresh_outputs.__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path, help="the .ipynb files, run one at a time")
    for notebook_path in parser.parse_args().notebooks:
        refresh_outputs(notebook_path.resolve())


if __name__ == "__main__":
    main()


ABLATIONS_NOTEBOOK = REPO_ROOT / "notebooks" / "03_ablations.ipynb"
