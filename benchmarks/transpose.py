r"""XLA's CPU transpose of a whole matrix against :func:`attention_jax.cpu_kernels.projection.transpose_in_row_blocks`.

Run from the repository root::

    python benchmarks/transpose.py --out=benchmarks/results/transpose_cpu.json
    python benchmarks/transpose.py --quick        # two small shapes, a few repeats (the test suite's run)

For each ``[M, C]`` float32 shape (default: the inputs the Dense layers' backward pass transposes in
the base- and small-shape train steps of ``benchmarks/peer_flax.py``), three jitted programs add 1 to
the matrix and transpose it: whole (``.T`` behind an ``optimization_barrier``, as the backward pass
did before), in row blocks, and, as the floor, the same add without a transpose (a plain copy). The
programs are timed in alternating rounds; each reports the median over all rounds. Every result is
checked against NumPy's transpose before timing.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, "benchmarks"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from attention_jax.cpu_kernels import projection  # noqa: E402
from benchmarks import command_line  # noqa: E402
from peer_compare import emit_json  # noqa: E402

DEFAULT_SHAPES = "1024x2048,1024x512,2048x1024,2048x512,2048x256"
QUICK_SHAPES = "512x256,256x64"


def _programs() -> dict[str, Callable[[jax.Array], jax.Array]]:
    """The three jitted programs compared, by name."""
    barrier = jax.lax.optimization_barrier
    return {"whole": jax.jit(lambda matrix: barrier((matrix + 1.0).T)),
            "row_blocks": jax.jit(lambda matrix: barrier(projection.transpose_in_row_blocks(matrix + 1.0))),
            "copy": jax.jit(lambda matrix: barrier(matrix + 1.0))}


def time_shape(num_rows: int, num_columns: int, rounds: int, repeats: int) -> dict[str, Any]:
    """Median milliseconds of each program on one ``[num_rows, num_columns]`` float32 matrix.

    Parameters
    ----------
    num_rows, num_columns : int
        ``M`` and ``C``.
    rounds : int
        Alternating rounds over the programs.
    repeats : int
        Timed calls of each program per round.

    Returns
    -------
    dict[str, Any]
        ``shape``, ``bytes``, ``median_ms`` per program and ``whole_over_row_blocks``.
    """
    matrix = np.random.default_rng(0).normal(size=(num_rows, num_columns)).astype(np.float32)
    device_matrix = jnp.asarray(matrix)
    programs = _programs()
    for name, program in programs.items():  # Compile, and check what is timed.
        expected = matrix + 1.0 if name == "copy" else (matrix + 1.0).T
        np.testing.assert_array_equal(np.asarray(program(device_matrix)), expected)
    times: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(rounds):
        for name, program in programs.items():
            for _ in range(repeats):
                start = time.perf_counter()
                jax.block_until_ready(program(device_matrix))
                times[name].append(time.perf_counter() - start)
    median_ms = {name: 1e3 * float(np.median(values)) for name, values in times.items()}
    return {"shape": [num_rows, num_columns], "bytes": matrix.nbytes, "median_ms": median_ms,
            "whole_over_row_blocks": median_ms["whole"] / median_ms["row_blocks"]}


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("shapes", DEFAULT_SHAPES, "Comma-separated MxC shapes.")
    flags.DEFINE_integer("rounds", 5, "Alternating rounds over the programs.")
    flags.DEFINE_integer("repeats", 10, "Timed calls per program and round.")
    flags.DEFINE_bool("quick", False, f"Shapes {QUICK_SHAPES}, 2 rounds of 2.")
    flags.DEFINE_string("out", "", "Also write the JSON here.")


def main(argv: list[str]) -> None:
    """Time every shape, print a table to stderr and the JSON to stdout."""
    del argv
    args = flags.FLAGS
    shapes, rounds, repeats = args.shapes, args.rounds, args.repeats
    if args.quick:
        shapes, rounds, repeats = QUICK_SHAPES, 2, 2
    results = []
    for text in shapes.split(","):
        num_rows, num_columns = (int(size) for size in text.lower().split("x"))
        results.append(time_shape(num_rows, num_columns, rounds, repeats))
        milliseconds = results[-1]["median_ms"]
        print(f"[{num_rows}, {num_columns}]: whole {milliseconds['whole']:.2f} ms, row blocks "
              f"{milliseconds['row_blocks']:.2f} ms, copy {milliseconds['copy']:.2f} ms", file=sys.stderr)
    emit_json({"device": jax.devices()[0].device_kind, "jax": jax.__version__, "rounds": rounds,
               "repeats": repeats, "block_rows": projection.TRANSPOSE_BLOCK_ROWS, "shapes": results}, args.out)


if __name__ == "__main__":
    command_line.run(main, define_flags)
