"""Traces KernelPro did not record (a user's own torch.profiler export): the GPU comes from
the profiler's ``deviceProperties``; a trace with nothing to analyse says so once and makes
``kernelpro analyze`` fail with one error line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from click.testing import CliRunner

from kernelpro import cli as cli_mod

from kernelpro_plugins_nsys import kineto

FIXTURE = Path(__file__).parent / "fixtures" / "h200" / "launch_bound.json.gz"


def user_trace() -> dict:
    data = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    data.pop("kernelpro_trace", None)
    return data


def test_device_name_and_arch_come_from_device_properties(tmp_path):
    data = user_trace()
    timeline = kineto.parse(data)
    assert timeline.meta["gpu_name"] == "NVIDIA H200" and timeline.meta["arch"] == "sm_90"
    path = tmp_path / "user.json"
    path.write_text(json.dumps(data))
    res = CliRunner().invoke(cli_mod.cli, ["analyze", str(path)])
    assert res.exit_code == 0, res.output
    assert "the file does not name it" not in res.stdout


def test_kernelpro_s_own_metadata_wins():
    data = user_trace()
    data["kernelpro_trace"] = {"gpu_name": "NVIDIA H100 80GB HBM3"}
    assert kineto.parse(data).meta["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_non_finite_timestamps_are_skipped():
    data = user_trace()
    kernels = [e for e in data["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]
    kernels[0]["ts"] = float("nan")
    timeline = kineto.parse(data)
    assert len([g for g in timeline.gpu if g.kind == "kernel"]) == len(kernels) - 1


def test_gpu_work_with_nothing_to_attribute_it_to_is_an_error(tmp_path):
    data = user_trace()
    data["traceEvents"] = [e for e in data["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]
    path = tmp_path / "kernels_only.json"
    path.write_text(json.dumps(data))
    res = CliRunner().invoke(cli_mod.cli, ["analyze", str(path)])
    assert res.exit_code == 2, res.output
    notes = [ln for ln in res.stdout.splitlines() if ln.startswith("note: timeline")]
    assert len(notes) == 1 and "no call to analyse" in notes[0], notes  # not also "analysed as one call"
    errors = res.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: ") and "nothing could be derived" in errors[0]
