"""The line per forward input that generators get (``InputsDescription``): worked out in a
child process, on the meta device where ``get_inputs()`` allows it, so that an input of
many gigabytes costs neither time nor memory, and with real values where it needs them."""

from __future__ import annotations

import time

from kernelpro.loop import InputsDescription, describe_inputs


def _problem(tmp_path, body: str):
    path = tmp_path / "problem.py"
    path.write_text("import torch\n\n\ndef get_init_inputs():\n    return []\n\n\n" + body)
    return path


def test_huge_inputs_are_described_without_their_data(tmp_path):
    # 2**40 fp32 elements (4 TiB): only the meta device can make this
    path = _problem(tmp_path, "def get_inputs():\n"
                              "    x = torch.randn(1 << 20, 1 << 20)\n"
                              "    return [x.t(), torch.randint(0, 5, (3,)), 0.5]\n")
    lines = describe_inputs(path, ("a", "b"))
    assert lines == ("a: float32 [1048576, 1048576] strides [1, 1048576]",
                     "b: int64 [3] contiguous",
                     "input 2: float 0.5")


def test_inputs_that_need_values_are_made_for_real(tmp_path):
    # a size read from a tensor's value cannot come from the meta device
    path = _problem(tmp_path, "def get_inputs():\n"
                              "    n = int(torch.tensor(6).item())\n"
                              "    return [torch.ones(n, 2, dtype=torch.float16), n]\n")
    assert describe_inputs(path, ("x", "n")) == ("x: float16 [6, 2] contiguous", "n: int 6")


def test_a_failing_or_slow_get_inputs_gives_no_lines(tmp_path):
    path = _problem(tmp_path, "def get_inputs():\n    raise RuntimeError('no inputs')\n")
    assert describe_inputs(path, ("x",)) == ()
    path = _problem(tmp_path, "import time\n\n\ndef get_inputs():\n    time.sleep(60)\n")
    t0 = time.monotonic()
    desc = InputsDescription(path, ("x",), timeout_s=3.0)
    assert desc.lines() == () and time.monotonic() - t0 < 30
    desc.close()  # nothing left running
    assert desc._proc.poll() is not None


def test_started_early_and_read_later(tmp_path):
    path = _problem(tmp_path, "def get_inputs():\n    return [torch.zeros(4, 4)]\n")
    desc = InputsDescription(path, ("x",))
    time.sleep(0.1)  # the run goes on (its baseline job) while the child works
    assert desc.lines() == ("x: float32 [4, 4] contiguous",)
    assert desc.lines() == ("x: float32 [4, 4] contiguous",)  # read once, kept
    desc.close()
