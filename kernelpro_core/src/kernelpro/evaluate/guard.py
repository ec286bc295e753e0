"""Integrity guards of the worker process against a candidate that runs in it.

* :class:`Snapshot` records the identity of every callable attribute of the modules and
  classes the measurement relies on (torch, torch.nn.functional, torch.Tensor, torch.cuda,
  the nn module classes, time, the evaluator's own modules) before the candidate is
  imported; :meth:`Snapshot.changed` names those replaced since. A candidate that patches
  ``time.perf_counter``, ``torch.cuda.Event.elapsed_time``, the evaluator's captured
  functions or an operator the reference calls (to slow the baseline down) is caught.
* :func:`backend_flags` / :func:`restore_backend_flags`: the reference always runs with
  the flags it was measured with (TF32 off, cuDNN settings), whatever the candidate set.
* :func:`scan_source` rejects sources that reach into the evaluator (frame or garbage
  collector introspection, the result channel, importing the evaluator's modules).
* :func:`extra_threads` names Python threads the candidate left running.

Residual risk (documented in docs/evaluation.md): code in the same process can always
defeat in-process checks with enough effort (ctypes writes to memory, obfuscated
introspection); these checks make cheating deliberate and visible, not impossible.
"""

from __future__ import annotations

import os
import re
import threading
import time
import types
from typing import Any

import torch

_EVALUATOR_MODULES = (
    "kernelpro.evaluate.worker", "kernelpro.evaluate.timing", "kernelpro.evaluate.compare",
    "kernelpro.evaluate.loader", "kernelpro.evaluate.guard", "kernelpro.evaluate.channel",
    "kernelpro.evaluate.gpu_state", "kernelpro.evaluate.policy", "kernelpro.evaluate.bounds",
)


def _targets() -> dict[str, Any]:
    import statistics
    import sys

    import torch.nn as nn
    import torch.nn.functional as F

    out: dict[str, Any] = {
        "torch": torch, "torch.nn.functional": F, "torch.Tensor": torch.Tensor,
        "torch._C.TensorBase": torch._C.TensorBase, "torch.cuda": torch.cuda, "torch.cuda.Event": torch.cuda.Event,
        "torch.nn.Module": nn.Module, "time": time, "statistics": statistics, "torch.linalg": torch.linalg,
        "torch.fft": torch.fft, "torch.special": torch.special,
    }
    for name in dir(nn):
        obj = getattr(nn, name, None)
        if isinstance(obj, type) and issubclass(obj, nn.Module) and obj is not nn.Module:
            out[f"torch.nn.{name}"] = obj
    for name in _EVALUATOR_MODULES:
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = mod
    return out


_TORCH_DIR = os.path.dirname(torch.__file__)


def _callables(obj: Any) -> dict[str, Any]:
    try:
        items = vars(obj).items()
    except TypeError:
        return {}
    return {k: v for k, v in items if callable(v) or isinstance(v, (staticmethod, classmethod, property))}


def _torch_wrapper_of(new: Any, old: Any) -> bool:
    """Whether ``new`` is torch's own wrapper of ``old``. torch._dynamo wraps a few functions
    (e.g. ``torch.manual_seed``) when it is first imported: ``new.__wrapped__`` is ``old``.
    The first torch.compile replaces ``nn.Module.__init__`` and ``__setstate__`` with
    generation-tagging closures over the originals, without ``__wrapped__``: a function of
    ``torch._dynamo.mutation_guard`` whose closure holds ``old``. Either way ``new``'s code
    lives in torch's package directory."""
    code = getattr(new, "__code__", None)
    if code is None or not os.path.dirname(code.co_filename).startswith(_TORCH_DIR):
        return False
    if getattr(new, "__wrapped__", None) is old:
        return True
    if getattr(new, "__module__", None) != "torch._dynamo.mutation_guard":
        return False
    return any(_cell(c) is old for c in (getattr(new, "__closure__", None) or ()))


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _settle_torch() -> None:
    """Let torch make the patches it makes on first use before the snapshot is taken, where
    that costs nothing: torch.compile (Dynamo) replaces ``nn.Module.__init__`` and
    ``__setstate__`` with its generation-tagging versions the first time it runs. Only when
    Dynamo is already imported: importing it here took seconds of every evaluation (the
    ``guards`` stage, 3.8-7.0 s per candidate on the H200), and :func:`_torch_wrapper_of`
    recognizes those patches when a candidate's torch.compile makes them later."""
    import sys

    guard_mod = sys.modules.get("torch._dynamo.mutation_guard")
    install = getattr(guard_mod, "install_generation_tagging_init", None)
    if install is None:
        return
    try:
        install()
    except Exception:
        pass


class Snapshot:
    """The callables of the modules and classes the measurement relies on."""

    def __init__(self) -> None:
        _settle_torch()
        self.targets = _targets()
        self.objs = {name: _callables(obj) for name, obj in self.targets.items()}

    def changed(self) -> list[str]:
        """``module.attribute`` of every callable replaced or deleted since the snapshot."""
        out = []
        for name, obj in self.targets.items():
            try:
                live = vars(obj)
            except TypeError:
                continue
            for key, old in self.objs[name].items():
                if key not in live:
                    out.append(f"{name}.{key}")
                elif live[key] is not old and not _torch_wrapper_of(live[key], old):
                    out.append(f"{name}.{key}")
        return sorted(out)


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


# --- threads -----------------------------------------------------------------------------------


def thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def extra_threads(before: set[int]) -> list[str]:
    """Names of live Python threads started since ``before`` (daemon or not)."""
    return [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]


def is_module(obj: Any) -> bool:
    return isinstance(obj, types.ModuleType)
