"""The evaluation worker: one process per candidate.

    python -m kernelpro.evaluate.worker JOB.json

Reads the job, evaluates, writes the result JSON named in the job. Before each stage it
writes the stage name to the job's status file, so the parent can tell where a worker
that died (signal, os._exit, hang) was. Everything the measurement relies on (timers,
comparison functions) is imported before the candidate is.

Order of work:
1. Reference precision is fixed (no TF32), the problem module is loaded, the reference
   model is built after the seed, and its outputs for every trial's inputs are computed
   and copied to host memory, before any candidate code runs.
2. Device memory that held reference outputs is overwritten with NaN before the
   candidate runs, so a candidate that reads stale memory gets poison, not answers.
3. The candidate is imported (this compiles load_inline / Triton code), built after the
   same seed, and checked trial by trial: outputs, inputs left unmodified, no aliasing.
4. Reference, ``torch.compile``'d reference (GPU) and candidate are timed interleaved,
   with inputs rotating among the trial sets; outputs of timed calls are re-checked.
5. Extra measurements (energy, ...) run for reference and candidate.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# --- captured before any candidate code can run ------------------------------------------
import torch  # noqa: E402

from kernelpro.evaluate import compare as cmp  # noqa: E402
from kernelpro.evaluate import timing  # noqa: E402
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


class Fail(Exception):
    def __init__(self, verdict: Verdict, reason: str, **extra: Any):
        super().__init__(reason)
        self.verdict = verdict
        self.reason = reason
        self.extra = extra


def _status(job: dict[str, Any], stage: str) -> None:
    Path(job["status"]).write_text(stage)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]


def _is_cuda_error(exc: BaseException) -> bool:
    text = str(exc)
    markers = ("CUDA error", "illegal memory access", "misaligned address", "device-side assert",
               "unspecified launch failure", "an illegal instruction", "CUDA_ERROR")
    return any(m in text for m in markers)


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (MemoryError, torch.cuda.OutOfMemoryError)) or "out of memory" in str(exc)


def _compile_log(exc: BaseException) -> str:
    """Trim a compiler failure to the lines that matter for the next generation."""
    text = "".join(traceback.format_exception_only(type(exc), exc))
    lines = text.splitlines()
    keep = [ln for ln in lines if ("error" in ln.lower() or "warning" in ln.lower() or ln.strip().startswith("^"))]
    keep = keep or lines[-20:]
    return "\n".join(keep[:40])[:4000]


def _classify_import_error(exc: BaseException) -> Fail:
    text = str(exc)
    if isinstance(exc, SyntaxError):
        return Fail(Verdict.INVALID, f"candidate has a syntax error at line {exc.lineno}: {exc.msg}")
    compile_markers = ("Error building extension", "ninja: build stopped", "nvcc", "CompilationError",
                       "error:", "ptxas", "CalledProcessError")
    if any(m in text for m in compile_markers) or type(exc).__name__ in ("CompilationError", "CalledProcessError"):
        return Fail(Verdict.COMPILE_ERROR, "compilation failed: " + _one_line(exc), log=_compile_log(exc))
    if _is_oom(exc):
        return Fail(Verdict.OOM, _one_line(exc))
    if _is_cuda_error(exc):
        return Fail(Verdict.CUDA_ERROR, _one_line(exc))
    return Fail(Verdict.RUNTIME_ERROR, "importing the candidate failed: " + _one_line(exc))


def _tolerances(job: dict[str, Any]) -> dict[str, tuple[float, float]]:
    tol = job["evaluator"]["tolerances"]
    return {k: (float(v["atol"]), float(v["rtol"])) for k, v in tol.items()}


def _other_distribution(inputs: list[Any], seed: int) -> list[Any]:
    """Inputs of another distribution: floating tensors redrawn from N(0, 1)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            y = torch.randn(x.shape, generator=g, dtype=torch.float32).to(dtype=x.dtype, device=x.device)
            out.append(y)
        else:
            out.append(x)
    return out


def _clone_inputs(inputs: list[Any]) -> list[Any]:
    return [_clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]


