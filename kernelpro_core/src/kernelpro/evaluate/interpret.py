"""Triton candidates on a CPU: Triton's interpreter, chosen by the evaluator.

Triton compiles kernels for GPUs only; on a CPU device its kernels run under its
interpreter (NumPy), which Triton reads from ``TRITON_INTERPRET=1`` in the environment
*before* triton is first imported. The evaluator therefore sets it in the environment of
the candidate's harness and of its profilers whenever the device is a CPU and the
candidate is Triton code (:func:`interpreter_env`); the reference's harness never gets it.
The interpreter is slow (a kernel's programs run one after another in NumPy): results
on a CPU show that a kernel is correct and what the loop does with it, not its speed.

:func:`prepare_interpreter` runs in the process that loads the candidate, before it is
loaded: under NumPy >= 2.4 the interpreter fails on a loop bound taken from a kernel
argument (``range(start, n, step)``), since it turns the scalar argument into a
one-element array and NumPy no longer converts those to ``int``; such arrays are made to
give their element.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernelpro.problem import detect_language

#: the variable Triton reads at import
INTERPRET_VAR = "TRITON_INTERPRET"


def needs_interpreter(device: str, candidate: Path | str | None, language: str | None = None) -> bool:
    """Whether ``candidate`` (a path) runs Triton kernels on a CPU ``device``. ``language``:
    the candidate's language when the caller knows it; otherwise it is read from the source."""
    if candidate is None or not device.startswith("cpu"):
        return False
    if language is None or language == "pytorch":
        try:
            language = detect_language(Path(candidate).read_text())
        except (OSError, UnicodeDecodeError):
            return False
    return language == "triton"


def interpreter_env(device: str, candidate: Path | str | None, language: str | None = None) -> dict[str, str]:
    """``{"TRITON_INTERPRET": "1"}`` for a Triton candidate on a CPU, else nothing."""
    return {INTERPRET_VAR: "1"} if needs_interpreter(device, candidate, language) else {}


def prepare_interpreter() -> None:
    """In the process about to load a candidate: when Triton's interpreter is on, let it
    take loop bounds from kernel arguments under NumPy >= 2.4 (see the module docstring).
    Does nothing when the interpreter is off, triton is absent, or NumPy converts
    one-element arrays itself."""
    if os.environ.get(INTERPRET_VAR) != "1":
        return
    try:
        import numpy as np
        from triton.runtime import interpreter
    except ImportError:
        return
    try:
        int(np.zeros(1))
        return
    except TypeError:
        pass
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_kernelpro_scalar_bounds", False):
        return

    def patched(tensor):
        original(tensor)
        tensor.__index__ = lambda self: int(np.asarray(self.handle.data).reshape(-1)[0])

    patched._kernelpro_scalar_bounds = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched
