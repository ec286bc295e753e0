"""The evaluation worker: one process per candidate.

    python -m kernelpro.evaluate.worker JOB.json      (started by runner.evaluate)

The result goes back over the signed result channel (:mod:`kernelpro.evaluate.channel`);
before each stage the stage name is written to the job's status file, so the parent can
tell where a worker that died (signal, os._exit, hang) was. Everything the measurement
relies on is imported, and a snapshot of torch's callables is taken, before the candidate
is imported.

Order of work (docs/evaluation.md states the method in full):
1. Reference precision is fixed (no TF32), the problem is loaded, the reference is built
   after the seed; its outputs for every trial's inputs (``trials`` seeds plus one
   N(0, 1) set) are copied to host memory and the device copies overwritten with NaN.
   Degenerate references (an all-zeros or constant output would pass) are flagged; the
   bytes/FLOPs lower bound is estimated; the ``torch.compile``'d reference is built.
2. Free cached device memory is filled with NaN; the source is scanned for evaluator
   introspection; the candidate is imported (its build, if any, is already in the cache
   entry from the compile stage) and built after the same seed.
3. Correctness, trial by trial: plain tensors of the right device, shape and dtype;
   finite where the reference is; within tolerance; inputs unmodified; no output aliasing
   an input; the call policy. Then: outputs not constant when the reference's are not,
   no patched torch/evaluator functions, no candidate threads left running.
4. Timing, interleaved: reference, compiled reference, candidate. Before each call the
   timed input buffers are refilled with a different trial's values, backend flags are
   set to those of the callable, L2 persistence is reset; after each call the reference's
   outputs are poisoned and a sample of the candidate's outputs is kept and re-checked.
5. Afterwards: the reference re-checked (not tampered with), the snapshot compared again,
   suspicious speedups (above ``max_speedup`` or below the physical bound) re-verified
   with ``reverify_trials`` fresh trials and flagged; extra measurements.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

# --- captured before any candidate code can run ------------------------------------------
import torch  # noqa: E402

from kernelpro.evaluate import bounds  # noqa: E402
from kernelpro.evaluate import compare as cmp  # noqa: E402
from kernelpro.evaluate import guard, policy, timing  # noqa: E402
from kernelpro.evaluate.channel import WorkerEnd  # noqa: E402
from kernelpro.evaluate.compile import install_build_hooks, trim_compiler_log  # noqa: E402
from kernelpro.evaluate.loader import build_model, load_module, make_inputs, seed_everything  # noqa: E402
from kernelpro.records import (  # noqa: E402
    CompileResult,
    CorrectnessResult,
    EvalResult,
    Verdict,
    to_json,
)

_clone = torch.Tensor.clone
_equal = torch.equal
_isnan = torch.isnan


class Fail(Exception):
    def __init__(self, verdict: Verdict, reason: str, **extra: Any):
        super().__init__(reason)
        self.verdict = verdict
        self.reason = reason
        self.extra = extra


#: (stage, time.monotonic() when it began) of the job in progress, for the stage timings
STAGES: list[tuple[str, float]] = []


def _status(job: dict[str, Any], stage: str) -> None:
    Path(job["status"]).write_text(stage)
    STAGES.append((stage, time.monotonic()))


def stage_seconds(stages: list[tuple[str, float]], end: float) -> dict[str, float]:
    """Seconds spent in each stage (a stage entered twice is summed), the last one up to ``end``."""
    out: dict[str, float] = {}
    for (name, t), nxt in zip(stages, [t for _, t in stages[1:]] + [end]):
        out[name] = out.get(name, 0.0) + max(0.0, nxt - t)
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]


def _is_cuda_error(exc: BaseException) -> bool:
    text = str(exc)
    markers = ("CUDA error", "illegal memory access", "misaligned address", "device-side assert",
               "unspecified launch failure", "an illegal instruction", "CUDA_ERROR", "cudaError",
               "AcceleratorError")
    return any(m in text for m in markers) or type(exc).__name__ == "AcceleratorError"


def _is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)) or any(
        m in text for m in ("out of memory", "can't allocate memory", "Cannot allocate memory"))


def _classify_import_error(exc: BaseException) -> Fail:
    text = "".join(traceback.format_exception_only(type(exc), exc))
    if isinstance(exc, SyntaxError):
        return Fail(Verdict.INVALID, f"candidate has a syntax error at line {exc.lineno}: {exc.msg}")
    compile_markers = ("Error building extension", "ninja: build stopped", "nvcc fatal", "ptxas", "error:")
    if any(m in text for m in compile_markers) or type(exc).__name__ in ("CompilationError", "CalledProcessError",
                                                                        "NvccError"):
        return Fail(Verdict.COMPILE_ERROR, "compilation failed: " + _one_line(exc), log=trim_compiler_log(text))
    if _is_oom(exc):
        return Fail(Verdict.OOM, _one_line(exc))
    if _is_cuda_error(exc):
        return Fail(Verdict.CUDA_ERROR, _one_line(exc))
    return Fail(Verdict.RUNTIME_ERROR, "importing the candidate failed: " + _one_line(exc))


def _classify_runtime(exc: BaseException, prefix: str) -> Fail:
    if isinstance(exc, timing.TamperError):
        return Fail(Verdict.INTEGRITY, prefix + str(exc))
    if _is_oom(exc):
        return Fail(Verdict.OOM, prefix + _one_line(exc))
    if _is_cuda_error(exc):
        return Fail(Verdict.CUDA_ERROR, prefix + _one_line(exc))
    return Fail(Verdict.RUNTIME_ERROR, prefix + _one_line(exc))


# --- tolerances -----------------------------------------------------------------------------


def tolerances(job: dict[str, Any], problem: Any) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """Per-dtype (atol, rtol): the config's, overridden by the problem's
    ``KERNELPRO_TOLERANCES = {"float32": (atol, rtol), ...}``."""
    tol = {k: (float(v["atol"]), float(v["rtol"])) for k, v in job["evaluator"]["tolerances"].items()}
    notes: list[str] = []
    own = getattr(problem, "KERNELPRO_TOLERANCES", None)
    if own is not None:
        if not isinstance(own, dict):
            raise Fail(Verdict.INVALID, "the problem's KERNELPRO_TOLERANCES must be a dict "
                       "{dtype name: (atol, rtol)}")
        for key, value in own.items():
            try:
                atol, rtol = (float(v) for v in value)
            except (TypeError, ValueError):
                raise Fail(Verdict.INVALID, f"KERNELPRO_TOLERANCES[{key!r}]: expected (atol, rtol)") from None
            if atol < 0 or rtol < 0:
                raise Fail(Verdict.INVALID, f"KERNELPRO_TOLERANCES[{key!r}]: atol and rtol must be >= 0")
            tol[str(key).replace("torch.", "")] = (atol, rtol)
            notes.append(f"{key}: atol={atol:g} rtol={rtol:g}")
    return tol, notes


# --- inputs and outputs ---------------------------------------------------------------------


def _other_distribution(inputs: list[Any], seed: int) -> list[Any]:
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


def _clone_inputs(inputs: list[Any]) -> list[Any]:
    return [_clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]


def _inputs_unchanged(before: list[Any], after: list[Any]) -> bool:
    for b, a in zip(before, after):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or b.shape != a.shape or b.dtype != a.dtype:
                return False
            if b.is_floating_point() or b.is_complex():
                same = (b == a) | (_isnan(b) & _isnan(a))
                if not bool(same.all()):
                    return False
            elif not _equal(b, a):
                return False
    return True


def _aliases(out: Any, others: list[Any]) -> bool:
    for o in cmp.tensors(out):
        for x in others:
            if isinstance(x, torch.Tensor) and cmp.shares_storage(o, x):
                return True
    return False


def _poison(out: Any, keep: list[torch.Tensor]) -> None:
    """Overwrite output tensors (NaN, or -1 for integers) before their memory is freed, so
    the next allocation of that block holds no answer; tensors sharing memory with
    ``keep`` (inputs, parameters) are left alone."""
    for t in cmp.tensors(out):
        if t.numel() == 0 or any(cmp.shares_storage(t, k) for k in keep):
            continue
        try:
            if t.is_floating_point() or t.is_complex():
                t.detach().fill_(float("nan"))
            elif t.dtype != torch.bool:
                t.detach().fill_(-1)
        except RuntimeError:
            pass  # e.g. an expanded view: not writable in place, and not a fresh block anyway


def _fill_timed_inputs(timed: list[Any], src: list[Any], u: float) -> None:
    """Copy a trial's inputs into the timing buffers and scale the floating ones by
    ``1 + u * max(1e-3, 4 * eps(dtype))`` (sign and zeros kept, values new)."""
    for dst, s in zip(timed, src):
        if isinstance(dst, torch.Tensor):
            dst.copy_(s)
            if dst.is_floating_point() and u:
                dst.mul_(1.0 + u * max(1e-3, 4 * torch.finfo(dst.dtype).eps))


def scale_draws(rng: random.Random, n: int = 4096) -> tuple[list[float], list[float]]:
    """The ``u`` of :func:`_fill_timed_inputs` for warm-up and for timed calls: the grid
    ``+-(1 + k / n)``, ``k < n``, shuffled and split in two, so no value is drawn twice."""
    grid = [sign * (1.0 + k / n) for sign in (-1.0, 1.0) for k in range(n)]
    rng.shuffle(grid)
    return grid[:n], grid[n:]


#: default of ``evaluator.device_copy_share``: the share of the GPU's available memory the
#: worker's own copies (the reference's outputs, whole re-check copies) may take
DEVICE_COPY_SHARE = 0.25


def _copies_fit_on_device(out: Any, count: int, share: float = DEVICE_COPY_SHARE) -> bool:
    """Whether ``count`` copies of ``out`` fit in ``share`` of the GPU memory still
    available (the driver's free memory plus the allocator cache's free blocks). Copies
    on the GPU save a host round trip per copy (seconds for outputs of gigabytes); larger
    ones go to the host."""
    return _output_bytes(out) * count <= share * _available_device_bytes()


def _output_bytes(out: Any) -> int:
    return sum(t.numel() * t.element_size() for t in cmp.tensors(out))


def _available_device_bytes() -> int:
    """The driver's free memory plus the allocator cache's free blocks."""
    free, _total = torch.cuda.mem_get_info()
    return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()


def _poison_free_memory(device: str) -> None:
    """Fill the caching allocator's free blocks with NaN so stale reads see poison.

    Only the free blocks the cache already holds are filled, each by a tensor of its exact
    size, largest first: a request that no free block can hold would make the allocator
    take new device memory, which stays in the cache afterwards and is no longer available
    to anything that does not allocate from it (a CUDA graph's private pool)."""
    if not device.startswith("cuda"):
        return
    torch.cuda.synchronize()
    reserved0 = torch.cuda.memory_reserved()
    sizes = sorted((blk["size"] for seg in torch.cuda.memory_snapshot()
                    for blk in seg.get("blocks", []) if blk.get("state") == "inactive" and blk["size"] >= 512),
                   reverse=True)
    chunks = []
    try:
        for size in sizes[:256]:
            try:
                t = torch.empty(size // 4, dtype=torch.float32, device=device)
            except torch.cuda.OutOfMemoryError:
                continue
            if torch.cuda.memory_reserved() > reserved0:  # it did not fit a free block: give it back
                del t
                break
            t.fill_(float("nan"))
            chunks.append(t)
    finally:
        torch.cuda.synchronize()
        if torch.cuda.memory_reserved() > reserved0:
            # the segment just taken is the only wholly free one while the poison is held
            torch.cuda.empty_cache()
        del chunks


def _candidate_threads() -> list[str]:
    """Python threads other than this one that belong to the candidate: started with a
    target (or a Thread subclass) from the candidate's module, or executing the candidate's
    code right now (a thread pool running submitted work: ``sys._current_frames``)."""
    out = []
    me = threading.get_ident()
    frames = sys._current_frames()
    # this thread's own entry is this very frame: held in a local, it makes a reference
    # cycle that keeps the callers' frames, and the outputs in their locals, alive until
    # the cyclic garbage collector happens to run (during timing: dozens of outputs)
    frames.pop(me, None)
    try:
        names = {t.ident: t.name for t in threading.enumerate()}
        for t in threading.enumerate():
            target = getattr(t, "_target", None)
            mod = getattr(target, "__module__", None) if target is not None else type(t).__module__
            if mod == "kernelpro_candidate" and t.is_alive() and t.ident != me:
                out.append(t.name)
        for ident, frame in frames.items():
            if names.get(ident) in out:
                continue
            f = frame
            while f is not None:
                if f.f_globals.get("__name__") == "kernelpro_candidate":
                    out.append(names.get(ident, str(ident)))
                    break
                f = f.f_back
    finally:
        frames.clear()
        frame = f = None
    return out


def _degenerate(ref_outs: list[Any], tols: dict[str, tuple[float, float]], trials: int,
                on: str | None = None) -> list[str]:
    """Flags for a reference whose outputs a trivial candidate would match (``on``: where
    the comparisons compute)."""
    flags = []
    if trials > 1 and all(cmp.same_values(ref_outs[0], r) for r in ref_outs[1:trials]):
        flags.append("degenerate_reference: the reference output does not depend on the inputs")
    floats = [r for r in ref_outs if any(x.is_floating_point() for x in cmp.tensors(r))]
    if floats:
        zeros = all(cmp.compare(cmp.map_tensors(r, torch.zeros_like), r, tols, stop_early=True,
                                 compute_device=on).ok for r in floats)
        if zeros:
            flags.append("degenerate_reference: an all-zeros output passes the tolerance")
        else:
            def const(x: torch.Tensor) -> torch.Tensor:
                if not x.is_floating_point() or x.numel() == 0:
                    return x
                return torch.full_like(x, float(x.mean(dtype=torch.float64)))

            if all(cmp.compare(cmp.map_tensors(r, const), r, tols, stop_early=True, compute_device=on).ok
                   for r in floats):
                flags.append("degenerate_reference: a constant output (the mean) passes the tolerance")
    return flags


# --- the evaluation --------------------------------------------------------------------------


FLAGS: list[str] = []  # flags of the current run, kept when the run ends in a failure verdict


def run(job: dict[str, Any]) -> EvalResult:
    t_start = time.monotonic()
    device = job["device"]
    cuda = device.startswith("cuda")
    ev = job["evaluator"]
    seed = int(job["seed"])
    flags = FLAGS
    flags.clear()
    gpu_name = torch.cuda.get_device_name() if cuda else None
    evaluator_notes: dict[str, float] = {}
    STAGES.clear()

    # 1. reference -----------------------------------------------------------------------
    _status(job, "reference")
    guard.set_reference_precision()
    try:
        problem = load_module(job["problem"], "kernelpro_problem")
        ref_model = build_model(problem.Model, problem, seed, device)
    except Exception as exc:
        raise Fail(Verdict.INVALID, "the problem itself failed to load: " + _one_line(exc))
    tols, tol_notes = tolerances(job, problem)
    if tol_notes:
        flags.append("problem_tolerances: " + "; ".join(tol_notes))
    params = [p for p in ref_model.parameters()] + [b for b in ref_model.buffers()] \
        if isinstance(ref_model, torch.nn.Module) else []

    trials = int(ev["trials"])
    input_sets: list[list[Any]] = []
    ref_outs: list[Any] = []
    _status(job, "reference_outputs")
    # the reference's outputs are kept on the GPU while they fit in device_copy_share of its
    # available memory (taken when the first is kept), the rest on the host (a host copy of
    # a multi-gigabyte output takes seconds); the outputs themselves are poisoned before
    # they are freed
    on_device: list[bool] = []
    budget: list[float] = []
    share = float(ev.get("device_copy_share", DEVICE_COPY_SHARE))

    def keep_ref(out: Any) -> Any:
        if cuda and not budget:
            budget.append(share * _available_device_bytes())
        nbytes = _output_bytes(out)
        here = cuda and nbytes <= budget[0]
        if here:
            budget[0] -= nbytes
        on_device.append(here)
        return cmp.snapshot(out) if here else cmp.to_cpu(out)

    with torch.no_grad():
        for t in range(trials):
            inputs = make_inputs(problem, seed + 1 + t, device)
            out = ref_model(*_clone_inputs(inputs))
            input_sets.append(inputs)
            ref_outs.append(keep_ref(out))
            _poison(out, params)
            del out
        if ev.get("other_distribution", True):
            inputs = _other_distribution(make_inputs(problem, seed + 1000, device), seed + 1000)
            out = ref_model(*_clone_inputs(inputs))
            if all(torch.isfinite(x).all() for x in cmp.tensors(out) if x.is_floating_point()):
                input_sets.append(inputs)
                ref_outs.append(keep_ref(out))
            else:
                flags.append("other_distribution_skipped: reference not finite on N(0,1) inputs")
            _poison(out, params)
            del out
    evaluator_notes["reference_outputs_on_device"] = float(sum(on_device))
    _status(job, "degenerate_check")
    flags += _degenerate(ref_outs, tols, trials, on=device if cuda else None)
    ref_flags = guard.backend_flags()

    spec = bounds.gpu_spec_for(gpu_name) if gpu_name else None
    bound = None
    if cuda and spec is not None:
        _status(job, "bounds")
        with torch.no_grad():
            known = job.get("reference_flops")
            work = bounds.estimate(ref_model, _clone_inputs(input_sets[0]), ref_outs[0], spec.l2_bytes,
                                   flops=float(known) if known is not None else None)
        bound = bounds.lower_bound(work, spec)
        evaluator_notes.update(flops=work.flops, bytes_min=work.bytes_min, lower_bound_ms=bound.lower_ms)

    compiled = None
    baseline_job = job.get("candidate") is None
    if cuda and ev.get("time_compiled_reference", True) and (
            baseline_job or ev.get("compiled_reference_per_candidate", True)):
        _status(job, "compile_reference")
        try:
            compiled = torch.compile(ref_model)
            with torch.no_grad():
                _poison(compiled(*_clone_inputs(input_sets[0])), params)
        except Exception as exc:  # the compiled baseline is optional; say why it is missing
            compiled = None
            flags.append("compiled_reference_failed: " + _one_line(exc))
        guard.restore_backend_flags(ref_flags)

    if baseline_job:  # time the reference (and its compiled form), interleaved
        _status(job, "timing")
        timer = timing.Timer(device, ev["warmup_ms"], ev["rep_ms"], ev["min_reps"], ev["max_reps"])
        k = [0]

        def ref_call() -> Any:
            return ref_model(*input_sets[k[0]])

        base_fns: dict[str, Any] = {"reference": ref_call}
        if compiled is not None:
            base_fns["compiled"] = lambda: compiled(*input_sets[k[0]])

        def pick(_name: str, i: int) -> None:
            k[0] = max(i, 0) % len(input_sets)

        with torch.no_grad():
            try:
                res = timer.interleaved(base_fns, ev["rounds"], before=pick)
            except Exception as exc:
                if "compiled" not in base_fns:
                    raise
                # the compiled reference is optional: the eager one is timed alone then
                flags.append("compiled_reference_failed: " + _one_line(exc))
                guard.restore_backend_flags(ref_flags)
                res = timer.interleaved({"reference": ref_call}, ev["rounds"], before=pick)
        evaluator_notes.update({f"stage_{name}_s": v
                                for name, v in stage_seconds(STAGES, time.monotonic()).items()})
        return EvalResult(verdict=Verdict.CORRECT, reason="reference", baseline=res["reference"],
                          timing=res["reference"], baseline_compiled=res.get("compiled"),
                          flags=tuple(flags), device=device, gpu_name=gpu_name,
                          measurements={"evaluator": evaluator_notes},
                          wall_s=time.monotonic() - t_start)

    # 2. candidate -----------------------------------------------------------------------
    source = Path(job["candidate"]).read_text()
    why = guard.scan_source(source)
    if why:
        raise Fail(Verdict.INTEGRITY, why)
    _status(job, "poison")
    _poison_free_memory(device)
    _status(job, "guards")
    l2 = None
    if cuda:
        from kernelpro.evaluate.gpu_state import L2State

        l2 = L2State()
        l2.reset([torch.cuda.current_stream().cuda_stream, 0])
        l2.found.clear()
    install_build_hooks()
    snapshot = guard.Snapshot()
    threads_before = guard.thread_idents()

    _status(job, "compile")
    stage_compile = job.get("compile") or {}
    t0 = time.monotonic()
    try:
        cand_mod = load_module(job["candidate"], "kernelpro_candidate")
    except Exception as exc:
        raise _classify_import_error(exc)
    load_s = time.monotonic() - t0
    compile_res = CompileResult(
        ok=True, seconds=float(stage_compile.get("compile_seconds") or load_s),
        cached=bool(stage_compile.get("cached", False)), language=job.get("language", "pytorch"))
    if not hasattr(cand_mod, "ModelNew"):
        raise Fail(Verdict.INVALID, "candidate defines no ModelNew", compile=compile_res)

    _status(job, "build")
    try:
        cand_model = build_model(cand_mod.ModelNew, problem, seed, device)
    except Exception as exc:
        f = _classify_runtime(exc, "constructing ModelNew failed: ")
        f.extra["compile"] = compile_res
        raise f

    def fail(verdict: Verdict, reason: str, **extra: Any) -> Fail:
        return Fail(verdict, reason, compile=compile_res, **extra)

    # the second opinion on fp32 outputs that fail the check: the reference built again
    # (same seed) in float64, run on the same inputs (see compare.compare_to_exact)
    exact: dict[str, Any] = {"model": None, "unavailable": None, "passed": []}
    factor = float(ev.get("reference_error_factor", 2.0))

    def second_opinion(out: Any, ref_out: Any, inputs: list[Any], label: str,
                       pick: Any = None) -> cmp.Comparison | None:
        """``pick``: applied to the float64 output first (the positions of a sampled output)."""
        if not ev.get("fp64_second_opinion", True) or exact["unavailable"] is not None:
            return None
        if not any(t.dtype == torch.float32 for t in cmp.tensors(ref_out)):
            return None
        try:
            if exact["model"] is None:
                model = build_model(problem.Model, problem, seed, device)
                exact["model"] = model.double() if isinstance(model, torch.nn.Module) else model
            wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            with torch.no_grad():
                gold = exact["model"](*wide)  # compared piece by piece where it lies
        except Exception as exc:  # an op without float64 support: the first verdict stands
            exact["unavailable"] = _one_line(exc)
            flags.append(f"fp64_second_opinion_unavailable: {exact['unavailable']}")
            return None
        c = cmp.compare_to_exact(out, ref_out, pick(gold) if pick is not None else gold, tols, factor)
        if c.ok:
            exact["passed"].append(f"{label}: {c.message}")
        return c

    # 3. correctness ---------------------------------------------------------------------
    _status(job, "correctness")
    call_policy = ev.get("call_policy", "any")
    dev_type = torch.device(device).type
    max_abs = max_rel = 0.0
    first_out = None  # the first trial's output, kept where it is: are later ones all equal to it?
    all_equal = True
    if call_policy == "own_kernel":
        own = policy.own_kernel_names(source)
        if not cuda:
            flags.append("own_kernel_unverified_on_cpu: kernels cannot be observed on a CPU; "
                         "only no_torch_compute was enforced")
        else:
            if not own:
                raise fail(Verdict.POLICY, "call policy own_kernel: the source defines no __global__ or "
                           "@triton.jit kernel")
            try:
                with torch.no_grad():
                    kernels = policy.launched_kernels(lambda: cand_model(*_clone_inputs(input_sets[0])))
            except Exception as exc:
                raise _classify_runtime(exc, "forward failed: ")
            if not policy.uses_own_kernel(kernels, own):
                raise fail(Verdict.POLICY, "call policy own_kernel: none of the kernels launched ("
                           f"{', '.join(k[:60] for k in kernels[:5]) or 'none'}) is defined in the candidate "
                           f"({', '.join(sorted(own)[:5])})")
    with torch.no_grad():
        for t, (inputs, ref_out) in enumerate(zip(input_sets, ref_outs)):
            label = f"trial {t}" if t < trials else "N(0,1) trial"
            before = _clone_inputs(inputs)
            try:
                if call_policy in ("no_torch_compute", "own_kernel"):
                    rec = policy.ComputeRecorder()
                    with rec:
                        out = cand_model(*inputs)
                    if rec.compute_ops:
                        raise fail(Verdict.POLICY, f"call policy {call_policy}: forward calls PyTorch compute "
                                   f"ops: {', '.join(sorted(rec.compute_ops)[:8])}")
                else:
                    out = cand_model(*inputs)
                threads = _candidate_threads()  # before anything waits: a worker thread is still busy now
                if threads:
                    raise fail(Verdict.INTEGRITY, f"{label}: the candidate left Python threads running after "
                               f"forward returned ({', '.join(threads[:3])}): work outside the timed call")
                if cuda:
                    torch.cuda.synchronize()
            except Fail:
                raise
            except Exception as exc:
                f = _classify_runtime(exc, f"{label}: forward failed: ")
                f.extra["compile"] = compile_res
                raise f
            if _aliases(out, inputs):
                raise fail(Verdict.INTEGRITY, f"{label}: output shares memory with an input")
            if not _inputs_unchanged(before, inputs):
                raise fail(Verdict.INTEGRITY, f"{label}: the candidate modified its inputs")
            c = cmp.compare(out, ref_out, tols, dev_type)
            if not c.ok and c.integrity:
                raise fail(Verdict.INTEGRITY, f"{label}: {c.message}")
            if not c.ok:
                second = second_opinion(out, ref_out, before, label)
                if second is None or not second.ok:
                    message = c.message if second is None else f"{c.message}; against fp64: {second.message}"
                    raise fail(Verdict.INCORRECT, f"{label}: {message}",
                               correctness=CorrectnessResult(False, t + 1, c.max_abs_err, c.max_rel_err, message))
            max_abs, max_rel = max(max_abs, c.max_abs_err), max(max_rel, c.max_rel_err)
            if first_out is None:
                first_out = cmp.snapshot(out)
            elif all_equal:
                all_equal = cmp.same_values(out, first_out)
            del out
    n_checked = len(input_sets)
    if n_checked > 1 and all_equal and not all(cmp.same_values(ref_outs[0], r) for r in ref_outs[1:]):
        raise fail(Verdict.INTEGRITY, "the candidate's output is constant across trials while the reference's is not")
    del first_out
    patched = snapshot.changed()
    if patched:
        raise fail(Verdict.INTEGRITY, "the candidate replaced functions the evaluation relies on: "
                   + ", ".join(patched[:6]))
    correctness = CorrectnessResult(True, n_checked, max_abs, max_rel, "")
    cand_flags = guard.backend_flags()
    if cand_flags != ref_flags:
        changed = sorted(k for k in ref_flags if cand_flags.get(k) != ref_flags[k])
        flags.append("backend_flags_changed: the candidate set " + ", ".join(changed)
                     + "; the reference is timed with its own settings")
    if l2 is not None:
        l2.reset([torch.cuda.current_stream().cuda_stream, 0])

    # 4. timing --------------------------------------------------------------------------
    _status(job, "timing")
    timer = timing.Timer(device, ev["warmup_ms"], ev["rep_ms"], ev["min_reps"], ev["max_reps"])
    timed_inputs = _clone_inputs(input_sets[0])
    k_sets = len(input_sets)
    rng = random.Random(secrets.randbits(64))  # the candidate cannot predict which calls are re-checked
    order = [rng.randrange(k_sets) for _ in range(4096)]
    for i in range(1, len(order)):  # consecutive calls always see different values
        if k_sets > 1 and order[i] == order[i - 1]:
            order[i] = (order[i] + 1) % k_sets
    # every call's floating inputs are also scaled by 1 + u * max(1e-3, 4 eps(dtype)), u drawn
    # without replacement from the grid +-(1 + k / 4096), k < 4096 (half for warm-up calls,
    # half for timed ones): in fp32 any two calls' factors are at least 2 ulps apart, so no
    # two calls see the same values and neither address- nor content-keyed caches can hit
    # (u drawn at random could land within an ulp of an earlier call's: a rare repeat)
    warm_u, eps_u = scale_draws(rng)
    current = {"j": 0, "u": 0.0}
    kept: list[tuple[int, int, float, Any]] = []
    recheck_n = max(1, int(ev.get("recheck_calls", 8)))
    # the re-checked calls' outputs are kept whole on the GPU when the copies fit there; else
    # (recheck_copies auto) as samples of positions drawn after each call, on the GPU (a
    # host copy of a multi-gigabyte output per kept call cost more than the timing itself:
    # docs/validation/expert_h200.md, pass 4); on a CPU whole, as host copies
    mode = ev.get("recheck_copies", "auto")
    fits = cuda and mode != "sampled" and _copies_fit_on_device(ref_outs[0], recheck_n + 1, share)
    sampler = None
    if mode == "sampled" or (mode == "auto" and cuda and not fits):
        gen = torch.Generator(device=device)
        gen.manual_seed(secrets.randbits(63))  # positions the candidate cannot predict
        k_sample = max(1, int(ev.get("recheck_sample_elements", 1 << 20)))

        def sample(out: Any) -> Any:
            return cmp.sample(out, k_sample, gen)

        sampler = sample
        evaluator_notes["recheck_sampled_elements"] = float(k_sample)
    keep_copy = sampler or (cmp.snapshot if fits else cmp.to_cpu)
    latest_copy = sampler or cmp.snapshot
    evaluator_notes["recheck_copies_on_device"] = float(fits)
    seen = {"n": 0}
    stream_handles = [torch.cuda.current_stream().cuda_stream, 0] if cuda else []

    def before(name: str, i: int) -> None:
        j = order[(-1 - i) % len(order)] if i < 0 else order[i % len(order)]
        u = warm_u[(-1 - i) % len(warm_u)] if i < 0 else eps_u[i % len(eps_u)]
        current["j"], current["u"] = j, u
        _fill_timed_inputs(timed_inputs, input_sets[j], u)
        guard.restore_backend_flags(cand_flags if name == "candidate" else ref_flags)
        if l2 is not None:
            l2.reset(stream_handles)

    def after(name: str, i: int, out: Any) -> None:
        if name != "candidate":
            _poison(out, params + [x for x in timed_inputs if isinstance(x, torch.Tensor)])
            return
        threads = _candidate_threads()
        if threads:
            raise timing.TamperError(f"the candidate left Python threads running after a timed call "
                                     f"({', '.join(threads[:3])})")
        if i < 0:
            return
        if _aliases(out, timed_inputs):
            raise timing.TamperError("a timed call returned an output sharing memory with its input")
        # reservoir sample of the timed calls, and the latest call always in the last slot:
        # that one is a copy on the device (every call replaces it; a host copy of a large
        # output per call would cost more than the timing itself), moved to the host when
        # it enters the reservoir
        seen["n"] += 1
        item = (i, current["j"], current["u"])
        if len(kept) < recheck_n:
            kept.append((*item, keep_copy(out)))
            return
        r = rng.randrange(seen["n"])
        if r < recheck_n - 1:
            *prev, prev_out = kept[-1]
            kept[r] = (*prev, keep_copy(prev_out) if keep_copy is cmp.to_cpu else prev_out)
        kept[-1] = (*item, latest_copy(out))

    def ref_call() -> Any:
        return ref_model(*timed_inputs)

    def cand_call() -> Any:
        return cand_model(*timed_inputs)

    fns: dict[str, Any] = {"reference": ref_call}
    if compiled is not None:
        fns["compiled"] = lambda: compiled(*timed_inputs)
    fns["candidate"] = cand_call
    try:
        with torch.no_grad():
            times = timer.interleaved(fns, ev["rounds"], before=before, after=after)
            evaluator_notes["timer_overhead_ms"] = timer.overhead_ms(20)
            evaluator_notes["sync_gap_ms"] = timer.gap0_ms
    except Exception as exc:
        f = _classify_runtime(exc, "timed run failed: ")
        f.extra["compile"] = compile_res
        raise f

    # 5. after timing ----------------------------------------------------------------------
    _status(job, "verify")
    patched = snapshot.changed()
    if patched:
        raise fail(Verdict.INTEGRITY, "the candidate replaced functions the evaluation relies on: "
                   + ", ".join(patched[:6]))
    with torch.no_grad():
        again = ref_model(*_clone_inputs(input_sets[0]))
        if cuda:
            torch.cuda.synchronize()
    if not cmp.compare(again, ref_outs[0], tols, compute_device=device if cuda else None).ok:
        raise fail(Verdict.INTEGRITY, "the reference model no longer produces its own outputs: the candidate "
                   "altered it")
    _poison(again, params)
    del again
    guard.restore_backend_flags(ref_flags)
    for i, j, u, out in kept:
        if l2 is not None:
            l2.reset(stream_handles)
        _fill_timed_inputs(timed_inputs, input_sets[j], u)
        with torch.no_grad():
            # the reference's output stays where it was computed: the comparison runs there
            expected = ref_model(*timed_inputs)
        # ``out``: the timed call's output as kept (a GPU copy, a host copy, or a sample)
        pick = None
        if sampler is not None:
            want, why = cmp.values_at(expected, out)
            if why:
                raise fail(Verdict.INTEGRITY, f"timed call {i} returned a wrong output: {why}")
            got, expected_at = cmp.sampled_values(out), want

            def pick(gold: Any, out: Any = out) -> Any:
                return cmp.values_at(gold, out, same_dtype=False)[0]
        else:
            got, expected_at = out, expected
        c = cmp.compare(got, expected_at, tols, compute_device=device if cuda else None)
        if not c.ok and not c.integrity:
            second = second_opinion(got, expected_at, timed_inputs, f"timed call {i}", pick=pick)
            c = second if second is not None and second.ok else c
        del got, expected_at
        _poison(expected, params + [x for x in timed_inputs if isinstance(x, torch.Tensor)])
        del expected
        if not c.ok:
            raise fail(Verdict.INTEGRITY, f"timed call {i} returned a wrong output (results cached across calls "
                       f"or an input-dependent shortcut): {c.message}")
    evaluator_notes["rechecked_calls"] = float(len(kept))
    for name, ms in timer.escaped_ms.items():
        evaluator_notes[f"{name}_escaped_ms"] = ms
    for name, ms in timer.gap_matched_ms.items():  # the same-length one-stream control's gap
        evaluator_notes[f"{name}_sync_gap_matched_ms"] = ms
    if "candidate" in timer.escaped_ms:
        flags.append(f"side_stream_work: the candidate left about {timer.escaped_ms['candidate']:.3f} ms of work "
                     "per call on streams its own stream never waited for; its time runs to device idle")
    if l2 is not None and l2.found:
        flags.append("l2_persistence_reset: the candidate left " + "; ".join(l2.found[:3])
                     + " (reset before every timed call)")
    extra_threads = guard.extra_threads(threads_before)
    if extra_threads:
        evaluator_notes["threads_started"] = float(len(extra_threads))

    suspicious = suspicious_speed(times["reference"].median_ms, times["candidate"].median_ms, bound, ev)
    if suspicious:
        _status(job, "reverify")
        n = int(ev.get("reverify_trials", 10))
        with torch.no_grad():
            for t in range(n):
                inputs = make_inputs(problem, seed + 5000 + t, device)
                guard.restore_backend_flags(ref_flags)
                ref_dev = ref_model(*_clone_inputs(inputs))
                ref = cmp.to_cpu(ref_dev)
                _poison(ref_dev, params)
                del ref_dev
                pristine = _clone_inputs(inputs) if ev.get("fp64_second_opinion", True) else inputs
                guard.restore_backend_flags(cand_flags)
                try:
                    out = cand_model(*inputs)
                except Exception as exc:
                    raise _classify_runtime(exc, "re-verification: forward failed: ")
                c = cmp.compare(out, ref, tols, dev_type)
                if not c.ok and not c.integrity:
                    second = second_opinion(out, ref, pristine, f"re-verification trial {t}")
                    c = second if second is not None and second.ok else c
                if not c.ok:
                    raise fail(Verdict.INTEGRITY, f"{suspicious[0].split(':')[0]}: re-verification trial {t} "
                               f"failed: {c.message}")
        guard.restore_backend_flags(ref_flags)
        flags += [s + f" (re-verified with {n} more trials)" for s in suspicious]

    if exact["passed"]:
        flags.append(f"fp64_second_opinion: {len(exact['passed'])} check(s) failed the tolerance against the fp32 "
                     f"reference and passed against the reference in float64 (first: {exact['passed'][0]})")

    # 6. measurements --------------------------------------------------------------------
    measurements: dict[str, dict[str, float]] = {}
    for spec_m in job.get("measurements", []):
        _status(job, f"measure:{spec_m['name']}")
        try:
            m = _load_measurement(spec_m)
            reason = m.unavailable_reason(device)
            if reason:
                flags.append(f"measurement_unavailable: {spec_m['name']}: {reason}")
                continue
            sync = torch.cuda.synchronize if cuda else (lambda: None)
            x = input_sets[0]
            with torch.no_grad():
                ref_m = m.measure(lambda: ref_model(*x), sync)
                cand_m = m.measure(lambda: cand_model(*x), sync)
            measurements[spec_m["name"]] = {**{f"{k}": v for k, v in cand_m.items()},
                                            **{f"reference_{k}": v for k, v in ref_m.items()}}
        except Exception as exc:
            flags.append(f"measurement_failed: {spec_m['name']}: {_one_line(exc)}")
    evaluator_notes.update({f"stage_{name}_s": v for name, v in stage_seconds(STAGES, time.monotonic()).items()})
    measurements["evaluator"] = evaluator_notes

    return EvalResult(
        verdict=Verdict.CORRECT,
        compile=compile_res,
        correctness=correctness,
        timing=times["candidate"],
        baseline=times["reference"],
        baseline_compiled=times.get("compiled"),
        flags=tuple(flags),
        measurements=measurements,
        device=device,
        gpu_name=gpu_name,
        wall_s=time.monotonic() - t_start,
    )


def suspicious_speed(reference_ms: float, candidate_ms: float, bound: Any, ev: dict[str, Any]) -> list[str]:
    """Flags for a speedup above ``max_speedup`` or a time below ``impossible_margin`` x the
    physical lower bound (``bound``: a :class:`kernelpro.evaluate.bounds.Bound` or None)."""
    out = []
    speedup = reference_ms / max(candidate_ms, 1e-9)
    if speedup > float(ev.get("max_speedup", 100.0)):
        out.append(f"suspicious_speedup: {speedup:.1f}x exceeds evaluator.max_speedup")
    if bound is not None and candidate_ms < float(ev.get("impossible_margin", 0.9)) * bound.lower_ms:
        out.append(
            f"physically_impossible: {candidate_ms:.4g} ms is below the lower bound "
            f"{bound.lower_ms:.4g} ms for the reference's bytes and FLOPs on {bound.gpu} "
            f"(memory {bound.memory_ms:.4g} ms, compute {bound.compute_ms:.4g} ms)")
    return out


def _load_measurement(spec: dict[str, Any]) -> Any:
    import importlib

    from kernelpro.config import structure

    mod_name, _, qual = spec["import"].partition(":")
    cls = getattr(importlib.import_module(mod_name), qual)
    settings_cls = getattr(cls, "Settings", None)
    settings = structure(spec.get("settings") or {}, settings_cls) if settings_cls else None
    return cls(settings)


def _limit_memory(job: dict[str, Any]) -> None:
    limit = job["evaluator"].get("memory_limit_mb")
    if limit and not job["device"].startswith("cuda"):
        import resource

        n = int(limit) << 20
        resource.setrlimit(resource.RLIMIT_AS, (n, n))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    channel = WorkerEnd()  # reads the token and closes stdin before any candidate code
    job = json.loads(Path(argv[0]).read_text())
    seed_everything(int(job["seed"]))
    _limit_memory(job)
    try:
        result = run(job)
    except Fail as f:
        result = EvalResult(
            verdict=f.verdict,
            reason=f.reason,
            compile=f.extra.get("compile") or (
                CompileResult(ok=False, log=f.extra.get("log", "")) if f.verdict is Verdict.COMPILE_ERROR else None
            ),
            correctness=f.extra.get("correctness"),
            flags=tuple(FLAGS),
            device=job["device"],
        )
    except BaseException as exc:  # anything else is the candidate's fault, reported as such
        fail = _classify_runtime(exc, "")
        result = EvalResult(verdict=fail.verdict, reason=fail.reason, flags=tuple(FLAGS), device=job["device"])
    channel.send(json.dumps(to_json(result)))
    sys.stdout.flush()
    # leave without running the candidate's atexit handlers or destructors
    os._exit(0)


if __name__ == "__main__":
    main()
