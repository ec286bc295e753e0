"""NcuAnalyzer and the CSV readers on synthetic exports of the raw and details pages."""

import csv
import io
import json

import pytest

from kernelpro.api import CollectorError

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu import report as R
from kernelpro_plugins_ncu.analyzer import NcuAnalyzer

from ncu_helpers import memory_bound_metrics, raw_csv


def details_csv(rows):
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
                "Metric Value"])
    for kid, kname, section, metric, unit, value in rows:
        w.writerow([kid, "1", "python3", "h", kname, "1", "7", "(256, 1, 1)", "(4, 1, 1)", "0", "9.0",
                    section, metric, unit, value])
    return buf.getvalue()


def test_raw_csv_units_and_thousands():
    text = "==PROF== Connected to process\n" + raw_csv(
        [("kp_a(float*)", {M.DURATION_NS: 1.5, M.DRAM_READ_BYTES: 1234567.0, M.SM_CLOCK_HZ: 1.98})],
        units={M.DURATION_NS: "usecond", M.DRAM_READ_BYTES: "byte", M.SM_CLOCK_HZ: "Ghz"})
    kernels, payload = R.parse_raw_csv(text)
    k = kernels[0]
    assert k.name == "kp_a(float*)" and k.duration_ns == pytest.approx(1500.0)
    assert k.metrics[M.DRAM_READ_BYTES] == 1234567.0
    assert k.grid == (1024, 1, 1) and k.block == (256, 1, 1)


@pytest.mark.parametrize("unit,scale", [("Kbyte", 1e3), ("Mbyte", 1e6), ("Gbyte/second", 1e9), ("msecond", 1e6),
                                        ("nsecond", 1.0), ("%", 1.0), ("cycle/nsecond", 1e9), ("Ghz", 1e9)])
def test_unit_scale(unit, scale):
    assert R.unit_scale(unit) == pytest.approx(scale)


def test_details_csv_maps_display_names():
    text = details_csv([
        ("0", "kp_tiny", "GPU Speed Of Light Throughput", "Duration", "usecond", "1,250.50"),
        ("0", "kp_tiny", "GPU Speed Of Light Throughput", "DRAM Throughput", "%", "3.1"),
        ("0", "kp_tiny", "Launch Statistics", "Grid Size", "", "4"),
        ("0", "kp_tiny", "Occupancy", "Achieved Occupancy", "%", "6.2"),
        ("0", "kp_tiny", "Occupancy", "Theoretical Occupancy", "%", "100"),
        ("1", "kp_other", "GPU Speed Of Light Throughput", "Duration", "nsecond", "900"),
        ("1", "kp_other", "Custom", "Something Else", "", "7"),
    ])
    kernels, _ = R.parse_details_csv(text)
    assert [k.name for k in kernels] == ["kp_tiny", "kp_other"]
    a = kernels[0]
    assert a.duration_ns == pytest.approx(1250500.0)
    assert a.metrics[M.DRAM_THROUGHPUT_PCT] == 3.1 and a.metrics[M.GRID_SIZE] == 4
    assert a.metrics[M.THEORETICAL_OCCUPANCY_PCT] == 100.0
    assert kernels[1].metrics["Custom/Something Else"] == 7.0


def test_analyzer_accepts_and_loads_csv_with_sidecar(tmp_path):
    path = tmp_path / "rep.raw.csv"
    path.write_text(raw_csv([("kp_copy", {M.DURATION_NS: 1e6, **memory_bound_metrics()})]))
    (tmp_path / "rep.raw.json").write_text(json.dumps({"io": {"input_bytes": 10, "output_bytes": 20}}))
    a = NcuAnalyzer()
    assert a.accepts(path) and a.accepts(tmp_path / "x.ncu-rep")
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert not a.accepts(other)
    data = a.load(path)
    assert data.level == "kernel" and data.kernels[0].metrics[M.DRAM_WRITE_BYTES] == 2.15e9
    assert data.payload["io"] == {"input_bytes": 10, "output_bytes": 20}


def test_analyzer_errors_are_one_line(tmp_path, monkeypatch):
    bad = tmp_path / "bad.csv"
    bad.write_text('"x","y"\n"1","2"\n')
    with pytest.raises(CollectorError, match="Kernel Name"):
        NcuAnalyzer().load(bad)
    with pytest.raises(CollectorError, match="no such report"):
        NcuAnalyzer().load(tmp_path / "missing.ncu-rep")
    rep = tmp_path / "r.ncu-rep"
    rep.write_text("not a report")
    monkeypatch.setattr(R, "import_ncu_report", lambda ncu_path=None: None)
    monkeypatch.setattr(R.shutil, "which", lambda name: None)
    with pytest.raises(CollectorError, match="pip install ncu-report"):
        NcuAnalyzer().load(rep)


def test_corrupt_ncu_rep_with_module_is_one_line(tmp_path):
    pytest.importorskip("ncu_report")
    rep = tmp_path / "r.ncu-rep"
    rep.write_bytes(b"\x00garbage")
    with pytest.raises(CollectorError) as err:
        NcuAnalyzer().load(rep)
    assert "\n" not in str(err.value)


def test_merge_kernels_prefers_stage2():
    from kernelpro.records import KernelProfile

    a = [KernelProfile(name="k", duration_ns=5.0, metrics={"x": 1.0, "y": 1.0})]
    b = [KernelProfile(name="k", duration_ns=None, metrics={"y": 2.0})]
    merged = R.merge_kernels(a, b)
    assert merged[0].metrics == {"x": 1.0, "y": 2.0} and merged[0].duration_ns == 5.0
    assert R.merge_kernels(a, [KernelProfile(name="other")])[0].name == "other"
