"""Real rewrites of corpus kernels: for a PyTorch kernel of the micro-profiler corpus
(``tests/ncu/corpus/<dir>``), a Triton kernel that carries out the action one of our findings
on that kernel proposes, computing the same result. Timed against the PyTorch operation on
the GPU, each pair gives a realized gain to set beside the finding's estimated gain
(``benchmarks/ncu_calibration/run.py``, ``pairs.py --set corpus``).

One module per rewrite, named after the workload's family, defining:

* ``CORPUS``: the corpus directory under ``tests/ncu/corpus`` (e.g. ``"h200_v2"``);
* ``WORKLOAD``: the workload there, ``"<family>@large"``;
* ``KERNEL``: a substring of the name of the corpus kernel the rewrite replaces (the
  workload's kernel below 60 % of its roofline);
* ``ACTS_ON``: the micro-profilers whose action the rewrite carries out (each gave a finding
  on that kernel);
* ``ACTION``: one line saying what the rewrite does;
* ``SIZES``: ``{"large": (...), "small": (...)}``; ``large`` is the corpus workload's size
  (the arguments of its builder in ``tools/capture/ncu_corpus/workloads.py``), ``small`` a
  size the CPU tests run in Triton's interpreter in a second or so;
* ``RTOL``, ``ATOL``: the tolerance ``after`` must meet against ``before``;
* ``inputs(torch, device, *size) -> list``: the operation's input tensors;
* ``before(torch, *inputs)``: the PyTorch operation exactly as the corpus workload runs it;
* ``after(torch, *inputs)``: the rewrite; its Triton kernels are module-level ``@triton.jit``
  functions whose names start with ``_kp_r`` and are launched by their global name (so that
  the CPU tests can compile them for sm_90 in place of launching them).

Where the PyTorch kernel writes a second output its operation does not return (a max pool's
int64 indices), the rewrite writes it too, and the module also defines
``before_with_indices`` and ``after_with_indices`` returning ``(values, indices)``: the CPU test
checks the indices are PyTorch's.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def load(name: str) -> ModuleType:
    key = f"kp_corpus_rewrite_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod
