"""Training throughput and MFU (training time only: evaluation, checkpoints and compilation off the clock)
against a device's peak FLOP/s: declared, a datasheet's dense rate, or measured and cached.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import re
import time
from typing import Any, Callable

from absl import logging

from attention_jax.foundation import cache_dirs, run_files

# Dense peaks in TFLOP/s per JAX device (datasheets' "with sparsity" halved). GPU float32: the TF32 rate (JAX's
# default precision there); TPU float32 runs as bfloat16 passes. The first pattern matching ``device_kind`` wins.
DATASHEET_PEAKS: tuple[tuple[str, dict[str, float], str], ...] = (
    (r"H100.*NVL", {"bfloat16": 835.5, "float32": 417.5}, "NVIDIA H100 datasheet, H100 NVL (sparsity halved)"),
    (r"H100.*PCIe", {"bfloat16": 756.5, "float32": 378.0}, "NVIDIA H100 datasheet, H100 PCIe (sparsity halved)"),
    (r"H100", {"bfloat16": 989.5, "float32": 494.5}, "NVIDIA H100 datasheet, H100 SXM (sparsity halved)"),
    (r"H200.*NVL", {"bfloat16": 835.5, "float32": 417.5}, "NVIDIA H200 datasheet, H200 NVL (sparsity halved)"),
    (r"H200", {"bfloat16": 989.5, "float32": 494.5}, "NVIDIA H200 datasheet, H200 SXM (sparsity halved)"),
    (r"A100", {"bfloat16": 312.0, "float32": 156.0}, "NVIDIA A100 datasheet (BF16 312, TF32 156 dense)"),
    (r"L40S", {"bfloat16": 366.5, "float32": 183.0}, "NVIDIA L40S datasheet (sparsity halved)"),
    (r"\bL4\b", {"bfloat16": 121.0, "float32": 60.0}, "NVIDIA L4 datasheet (sparsity halved)"),
    (r"\bA10\b", {"bfloat16": 125.0, "float32": 62.5}, "NVIDIA A10 datasheet (sparsity halved)"),
    (r"TPU v6", {"bfloat16": 918.0, "float32": 918.0}, "Google Cloud TPU v6e documentation (per chip)"),
    (r"TPU v5 ?lite|TPU v5e", {"bfloat16": 197.0, "float32": 197.0}, "Google Cloud TPU v5e documentation (per chip)"),
    (r"TPU v5", {"bfloat16": 459.0, "float32": 459.0}, "Google Cloud TPU v5p documentation (per chip)"),
    (r"TPU v4", {"bfloat16": 275.0, "float32": 275.0}, "Google Cloud TPU v4 documentation (per chip)"),
)

MEASURED_MATMUL_SIZE = 512
"""Side of the square products timed when no peak is declared or known."""

BUSY_LOAD_PER_CPU = 0.25
"""Load from other processes, per usable CPU, above which a CPU peak is measured "under load"."""

_MEASURED: dict[tuple[str, str], _DevicePeak] = {}  # (device kind, dtype) -> the peak measured in this process.


@dataclasses.dataclass(frozen=True)
class _DevicePeak:
    """The peak FLOP/s of one device and where the figure comes from."""

    flops_per_s: float  # One device's.
    source: str  # "declared (config.peak_tflops_per_device)", a datasheet, or how it was measured.
    under_load: bool = False  # Measured while other processes kept the CPUs busy: the figure reads low.

    def describe(self, device_kind: str, dtype: str, device_count: int) -> str:
        """Return the log line's phrase, e.g. ``"989.5 TFLOP/s per device x 8 (H100, bfloat16: ...)"``."""
        return (f"{self.flops_per_s / 1e12:.4g} TFLOP/s per device x {device_count} "
                f"({device_kind}, {dtype}: {self.source})")


def datasheet_peak(device_kind: str, dtype: str) -> _DevicePeak | None:
    """Return the dense datasheet peak of a known device (``jax.devices()[0].device_kind``) for ``dtype``.

    Parameters
    ----------
    device_kind, dtype : str
        E.g. ``"TPU v4"``; ``"float32"`` or ``"bfloat16"``.

    Returns
    -------
    _DevicePeak or None
        The first matching pattern's; ``None`` for an unknown device or dtype.
    """
    for pattern, peaks, source in DATASHEET_PEAKS:
        if re.search(pattern, device_kind, flags=re.IGNORECASE):
            return _DevicePeak(peaks[dtype] * 1e12, source) if dtype in peaks else None
    return None


