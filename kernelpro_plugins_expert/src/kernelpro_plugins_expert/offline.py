"""Compiling a candidate's Triton kernels for a GPU without one.

:func:`compile_instead_of_launch` replaces the kernels of a loaded candidate module
(``_kp_r<i>_...``, not the jit helpers they call) so that running its forward compiles
each launch for a chosen target (sm_90: the H200) at the launch's real argument types
instead of running it; with meta tensors as inputs nothing is allocated. The tests
(``tests/expert/compile_candidates.py``) and ``benchmarks/kernel_sass.py`` check and count
kernels this way on the development machine.
"""

from __future__ import annotations

from typing import Any, Callable


def compile_launch(fn: Any, args: tuple[Any, ...], constexprs: dict[str, Any], num_warps: int = 4,
                   num_stages: int = 3, arch: int = 90, cache: dict[str, Any] | None = None) -> Any:
    """``fn`` (a ``triton.jit`` function) compiled for ``sm_<arch>`` as this launch would run it,
    with the specializations a real launch makes: a pointer whose address is a multiple of
    16 bytes, or an integer that is a multiple of 16, is marked so (``tt.divisibility``: the
    loads and stores it addresses can be vectorized), and an integer equal to 1 becomes a
    constant. A meta tensor's address is 0, as aligned as PyTorch's allocations. With
    ``cache``, a launch of the same source (its callees' too) at the same specializations
    is compiled once (a model's layers repeat their launches)."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    pointer = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float64: "*fp64",
               # argmax/argmin indices, integer and bool operands of pointwise kernels
               torch.int64: "*i64", torch.int32: "*i32", torch.int16: "*i16", torch.int8: "*i8",
               torch.uint8: "*u8", torch.bool: "*i1"}
    signature, values, attrs = {}, dict(constexprs), {}
    for i, (p, a) in enumerate(zip(fn.params, args)):
        if p.is_constexpr:
            values[p.name] = a
        elif isinstance(a, torch.Tensor):
            signature[p.name] = pointer[a.dtype]
            if a.data_ptr() % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(a, bool):
            signature[p.name] = "i1"
        elif isinstance(a, int) and a == 1:
            signature[p.name], values[p.name] = "constexpr", 1
        elif isinstance(a, int):
            signature[p.name] = "i64" if abs(a) >= 2**31 else "i32"
            if a % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(a, float):
            signature[p.name] = "fp32"
        else:
            raise TypeError(f"{p.name}: cannot type a launch argument of {type(a).__name__}")
    for p in fn.params:
        if p.is_constexpr:
            signature[p.name] = "constexpr"
    key = repr((fn.cache_key, sorted(signature.items()), sorted(values.items()), sorted(attrs.items()), num_warps,
                num_stages, arch))
    if cache is not None and key in cache:
        return cache[key]
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=values, attrs=attrs),
                               target=GPUTarget("cuda", arch, 32),
                               options={"num_warps": num_warps, "num_stages": num_stages})
    if cache is not None:
        cache[key] = compiled
    return compiled


def compile_instead_of_launch(module: Any, on_compiled: Callable[[str, Any, int, dict[str, Any]], None],
                              arch: int = 90, cache: dict[str, Any] | None = None) -> None:
    """Replace the kernels of ``module``: each launch ``kernel[grid](*args, **kw)`` compiles
    (through ``cache``, see :func:`compile_launch`) and calls ``on_compiled(kernel_name,
    compiled, num_warps, constexprs)``."""
    import triton

    for name, fn in list(vars(module).items()):
        if not (isinstance(fn, triton.runtime.jit.JITFunction) and name.startswith("_kp_r")):
            continue

        class Launcher:
            def __init__(self, name: str = name, fn: Any = fn) -> None:
                self.name, self.fn = name, fn

            def __getitem__(self, grid: Any) -> Callable[..., None]:
                def launch(*args: Any, num_warps: int = 4, num_stages: int = 3, **constexprs: Any) -> None:
                    compiled = compile_launch(self.fn, args, constexprs, num_warps, num_stages, arch, cache)
                    on_compiled(self.name, compiled, num_warps, {**constexprs})

                return launch

        setattr(module, name, Launcher())
