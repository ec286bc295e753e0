"""Capture the system-level fixtures on a GPU machine (run from the repository root).

    python tools/capture/nsys/gpu_capture.py        # writes $OUT/nsys.tar.gz

1. Records a Kineto trace (``python -m kernelpro_plugins_nsys.trace``, 3 warm-up + 3
   recorded calls) of each case in tests/nsys/fixtures/problems/: a launch-bound chain of
   200 tiny operators, the same chain replayed from a CUDA graph, a forward calling
   ``.item()`` and ``.cpu()``, one allocating large temporaries and emptying the cache, one
   dominated by host-side Python, and a good one (a single large matrix product).
2. Times each case's forward without a profiler (wall time per call between syncs), to
   check the findings' estimated gains against what a fix really saves.
3. Runs the TimelineCollector end to end on one case (it chooses nsys or the trace driver).
4. Tries Nsight Systems on the launch-bound case and records what happens: version,
   ``nsys status``, exit status, output, the files it wrote, and whether a report could be
   made from them (QdstrmImporter for a bare .qdstrm, ``nsys export`` for a report).
5. Runs the analyzer and every micro-profiler on each trace and prints a summary table.

Everything goes into ``$OUT/nsys.tar.gz``. Never changes clocks, power or modes. Time budget
about 3 minutes; each subprocess has its own timeout and later steps are skipped when the
budget is spent.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PROBLEMS = REPO / "tests" / "nsys" / "fixtures" / "problems"
BUDGET_S = 175.0
T0 = time.monotonic()

CASES = {
    # name: (problem file, candidate file or None)
    "launch_bound": ("launch_bound.py", None),
    "launch_bound_graphed": ("launch_bound.py", "launch_bound_graphed.py"),
    "host_sync": ("host_sync.py", None),
    "alloc_churn": ("alloc_churn.py", None),
    "cpu_overhead": ("cpu_overhead.py", None),
    "fused_matmul": ("fused_matmul.py", None),
}


def left_s() -> float:
    return BUDGET_S - (time.monotonic() - T0)


def run(argv: list[str], timeout_s: float, cwd: Path | None = None) -> dict:
    """Run a command; return rc, wall seconds and the tails of its output."""
    t = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=cwd, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=max(5.0, timeout_s))
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # nsys and the program it started
            out, err = proc.communicate()
            rc = "timeout"
    except OSError as exc:
        rc, out, err = "oserror", "", str(exc)
    return {
        "argv": argv,
        "rc": rc,
        "wall_s": round(time.monotonic() - t, 2),
        "stdout_tail": out[-3000:],
        "stderr_tail": err[-3000:],
    }


def environment() -> dict:
    info: dict = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    smi = run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm",
         "--format=csv,noheader"], 20,
    )
    info["nvidia_smi"] = smi["stdout_tail"].strip() or smi["stderr_tail"].strip()
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda_runtime"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name()
    except Exception as exc:  # recorded, not fatal
        info["torch_error"] = str(exc)
    return info


def capture_traces(work: Path) -> dict:
    results = {}
    for name, (problem, candidate) in CASES.items():
        if left_s() < 20:
            results[name] = {"skipped": "time budget spent"}
            continue
        out = work / "traces" / f"{name}.json.gz"
        argv = [sys.executable, "-m", "kernelpro_plugins_nsys.trace",
                "--problem", str(PROBLEMS / problem)]
        if candidate:
            argv += ["--candidate", str(PROBLEMS / candidate)]
        argv += ["--device", "cuda", "--out", str(out), "--warmup", "3", "--iters", "3"]
        res = run(argv, min(60.0, left_s() - 10))
        res["bytes"] = out.stat().st_size if out.exists() else None
        results[name] = res
        print(f"trace {name}: rc={res['rc']} {res['wall_s']}s bytes={res['bytes']}", flush=True)
    return results


def nsys_binaries() -> list[str]:
    found = []
    on_path = shutil.which("nsys")
    if on_path:
        found.append(on_path)
    for pattern in (
        "/opt/nvidia/nsight-systems*/*/bin/nsys",
        "/opt/nvidia/nsight-systems*/bin/nsys",
        "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
        "/usr/local/cuda*/bin/nsys",
        "/usr/local/cuda*/nsight-systems*/bin/nsys",
    ):
        found += sorted(glob.glob(pattern))
    unique = []
    for path in found:
        real = os.path.realpath(path)
        if real not in [os.path.realpath(u) for u in unique]:
            unique.append(path)
    return unique


def try_nsys(work: Path) -> dict:
    """Try nsys without a capture range and without --export (the first run, with
    --capture-range=cudaProfilerApi --export=sqlite, hung for 45 s and wrote nothing), then
    the missing steps by hand: QdstrmImporter on a bare .qdstrm, nsys export on a report."""
    attempt: dict = {"binaries": nsys_binaries()}
    importers = sorted(glob.glob("/opt/nvidia/**/QdstrmImporter", recursive=True))
    attempt["qdstrm_importers"] = importers
    runs = []
    for i, nsys in enumerate(attempt["binaries"][:1]):
        if left_s() < 45:
            runs.append({"nsys": nsys, "skipped": "time budget spent"})
            continue
        entry: dict = {"nsys": nsys, "version": run([nsys, "--version"], 15)}
        entry["status"] = run([nsys, "status", "--environment"], 15)
        outdir = work / "nsys" / f"run{i}"
        outdir.mkdir(parents=True, exist_ok=True)
        base = outdir / "launch_bound"
        argv = [
            nsys, "profile", "--trace=cuda,nvtx", "--force-overwrite=true", "-o", str(base),
            sys.executable, "-m", "kernelpro_plugins_nsys.trace",
            "--problem", str(PROBLEMS / "launch_bound.py"),
            "--device", "cuda", "--mode", "nvtx", "--warmup", "1", "--iters", "2",
        ]
        entry["profile"] = run(argv, min(50.0, left_s() - 25))
        entry["files"] = {p.name: p.stat().st_size for p in sorted(outdir.iterdir())}
        qdstrms = sorted(outdir.glob("*.qdstrm"))
        if qdstrms and not list(outdir.glob("*.nsys-rep")) and importers and left_s() > 20:
            entry["qdstrm_import"] = run([importers[0], "-i", str(qdstrms[0])], min(40.0, left_s() - 10))
        reps = sorted(outdir.glob("*.nsys-rep"))
        if reps and not list(outdir.glob("*.sqlite")) and left_s() > 15:
            entry["export"] = run(
                [nsys, "export", "--type", "sqlite", "--force-overwrite", "true",
                 "-o", str(base) + ".sqlite", str(reps[0])], min(40.0, left_s() - 5),
            )
        entry["files_after"] = {p.name: p.stat().st_size for p in sorted(outdir.iterdir())}
        for p in outdir.iterdir():  # keep only what is small enough to bring back
            if p.stat().st_size > 3 * (1 << 20):
                p.unlink()
        runs.append(entry)
        print(f"nsys {nsys}: rc={entry['profile']['rc']} files={entry['files_after']}", flush=True)
    attempt["runs"] = runs
    return attempt


TIME_CASES = r"""
import json, statistics, sys, time
import torch
from kernelpro.evaluate.forward import prepare
problems, cases, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
result = {}
for name, (problem, candidate) in cases.items():
    model, inputs = prepare(f"{problems}/{problem}", f"{problems}/{candidate}" if candidate else None, "cuda", 0)
    times = []
    with torch.no_grad():
        for i in range(25):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(*inputs)
            torch.cuda.synchronize()
            if i >= 5:
                times.append((time.perf_counter() - t0) * 1e3)
    result[name] = {"median_ms": statistics.median(times), "min_ms": min(times), "n": len(times)}
    print(name, result[name], flush=True)
json.dump(result, open(out, "w"), indent=1)
"""


def time_cases(work: Path) -> dict:
    """Each case's forward without any profiler: 5 warm-up then 20 calls, each timed with
    perf_counter between device synchronisations (wall time of one call, host included)."""
    if left_s() < 40:
        return {"skipped": "time budget spent"}
    out = work / "unprofiled_ms.json"
    res = run([sys.executable, "-c", TIME_CASES, str(PROBLEMS), json.dumps(CASES), str(out)], min(60.0, left_s() - 20))
    res["result"] = json.loads(out.read_text()) if out.exists() else None
    return res


def collector_end_to_end(work: Path) -> dict:
    if left_s() < 75:
        return {"skipped": "time budget spent"}
    try:
        from kernelpro.api import ProfileTarget

        from kernelpro_plugins_nsys.collector import TimelineCollector, TimelineSettings

        target = ProfileTarget(
            problem_path=PROBLEMS / "launch_bound.py",
            candidate_path=PROBLEMS / "launch_bound_graphed.py",
            device="cuda",
            workdir=work / "collector",
            python=sys.executable,
        )
        collector = TimelineCollector(TimelineSettings(timeout_s=40.0, nsys_timeout_s=20.0))
        os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # keep the nsys verdict local
        t = time.monotonic()
        reason = collector.unavailable_reason(target)
        data = collector.collect(target, stage=1)
        return {
            "unavailable_reason": reason,
            "wall_s": round(time.monotonic() - t, 2),
            "notes": list(data.notes),
            "source": getattr(data.payload, "source", None),
            "kernels": len(data.kernels),
        }
    except Exception as exc:  # recorded, not fatal
        return {"error": f"{type(exc).__name__}: {exc}"}


def analyze_traces(work: Path) -> list[dict]:
    rows = []
    try:
        from kernelpro.api import ProfileContext

        from kernelpro_plugins_nsys.analyzer import TraceAnalyzer
        from kernelpro_plugins_nsys.micro import MICRO_PROFILERS
    except Exception as exc:
        return [{"error": f"analysis unavailable: {type(exc).__name__}: {exc}"}]
    context = ProfileContext(gpu=None, device="cuda")
    for trace in sorted((work / "traces").glob("*.json.gz")):
        row: dict = {"trace": trace.name}
        try:
            profile = TraceAnalyzer().load(trace)
            fired = {}
            for cls in MICRO_PROFILERS:
                found = cls().analyze(profile, None, context)
                if found:
                    fired[cls.name] = [(f.severity, f.title) for f in found]
            row["fired"] = fired
            row["summary"] = profile.payload.summary_line()
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    return rows


def main() -> int:
    out_dir = Path(os.environ.get("OUT", "/tmp/nsys_capture_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/kernelpro_nsys_capture")
    shutil.rmtree(work, ignore_errors=True)
    (work / "traces").mkdir(parents=True)

    record: dict = {"environment": environment()}
    print(json.dumps(record["environment"]), flush=True)
    record["traces"] = capture_traces(work)
    record["unprofiled"] = time_cases(work)
    record["collector"] = collector_end_to_end(work)
    record["nsys"] = try_nsys(work)
    record["analysis"] = analyze_traces(work)
    record["total_wall_s"] = round(time.monotonic() - T0, 1)
    (work / "capture.json").write_text(json.dumps(record, indent=1, default=str))

    shutil.rmtree(work / "collector", ignore_errors=True)
    tar_path = out_dir / "nsys.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(work, arcname="nsys")
    print(f"\nwrote {tar_path} ({tar_path.stat().st_size} bytes) in {record['total_wall_s']} s")

    print("\n== summary ==")
    print(f"{'case':24} {'rc':>8} {'KiB':>7}  fired")
    fired_by_trace = {r.get("trace", "").replace(".json.gz", ""): r for r in record["analysis"]}
    for name, res in record["traces"].items():
        kib = (res.get("bytes") or 0) / 1024
        row = fired_by_trace.get(name, {})
        fired = ",".join(sorted(row.get("fired", {}))) or row.get("error", "-")
        print(f"{name:24} {str(res.get('rc', res.get('skipped'))):>8} {kib:7.0f}  {fired}")
    for r in record["analysis"]:
        if "summary" in r:
            print(f"  {r['trace']}: {r['summary']}")
    for entry in record["nsys"].get("runs", []):
        prof = entry.get("profile", {})
        print(f"nsys {entry.get('nsys')}: rc={prof.get('rc')} files={entry.get('files_after')}")
    print(f"collector: {record['collector']}")
    print(f"unprofiled: {(record['unprofiled'] or {}).get('result')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
