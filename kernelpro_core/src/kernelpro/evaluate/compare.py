"""Comparing a candidate's outputs with the reference's.

Method: outputs are flattened into lists of tensors (a tensor, or a tuple/list of them).
Shape and dtype must match exactly; the candidate's tensors must be plain
``torch.Tensor`` objects; NaN and Inf never pass (a non-finite value in the candidate
where the reference is finite fails; a trial whose reference is non-finite is skipped by
the caller). Values pass when ``|cand - ref| <= atol + rtol * |ref|`` element-wise, with
the tolerance of the output's dtype (see ``evaluator.tolerances`` in the config).
:func:`compare_to_exact` is the second opinion for float32 outputs that fail: their
distance to the reference computed in float64, against the fp32 reference's own; and for
integer and boolean outputs, which must take either reference's value.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import torch

# captured at import, before any candidate code runs in this process
_isfinite = torch.isfinite
_abs = torch.abs
_tensor_type = torch.Tensor


@attrs.frozen
class Comparison:
    ok: bool
    message: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    integrity: bool = False  # failed for not being a plain tensor / dense / on the right device
    n_over: int = 0  # a failure on finite values alone: how many were outside the tolerance


def flatten(out: Any) -> list[Any]:
    if isinstance(out, (list, tuple)):
        flat: list[Any] = []
        for x in out:
            flat.extend(flatten(x))
        return flat
    return [out]


def compare(cand_out: Any, ref_out: Any, tolerances: dict[str, tuple[float, float]],
            device_type: str | None = None, stop_early: bool = False,
            compute_device: Any = None) -> Comparison:
    """``device_type``: where the candidate's tensors must live (the reference's device).
    ``stop_early``: return at the first piece that fails (the counts in the message are
    then those of the pieces read so far; for checks that only need the verdict).
    ``compute_device``: where the arithmetic runs (default: the candidate's GPU, else the
    CPU); host copies are moved there piece by piece."""
    cands, refs = flatten(cand_out), flatten(ref_out)
    if len(cands) != len(refs):
        return Comparison(False, f"expected {len(refs)} output(s), got {len(cands)}")
    worst_abs = worst_rel = 0.0
    for i, (c, r) in enumerate(zip(cands, refs)):
        where = f"output {i}" if len(refs) > 1 else "output"
        if not isinstance(r, _tensor_type):
            if type(c) is not type(r):
                return Comparison(False, f"{where}: expected a {type(r).__name__}, got "
                                  f"{type(c).__module__}.{type(c).__name__}", integrity=True)
            if type(r) is float:
                # usually a float32 result read with .item(): float32's relative tolerance (an
                # honest sum in float64, rounded to float32 at the end, was 1 ulp off and failed
                # exactly); no absolute one, which passed anything for a loss of 1.7e-7
                rtol = tolerances.get("float32", (1e-4, 1e-4))[1]
                same = c == r or (c != c and r != r)
                if not same and not (abs(c - r) <= rtol * abs(r)):
                    return Comparison(False, f"{where}: expected {r!r}, got {c!r} (outside rtol={rtol:g})")
                continue
            if c != r:
                return Comparison(False, f"{where}: expected {r!r}, got {c!r}")
            continue
        if type(c) is not _tensor_type:
            return Comparison(False, f"{where}: expected a plain torch.Tensor, got "
                              f"{type(c).__module__}.{type(c).__name__}", integrity=True)
        if c.layout != torch.strided or c.is_meta:
            return Comparison(False, f"{where}: expected a dense tensor with storage, got layout {c.layout}"
                              f"{' on meta' if c.is_meta else ''}", integrity=True)
        if device_type is not None and c.device.type != device_type:
            return Comparison(False, f"{where}: on device {c.device.type}, expected {device_type}", integrity=True)
        if c.shape != r.shape:
            return Comparison(False, f"{where}: shape {tuple(c.shape)} != reference {tuple(r.shape)}")
        if c.dtype != r.dtype:
            return Comparison(False, f"{where}: dtype {c.dtype} != reference {r.dtype}")
        if c.numel() == 0:
            continue
        if not r.is_floating_point() and not r.is_complex():
            bad = sum(int((cc != rr).sum()) for cc, rr in _chunks(c, r, compute_device=compute_device))
            if bad:
                return Comparison(False, f"{where}: {bad} of {r.numel()} integer values differ")
            continue
        key = str(r.dtype).replace("torch.", "")
        atol, rtol = tolerances.get(key, tolerances.get("float32", (1e-4, 1e-4)))
        nonfinite = mismatch_nf = n_over = 0
        max_abs = max_rel = 0.0
        worst_excess, example = None, None
        wide = torch.float64 if r.is_floating_point() else torch.complex128
        floor = atol if atol > 0 else 1e-30
        for start, (c64, r64) in zip(range(0, r.numel(), CHUNK),
                                    _chunks(c, r, dtype=wide, compute_device=compute_device)):
            piece = _piece(c64, r64, atol, rtol, floor)
            nonfinite += piece.nonfinite
            mismatch_nf += piece.mismatch_nf
            n_over += piece.n_over
            max_abs, max_rel = max(max_abs, piece.max_abs), max(max_rel, piece.max_rel)
            # the example: where the distance most exceeds the tolerance, first such place in
            # the output; a piece with none over it (its excess <= 0) cannot hold it
            if piece.example is not None and (worst_excess is None or piece.example[0] > worst_excess):
                worst_excess, example = piece.example[0], (start + piece.example[1], *piece.example[2:])
            if stop_early and (nonfinite or mismatch_nf or n_over):
                break
        if nonfinite:
            return Comparison(False, f"{where}: {nonfinite} NaN/Inf values where the reference is finite")
        if mismatch_nf:
            return Comparison(False, f"{where}: {mismatch_nf} non-finite reference values not matched")
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
        if n_over:
            assert example is not None  # set with every value counted in n_over
            idx, got, want = example
            return Comparison(
                False,
                f"{where}: {n_over} of {r.numel()} values outside atol={atol:g} rtol={rtol:g} "
                f"(max abs err {max_abs:.3g}; e.g. index {idx}: got {_num(got)}, "
                f"expected {_num(want)})",
                max_abs,
                max_rel,
                n_over=n_over,
            )
    return Comparison(True, "", worst_abs, worst_rel)


@attrs.frozen
class _Piece:
    nonfinite: int
    mismatch_nf: int
    n_over: int
    max_abs: float
    max_rel: float
    example: tuple[float, int, Any, Any] | None  # (excess, index in the piece, got, expected)


def _piece(c64: torch.Tensor, r64: torch.Tensor, atol: float, rtol: float, floor: float) -> _Piece:
    """One piece of a floating-point output, both sides in float64 (complex128). Where every
    difference is finite (so both sides are: inf - inf is NaN, and float64 differences of
    narrower values cannot overflow), about half the kernels of the general case and one
    synchronization; otherwise the general case. Both give the same numbers bit for bit
    (``tests/evaluate/test_units.py``)."""
    d = c64 - r64
    if not d.is_complex():
        ad = d.abs_()
        ar = _abs(r64)
        limit = ar.mul(rtol).add_(atol)
        over = ad > limit
        # one read-back for the three numbers; the largest distance is NaN or Inf exactly where
        # some difference is not finite (a maximum propagates NaN), and then the rest is unused
        n, mx, mr = torch.stack([over.sum().to(torch.float64), ad.max(),
                                 torch.div(ad, ar.clamp_min_(floor)).max()]).tolist()
        if math.isfinite(mx):
            example = None
            if n:
                excess = ad.sub_(limit)
                j = int(torch.argmax(excess))
                example = (float(excess[j]), j, c64[j].item(), r64[j].item())
            return _Piece(0, 0, int(n), mx, mr, example)
        del ad, ar, limit, over
    return _piece_general(c64, r64, atol, rtol, floor)


def _piece_general(c64: torch.Tensor, r64: torch.Tensor, atol: float, rtol: float, floor: float) -> _Piece:
    """:func:`_piece` where some value is not finite: NaN and Inf counted on both sides."""
    ref_finite = _isfinite(r64)
    cand_finite = _isfinite(c64)
    nonfinite = int((~cand_finite & ref_finite).sum())
    mismatch_nf = int((~ref_finite & ~((c64 == r64) | (c64.isnan() & r64.isnan()))).sum())
    diff = _abs(c64 - r64)
    diff = torch.where(ref_finite, diff, torch.zeros_like(diff))
    limit = atol + rtol * _abs(r64)
    n_over = int((diff > limit).sum())
    max_abs = float(diff.max())
    denom = _abs(r64).clamp_min(floor)
    max_rel = float((diff / denom).max())
    excess = diff - limit
    j = int(torch.argmax(excess))
    return _Piece(nonfinite, mismatch_nf, n_over, max_abs, max_rel, (float(excess[j]), j, c64[j].item(), r64[j].item()))


def _num(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


CHUNK = 1 << 26  # elements compared at a time (float64 temporaries of 512 MiB each)


def _chunks(c: torch.Tensor, *others: torch.Tensor, dtype: torch.dtype | None = None, compute_device: Any = None):
    """Matching flat pieces of ``c`` and ``others`` (``dtype``: converted to it), on
    ``compute_device``, by default ``c``'s device when that is a GPU, else the CPU (host
    copies are moved piece by piece): a multi-GB output is compared without a float64
    copy of it in host memory."""
    if compute_device is not None:
        dev = torch.device(compute_device)
    else:
        dev = c.device if c.device.type == "cuda" else torch.device("cpu")
    flat = [_flat(t) for t in (c, *others)]
    for start in range(0, flat[0].numel(), CHUNK):
        pieces = [f[start:start + CHUNK].to(dev) for f in flat]
        yield tuple(pieces if dtype is None else [x.to(dtype) for x in pieces])


def _flat(t: torch.Tensor) -> torch.Tensor:
    """``t`` as one dimension; one value expanded to a shape (every stride 0) stays a view."""
    t = t.detach()
    if t.numel() > 1 and all(s == 0 for s in t.stride()):
        return t.as_strided((t.numel(),), (0,))
    return t.reshape(-1)


#: outputs up to this many elements get an allowance per element (float32 copies of the
#: errors and magnitudes); larger ones fall back to the output-wide largest error
LINE_LIMIT = 1 << 28


#: the quantile of the fp32 reference's relative error that scales the relative allowance
RELATIVE_QUANTILE = 0.999


def _reference_error(runs: list[torch.Tensor], g: torch.Tensor,
                     atol: float = 0.0) -> tuple[torch.Tensor | float, float, str]:
    """How far the fp32 reference itself is from ``g`` (the fp64 reference), as an allowance
    per element. The output-wide largest error let one large column lend its rounding error
    to every small one (a product whose first feature is 1e7 times the others: zeros in the
    other 1023 features passed). So the error is taken along lines of one dimension: the one
    (of two or more elements) along which the reference's error is most even, judged by the
    median over its lines of (largest error) / (root mean square error x sqrt(2 ln n)), n the
    line's length (about 1 for normal errors, sqrt(n / 2 ln n) for a line one element
    dominates). Per element, its line's largest error, or its root mean square error times
    ``sqrt(2 ln 2N)`` (N elements: about the largest of N normal errors), whichever is larger.
    Chosen per element instead, a large element near zero by cancellation took its row, where
    its own error was the largest, and an honest sum in two halves failed on that one sample.
    Outputs with no such dimension, or above :data:`LINE_LIMIT` elements, use the output-wide
    largest error. Also returned: the reference's relative error ``|ref - exact| / (|exact| +
    atol)`` at its :data:`RELATIVE_QUANTILE` quantile (over up to a million positions), so that
    an element may also be off by that share of its own magnitude: where the error follows each
    element's size along every line (a softmax of logits that lost digits to cancellation),
    a line's largest error is one element's and an honest sum in two halves failed on it.
    Returns (a float, or a tensor broadcastable to ``g``'s shape, on the compute device), the
    relative share, and a word for the message."""
    n = g.numel()
    dims = [d for d in range(g.dim()) if g.shape[d] >= 2] if n <= LINE_LIMIT else []
    err: torch.Tensor | None = None
    whole = 0.0
    step = max(1, n // 1_000_000)
    shares: list[torch.Tensor] = []
    for run in runs:
        start = 0
        for r64, g64 in _chunks(run, g, dtype=torch.float64):
            finite = _isfinite(g64) & _isfinite(r64)
            e = torch.where(finite, _abs(r64 - g64), torch.zeros_like(g64))
            whole = max(whole, float(e.max()))
            first = (-start) % step
            shares.append((e[first::step] / (_abs(torch.where(finite, g64, torch.zeros_like(g64)))[first::step]
                                             + max(atol, 1e-30))).to(torch.float32).cpu())
            if dims:
                if err is None:
                    err = torch.zeros(n, dtype=torch.float32, device=e.device)
                piece = err[start:start + e.numel()]
                torch.maximum(piece, e.to(torch.float32), out=piece)
            start += e.numel()
    sampled = torch.cat(shares) if shares else torch.zeros(1)
    share = float(torch.quantile(sampled, RELATIVE_QUANTILE)) if sampled.numel() else 0.0
    if err is None or not dims or whole == 0.0:
        return whole, share, "largest"
    shaped = err.view(g.shape)
    chosen: tuple[float, int, torch.Tensor, torch.Tensor] | None = None
    for d in dims:
        top = shaped.amax(dim=d, keepdim=True)
        rms = shaped.square().mean(dim=d, keepdim=True).sqrt()
        spread = math.sqrt(2.0 * math.log(g.shape[d]))
        ratios = (top / (rms * spread))[rms > 0]
        evenness = float(ratios.median()) if ratios.numel() else 1.0
        if chosen is None or (evenness, -g.shape[d]) < (chosen[0], -g.shape[chosen[1]]):
            chosen = (evenness, d, top, rms)
    assert chosen is not None
    _, d, top, rms = chosen
    k = math.sqrt(2.0 * math.log(2.0 * n))
    return torch.maximum(top, k * rms), share, f"along dimension {d}"


#: the share of an integer or boolean output's positions an honest candidate may decide
#: otherwise than both the float64 reference and the fp32 reference (a threshold or an argmax
#: at a value within rounding of it, summed in another order): one in 100,000, and one
#: position in outputs of 1,000 or more (a split-K argmax over 4,096 rows met one near-tie)
FLIPS_SHARE = 1e-5


def _flips(c: Any, runs: list[Any], g: Any, where: str) -> Comparison:
    """The second opinion on an integer or boolean output (a comparison, a sign, an argmax of
    float values): at every position the candidate's value must be the float64 reference's
    or an fp32 reference run's, except at :data:`FLIPS_SHARE` of the positions. A count of
    positions instead let a candidate be wrong anywhere once the fp32 reference was off in
    most rows (an argmax of a saturated tanh: 3,150 of 4,096 rows), and a candidate computing
    in float64 was called a cheater for one of 2 million booleans before any second opinion."""
    if not isinstance(g, _tensor_type) or g.shape != c.shape or g.dtype != c.dtype:
        return Comparison(False, f"{where}: does not match the fp64 reference's shape or dtype")
    same_shape = [run for run in runs if isinstance(run, _tensor_type) and run.shape == g.shape]
    bad = off = 0
    pieces = _chunks(c, g, *same_shape)
    for cc, gg, *rr in pieces:
        ok = cc == gg
        off += int((~ok).sum())
        for r_piece in rr:
            ok |= cc == r_piece
        bad += int((~ok).sum())
    extra = max(int(FLIPS_SHARE * c.numel()), 1 if c.numel() >= 1000 else 0)
    if bad > extra:
        return Comparison(False, f"{where}: {bad} of {c.numel()} values are neither the fp64 reference's nor the "
                          f"fp32 reference's (at most {extra} allowed)")
    return Comparison(True, f"{where}: {off} of {c.numel()} values differ from the fp64 reference's, "
                      f"{bad} from both references")


def compare_to_exact(cand_out: Any, ref_out: Any, exact_out: Any, tolerances: dict[str, tuple[float, float]],
                     factor: float, others: list[Any] | tuple[Any, ...] = ()) -> Comparison:
    """The second opinion on outputs that failed :func:`compare`: every float32 output is
    measured against ``exact_out`` (the reference run in float64) and passes when
    ``|cand - exact| <= atol + rtol * |exact| + factor * E`` element-wise, where E is the
    fp32 reference's own error scale on the element's line along its most even dimension
    (:func:`_reference_error`):
    the candidate may be as far from the exact value as the fp32 reference is there (times
    ``factor``), plus the tolerance. ``others``: more fp32 runs of the reference (under
    PyTorch's default flags); the largest of their errors and the reference's counts.
    Integer and boolean outputs that differ from the fp32 reference's are judged against the
    float64 reference's too (:func:`_flips`). Other outputs must pass :func:`compare`
    unchanged; shapes, dtypes, NaN/Inf and integrity are :func:`compare`'s business (call
    it first)."""
    cands, refs, golds = flatten(cand_out), flatten(ref_out), flatten(exact_out)
    alts = [flatten(o) for o in others]
    if not len(cands) == len(refs) == len(golds) or any(len(a) != len(refs) for a in alts):
        return Comparison(False, "output count differs from the fp64 reference's")
    worst = 0.0
    notes = []
    for i, (c, r, g) in enumerate(zip(cands, refs, golds)):
        where = f"output {i}" if len(refs) > 1 else "output"
        runs = [r] + [a[i] for a in alts if isinstance(a[i], _tensor_type) and a[i].shape == r.shape]
        if isinstance(r, _tensor_type) and not r.is_floating_point() and not r.is_complex():
            one = compare(c, r, tolerances)
            if not one.ok and not one.integrity:
                one = _flips(c, runs, g, where)
            if not one.ok:
                return one
            if one.message:
                notes.append(one.message)
            continue
        if not isinstance(r, _tensor_type) or r.dtype != torch.float32:
            one = compare(c, r, tolerances)
            if not one.ok:
                return one
            continue
        if type(c) is not _tensor_type or c.shape != r.shape or not isinstance(g, _tensor_type) or \
                g.shape != r.shape or c.dtype != r.dtype:
            return Comparison(False, f"{where}: does not match the fp64 reference's shape or dtype")
        if c.numel() == 0:
            continue
        atol, rtol = tolerances.get("float32", (1e-4, 1e-4))
        # two passes in pieces: the fp32 reference's own error, then the candidate's
        allowed, share, how = _reference_error(runs, g, atol)
        ref_err = allowed if isinstance(allowed, float) else float(allowed.max())
        flat_allowed = (allowed.expand(g.shape).reshape(-1) if isinstance(allowed, _tensor_type) else None)
        cand_err, n_over, nonfinite, unmatched = 0.0, 0, 0, 0
        start = 0
        for c64, r64, g64 in _chunks(c, r, g, dtype=torch.float64):
            finite = _isfinite(g64) & _isfinite(r64)
            nonfinite += int((~_isfinite(c64) & finite).sum())
            # where the fp32 reference is NaN/Inf the candidate must match it exactly, as in
            # compare(): those positions are left out of the distances below, so without this
            # a finite value there (log|x| for log x) passed the second opinion
            same = (c64 == r64) | (torch.isnan(c64) & torch.isnan(r64))
            unmatched += int((~_isfinite(r64) & ~same).sum())
            diff = torch.where(finite, _abs(c64 - g64), torch.zeros_like(g64))
            if flat_allowed is None:
                own: torch.Tensor | float = ref_err
            else:
                own = flat_allowed[start:start + diff.numel()].to(device=diff.device, dtype=torch.float64)
            start += diff.numel()
            own = torch.maximum(torch.as_tensor(own, dtype=torch.float64, device=diff.device), share * _abs(g64))
            n_over += int((diff > atol + rtol * _abs(g64) + factor * own).sum())
            cand_err = max(cand_err, float(diff.max()))
        if nonfinite:
            return Comparison(False, f"{where}: NaN/Inf values where the fp64 reference is finite")
        if unmatched:
            return Comparison(False, f"{where}: {unmatched} NaN/Inf value(s) of the reference not matched")
        worst = max(worst, cand_err)
        if n_over:
            return Comparison(False, f"{where}: {n_over} of {r.numel()} values farther from the fp64 reference than "
                              f"atol={atol:g} rtol={rtol:g} + {factor:g} x the fp32 reference's own error "
                              f"({how}: at most {ref_err:.3g}, or {share:.3g} of the value) (max err "
                              f"{cand_err:.3g})", cand_err)
        notes.append(f"{where}: max err {cand_err:.3g} against the fp32 reference's {ref_err:.3g}")
    return Comparison(True, "; ".join(notes), worst)


def same_values(a: Any, b: Any) -> bool:
    """Exact equality of two outputs (used to detect constant outputs)."""
    fa, fb = flatten(a), flatten(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if isinstance(x, _tensor_type) and isinstance(y, _tensor_type):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            xd, yd = x.detach(), y.detach()
            head = 1 << 20  # large outputs usually differ early: look at a prefix first
            if x.numel() > 4 * head and not torch.equal(xd.reshape(-1)[:head],
                                                          yd.reshape(-1)[:head].to(xd.device)):
                return False
            if x.device == y.device:
                if not torch.equal(xd, yd):
                    return False
            elif not all(torch.equal(a, b) for a, b in _chunks(xd, yd)):
                return False  # one on the GPU, one on the host: compared piece by piece
        elif x != y:
            return False
    return True


def map_tensors(out: Any, fn) -> Any:
    """``out`` with every tensor replaced by ``fn(tensor)`` (same nesting)."""
    if isinstance(out, _tensor_type):
        return fn(out)
    if isinstance(out, (list, tuple)):
        return type(out)(map_tensors(x, fn) for x in out)
    return out


def to_cpu(out: Any) -> Any:
    """A host copy of an output (same nesting)."""
    return map_tensors(out, lambda t: t.detach().to("cpu") if t.device.type != "cpu" else t.detach().clone())


def snapshot(out: Any) -> Any:
    """A copy of an output on its own device (cheap on a GPU: no host transfer)."""
    return map_tensors(out, lambda t: t.detach().clone())


def tensors(out: Any) -> list[torch.Tensor]:
    return [x for x in flatten(out) if isinstance(x, _tensor_type)]


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' memory ranges overlap."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    try:
        sa, sb = a.untyped_storage(), b.untyped_storage()
    except Exception:  # pragma: no cover - exotic tensors
        return False
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


@attrs.frozen
class Sample:
    """One output tensor of a timed call kept as the values at a few positions drawn after
    the call returned (for outputs too large to copy whole): its shape and dtype, the
    positions (``coords``, one index tensor per dim) and the values there. ``problem``: why
    the output could not be sampled (not a plain dense tensor): it then fails the check."""

    shape: tuple[int, ...]
    dtype: Any
    coords: tuple[Any, ...] = ()
    values: Any = None
    problem: str | None = None


def sample(out: Any, k: int, generator: Any) -> Any:
    """``out`` with every tensor replaced by a :class:`Sample` of at most ``k`` positions,
    drawn uniformly (with replacement) by ``generator`` on the tensor's device; a tensor of
    at most ``k`` elements is kept whole."""

    def one(t: torch.Tensor) -> Sample:
        if type(t) is not _tensor_type or t.layout != torch.strided or t.is_meta:
            return Sample(tuple(t.shape), t.dtype, problem=f"expected a plain dense torch.Tensor, got "
                          f"{type(t).__module__}.{type(t).__name__} ({t.layout})")
        n = t.numel()
        if n <= k:
            flat = torch.arange(n, device=t.device)
        else:
            flat = torch.randint(n, (k,), device=t.device, generator=generator)
        coords = tuple(torch.unravel_index(flat, tuple(t.shape))) if t.dim() else ()
        values = (t[coords] if t.dim() else t.reshape(1)).detach().clone()
        return Sample(tuple(t.shape), t.dtype, coords, values)

    return map_tensors(out, one)


def values_at(out: Any, sampled: Any, same_dtype: bool = True) -> tuple[list[Any], str | None]:
    """``out``'s values at the positions of ``sampled`` (same nesting, flattened), or a
    message when the two differ in structure, shape or dtype (``same_dtype`` False: any
    dtype, for the float64 reference of the second opinion)."""
    outs, samples = flatten(out), flatten(sampled)
    if len(outs) != len(samples):
        return [], f"expected {len(outs)} output(s), got {len(samples)}"
    picked: list[Any] = []
    for i, (o, s) in enumerate(zip(outs, samples)):
        where = f"output {i}" if len(outs) > 1 else "output"
        if not isinstance(s, Sample):
            picked.append(o)
            continue
        if s.problem:
            return [], f"{where}: {s.problem}"
        if not isinstance(o, _tensor_type):
            return [], f"{where}: expected a {type(o).__name__}, got a tensor"
        if tuple(o.shape) != s.shape:
            return [], f"{where}: shape {s.shape} != reference {tuple(o.shape)}"
        if same_dtype and o.dtype != s.dtype:
            return [], f"{where}: dtype {s.dtype} != reference {o.dtype}"
        picked.append(o[tuple(c.to(o.device) for c in s.coords)] if o.dim() else o.reshape(1))
    return picked, None


def sampled_values(sampled: Any) -> list[Any]:
    """The kept values of ``sampled`` (flattened; non-tensor outputs as they were)."""
    return [s.values if isinstance(s, Sample) else s for s in flatten(sampled)]


def read_back(leaves: list[dict[str, Any]], exported: list[bool], ref_out: Any, views: list[Any],
              device_type: str | None = None, reference: bool = False,
              check_values: bool = True, alias_ok: bool = False) -> tuple[Comparison | None, Any]:
    """A candidate's output as its harness described it (``leaves``, in :func:`flatten`
    order, see :func:`kernelpro.evaluate.transport.describe_output`) and copied into the
    judge's buffers (``views``, one per reference output tensor; ``exported[i]``: whether
    leaf ``i`` was copied). Returns a failed :class:`Comparison` when the description
    already fails the checks of :func:`compare` (count, type, layout, device, shape,
    dtype, an output sharing memory with an input), else ``None`` and the output rebuilt
    with the reference's nesting: the buffers in place of tensors, the harness's values in
    place of the rest. ``reference``: the reference's own output, read against an example
    of its structure: its non-tensor values are taken as described, and it may return (a
    view of) its input. ``check_values`` False: the candidate's non-tensor values are taken as
    described too (their type still checked), for a call on other inputs than ``ref_out``'s
    whose output is compared later. ``alias_ok``: the candidate may return (a view of) an
    input, as the reference does."""
    refs = flatten(ref_out)
    if len(leaves) != len(refs):
        return Comparison(False, f"expected {len(refs)} output(s), got {len(leaves)}"), None
    values: list[Any] = []
    k = 0
    for i, (leaf, r) in enumerate(zip(leaves, refs)):
        where = f"output {i}" if len(refs) > 1 else "output"
        leaf = leaf if isinstance(leaf, dict) else {}
        if not isinstance(r, _tensor_type):
            if "v" not in leaf:
                got = leaf.get("other") or ("a tensor" if "tensor" in leaf else "something else")
                return Comparison(False, f"{where}: expected a {type(r).__name__}, got {got}", integrity=True), None
            v = leaf["v"]
            if type(v) is not type(r):
                return Comparison(False, f"{where}: expected a {type(r).__name__}, got {type(v).__name__}",
                                  integrity=True), None
            # a float is compared within a tolerance by compare(), which sees it next
            if check_values and not reference and type(r) is not float and v != r:
                return Comparison(False, f"{where}: expected {r!r}, got {v!r}"), None
            values.append(v)
            continue
        view = views[k]
        k += 1
        t = leaf.get("tensor")
        if not isinstance(t, dict):
            got = leaf.get("other") or (type(leaf.get("v")).__name__ if "v" in leaf else "something else")
            return Comparison(False, f"{where}: expected a plain torch.Tensor, got {got}", integrity=True), None
        if not t.get("plain") or t.get("error"):
            return Comparison(False, f"{where}: expected a plain torch.Tensor, got {t.get('type', '?')}"
                              + (f" ({t['error']})" if t.get("error") else ""), integrity=True), None
        if t.get("layout") != "torch.strided" or t.get("meta"):
            return Comparison(False, f"{where}: expected a dense tensor with storage, got layout {t.get('layout')}"
                              f"{' on meta' if t.get('meta') else ''}", integrity=True), None
        if device_type is not None and t.get("device") != device_type:
            return Comparison(False, f"{where}: on device {t.get('device')}, expected {device_type}",
                              integrity=True), None
        if tuple(t.get("shape") or ()) != tuple(r.shape):
            return Comparison(False, f"{where}: shape {tuple(t.get('shape') or ())} != reference {tuple(r.shape)}"), None
        if t.get("dtype") != str(r.dtype).replace("torch.", ""):
            return Comparison(False, f"{where}: dtype torch.{t.get('dtype')} != reference {r.dtype}"), None
        if t.get("alias") and not (reference or alias_ok):
            return Comparison(False, f"{where}: output shares memory with an input", integrity=True), None
        if i >= len(exported) or not exported[i]:
            return Comparison(False, f"{where}: the candidate's process did not hand the output back",
                              integrity=True), None
        values.append(view)
    it = iter(values)
    return None, _renest(ref_out, it)


def replace_tensors(ref: Any, views: list[Any]) -> Any:
    """``ref`` with its tensors replaced, in order, by ``views`` (other values kept)."""
    it = iter(views)
    return map_tensors(ref, lambda _t: next(it))


def _renest(ref: Any, it: Any) -> Any:
    if isinstance(ref, (list, tuple)):
        return type(ref)(_renest(x, it) for x in ref)
    return next(it)
