"""Honest, and checks at import what its process was told: its working directory is its
sandbox, temporary files go under it, the variables of its build entry are set (and not
the reference's Triton cache), its directory is first on sys.path, bytecode is not
written. A judge started ahead of its job
tells the harness these with its hello; a failed check fails the import."""
import os
import sys
import tempfile

import torch
import torch.nn as nn

_cwd = os.getcwd()
_problems = []
if os.path.basename(_cwd) != "sandbox":
    _problems.append(f"cwd {_cwd}")
if os.path.realpath(tempfile.gettempdir()) != os.path.realpath(os.path.join(_cwd, "tmp")):
    _problems.append(f"tempdir {tempfile.gettempdir()}")
for _key, _tail in (("TORCH_EXTENSIONS_DIR", "torch_extensions"), ("TRITON_CACHE_DIR", "triton"),
                    ("KERNELPRO_BUILD_DIR", "nvcc")):
    _value = os.environ.get(_key, "")
    if not _value.endswith(os.sep + _tail) or os.sep + "reference" + os.sep in _value:
        _problems.append(f"{_key}={_value!r}")
if not os.environ.get("TORCHINDUCTOR_CACHE_DIR", "").endswith(os.sep + "inductor"):
    _problems.append(f"TORCHINDUCTOR_CACHE_DIR={os.environ.get('TORCHINDUCTOR_CACHE_DIR')!r}")
if os.path.realpath(sys.path[0] or ".") != os.path.realpath(_cwd):  # modules beside it import
    _problems.append(f"sys.path[0] {sys.path[0]!r}")
if not sys.dont_write_bytecode:
    _problems.append("writes bytecode")
if _problems:
    raise RuntimeError("the candidate's process was not set up as its job says: " + "; ".join(_problems))


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7

    def forward(self, x):
        return torch.nn.functional.gelu(x + self.bias) * self.scale
