"""MFU's measured peak is measured once per machine and reused (issue 74): a cache keyed by the
processor model, the device kind and the dtype, in the user's cache directory. The measurement is a
fake here: a real one differs between processors and with the machine's load."""

from __future__ import annotations

import json
import pathlib

import pytest

from attention_jax.training import device_peaks


class _FakeMeasurement:
    """Counts its calls and returns the next of ``rates``, taken quiet or under load as told."""

    def __init__(self, rates: list[float], under_load: bool = False) -> None:
        self.rates, self.under_load, self.calls = list(rates), under_load, 0

    def __call__(self, device_kind: str, dtype: str) -> device_peaks._DevicePeak:
        self.calls += 1
        label = "under load" if self.under_load else "quiet"
        return device_peaks._DevicePeak(self.rates.pop(0), f"fake {label} {device_kind} {dtype}",
                                       under_load=self.under_load)


@pytest.fixture
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_peaks, "_machine_load", lambda: (0.0, 2))
    monkeypatch.setattr(device_peaks, "_processor_model", lambda: "Test CPU 9000")


def test_a_peak_is_measured_once_and_reused_with_its_source_named(tmp_path: pathlib.Path, quiet_machine) -> None:
    cache = str(tmp_path / "device_peaks.json")
    measure = _FakeMeasurement([3e11, 9e11])
    first = device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=measure)
    again = device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=measure)
    assert measure.calls == 1 and first.flops_per_s == again.flops_per_s == 3e11
    assert first.source == "fake quiet cpu float32"
    assert again.source.startswith("measured on this machine on ") and f"cached in {cache}" in again.source
    assert again.source.endswith(": fake quiet cpu float32")
    [(key, entry)] = json.loads(pathlib.Path(cache).read_text()).items()
    assert key == "Test CPU 9000 | cpu | float32" and entry["flops_per_s"] == 3e11 and not entry["under_load"]


def test_each_processor_device_and_dtype_has_its_own_figure(tmp_path: pathlib.Path, quiet_machine,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cache = str(tmp_path / "device_peaks.json")
    measure = _FakeMeasurement([1e11, 2e11, 3e11, 4e11])
    assert device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=measure).flops_per_s == 1e11
    assert device_peaks._cached_measured_peak("cpu", "bfloat16", path=cache, measure=measure).flops_per_s == 2e11
    assert device_peaks._cached_measured_peak("Tesla T4", "float32", path=cache, measure=measure).flops_per_s == 3e11
    monkeypatch.setattr(device_peaks, "_processor_model", lambda: "Another CPU")  # A shared home, another machine.
    assert device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=measure).flops_per_s == 4e11
    assert measure.calls == 4 and len(json.loads(pathlib.Path(cache).read_text())) == 4


def test_a_peak_taken_under_load_is_measured_again_once_the_machine_is_quiet(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = str(tmp_path / "device_peaks.json")
    monkeypatch.setattr(device_peaks, "_processor_model", lambda: "Test CPU 9000")
    monkeypatch.setattr(device_peaks, "_machine_load", lambda: (2.4, 2))  # Busy.
    busy = _FakeMeasurement([2e11], under_load=True)
    assert device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=busy).under_load
    reused = device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=busy)
    assert busy.calls == 1 and reused.flops_per_s == 2e11 and reused.under_load  # Still busy: reused.
    monkeypatch.setattr(device_peaks, "_machine_load", lambda: (0.0, 2))  # Quiet now.
    quiet = _FakeMeasurement([4e11])
    remeasured = device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=quiet)
    assert quiet.calls == 1 and remeasured.flops_per_s == 4e11 and not remeasured.under_load
    assert device_peaks._cached_measured_peak("cpu", "float32", path=cache, measure=quiet).flops_per_s == 4e11
    assert quiet.calls == 1


def test_a_damaged_or_unwritable_cache_only_costs_a_measurement(tmp_path: pathlib.Path, quiet_machine) -> None:
    damaged = tmp_path / "device_peaks.json"
    damaged.write_text("{not json")
    measure = _FakeMeasurement([5e11, 6e11])
    assert device_peaks._cached_measured_peak("cpu", "float32", path=str(damaged), measure=measure).flops_per_s == 5e11
    assert json.loads(damaged.read_text())["Test CPU 9000 | cpu | float32"]["flops_per_s"] == 5e11  # Rewritten.
    blocked = tmp_path / "a_file"
    blocked.write_text("")
    unwritable = str(blocked / "device_peaks.json")  # Its folder is a file: nothing can be written there.
    assert device_peaks._cached_measured_peak("cpu", "float32", path=unwritable, measure=measure).flops_per_s == 6e11


def test_the_cache_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv("ATTENTION_JAX_CACHE_DIR", raising=False)  # It would win over XDG_CACHE_HOME.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert device_peaks._peak_cache_path() == str(tmp_path / "attention_jax" / "device_peaks.json")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert device_peaks._peak_cache_path() == str(pathlib.Path.home() / ".cache" / "attention_jax" / "device_peaks.json")
    assert device_peaks._processor_model()  # Some name on every machine.


def test_the_processor_is_named_with_its_family_and_model(tmp_path: pathlib.Path) -> None:
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n\n"
                   "processor\t: 1\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Other\n")
    assert device_peaks._processor_model(str(x86)) == "AMD EPYC (family 25, model 17)"  # The first block only.
    named_only = tmp_path / "named_only"
    named_only.write_text("processor\t: 0\nModel\t: Some Board\n")
    assert device_peaks._processor_model(str(named_only)) == "Some Board"
    assert device_peaks._processor_model(str(tmp_path / "missing"))  # platform's name where there is no file.
