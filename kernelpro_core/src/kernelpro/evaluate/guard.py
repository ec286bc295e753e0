"""First-line checks of a candidate, and the backend flags a model runs with.

* :func:`scan_source` rejects sources that reach into the evaluator (frame or garbage
  collector introspection, the result channel, importing the evaluator's modules) before
  any of them runs. It makes the obvious attempts fail with a clear reason; the trust
  boundary itself is the process boundary (docs/evaluation.md): a candidate that gets past
  the scan only reaches its own process.
* :func:`set_reference_precision`, :func:`backend_flags` / :func:`restore_backend_flags`:
  the reference's outputs (what correctness is judged against) are computed in fp32 without
  TF32; the timed baselines and the candidate run with the process's own settings at start,
  PyTorch's defaults (:data:`STARTUP_FLAGS`), as users run their models; the flags a
  candidate changes are reported.
"""

from __future__ import annotations

import re
from typing import Any

import torch

# --- backend flags -----------------------------------------------------------------------------




def set_reference_precision() -> None:
    """fp32 matmuls and convolutions in full fp32 (no TF32), via the API this torch has."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def _read(getter) -> Any:
    # torch >= 2.9 raises when the legacy TF32 flags are read after the new fp32_precision
    # API was used; such a flag reads as "unreadable" instead of failing the evaluation
    try:
        return getter()
    except RuntimeError:
        return "unreadable"


def backend_flags() -> dict[str, Any]:
    m, c = torch.backends.cuda.matmul, torch.backends.cudnn
    return {
        "matmul.allow_tf32": _read(lambda: m.allow_tf32),
        "matmul.allow_fp16_reduced": _read(lambda: m.allow_fp16_reduced_precision_reduction),
        "matmul.allow_bf16_reduced": _read(lambda: m.allow_bf16_reduced_precision_reduction),
        "cudnn.allow_tf32": _read(lambda: c.allow_tf32),
        "cudnn.enabled": c.enabled,
        "cudnn.benchmark": c.benchmark,
        "cudnn.deterministic": c.deterministic,
        "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "num_threads": torch.get_num_threads(),
    }


#: the flags :func:`set_reference_precision` sets (the others it leaves as they are)
STRICT: dict[str, Any] = {"matmul.allow_tf32": False, "cudnn.allow_tf32": False, "float32_matmul_precision": "highest"}

#: the flags this process started with (PyTorch's defaults, or what the user's environment
#: sets): captured when this module is first imported, before any model or candidate runs
STARTUP_FLAGS: dict[str, Any] = {}


def set_default_precision() -> None:
    """Back to :data:`STARTUP_FLAGS`: the settings users run their models with."""
    restore_backend_flags(STARTUP_FLAGS)


def strict_differs(cuda: bool) -> bool:
    """Whether the strict-fp32 settings of :func:`set_reference_precision` change anything a
    computation on this process's devices can see (on a CPU the TF32 switches do nothing)."""
    return cuda and any(STARTUP_FLAGS.get(k) != v for k, v in STRICT.items())


def restore_backend_flags(flags: dict[str, Any]) -> None:
    """Put back the flags of :func:`backend_flags` (only those that differ)."""
    now = backend_flags()
    if now == flags:
        return
    try:
        _restore(now, flags)
    except RuntimeError:  # the legacy/new TF32 API mix: fall back to the one global switch
        if flags.get("float32_matmul_precision") == "highest":
            torch.set_float32_matmul_precision("highest")


def _restore(now: dict[str, Any], flags: dict[str, Any]) -> None:
    m = torch.backends.cuda.matmul
    c = torch.backends.cudnn
    if now["matmul.allow_fp16_reduced"] != flags["matmul.allow_fp16_reduced"] \
            and flags["matmul.allow_fp16_reduced"] != "unreadable":
        m.allow_fp16_reduced_precision_reduction = flags["matmul.allow_fp16_reduced"]
    if now["matmul.allow_bf16_reduced"] != flags["matmul.allow_bf16_reduced"] \
            and flags["matmul.allow_bf16_reduced"] != "unreadable":
        m.allow_bf16_reduced_precision_reduction = flags["matmul.allow_bf16_reduced"]
    if now["float32_matmul_precision"] != flags["float32_matmul_precision"] \
            and flags["float32_matmul_precision"] != "unreadable":
        torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    if now["matmul.allow_tf32"] != flags["matmul.allow_tf32"] and flags["matmul.allow_tf32"] != "unreadable":
        m.allow_tf32 = flags["matmul.allow_tf32"]
    if now["cudnn.allow_tf32"] != flags["cudnn.allow_tf32"] and flags["cudnn.allow_tf32"] != "unreadable":
        c.allow_tf32 = flags["cudnn.allow_tf32"]
    for key in ("enabled", "benchmark", "deterministic"):
        if now[f"cudnn.{key}"] != flags[f"cudnn.{key}"]:
            setattr(c, key, flags[f"cudnn.{key}"])
    if now["deterministic_algorithms"] != flags["deterministic_algorithms"]:
        torch.use_deterministic_algorithms(flags["deterministic_algorithms"])
    if now["num_threads"] != flags["num_threads"]:
        torch.set_num_threads(flags["num_threads"])


STARTUP_FLAGS.update(backend_flags())

# --- source scan -------------------------------------------------------------------------------

_FORBIDDEN = (
    (re.compile(r"\b_getframe\b|\bf_back\b|\bf_locals\b|\bf_globals\b|inspect\s*\.\s*(?:currentframe|stack|getouterframes|trace)"),
     "inspects the evaluator's stack frames"),
    (re.compile(r"\bget_objects\b|\bget_referrers\b|\bget_referents\b"), "searches the garbage collector's objects"),
    (re.compile(r"/proc/self/(?:mem|fd)|/proc/\{|/proc/\"|KERNELPRO_RESULT_FD"), "touches the evaluator's result channel or memory"),
    # the kernelpro package itself (other distributions such as kernelpro_cute are fine;
    # kernelpro.evaluate.nvcc is the helper candidates may use)
    (re.compile(r"\b(?:from|import)\s+kernelpro(?:\s|$|\.(?!evaluate\.nvcc\b))|\bkernelpro\.evaluate\.(?!nvcc\b)\w+"
                r"|sys\.modules\s*\[\s*['\"]kernelpro(?:['\".]|_problem)", re.M),
     "imports the evaluator"),
    (re.compile(r"\bsettrace\b|\bsetprofile\b|\baddaudithook\b"), "installs tracing or audit hooks"),
)


def scan_source(source: str) -> str | None:
    """Why a candidate source is rejected before it runs, or None."""
    for pattern, why in _FORBIDDEN:
        m = pattern.search(source)
        if m:
            line = source.count("\n", 0, m.start()) + 1
            return f"the candidate {why} (line {line}: {m.group(0)!r})"
    return None