def measure_matmul_peak(dtype: str, size: int = MEASURED_MATMUL_SIZE, repeats: int = 5) -> float:
    """Return the best rate of ``size`` x ``size`` products on the default device, in FLOP/s (``2 size^3 / best time``).

    Parameters
    ----------
    dtype : str
        ``"float32"`` or ``"bfloat16"``.
    size, repeats : int
        Matrix side; timed products after one compiling call.

    Returns
    -------
    float
        The rate.
    """
    import jax
    import jax.numpy as jnp

    matmul = jax.jit(jnp.dot)
    left = jax.random.normal(jax.random.key(0), (size, size), dtype)
    right = jax.random.normal(jax.random.key(1), (size, size), dtype)
    matmul(left, right).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        matmul(left, right).block_until_ready()
        best = min(best, time.perf_counter() - started)
    return 2.0 * size ** 3 / best


def _machine_load() -> tuple[float, int]:
    """Return the 1-minute load of other processes (floored at 0) and the CPUs in this process's affinity mask."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0, cpus
    return max(0.0, load - 1.0), cpus


def _measured_peak(device_kind: str, dtype: str) -> _DevicePeak:
    """Return a peak measured here; on a busy CPU 25 products instead of 5, marked as under load."""
    other_load, cpus = _machine_load() if device_kind.lower() == "cpu" else (0.0, 1)
    busy = other_load >= BUSY_LOAD_PER_CPU * cpus
    repeats = 25 if busy else 5
    rate = measure_matmul_peak(dtype, repeats=repeats)
    products = f"best of {repeats} {MEASURED_MATMUL_SIZE}^3 {dtype} matmuls"
    declare = "set config.peak_tflops_per_device to declare one"
    if busy:
        return _DevicePeak(rate, f"measured here under load: {products} while other processes kept the CPUs "
                                f"busy (load {other_load:.1f} on {cpus} CPUs), so the peak reads low and MFU "
                                f"high; {declare}", under_load=True)
    return _DevicePeak(rate, f"measured here once: {products} (device not in the datasheet table; {declare})")


def _device_peak(device_kind: str, dtype: str, declared_tflops: float = 0.0) -> _DevicePeak:
    """Return the peak of one device: declared, else from a datasheet, else measured once per machine."""
    if declared_tflops > 0:
        return _DevicePeak(float(declared_tflops) * 1e12, "declared (config.peak_tflops_per_device)")
    known = datasheet_peak(device_kind, dtype)
    if known is not None:
        return known
    key = (device_kind, dtype)
    if key not in _MEASURED:
        _MEASURED[key] = _cached_measured_peak(device_kind, dtype)
    return _MEASURED[key]


def _peak_cache_path() -> str:
    """Return the measured peaks' file under ``$ATTENTION_JAX_CACHE_DIR`` or ``$XDG_CACHE_HOME/attention_jax``."""
    moved = cache_dirs.under_cache_root("device_peaks.json")
    if moved:
        return moved
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.abspath(os.path.expanduser(os.path.join(cache_home, "attention_jax", "device_peaks.json")))


def _processor_model(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """Return the host's processor: ``/proc/cpuinfo``'s model name with its family and model numbers.

    XLA compiles CPU code for the processor it runs on, so the same seed can train to a slightly different
    model on another one: ``results.json`` records this name, and a cached peak is keyed by it. The numbers
    tell apart processors that share a generic name ("AMD EPYC").
    """
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                if not name.strip():
                    break  # The first processor's block ends at its blank line.
                fields.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    model = fields.get("model name") or fields.get("Model")
    if not model:
        return platform.processor() or platform.machine() or "unknown processor"
    if fields.get("cpu family") and fields.get("model"):
        return f"{model} (family {fields['cpu family']}, model {fields['model']})"
    return model


def _read_peak_cache(path: str) -> dict[str, Any]:
    """Return the cache file's entries; missing or damaged reads as empty."""
    try:
        with open(path, encoding="utf-8") as cache_file:
            entries = json.load(cache_file)
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _cached_measured_peak(device_kind: str, dtype: str, *, path: str | None = None,
                         measure: Callable[[str, str], _DevicePeak] | None = None) -> _DevicePeak:
    """Return this machine's measured peak, cached per processor, device and dtype (one under load: while busy)."""
    path = _peak_cache_path() if path is None else path
    measure = _measured_peak if measure is None else measure
    key = f"{_processor_model()} | {device_kind} | {dtype}"
    entry = _read_peak_cache(path).get(key)
    if isinstance(entry, dict) and isinstance(entry.get("flops_per_s"), (int, float)):
        still_busy = bool(entry.get("under_load")) and _machine_is_busy(device_kind)
        if not entry.get("under_load") or still_busy:
            return _DevicePeak(float(entry["flops_per_s"]),
                              f"measured on this machine on {entry.get('measured_on', '?')}, cached in {path} "
                              f"(delete it to measure again): {entry.get('source', '?')}",
                              under_load=bool(entry.get("under_load")))
    peak = measure(device_kind, dtype)
    entries = _read_peak_cache(path)  # Afresh: another run may have added its own device meanwhile.
    entries[key] = {"flops_per_s": peak.flops_per_s, "under_load": peak.under_load, "source": peak.source,
                    "measured_on": datetime.date.today().isoformat()}
    try:
        run_files.write_json_atomically(path, entries, sort_keys=True)
    except OSError as error:
        logging.info("Measured peak not cached (%s): the next run measures it again.", error)
    return peak


def _machine_is_busy(device_kind: str) -> bool:
    """Return whether other processes keep this machine's CPUs busy now; never for a GPU."""
    if device_kind.lower() != "cpu":
        return False
    other_load, cpus = _machine_load()
    return other_load >= BUSY_LOAD_PER_CPU * cpus


@dataclasses.dataclass(frozen=True)
class _IntervalRates:
    """The figures of one logging interval (NaN where nothing was timed)."""

    tokens_per_s: float  # Target tokens per second of training time.
    step_time_s: float  # Mean seconds between two steps.
    data_wait_s: float  # Mean seconds per step waiting for the batch (part of the step time).
    steps: int  # Timed steps (those compiling a new shape are not).

    def mfu(self, flops_per_token: float, peak: _DevicePeak | None, device_count: int) -> float:
        """Return model FLOPs utilization: ``flops_per_token x tokens/s`` over ``peak x devices``."""
        if peak is None or peak.flops_per_s <= 0 or not math.isfinite(self.tokens_per_s):
            return float("nan")
        return flops_per_token * self.tokens_per_s / (peak.flops_per_s * device_count)


class _Throughput:
    """Target tokens, steps and data-wait time per second of training time."""

    def __init__(self) -> None:
        self._running_since: float | None = None
        self._seconds = 0.0
        self._tokens = 0.0
        self._steps = 0
        self._data_wait_s = 0.0
        self.total_seconds = 0.0
        self.total_tokens = 0.0
        self.peak: _DevicePeak | None = None

    def resume(self) -> None:
        """Start (or continue) the clock."""
        if self._running_since is None:
            self._running_since = time.time()

    def pause(self) -> None:
        """Stop the clock, keeping the time so far."""
        if self._running_since is not None:
            self._seconds += time.time() - self._running_since
            self._running_since = None

    def add_tokens(self, tokens: float) -> None:
        """Count tokens trained on while the clock ran."""
        self._tokens += tokens

    def add_step(self, data_wait_s: float) -> None:
        """Count one timed step."""
        self._steps += 1
        self._data_wait_s += data_wait_s

    def close_interval(self) -> _IntervalRates:
        """Return the rates since the last call; a running clock keeps running."""
        running = self._running_since is not None
        self.pause()
        rates = _IntervalRates(
            tokens_per_s=self._tokens / self._seconds if self._seconds > 0 else float("nan"),
            step_time_s=self._seconds / self._steps if self._steps else float("nan"),
            data_wait_s=self._data_wait_s / self._steps if self._steps else float("nan"),
            steps=self._steps)
        self.total_seconds += self._seconds
        self.total_tokens += self._tokens
        self._seconds = self._tokens = self._data_wait_s = 0.0
        self._steps = 0
        if running:
            self.resume()
        return rates

    @property
    def tokens_per_s(self) -> float:
        """Return the tokens per second over the session's closed intervals."""
        return self.total_tokens / self.total_seconds if self.total_seconds > 0 else float("nan")
