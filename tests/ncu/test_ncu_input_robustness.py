"""``kernelpro analyze`` on damaged or partial Nsight Compute exports: each case is a
committed corpus CSV (or fixture report) altered in tmp_path the way a user's file can be:
a byte-order mark, a foreign sidecar, missing or non-finite counters, no durations,
repeated launches, truncation, a wrong --gpu, unknown units, another delimiter."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelpro import cli as cli_mod
from kernelpro.api import CollectorError

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu import report as R

HERE = Path(__file__).parent
TEMPLATE = HERE / "corpus" / "h200" / "template.raw.csv"
SUITE = HERE / "fixtures" / "h200" / "suite"


def rows() -> list[list[str]]:
    return list(csv.reader(TEMPLATE.open(newline="")))


def write(path: Path, table: list[list[str]], **kw) -> Path:
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(table)
    path.write_text(buf.getvalue(), **kw)
    return path


def without(table: list[list[str]], drop) -> list[list[str]]:
    keep = [i for i, name in enumerate(table[0]) if not drop(name)]
    return [[r[i] for i in keep if i < len(r)] for r in table]  # details rows may end early


def with_value(table: list[list[str]], column: str, value: str) -> list[list[str]]:
    i = table[0].index(column)
    out = [list(r) for r in table]
    for r in out[2:]:  # header, units, then the kernels
        r[i] = value
    return out


def analyze(*args: str):
    return CliRunner().invoke(cli_mod.cli, ["analyze", *args])


def analyze_json(path: Path, *args: str) -> dict:
    res = analyze(str(path), "--json", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"{c} in --json output"))


def one_error_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    return lines[0]


# --- reading ------------------------------------------------------------------------------


def test_a_byte_order_mark_does_not_hide_the_header(tmp_path):
    res = analyze(str(write(tmp_path / "bom.raw.csv", rows(), encoding="utf-8-sig")))
    assert res.exit_code == 0, res.output
    assert "bottleneck: compute (fp32)" in res.stdout


def test_a_json_beside_the_csv_that_is_not_the_sidecar_is_ignored(tmp_path):
    path = write(tmp_path / "run.csv", rows())
    (tmp_path / "run.json").write_text(json.dumps([{"name": "k", "ph": "X", "ts": 0, "dur": 5}]))
    assert R.load_sidecar(path) == {}
    res = analyze(str(path))
    assert res.exit_code == 0, res.output


def test_non_finite_values_are_no_measurement():
    assert R.parse_number("nan") is None and R.parse_number("inf") is None and R.parse_number("-inf") is None
    assert R.parse_number("1,234.5") == 1234.5


def test_nan_throughput_and_inf_duration_are_not_printed(tmp_path):
    nan_sm = write(tmp_path / "nan_sm.raw.csv", with_value(rows(), M.SM_THROUGHPUT_PCT, "nan"))
    out = analyze_json(nan_sm)
    assert not re.search(r"\bnan\b", out["bottleneck"]["summary"]) and "is not in the report" in out["bottleneck"]["summary"]
    inf_dur = write(tmp_path / "inf_dur.raw.csv", with_value(rows(), M.DURATION_NS, "inf"))
    res = analyze(str(inf_dur))
    assert res.exit_code == 0 and not re.search(r"\b(nan|inf)\b", res.stdout, re.I)


def test_missing_dram_bytes_keep_the_json_valid(tmp_path):
    path = write(tmp_path / "no_dram.raw.csv", without(rows(), lambda n: n.startswith("dram__")))
    out = analyze_json(path)  # no Infinity for the intensity
    ev = out["bottleneck"]["evidence"]
    assert "arithmetic_intensity_flop_per_byte" not in ev and "dram_bytes" not in ev
    assert "DRAM bytes are not in the report" in out["bottleneck"]["summary"]


def test_json_output_has_no_non_finite_number():
    assert cli_mod._finite({"a": [1.0, float("inf")], "b": float("nan"), "c": "x"}) == {"a": [1.0, None], "b": None,
                                                                                        "c": "x"}


def test_missing_sm_throughput_is_not_printed_as_zero(tmp_path):
    path = write(tmp_path / "no_sm.raw.csv", without(rows(), lambda n: n == M.SM_THROUGHPUT_PCT))
    summary = analyze_json(path)["bottleneck"]["summary"]
    assert "0% of peak" not in summary and "SM 0%" not in summary
    assert f"SM throughput ({M.SM_THROUGHPUT_PCT}) is not in the report" in summary


def test_speed_of_light_only_invents_no_pipe_and_no_roofline(tmp_path):
    ids = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
           "Grid Size", "Device", "CC"}
    sol = {M.DURATION_NS, M.SM_THROUGHPUT_PCT, M.MEM_THROUGHPUT_PCT, M.DRAM_THROUGHPUT_PCT, M.L1_THROUGHPUT_PCT,
           M.L2_THROUGHPUT_PCT, M.DEVICE_NAME}
    path = write(tmp_path / "sol.raw.csv", without(rows(), lambda n: not (n in ids or n in sol)))
    bn = analyze_json(path)["bottleneck"]
    assert bn["pipe"] is None and bn["roofline_fraction"] is None
    assert "achieved_tflops" not in bn["evidence"] and "0.0 TFLOP/s" not in bn["summary"]
    assert "no DRAM-byte or FLOP counters" in bn["summary"]


def test_without_durations_shares_are_of_the_kernels(tmp_path):
    path = write(tmp_path / "no_dur.raw.csv", without(rows(), lambda n: n == M.DURATION_NS))
    res = analyze(str(path))
    assert res.exit_code == 0, res.output
    assert "of the time" not in res.stdout and "profiled time" not in res.stdout
    assert "of the kernels" in res.stdout and "no durations" in res.stdout


def test_repeated_launches_do_not_dilute_or_repeat_findings(tmp_path):
    once = analyze_json(write(tmp_path / "x1.raw.csv", rows()))
    table = rows()
    ten = analyze_json(write(tmp_path / "x10.raw.csv", table[:2] + table[2:] * 10))

    def tensor(out):
        return [f["estimated_gain"] for f in out["findings"] if f["tool"] == "tensor_cores_idle"]

    assert len(tensor(ten)) == len(tensor(once)) == 1
    assert tensor(ten) == pytest.approx(tensor(once))


def test_names_only_is_an_error_not_a_success(tmp_path):
    path = tmp_path / "names.csv"
    path.write_text('"ID","Kernel Name"\n"0","k"\n')
    res = analyze(str(path))
    assert res.exit_code == 2
    assert "nothing could be derived" in one_error_line(res)


def test_a_truncated_csv_is_an_error(tmp_path):
    text = TEMPLATE.read_text()
    path = tmp_path / "cut.raw.csv"
    path.write_text(text[: len(text) * 2 // 3])
    res = analyze(str(path))
    assert res.exit_code == 2
    assert "cut.raw.csv" in one_error_line(res) and "truncated" in res.stderr


def test_a_truncated_details_csv_is_an_error(tmp_path):
    lines = (SUITE / "ncu_stage1.details.csv").read_text().splitlines()
    last = lines[-1]
    path = tmp_path / "cut.details.csv"
    path.write_text("\n".join(lines[:-1] + [last[: last.index('","') + 3]]) + "\n")
    with pytest.raises(CollectorError, match="truncated"):
        R.read_report(path)


@pytest.mark.parametrize("share", [0.2, 0.3])
def test_a_truncated_ncu_rep_is_an_error(tmp_path, share):
    data = (SUITE / "ncu_stage1.ncu-rep").read_bytes()
    path = tmp_path / "cut.ncu-rep"
    path.write_bytes(data[: int(len(data) * share)])
    res = analyze(str(path))
    assert res.exit_code == 2
    assert "truncated or corrupt" in one_error_line(res)


def test_other_delimiters_and_missing_columns_are_input_errors(tmp_path):
    buf = io.StringIO()
    csv.writer(buf, delimiter=";", quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows())
    semi = tmp_path / "semi.raw.csv"
    semi.write_text(buf.getvalue())
    res = analyze(str(semi))
    assert res.exit_code == 2
    line = one_error_line(res)
    assert "semi.raw.csv" in line and "semicolons" in line and "plugin" not in line

    text = (SUITE / "ncu_stage1.details.csv").read_text()
    table = list(csv.reader(io.StringIO(text)))
    noid = write(tmp_path / "noid.details.csv", without(table, lambda n: n == "ID"))
    res = analyze(str(noid))
    assert res.exit_code == 2
    line = one_error_line(res)
    assert "noid.details.csv" in line and "'ID'" in line and "plugin" not in line


def test_the_device_index_column_is_not_a_device_name(tmp_path):
    path = write(tmp_path / "nodev.raw.csv", without(rows(), lambda n: n.startswith("device__")))
    res = analyze(str(path))
    assert res.exit_code == 0, res.output
    assert "device '0'" not in res.stdout and "the file does not name it" in res.stdout


def test_issue_slots_message_without_eligible_warps(tmp_path):
    res = analyze(str(SUITE / "ncu_stage1.ncu-rep"), "--json")
    assert res.exit_code == 0, res.output
    messages = [f["message"] for f in json.loads(res.stdout)["findings"] if f["tool"] == "issue_slots"]
    assert messages and not any("()" in m for m in messages)
    assert all(M.ELIGIBLE_WARPS in m for m in messages)


def test_a_gpu_other_than_the_report_s_is_warned_about(tmp_path):
    res = analyze(str(TEMPLATE), "--gpu", "A100")
    assert res.exit_code == 0, res.output
    assert "warning: " in res.stderr and "--gpu 'A100'" in res.stderr
    assert "'NVIDIA H200'" in res.stdout and "far above the ceilings" in res.stdout
    assert "Above the roofline" in res.stdout and "At the roofline already" not in res.stdout
    same = analyze(str(TEMPLATE), "--gpu", "H200 SXM")
    assert same.exit_code == 0 and "warning" not in same.stderr


def test_an_sm_count_other_than_the_spec_s_is_named(tmp_path):
    path = write(tmp_path / "pcie.raw.csv", with_value(rows(), M.SM_COUNT, "114"))
    out = analyze_json(path, "--gpu", "H200 SXM")
    assert out["bottleneck"]["evidence"]["gpu_mismatch"] == 1.0
    assert "114 SMs" in out["bottleneck"]["summary"]


def test_units(tmp_path):
    assert R.unit_scale("Kibyte") == 1024 and R.known_unit("Kibyte")
    for unit in ("byte", "Kbyte/block", "inst/cycle", "cycle/nsecond", "GB/s", "register/thread", "%", ""):
        assert R.known_unit(unit), unit
    table = rows()
    i = table[0].index(M.DRAM_READ_BYTES)
    table[1][i] = "furlong"
    kernels, payload = R.parse_raw_csv("\n".join(",".join(f'"{c}"' for c in r) for r in table))
    assert any("'furlong'" in n and M.DRAM_READ_BYTES in n for n in payload["notes"])
    res = analyze(str(write(tmp_path / "units.raw.csv", table)))
    assert "note: unknown unit 'furlong'" in res.stdout
    assert math.isclose(kernels[0].metrics[M.DRAM_READ_BYTES], float(table[2][i].replace(",", "")))
