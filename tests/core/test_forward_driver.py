"""The forward driver profilers run: it builds the candidate, runs it, and records the bytes
the forward must at least move (--io-json)."""

from __future__ import annotations

import json
import subprocess
import sys

from kernelpro.evaluate.forward import command

from helpers import DATA


def test_forward_driver_records_io_bytes_on_cpu(tmp_path):
    out = tmp_path / "io.json"
    argv = command(DATA / "tiny_problem.py", DATA / "good.py", device="cpu", warmup=1, iters=1, io_json=out)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    io = json.loads(out.read_text())
    phases = io.pop("phases")
    # input 64x128 fp32, bias parameter 128 fp32, output 64x128 fp32
    assert io == {"input_bytes": 64 * 128 * 4, "param_bytes": 128 * 4, "output_bytes": 64 * 128 * 4}
    # when each phase ended, in order, so a collector can split its wall time
    assert list(phases) == ["main", "torch", "prepared", "warmup", "profiled"]
    times = list(phases.values())
    assert times == sorted(times) and times[-1] - times[0] < 120


def test_forward_driver_failure_is_one_line(tmp_path):
    argv = command(DATA / "tiny_problem.py", DATA / "raises.py", device="cpu", warmup=1, iters=1)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == ["forward failed: RuntimeError: deliberate failure in forward"]


def test_forward_driver_uses_the_evaluators_precision(tmp_path):
    # the timed calls run under PyTorch's defaults (cuDNN convolutions may use TF32, cuBLAS
    # not); the profiled forward must run the same kernels, even in a process that had
    # changed them, and a candidate that sets the flags itself when it loads keeps its own
    code = ("import torch\n"
            "prepared = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)\n"
            "from kernelpro.evaluate.forward import prepare\n"
            "import kernelpro.evaluate.guard  # the process's flags at start are captured here\n"
            "import pathlib, sys\n"
            "d = pathlib.Path(sys.argv[1])\n"
            "torch.backends.cudnn.allow_tf32 = False\n"
            "prepare(d / 'tiny_problem.py', d / 'good.py', 'cpu', 0)\n"
            "print(torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, prepared[0])\n"
            "(tmp / 'own.py').write_text((d / 'good.py').read_text() + '\\ntorch.backends.cudnn.allow_tf32 = False\\n')\n"
            "prepare(d / 'tiny_problem.py', tmp / 'own.py', 'cpu', 0)\n"
            "print(torch.backends.cudnn.allow_tf32)\n")
    script = tmp_path / "probe.py"
    script.write_text("import pathlib\ntmp = pathlib.Path(%r)\n" % str(tmp_path) + code)
    res = subprocess.run([sys.executable, str(script), str(DATA)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    first, second = res.stdout.strip().splitlines()
    assert first == "True False True", first  # torch's defaults: cuDNN may use TF32, cuBLAS not
    assert second == "False"
