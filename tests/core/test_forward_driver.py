"""The forward driver profilers run: it builds the candidate, runs it, and records the bytes
the forward must at least move (--io-json)."""

from __future__ import annotations

import json
import subprocess

from kernelpro.evaluate.forward import command

from helpers import DATA


def test_forward_driver_records_io_bytes_on_cpu(tmp_path):
    out = tmp_path / "io.json"
    argv = command(DATA / "tiny_problem.py", DATA / "good.py", device="cpu", warmup=1, iters=1, io_json=out)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    io = json.loads(out.read_text())
    # input 64x128 fp32, bias parameter 128 fp32, output 64x128 fp32
    assert io == {"input_bytes": 64 * 128 * 4, "param_bytes": 128 * 4, "output_bytes": 64 * 128 * 4}


def test_forward_driver_failure_is_one_line(tmp_path):
    argv = command(DATA / "tiny_problem.py", DATA / "raises.py", device="cpu", warmup=1, iters=1)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == ["forward failed: RuntimeError: deliberate failure in forward"]
