"""The judge's inputs: drawn from the problem, lent to the harnesses, changed every timed call.

Every trial's inputs are drawn once, in the judge, and kept there untouched; a harness
only ever sees copies in its own buffers (:mod:`kernelpro.evaluate.transport`), refilled
before each call. Timed calls see a trial's values scaled by a factor no earlier call
used (:func:`fill`, :func:`scale_draws`), so no cache keyed by address or content can hit.
"""

from __future__ import annotations

import random
from typing import Any

import torch


def other_distribution(inputs: list[Any], seed: int) -> list[Any]:
    """Inputs of another distribution: floating tensors redrawn from N(0, 1), on their own
    device (a generator per device, seeded with ``seed``)."""
    gens: dict[Any, torch.Generator] = {}
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            if x.device not in gens:
                gens[x.device] = torch.Generator(device=x.device).manual_seed(seed)
            out.append(torch.randn(x.shape, generator=gens[x.device], dtype=torch.float32,
                                   device=x.device).to(dtype=x.dtype))
        else:
            out.append(x)
    return out


def tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for x in value for t in tensors(x)]
    return []


def fill(views: list[torch.Tensor], src: list[Any], u: float = 0.0) -> None:
    """Copy the tensors of ``src`` into ``views`` (a harness's input buffers, in
    :func:`tensors` order) and scale the floating ones by ``1 + u * max(1e-3, 4 *
    eps(dtype))`` (sign and zeros kept, values new). A floating set of the buffer's dtype,
    shape and device is scaled into it in one pass (the product written where the copy
    would go: a timed call of an 8-GB input waited for one pass over it, not two)."""
    for dst, s in zip(views, tensors(src)):
        if not (dst.is_floating_point() and u):
            dst.copy_(s)
            continue
        factor = 1.0 + u * max(1e-3, 4 * torch.finfo(dst.dtype).eps)
        if s.dtype == dst.dtype and s.shape == dst.shape and s.device == dst.device:
            torch.mul(s, factor, out=dst)
        else:
            dst.copy_(s)
            dst.mul_(factor)


def scale_draws(rng: random.Random, n: int = 4096) -> tuple[list[float], list[float]]:
    """The ``u`` of :func:`fill` for warm-up and for timed calls: the grid ``+-(1 + k / n)``,
    ``k < n``, shuffled and split in two, so no value is drawn twice."""
    grid = [sign * (1.0 + k / n) for sign in (-1.0, 1.0) for k in range(n)]
    rng.shuffle(grid)
    return grid[:n], grid[n:]


def to_host(value: Any) -> Any:
    """``value`` with its tensors copied to host memory, contiguous (page-locked where the host
    lends it, so that copying them back to the GPU is one DMA), nesting kept. What reads a
    set copies it into buffers of their own strides, so the values are all that counts."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "cpu":
            return value
        try:
            host = torch.empty(value.shape, dtype=value.dtype, device="cpu", pin_memory=True)
        except RuntimeError:  # no page-locked memory left: pageable works, only slower to copy
            host = torch.empty(value.shape, dtype=value.dtype, device="cpu")
        host.copy_(value)
        return host
    if isinstance(value, (list, tuple)):
        return type(value)(to_host(v) for v in value)
    return value


#: elements compared at a time: a comparison of a whole multi-GB input would allocate its
#: boolean temporaries (a byte per element, several of them) on a device already full
PIECE = 1 << 26


def _split(t: torch.Tensor, flat: bool) -> list[torch.Tensor]:
    """``t`` in views of at most about :data:`PIECE` elements, in order: flat pieces where
    ``flat`` (``t`` contiguous), else slices of its first dimension (a flat view of a strided
    tensor would be a copy of it)."""
    if t.numel() <= PIECE or t.dim() == 0:
        return [t]
    if flat:
        return list(t.reshape(-1).split(PIECE))
    return list(t.split(max(1, PIECE // max(1, t[0].numel()))))


def _pieces(b: torch.Tensor, a: torch.Tensor):
    """Matching pieces of ``b`` and ``a`` (same shape), with ``b``'s moved to ``a``'s device
    one at a time, as they are asked for (a list would hold the whole set there)."""
    flat = b.is_contiguous() and a.is_contiguous()
    for bp, ap in zip(_split(b, flat), _split(a, flat)):
        yield (bp if bp.device == ap.device else bp.to(ap.device)), ap


def unchanged(before: list[Any], after: list[torch.Tensor]) -> bool:
    """Whether the tensors ``after`` (a harness's input buffers) still hold ``before``'s values
    (NaN equal to NaN); a set kept in host memory is compared piece by piece on the buffers'
    device."""
    for b, a in zip(tensors(before), after):
        if b.shape != a.shape or b.dtype != a.dtype:
            return False
        for bp, ap in _pieces(b, a):
            if torch.equal(bp, ap):  # one pass, no temporaries: the honest case (no NaN)
                continue
            if bp.is_floating_point() or bp.is_complex():
                same = (bp == ap) | (torch.isnan(bp) & torch.isnan(ap))
                if not bool(same.all()):
                    return False
            elif not torch.equal(bp, ap):
                return False
    return True


def poison(value: Any) -> None:
    """Overwrite tensors (NaN, or -1 for integers) before their memory is given back, so
    nothing that later receives the same memory finds an answer in it."""
    for t in tensors(value):
        if t.numel() == 0:
            continue
        try:
            if t.is_floating_point() or t.is_complex():
                t.detach().fill_(float("nan"))
            elif t.dtype != torch.bool:
                t.detach().fill_(-1)
        except RuntimeError:
            pass  # an expanded view: not writable in place
