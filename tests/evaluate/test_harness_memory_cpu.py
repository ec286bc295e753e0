"""A harness must not keep the outputs of timed calls alive: on a GPU each one can be
gigabytes (a 6 GiB output per call ran an H200 out of memory in the timing stage when a
reference cycle through the thread check's frames kept every call's output)."""

from __future__ import annotations

import gc

import pytest
import torch

from kernelpro.evaluate import harness


class Tanh(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def _big_tensors() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is torch.Tensor and o.numel() >= 256 * 4096)


@pytest.mark.slow
def test_timed_calls_do_not_keep_their_outputs_alive():
    h = harness.Harness(chan=None, hello={"role": "candidate", "device": "cpu"})
    x = torch.randn(256, 4096)
    h.models["main"] = Tanh()
    h.in_tensors, h.inputs = [x], [x]
    h.outputs["main"] = [torch.empty(256, 4096)]
    alive = []
    gc_was = gc.isenabled()
    gc.disable()  # the leak showed only while the cyclic collector did not run: make that certain
    try:
        with torch.no_grad():
            for _ in range(150):
                answer = h.op_call({"op": "call", "time": True, "export": True})
                assert answer["ok"] and answer["exported"] == [True]
                alive.append(_big_tensors())
    finally:
        if gc_was:
            gc.enable()
    # the input and the output buffer, and at most the call in flight
    assert max(alive) - alive[0] <= 1, (alive[0], max(alive))
    assert torch.equal(h.outputs["main"][0], torch.tanh(x))