def _inputs_unchanged(before: list[Any], after: list[Any]) -> bool:
    for b, a in zip(before, after):
        if isinstance(b, torch.Tensor):
            if b.shape != a.shape or not _equal(b.nan_to_num(), a.nan_to_num()):
                return False
    return True


def _poison_free_memory(device: str) -> None:
    """Fill the caching allocator's free blocks with NaN so stale reads see poison."""
    if not device.startswith("cuda"):
        return
    torch.cuda.synchronize()
    free_bytes = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    chunks = []
    try:
        # grab free cached blocks in decreasing sizes and fill them with NaN
        size = max(free_bytes, 0)
        while size >= 512:
            try:
                t = torch.empty(size // 4, dtype=torch.float32, device=device)
            except torch.cuda.OutOfMemoryError:
                size //= 2
                continue
            t.fill_(float("nan"))
            chunks.append(t)
            free_bytes -= size
            size = min(size, torch.cuda.memory_reserved() - torch.cuda.memory_allocated())
            if len(chunks) > 64:
                break
    finally:
        torch.cuda.synchronize()
        del chunks


class _ComputeRecorder(torch.utils._python_dispatch.TorchDispatchMode):
    """Records aten ops that compute (not allocation, views or copies)."""

    ALLOWED = {
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
        "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand",
        "select", "slice", "unsqueeze", "squeeze", "contiguous", "clone", "copy_", "_to_copy", "to",
        "detach", "alias", "lift_fresh", "split", "chunk", "unbind", "flatten", "view_as", "size",
        "stride", "numel", "is_contiguous", "resize_", "set_", "fill_", "zero_", "new_zeros",
        "_reshape_alias", "unfold", "narrow", "item", "_local_scalar_dense",
    }

    def __init__(self) -> None:
        super().__init__()
        self.compute_ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        if name.rstrip("_") not in self.ALLOWED and name not in self.ALLOWED:
            self.compute_ops.add(name)
        return func(*args, **(kwargs or {}))


def run(job: dict[str, Any]) -> EvalResult:
    t_start = time.monotonic()
    device = job["device"]
    ev = job["evaluator"]
    seed = int(job["seed"])
    tols = _tolerances(job)
    flags: list[str] = []
    gpu_name = torch.cuda.get_device_name() if device.startswith("cuda") else None

    # 1. reference -----------------------------------------------------------------------
    _status(job, "reference")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        problem = load_module(job["problem"], "kernelpro_problem")
        ref_model = build_model(problem.Model, problem, seed, device)
    except Exception as exc:
        raise Fail(Verdict.INVALID, "the problem itself failed to load: " + _one_line(exc))

    trials = int(ev["trials"])
    input_sets: list[list[Any]] = []
    ref_outs: list[Any] = []
    with torch.no_grad():
        for t in range(trials):
            inputs = make_inputs(problem, seed + 1 + t, device)
            input_sets.append(inputs)
            ref_outs.append(cmp.to_cpu(ref_model(*_clone_inputs(inputs))))
        if ev.get("other_distribution", True):
            inputs = _other_distribution(make_inputs(problem, seed + 1000, device), seed + 1000)
            out = ref_model(*_clone_inputs(inputs))
            if all(torch.isfinite(x).all() for x in cmp.tensors(out) if x.is_floating_point()):
                input_sets.append(inputs)
                ref_outs.append(cmp.to_cpu(out))
            else:
                flags.append("other_distribution_skipped: reference not finite on N(0,1) inputs")
    if trials > 1 and all(cmp.same_values(ref_outs[0], r) for r in ref_outs[1:trials]):
        flags.append("degenerate_reference: the reference output does not depend on the inputs")
    elif all(
        all(float(x.abs().max()) == 0.0 for x in cmp.tensors(r) if x.numel() and x.is_floating_point())
        for r in ref_outs
    ):
        flags.append("degenerate_reference: the reference output is all zeros")

    if job.get("candidate") is None:  # baseline-only job: time the reference
        _status(job, "timing")
        timer = timing.Timer(device, ev["warmup_ms"], ev["rep_ms"], ev["min_reps"], ev["max_reps"])
        k = [0]

        def rotate(_name: str, i: int) -> None:
            k[0] = i % len(input_sets)

        def ref_call() -> Any:
            return ref_model(*input_sets[k[0]])

        with torch.no_grad():
            res = timer.interleaved({"reference": ref_call}, ev["rounds"], on_call=rotate)
        return EvalResult(verdict=Verdict.CORRECT, reason="reference", baseline=res["reference"],
                          timing=res["reference"], flags=tuple(flags), device=device, gpu_name=gpu_name,
                          wall_s=time.monotonic() - t_start)

    _poison_free_memory(device)

    # 2. candidate -----------------------------------------------------------------------
    _status(job, "compile")
    t0 = time.monotonic()
    try:
        cand_mod = load_module(job["candidate"], "kernelpro_candidate")
    except Exception as exc:
        raise _classify_import_error(exc)
    compile_s = time.monotonic() - t0
    compile_res = CompileResult(ok=True, seconds=compile_s, language=job.get("language", "pytorch"))
    if not hasattr(cand_mod, "ModelNew"):
        raise Fail(Verdict.INVALID, "candidate defines no ModelNew", compile=compile_res)

    _status(job, "build")
    try:
        cand_model = build_model(cand_mod.ModelNew, problem, seed, device)
    except Exception as exc:
        f = _classify_runtime(exc, "constructing ModelNew failed: ")
        f.extra["compile"] = compile_res
        raise f

    # 3. correctness ---------------------------------------------------------------------
    _status(job, "correctness")
    policy = ev.get("call_policy", "any")
    max_abs = max_rel = 0.0
    cand_outs = []
    with torch.no_grad():
        for t, (inputs, ref_out) in enumerate(zip(input_sets, ref_outs)):
            before = _clone_inputs(inputs)
            try:
                if policy == "no_torch_compute" and t == 0:
                    rec = _ComputeRecorder()
                    with rec:
                        out = cand_model(*inputs)
                    if rec.compute_ops:
                        raise Fail(Verdict.POLICY, "call policy no_torch_compute: forward calls PyTorch "
                                   f"compute ops: {', '.join(sorted(rec.compute_ops)[:8])}", compile=compile_res)
                else:
                    out = cand_model(*inputs)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
            except Fail:
                raise
            except Exception as exc:
                f = _classify_runtime(exc, "forward failed: ")
                f.extra["compile"] = compile_res
                raise f
            label = "trial" if t < trials else "N(0,1) trial"
            for o in cmp.tensors(out):
                for x in inputs:
                    if isinstance(x, torch.Tensor) and cmp.shares_storage(o, x):
                        raise Fail(Verdict.INTEGRITY, f"{label} {t}: output shares memory with an input",
                                   compile=compile_res)
            if not _inputs_unchanged(before, inputs):
                raise Fail(Verdict.INTEGRITY, f"{label} {t}: the candidate modified its inputs", compile=compile_res)
            c = cmp.compare(out, ref_out, tols)
            if not c.ok:
                raise Fail(Verdict.INCORRECT, f"{label} {t}: {c.message}", compile=compile_res,
                           correctness=CorrectnessResult(False, t + 1, c.max_abs_err, c.max_rel_err, c.message))
            max_abs, max_rel = max(max_abs, c.max_abs_err), max(max_rel, c.max_rel_err)
            cand_outs.append(cmp.to_cpu(out))
    n_checked = len(input_sets)
    if n_checked > 1 and all(cmp.same_values(cand_outs[0], o) for o in cand_outs[1:]) and not all(
        cmp.same_values(ref_outs[0], r) for r in ref_outs[1:]
    ):
        raise Fail(Verdict.INTEGRITY, "the candidate's output is constant across trials while the reference's is not",
                   compile=compile_res)
    correctness = CorrectnessResult(True, n_checked, max_abs, max_rel, "")

    # 4. timing --------------------------------------------------------------------------
    _status(job, "timing")
    timer = timing.Timer(device, ev["warmup_ms"], ev["rep_ms"], ev["min_reps"], ev["max_reps"])
    current = {"i": 0}
    last_out: dict[str, Any] = {}

    def rotate(_name: str, i: int) -> None:
        current["i"] = i % len(input_sets)

    def ref_call() -> Any:
        return ref_model(*input_sets[current["i"]])

    def cand_call() -> Any:
        out = cand_model(*input_sets[current["i"]])
        last_out["i"], last_out["out"] = current["i"], out
        return out

    fns = {"reference": ref_call}
    if device.startswith("cuda") and ev.get("time_compiled_reference", True):
        try:
            compiled = torch.compile(ref_model)
            with torch.no_grad():
                compiled(*input_sets[0])

            def compiled_call() -> Any:
                return compiled(*input_sets[current["i"]])

            fns["compiled"] = compiled_call
        except Exception as exc:  # the baseline is optional; say why it is missing
            flags.append("compiled_reference_failed: " + _one_line(exc))
    fns["candidate"] = cand_call
    try:
        with torch.no_grad():
            times = timer.interleaved(fns, ev["rounds"], on_call=rotate)
    except Exception as exc:
        f = _classify_runtime(exc, "timed run failed: ")
        f.extra["compile"] = compile_res
        raise f
    # re-check the output of the last timed call against the reference for its inputs
    if last_out:
        c = cmp.compare(last_out["out"], ref_outs[last_out["i"]], tols)
        if not c.ok:
            raise Fail(Verdict.INTEGRITY, "output of a timed call is wrong (results cached or "
                       f"input-dependent shortcut): {c.message}", compile=compile_res)

    speedup = times["reference"].median_ms / max(times["candidate"].median_ms, 1e-9)
    if speedup > float(ev.get("max_speedup", 100.0)):
        flags.append(f"suspicious_speedup: {speedup:.1f}x exceeds evaluator.max_speedup")

    # 5. measurements --------------------------------------------------------------------
    measurements: dict[str, dict[str, float]] = {}
    for spec in job.get("measurements", []):
        _status(job, f"measure:{spec['name']}")
        try:
            m = _load_measurement(spec)
            reason = m.unavailable_reason(device)
            if reason:
                flags.append(f"measurement_unavailable: {spec['name']}: {reason}")
                continue
            sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
            x = input_sets[0]
            with torch.no_grad():
                ref_m = m.measure(lambda: ref_model(*x), sync)
                cand_m = m.measure(lambda: cand_model(*x), sync)
            measurements[spec["name"]] = {**{f"{k}": v for k, v in cand_m.items()},
                                          **{f"reference_{k}": v for k, v in ref_m.items()}}
        except Exception as exc:
            flags.append(f"measurement_failed: {spec['name']}: {_one_line(exc)}")

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


def _load_measurement(spec: dict[str, Any]) -> Any:
    import importlib

    from kernelpro.config import structure

    mod_name, _, qual = spec["import"].partition(":")
    cls = getattr(importlib.import_module(mod_name), qual)
    settings_cls = getattr(cls, "Settings", None)
    settings = structure(spec.get("settings") or {}, settings_cls) if settings_cls else None
    return cls(settings)


def _classify_runtime(exc: BaseException, prefix: str) -> Fail:
    if _is_oom(exc):
        return Fail(Verdict.OOM, prefix + _one_line(exc))
    if _is_cuda_error(exc):
        return Fail(Verdict.CUDA_ERROR, prefix + _one_line(exc))
    return Fail(Verdict.RUNTIME_ERROR, prefix + _one_line(exc))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    seed_everything(int(job["seed"]))
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
            device=job["device"],
        )
    except BaseException as exc:  # anything else is the candidate's fault, reported as such
        fail = _classify_runtime(exc, "")
        result = EvalResult(verdict=fail.verdict, reason=fail.reason, device=job["device"])
    tmp = Path(job["result"] + ".tmp")
    tmp.write_text(json.dumps(to_json(result)))
    os.replace(tmp, job["result"])
    sys.stdout.flush()
    # leave without running the candidate's atexit handlers or destructors
    os._exit(0)


if __name__ == "__main__":
    main()
