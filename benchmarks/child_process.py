"""Child processes of the benchmark drivers: the repository on their path, their output captured.

``benchmarks/gpu.py`` and ``benchmarks/time_to_bleu.py`` keep JAX (and so the GPU) out of their own
process while others measure: they ask a child which device there is, and run the commands they time
or score as children. Both start those children the same way, from here.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
from typing import Mapping, Sequence

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def repository_environment() -> dict[str, str]:
    """This process's environment with the repository root first on ``PYTHONPATH``.

    Returns
    -------
    dict[str, str]
        A copy of ``os.environ``; an existing ``PYTHONPATH`` follows the root.

    Notes
    -----
    The children import ``attention_jax`` and ``configs`` whatever directory the driver was started
    from.
    """
    search_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=search_path)


def run_captured(command: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` from the repository root and wait, its output captured as text.

    Parameters
    ----------
    command : sequence of str
        The program and its arguments.
    env : mapping of str to str
        The child's environment (:func:`repository_environment`).

    Returns
    -------
    subprocess.CompletedProcess[str]
        ``returncode``, ``stdout`` and ``stderr``; a failing command raises nothing (the caller reads
        the exit status).
    """
    return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
