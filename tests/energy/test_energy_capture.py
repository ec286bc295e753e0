"""CPU-checkable parts of the GPU capture script (kernelpro_plugins_energy/gpu_capture.py)."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def capture():
    spec = importlib.util.spec_from_file_location("energy_gpu_capture", ROOT / "kernelpro_plugins_energy" / "gpu_capture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _variant(time_ms, e1, e2, iqr=0.0, correct=True, loop_ms=None):
    loop_ms = time_ms if loop_ms is None else loop_ms
    return {
        "correct": correct,
        "timing_pass1": {"median_ms": time_ms},
        "timing_pass2": {"median_ms": time_ms},
        "energy_pass1": {"energy_j_per_call": e1, "energy_j_per_call_iqr": iqr, "time_per_call_ms": loop_ms},
        "energy_pass2": {"energy_j_per_call": e2, "energy_j_per_call_iqr": iqr, "time_per_call_ms": loop_ms},
    }


def test_similar_time_pairs(capture):
    variants = {
        "plain": _variant(1.00, 0.100, 0.100),
        "extra_fma": _variant(1.01, 0.110, 0.112),
        "noisy": _variant(0.995, 0.100, 0.120),  # passes disagree by 18 %
        "slow": _variant(1.10, 0.050, 0.050),  # 10 % slower: never paired
        # same short-burst time, but 10 % slower in the sustained energy loop (power limit)
        "throttled": _variant(1.00, 0.120, 0.120, loop_ms=1.10),
        "wrong": _variant(1.00, 0.010, 0.010, correct=False),
    }
    pairs = capture.similar_time_pairs(variants)
    names = {(p["lower_energy"], p["higher_energy"]) for p in pairs}
    assert names == {("plain", "extra_fma"), ("plain", "noisy"), ("noisy", "extra_fma")}
    best = pairs[0]
    assert (best["lower_energy"], best["higher_energy"]) == ("plain", "extra_fma")
    assert best["energy_diff_rel"] == pytest.approx(0.111 / 0.100 - 1)
    assert best["time_diff_rel"] == pytest.approx(0.01)
    assert best["loop_time_diff_rel"] == pytest.approx(0.01)
    assert best["measurable"] is True
    assert "plain < extra_fma  event time 1.0000 / 1.0100 ms (diff 1.00 %)" in capture.pair_line(best)
    noisy = [p for p in pairs if "noisy" in (p["lower_energy"], p["higher_energy"])]
    assert all(p["measurable"] is False for p in noisy)


def _driver_present() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is present here")
def test_without_nvml_the_capture_records_why(capture, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert capture.main() == 1
    with tarfile.open(tmp_path / "energy.tar.gz") as tar:
        data = json.loads(tar.extractfile("energy.json").read())
        summary = tar.extractfile("summary.txt").read().decode()
    assert data["unavailable"].startswith("energy unavailable: the NVML library")
    assert "UNAVAILABLE: energy unavailable" in summary
    assert "UNAVAILABLE" in capsys.readouterr().out
