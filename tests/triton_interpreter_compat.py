"""Test helper: let Triton's CPU interpreter take runtime loop bounds under NumPy >= 2.4.

The interpreter turns a scalar kernel argument into a one-element array, and a loop bound
(``range(start, n_elements, step)``) into ``int(array)``, which NumPy 2.4 refuses for
arrays of one dimension. :func:`allow_scalar_loop_bounds` makes such a tensor give its
element instead. Interpreter only: compiled kernels never see this. Call it after
``TRITON_INTERPRET=1`` is set and before the kernels run."""

from __future__ import annotations


def allow_scalar_loop_bounds() -> None:
    import numpy as np
    from triton.runtime import interpreter

    try:
        int(np.zeros(1))
        return
    except TypeError:
        pass
    original = interpreter._patch_lang_tensor

    def patched(tensor):
        original(tensor)
        tensor.__index__ = lambda self: int(np.asarray(self.handle.data).reshape(-1)[0])

    interpreter._patch_lang_tensor = patched
