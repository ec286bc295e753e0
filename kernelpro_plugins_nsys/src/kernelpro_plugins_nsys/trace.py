"""Record a timeline of a candidate's forward calls.

    python -m kernelpro_plugins_nsys.trace --problem P.py [--candidate C.py] --device cuda
        --out trace.json [--warmup 3] [--iters 3] [--seed 0] [--mode kineto|nvtx]

Method. The model and inputs are built by :func:`kernelpro.api.prepare_forward`
(the same construction the evaluator uses). ``--warmup`` calls run first, unrecorded
(compilation, autotuning, the caching allocator filling up). Then each of the ``--iters``
recorded calls runs inside its own range named ``kernelpro:forward``, followed by a device
synchronisation *outside* that range, so the GPU work of one call never overlaps the next
and a synchronisation that the driver adds is never blamed on the forward.

``--mode kineto`` (default) records with ``torch.profiler``, after one extra call inside the
profiler (range ``kernelpro:profiler_warmup``, not analysed) that absorbs the profiler's own
first-call costs: CPU activity always, CUDA
activity (CUPTI: kernels, runtime/driver calls, copies, memsets) when the device is CUDA,
shapes, and allocator events (``profile_memory``); Python stacks are off (they multiply
the trace size and the overhead). The Chrome/Kineto trace JSON is written to ``--out``
(gzip-compressed when the name ends in ``.gz``) with a ``kernelpro_trace`` object added at
the top level describing the run.

``--mode nvtx`` records nothing itself: it is the program an external profiler (Nsight
Systems with ``--capture-range=cudaProfilerApi``) runs. The recorded calls sit between
``cudaProfilerStart`` and ``cudaProfilerStop``, each inside an NVTX range
``kernelpro:forward``, with PyTorch's per-operator NVTX ranges (``emit_nvtx``) inside.

Exit status 0 on success; on failure one line on stderr and status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

FORWARD_RANGE = "kernelpro:forward"
PROFILER_WARMUP_RANGE = "kernelpro:profiler_warmup"
TRACE_META_KEY = "kernelpro_trace"


def command(
    problem: Path,
    candidate: Path | None,
    out: Path,
    device: str = "cuda",
    warmup: int = 3,
    iters: int = 3,
    seed: int = 0,
    mode: str = "kineto",
    python: str = sys.executable,
) -> list[str]:
    """The argv that runs this module."""
    argv = [python, "-m", "kernelpro_plugins_nsys.trace", "--problem", str(problem)]
    if candidate is not None:
        argv += ["--candidate", str(candidate)]
    argv += [
        "--device", device, "--out", str(out), "--warmup", str(warmup),
        "--iters", str(iters), "--seed", str(seed), "--mode", mode,
    ]
    return argv


def _profiler_activities(torch, cuda: bool) -> list:
    from torch.profiler import ProfilerActivity

    activities = [ProfilerActivity.CPU]
    if cuda:
        activities.append(ProfilerActivity.CUDA)
    return activities


def _experimental_config(torch):
    """Ask Kineto for its CUDA synchronisation events where this torch build knows them."""
    try:
        return torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    except (AttributeError, TypeError):
        return None


def record_kineto(model, inputs, device: str, warmup: int, iters: int, out: Path) -> dict:
    """Run warm-up calls, then record ``iters`` calls with torch.profiler; write ``out``.
    ``stage_s``: seconds of the warm-up, the recording and the export."""
    import torch
    from torch.profiler import profile, record_function

    cuda = device.startswith("cuda")
    t0 = time.perf_counter()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        sync()
        t_warm = time.perf_counter()
        kwargs: dict[str, Any] = dict(
            activities=_profiler_activities(torch, cuda),
            record_shapes=True,
            profile_memory=True,
            with_stack=False,
        )
        config = _experimental_config(torch) if cuda else None
        if config is not None:
            kwargs["experimental_config"] = config
        forward_s: list[float] = []
        with profile(**kwargs) as prof:
            # The first call under the profiler pays its one-time costs (on the H200 its span
            # was 3.2 to 4.3 ms longer than the next call's in every case of
            # docs/validation/nsys_tools.md); it is recorded under another name, not analysed.
            with record_function(PROFILER_WARMUP_RANGE):
                model(*inputs)
            sync()
            for _ in range(iters):
                t1 = time.perf_counter()
                with record_function(FORWARD_RANGE):
                    model(*inputs)
                sync()
                forward_s.append(time.perf_counter() - t1)
    t_rec = time.perf_counter()  # leaving the profiler's context collects its events
    raw = out.with_name(out.name + ".raw.json")
    prof.export_chrome_trace(str(raw))
    try:
        data = json.loads(raw.read_text())
    finally:
        raw.unlink(missing_ok=True)
    stage_s = {"warmup": t_warm - t0, "record": t_rec - t_warm, "export": time.perf_counter() - t_rec}
    return {"data": data, "forward_wall_ms": [s * 1e3 for s in forward_s], "stage_s": stage_s}


def run_nvtx(model, inputs, device: str, warmup: int, iters: int) -> dict:
    """Warm up, then run ``iters`` calls annotated for an external timeline profiler."""
    import torch

    cuda = device.startswith("cuda")
    forward_s: list[float] = []
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
        # operator ranges for the external profiler; NVTX exists only in CUDA builds
        ranges = torch.autograd.profiler.emit_nvtx(record_shapes=False) if cuda else contextlib.nullcontext()
        with ranges:
            for _ in range(iters):
                t0 = time.perf_counter()
                if cuda:
                    torch.cuda.nvtx.range_push(FORWARD_RANGE)
                model(*inputs)
                if cuda:
                    torch.cuda.nvtx.range_pop()
                    torch.cuda.synchronize()
                forward_s.append(time.perf_counter() - t0)
        if cuda:
            torch.cuda.cudart().cudaProfilerStop()
    return {"forward_wall_ms": [s * 1e3 for s in forward_s]}


def _meta(args: argparse.Namespace, torch) -> dict:
    meta = {
        "problem": str(args.problem),
        "candidate": str(args.candidate) if args.candidate else None,
        "device": args.device,
        "warmup": args.warmup,
        "iters": args.iters,
        "seed": args.seed,
        "mode": args.mode,
        "torch": torch.__version__,
        "forward_range": FORWARD_RANGE,
    }
    if args.device.startswith("cuda") and torch.cuda.is_available():
        meta["gpu_name"] = torch.cuda.get_device_name()
        major, minor = torch.cuda.get_device_capability()
        meta["arch"] = f"sm_{major}{minor}"
    return meta


def write_trace(data: dict, out: Path) -> None:
    """Write trace JSON to ``out``; gzip when the name ends in ``.gz``."""
    text = json.dumps(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.name.endswith(".gz"):
        with gzip.open(out, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        out.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelpro_plugins_nsys.trace")
    ap.add_argument("--problem", required=True, type=Path)
    ap.add_argument("--candidate", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, help="trace file to write (kineto mode)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=("kineto", "nvtx"), default="kineto")
    t_main = time.perf_counter()
    args = ap.parse_args(argv)
    if args.mode == "kineto" and args.out is None:
        print("trace failed: --out is required with --mode kineto", file=sys.stderr)
        return 1
    if args.iters < 1 or args.warmup < 0:
        print("trace failed: --iters must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 1

    from kernelpro.api import gpu_lock

    # on a GPU shared with other jobs: the GPU alone from the model's preparation on (the
    # timeline's kernel times must not include another job's kernels or memory); let go
    # when the process exits, after its memory is freed
    lock = gpu_lock()
    try:
        import torch

        from kernelpro.api import prepare_forward as prepare

        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(f"device {args.device} requested but torch sees no CUDA device")
        t_imported = time.perf_counter()
        lock.hold("exclusive")
        model, inputs = prepare(args.problem, args.candidate, args.device, args.seed)
        t_prepared = time.perf_counter()
        if args.mode == "kineto":
            recorded = record_kineto(model, inputs, args.device, args.warmup, args.iters, args.out)
            data = recorded["data"]
            # where the driver's time went (its interpreter's start-up and imports are what
            # the collector's wall clock shows beyond these)
            stage_s = {"torch_import": t_imported - t_main, "prepare": t_prepared - t_imported,
                       **recorded["stage_s"]}
            data[TRACE_META_KEY] = dict(_meta(args, torch), forward_wall_ms=recorded["forward_wall_ms"])
            t_write = time.perf_counter()
            write_trace(data, args.out)
            stage_s["write"] = time.perf_counter() - t_write
            args.out.with_name(args.out.name + ".stages.json").write_text(json.dumps(stage_s))
        else:
            run_nvtx(model, inputs, args.device, args.warmup, args.iters)
    except Exception as exc:  # one line for the collector, never a traceback
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"trace failed: {type(exc).__name__}: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
