"""Table 1 of Vaswani et al. (2017), measured: cost of one layer as sequence length n and width d grow.

Table 1 gives the complexity per layer of four layer types:

=============================  ==============
self-attention                 O(n^2 d)
recurrent                      O(n d^2)
convolutional (kernel k)       O(k n d^2)
self-attention (restricted r)  O(r n d)
=============================  ==============

Beside them, the attention functions of ``config.attention_function`` (Section 3.2.1 and later work; not in
Table 1, so their expected complexity comes from their papers):

=============================  ==============
unscaled self-attention        O(n^2 d)        softmax(q k^T) v, footnote 4
additive self-attention        O(n^2 d)        w^T tanh(q + k): n^2 d tanh evaluations
linear self-attention          O(n d^2)        phi(q) (sum phi(k) v^T), Katharopoulos et al. (2020)
causal linear self-attention   O(n d^2)        chunks of 64 positions: + O(n 64 d) within chunks
=============================  ==============

This script times the forward pass of one layer of each type (jitted, after a warm-up call, median of
repeats with ``block_until_ready``) on ``[1, n, d]`` inputs, once as n grows at fixed d and once as d grows
at fixed n, records the bytes of temporaries of the compiled computation (XLA's ``memory_analysis``), and
fits the growth exponents (slope of log time against log n, and against log d) to put beside the table's.

Layers, as in the table (no Q/K/V/output projections for attention: the table counts the attention itself):

* ``self_attention``: ``attention.scaled_dot_product_attention`` with Q = K = V = x, one head of width d.
* ``recurrent``: a GRU, d -> d, scanned over the sequence with ``lax.scan``.
* ``convolutional``: a 1-D convolution of width k, d -> d channels, ``SAME`` padding.
* ``restricted_self_attention``: ``attention.local_dot_product_attention`` with window r.
* ``unscaled_self_attention``: the same without ``1/sqrt(d)`` (``attention_functions.unscaled_query``).
* ``additive_self_attention``: ``attention_functions.additive_attention``, a score vector of width d.
* ``linear_self_attention`` / ``causal_linear_self_attention``: ``attention_functions.linear_attention``
  without a mask / with a causal ``StructuredMask``.

Run from the repository root::

    python -m benchmarks.complexity                 # full grid, a few minutes on 2 CPU cores
    python -m benchmarks.complexity --quick --out /tmp/complexity.json   # seconds
    python -m benchmarks.complexity --layers=self_attention,additive_self_attention,linear_self_attention \
        --out benchmarks/results/complexity_attention_functions.json      # a subset of the layers

Writes the JSON to ``--out`` (default ``benchmarks/results/complexity.json``) and a log-log plot beside it
(same name, ``.png``), and prints the exponents table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import platform
import statistics
import sys
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from attention_jax.models import attention, attention_functions  # noqa: E402
from benchmarks import command_line  # noqa: E402

Array = jax.Array

TABLE1_LAYER_TYPES = ("self_attention", "recurrent", "convolutional", "restricted_self_attention")
ATTENTION_FUNCTION_LAYER_TYPES = ("unscaled_self_attention", "additive_self_attention", "linear_self_attention",
                                  "causal_linear_self_attention")
LAYER_TYPES = TABLE1_LAYER_TYPES + ATTENTION_FUNCTION_LAYER_TYPES
PAPER_COMPLEXITY = {  # Table 1's rows; for the attention functions, their papers' (not in Table 1).
    "self_attention": "O(n^2 d)",
    "recurrent": "O(n d^2)",
    "convolutional": "O(k n d^2)",
    "restricted_self_attention": "O(r n d)",
    "unscaled_self_attention": "O(n^2 d)",
    "additive_self_attention": "O(n^2 d)",
    "linear_self_attention": "O(n d^2)",
    "causal_linear_self_attention": "O(n d^2)",
}
PAPER_EXPONENTS = {  # (in n, in d) read off PAPER_COMPLEXITY.
    "self_attention": (2, 1),
    "recurrent": (1, 2),
    "convolutional": (1, 2),
    "restricted_self_attention": (1, 1),
    "unscaled_self_attention": (2, 1),
    "additive_self_attention": (2, 1),
    "linear_self_attention": (1, 2),
    "causal_linear_self_attention": (1, 2),
}
DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "results" / "complexity.json"


@dataclasses.dataclass(frozen=True)
class Grid:
    """The sizes measured.

    Attributes
    ----------
    lengths : tuple of int
        Sequence lengths n of the n sweep.
    width_for_lengths : int
        d held fixed during the n sweep.
    widths : tuple of int
        Widths d of the d sweep.
    length_for_widths : int
        n held fixed during the d sweep.
    kernel_width : int
        Convolution kernel width k.
    window : int
        Restricted self-attention neighbourhood r.
    min_repeats, max_repeats : int
        Timed calls per point: at least ``min_repeats``, more (up to ``max_repeats``) while the total
        stays under ``target_seconds``.
    target_seconds : float
        Timing budget per point.
    """

    lengths: tuple[int, ...]
    width_for_lengths: int
    widths: tuple[int, ...]
    length_for_widths: int
    kernel_width: int = 3
    window: int = 32
    min_repeats: int = 3
    max_repeats: int = 30
    target_seconds: float = 1.0


FULL_GRID = Grid(lengths=(512, 1024, 2048, 4096, 8192), width_for_lengths=128,
                 widths=(128, 256, 512, 1024, 2048), length_for_widths=256)
QUICK_GRID = Grid(lengths=(32, 64), width_for_lengths=16, widths=(16, 32), length_for_widths=64,
                  window=8, min_repeats=1, max_repeats=2, target_seconds=0.01)


def self_attention_layer(params: dict[str, Array], x: Array) -> Array:
    """Full self-attention of ``x`` ``[B, n, d]`` with itself (one head): O(n^2 d)."""
    del params
    heads = x[:, :, None, :]  # [B, n, 1, d]
    return attention.scaled_dot_product_attention(heads, heads, heads)[:, :, 0]


def restricted_self_attention_layer(window: int) -> Callable[[dict[str, Array], Array], Array]:
    """Self-attention restricted to ``|i - j| <= window`` (one head), computed blockwise: O(r n d)."""

    def layer(params: dict[str, Array], x: Array) -> Array:
        del params
        heads = x[:, :, None, :]  # [B, n, 1, d]
        return attention.local_dot_product_attention(heads, heads, heads, window)[:, :, 0]

    return layer


def unscaled_self_attention_layer(params: dict[str, Array], x: Array) -> Array:
    """Self-attention without the ``1/sqrt(d)`` scaling (one head): O(n^2 d), as scaled."""
    del params
    heads = x[:, :, None, :]  # [B, n, 1, d]
    return attention.scaled_dot_product_attention(attention_functions.unscaled_query(heads), heads, heads)[:, :, 0]


def additive_self_attention_layer(params: dict[str, Array], x: Array) -> Array:
    """Additive self-attention ``softmax(w^T tanh(q + k)) v`` (one head of width d): O(n^2 d) tanh."""
    heads = x[:, :, None, :]  # [B, n, 1, d]
    return attention_functions.additive_attention(heads, heads, heads, params["score_vector"])[:, :, 0]


def linear_self_attention_layer(causal: bool) -> Callable[[dict[str, Array], Array], Array]:
    """Linear self-attention (one head), all keys or causal: O(n d^2)."""

    def layer(params: dict[str, Array], x: Array) -> Array:
        del params
        heads = x[:, :, None, :]  # [B, n, 1, d]
        mask = attention_functions.StructuredMask(causal=True) if causal else None
        return attention_functions.linear_attention(heads, heads, heads, mask)[:, :, 0]

    return layer


def recurrent_layer(params: dict[str, Array], x: Array) -> Array:
    """A GRU over ``x`` ``[B, n, d]`` (hidden size d), one ``lax.scan`` step per position: O(n d^2).

    Gates as in Cho et al. (2014): ``z, r = sigmoid(x W + h U + b)``, ``h~ = tanh(x W_h + r * (h U_h) +
    b_h)``, ``h' = (1 - z) * h + z * h~``. The input projections of all positions are one matmul; the
    recurrence does one ``[d, 3d]`` matmul per position.
    """
    batch, _, width = x.shape
    input_projection = x @ params["input_kernel"] + params["bias"]  # [B, n, 3d]

    def step(hidden: Array, projected: Array) -> tuple[Array, Array]:
        recurrent = hidden @ params["recurrent_kernel"]  # [B, 3d]
        update = jax.nn.sigmoid(projected[:, :width] + recurrent[:, :width])
        reset = jax.nn.sigmoid(projected[:, width:2 * width] + recurrent[:, width:2 * width])
        candidate = jnp.tanh(projected[:, 2 * width:] + reset * recurrent[:, 2 * width:])
        hidden = (1.0 - update) * hidden + update * candidate
        return hidden, hidden

    initial = jnp.zeros((batch, width), x.dtype)
    _, outputs = jax.lax.scan(step, initial, jnp.swapaxes(input_projection, 0, 1))  # over n
    return jnp.swapaxes(outputs, 0, 1)  # [B, n, d]


def convolutional_layer(params: dict[str, Array], x: Array) -> Array:
    """A 1-D convolution of width k over positions, d -> d channels, ``SAME`` padding: O(k n d^2)."""
    return jax.lax.conv_general_dilated(
        x, params["kernel"], window_strides=(1,), padding="SAME",
        dimension_numbers=("NWC", "WIO", "NWC"))  # kernel [k, d, d]


def make_layer(layer_type: str, width: int, grid: Grid, seed: int = 0
               ) -> tuple[Callable[[dict[str, Array], Array], Array], dict[str, Array]]:
    """The forward function and parameters of one layer of ``layer_type`` and width ``width``.

    Parameters
    ----------
    layer_type : str
        One of :data:`LAYER_TYPES`.
    width : int
        ``d``.
    grid : Grid
        Supplies the kernel width k and window r.
    seed : int
        Parameter initialisation seed.

    Returns
    -------
    (callable, dict)
        ``layer(params, x)`` mapping ``[B, n, d]`` to ``[B, n, d]``, and ``params``.
    """
    keys = jax.random.split(jax.random.key(seed), 2)
    scale = width ** -0.5
    if layer_type == "self_attention":
        return self_attention_layer, {}
    if layer_type == "restricted_self_attention":
        return restricted_self_attention_layer(grid.window), {}
    if layer_type == "unscaled_self_attention":
        return unscaled_self_attention_layer, {}
    if layer_type == "additive_self_attention":
        return additive_self_attention_layer, {"score_vector": scale * jax.random.normal(keys[0], (1, width))}
    if layer_type in ("linear_self_attention", "causal_linear_self_attention"):
        return linear_self_attention_layer(causal=layer_type.startswith("causal")), {}
    if layer_type == "recurrent":
        return recurrent_layer, {
            "input_kernel": scale * jax.random.normal(keys[0], (width, 3 * width)),
            "recurrent_kernel": scale * jax.random.normal(keys[1], (width, 3 * width)),
            "bias": jnp.zeros((3 * width,)),
        }
    if layer_type == "convolutional":
        kernel_shape = (grid.kernel_width, width, width)
        return convolutional_layer, {"kernel": scale * jax.random.normal(keys[0], kernel_shape)}
    raise ValueError(f"layer_type must be one of {LAYER_TYPES}; got {layer_type!r}.")


def measure(layer_type: str, length: int, width: int, grid: Grid) -> dict[str, Any]:
    """Compile and time one layer on a ``[1, length, width]`` input.

    Parameters
    ----------
    layer_type : str
        One of :data:`LAYER_TYPES`.
    length, width : int
        ``n`` and ``d``.
    grid : Grid
        Kernel width, window and the repeat policy.

    Returns
    -------
    dict
        ``layer``, ``n``, ``d``, ``median_s`` (median forward time), ``min_s``, ``repeats``, ``compile_s``,
        ``temp_bytes`` (temporaries of the compiled computation) and ``peak_bytes`` (XLA's estimate of
        peak memory, arguments and outputs included; ``None`` where the backend gives none).
    """
    layer, params = make_layer(layer_type, width, grid)
    x = jax.random.normal(jax.random.key(1), (1, length, width))
    start = time.perf_counter()
    compiled = jax.jit(layer).lower(params, x).compile()
    compile_s = time.perf_counter() - start
    memory = compiled.memory_analysis()
    compiled(params, x).block_until_ready()  # Warm-up.
    times: list[float] = []
    while len(times) < grid.min_repeats or (
            len(times) < grid.max_repeats and sum(times) < grid.target_seconds):
        start = time.perf_counter()
        compiled(params, x).block_until_ready()
        times.append(time.perf_counter() - start)
    return {
        "layer": layer_type, "n": length, "d": width, "median_s": statistics.median(times),
        "min_s": min(times), "repeats": len(times), "compile_s": compile_s,
        "temp_bytes": _memory_field(memory, "temp_size_in_bytes"),
        "peak_bytes": _memory_field(memory, "peak_memory_in_bytes"),
    }


def _memory_field(memory: Any, name: str) -> int | None:
    """A field of ``CompiledMemoryStats``, or ``None`` when the backend does not report it."""
    value = getattr(memory, name, None) if memory is not None else None
    return int(value) if value is not None else None


def fitted_exponent(sizes: list[int], values: list[float | None]) -> float | None:
    """Least-squares slope of ``log(value)`` against ``log(size)``.

    Parameters
    ----------
    sizes : list of int
        The swept sizes (n or d).
    values : list of float or None
        Times or byte counts; ``None`` or non-positive values (e.g. no temporaries) are left out.

    Returns
    -------
    float or None
        The slope, or ``None`` when fewer than two points remain (written as JSON ``null``).
    """
    pairs = [(s, v) for s, v in zip(sizes, values) if v is not None and v > 0]
    if len(pairs) < 2 or len({p[0] for p in pairs}) < 2:
        return None
    log_sizes, log_values = np.log([p[0] for p in pairs]), np.log([p[1] for p in pairs])
    return float(np.polyfit(log_sizes, log_values, 1)[0])


def run(grid: Grid, layer_types: tuple[str, ...] = LAYER_TYPES) -> dict[str, Any]:
    """Measure every layer type over both sweeps and fit the exponents.

    Parameters
    ----------
    grid : Grid
        Sizes and repeat policy.
    layer_types : tuple of str
        The layers to measure (default all of :data:`LAYER_TYPES`).

    Returns
    -------
    dict
        ``grid``, ``environment``, ``sweeps`` (``"n"`` and ``"d"``: lists of :func:`measure` records) and
        ``exponents`` per layer type: measured ``time_n``, ``time_d``, ``temp_bytes_n``, ``temp_bytes_d``
        beside the expected ``paper_n``, ``paper_d`` and ``paper_complexity`` (Table 1's, or for the
        attention functions their papers').
    """
    cache: dict[tuple[str, int, int], dict[str, Any]] = {}

    def point(layer_type: str, length: int, width: int) -> dict[str, Any]:
        if (layer_type, length, width) not in cache:
            cache[layer_type, length, width] = measure(layer_type, length, width, grid)
        return cache[layer_type, length, width]

    sweeps = {
        "n": [point(t, n, grid.width_for_lengths) for t in layer_types for n in grid.lengths],
        "d": [point(t, grid.length_for_widths, d) for t in layer_types for d in grid.widths],
    }
    exponents = {}
    for layer_type in layer_types:
        by_n = [r for r in sweeps["n"] if r["layer"] == layer_type]
        by_d = [r for r in sweeps["d"] if r["layer"] == layer_type]
        exponents[layer_type] = {
            "time_n": fitted_exponent([r["n"] for r in by_n], [r["median_s"] for r in by_n]),
            "time_d": fitted_exponent([r["d"] for r in by_d], [r["median_s"] for r in by_d]),
            "temp_bytes_n": fitted_exponent([r["n"] for r in by_n], [r["temp_bytes"] for r in by_n]),
            "temp_bytes_d": fitted_exponent([r["d"] for r in by_d], [r["temp_bytes"] for r in by_d]),
            "paper_n": PAPER_EXPONENTS[layer_type][0],
            "paper_d": PAPER_EXPONENTS[layer_type][1],
            "paper_complexity": PAPER_COMPLEXITY[layer_type],
        }
    return {"grid": dataclasses.asdict(grid), "environment": _environment(), "sweeps": sweeps,
            "exponents": exponents}


def _environment() -> dict[str, Any]:
    device = jax.devices()[0]
    return {"jax": jax.__version__, "backend": jax.default_backend(), "device": device.device_kind,
            "cpu_count": os.cpu_count(), "platform": platform.platform()}


def _format_exponent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def exponents_table(results: dict[str, Any]) -> str:
    """The fitted exponents beside the expected ones (Table 1's) as a fixed-width text table."""
    lines = [f"{'layer':<29} {'expected':<11} {'time~n^a':>9} {'paper a':>8} {'time~d^b':>9} {'paper b':>8}"]
    for layer_type, fit in results["exponents"].items():
        lines.append(f"{layer_type:<29} {fit['paper_complexity']:<11} "
                     f"{_format_exponent(fit['time_n']):>9} {fit['paper_n']:>8} "
                     f"{_format_exponent(fit['time_d']):>9} {fit['paper_d']:>8}")
    return "\n".join(lines)


def plot(results: dict[str, Any], path: pathlib.Path) -> None:
    """Log-log plots of time and temporary memory against n and against d, one line per layer type."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = results["grid"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    no_temporaries = []
    for column, (sweep, fixed) in enumerate((("n", f"d = {grid['width_for_lengths']}"),
                                             ("d", f"n = {grid['length_for_widths']}"))):
        for layer_type in results["exponents"]:
            records = [r for r in results["sweeps"][sweep] if r["layer"] == layer_type]
            sizes = [r[sweep] for r in records]
            fit = results["exponents"][layer_type]
            source = "paper" if layer_type in TABLE1_LAYER_TYPES else "expected"
            label = (f"{layer_type.replace('_', ' ')}: slope {_format_exponent(fit['time_' + sweep])} "
                     f"({source} {fit['paper_' + sweep]})")
            color = f"C{LAYER_TYPES.index(layer_type)}"
            axes[0, column].loglog(sizes, [r["median_s"] for r in records], "o-", color=color,
                                   label=label)
            memory = [r["temp_bytes"] for r in records]
            if all(m is not None and m > 0 for m in memory):
                axes[1, column].loglog(sizes, memory, "o-", color=color,
                                       label=f"{layer_type.replace('_', ' ')}: "
                                       f"slope {_format_exponent(fit['temp_bytes_' + sweep])}")
            elif column == 0:
                no_temporaries.append(layer_type.replace("_", " "))
        axes[0, column].set_title(f"forward time vs {sweep} ({fixed}, k = {grid['kernel_width']}, "
                                  f"r = {grid['window']})")
        axes[0, column].set_ylabel("median time per call [s]")
        axes[1, column].set_title(f"temporaries of the compiled layer vs {sweep} ({fixed})")
        axes[1, column].set_ylabel("bytes")
        for row in range(2):
            axis = axes[row, column]
            axis.set_xlabel(sweep)
            axis.set_xticks(sizes, [str(size) for size in sizes])
            axis.minorticks_off()
            axis.grid(True, alpha=0.3)
            axis.legend(fontsize=7)
    if no_temporaries:
        axes[1, 0].text(0.98, 0.02, f"no temporaries: {', '.join(no_temporaries)}", ha="right",
                        va="bottom", fontsize=8, transform=axes[1, 0].transAxes)
    environment = results["environment"]
    fig.suptitle(f"Table 1 measured: one layer, forward, jitted ({environment['backend']}, "
                 f"{environment['device']}, {environment['cpu_count']} cores)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.command_line`)."""
    flags.DEFINE_string("out", str(DEFAULT_OUT), "JSON output path; the plot goes beside it with suffix .png.")
    flags.DEFINE_bool("quick", False, "Tiny grid that runs in seconds (tests).")
    flags.DEFINE_list("layers", list(LAYER_TYPES), f"Comma-separated layer types to measure, of {', '.join(LAYER_TYPES)}.")


def main(argv: list[str]) -> None:
    """Run the sweeps, write the JSON and the PNG, print the exponents table.

    Parameters
    ----------
    argv : list of str
        The program name (the flags are parsed already).
    """
    del argv
    args = flags.FLAGS
    out = pathlib.Path(args.out)
    if out.suffix != ".json":
        command_line.fail(f"--out must name a .json file; got {out}.")
    layer_types = tuple(name.strip() for name in args.layers if name.strip())
    unknown = [name for name in layer_types if name not in LAYER_TYPES]
    if unknown or not layer_types:
        command_line.fail(f"--layers takes names from {', '.join(LAYER_TYPES)}; got {','.join(args.layers)!r}.")
    results = run(QUICK_GRID if args.quick else FULL_GRID, layer_types)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, allow_nan=False) + "\n")
    plot_path = out.with_suffix(".png")
    plot(results, plot_path)
    print(exponents_table(results))
    print(json.dumps({"json": str(out), "png": str(plot_path)}))


if __name__ == "__main__":
    command_line.run(main, define_flags)
