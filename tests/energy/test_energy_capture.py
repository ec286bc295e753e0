"""CPU-checkable parts of the GPU capture script (tools/capture/energy/gpu_capture.py)."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def capture():
    spec = importlib.util.spec_from_file_location("energy_gpu_capture", ROOT / "tools" / "capture" / "energy" / "gpu_capture.py")
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


def test_pairs_carry_the_power_of_both_members(capture):
    """How far below the power limit a pair ran is part of its evidence (at the limit,
    energy follows time)."""
    def measured(time_ms, e, watts):
        rec = _variant(time_ms, e, e)
        for i in (1, 2):
            rec[f"energy_pass{i}"]["power_w"] = watts + i
        return rec

    pairs = capture.similar_time_pairs({"plain": measured(0.230, 0.150, 629.0),
                                        "fma2": measured(0.232, 0.157, 659.0)})
    assert len(pairs) == 1
    assert pairs[0]["power_w"] == {"plain": pytest.approx(630.5), "fma2": pytest.approx(660.5)}
    assert capture.pair_line(pairs[0]).endswith("measurable=True  power 630.5 / 660.5 W")
    # without power readings the line ends at the verdict
    bare = capture.similar_time_pairs({"a": _variant(1.0, 0.1, 0.1), "b": _variant(1.0, 0.12, 0.12)})
    assert capture.pair_line(bare[0]).endswith("measurable=True")
