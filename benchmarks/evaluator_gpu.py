"""GPU evidence for the evaluator, in one run (< 5 minutes on an H200 machine).

    python3 benchmarks/evaluator_gpu.py          (from the repository root; $OUT must be set)

1. The GPU-marked evaluator tests (side streams, stale memory, sticky CUDA errors,
   L2 persistence, own-kernel policy, load_inline / raw .cu builds, leaked memory):
   ``python3 -m pytest tests/evaluate -m gpu -q``; at the same time
2. the compile benchmark (cold load_inline build, cache hit, 8 candidates with 8 workers);
3. then, alone, the timing fidelity benchmark (10 processes, and Nsight Compute).

Each phase has its own time limit; a phase that runs out is recorded as such and the
next one still runs. Everything goes into ``$OUT/evaluator.tar.gz``; a summary is printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/evaluator_out"))
WORK = OUT / "evaluator"
REPO = Path(__file__).resolve().parent.parent


class Phase:
    """A command run with a time limit, its output saved to ``<name>.log``."""

    def __init__(self, name: str, argv: list[str], timeout_s: float, env: dict[str, str] | None = None):
        self.name, self.argv, self.timeout_s = name, argv, timeout_s
        self.log = WORK / f"{name}.log"
        print(f"== start {name}: {' '.join(argv)}", flush=True)
        self.t0 = time.monotonic()
        self.fh = open(self.log, "w")
        self.proc = subprocess.Popen(argv, stdout=self.fh, stderr=subprocess.STDOUT, cwd=REPO,
                                     env={**os.environ, **(env or {})}, start_new_session=True)

    def finish(self) -> dict:
        left = max(1.0, self.timeout_s - (time.monotonic() - self.t0))
        try:
            rc = self.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            rc = 124
            self.fh.write(f"\n[timed out after {self.timeout_s:g} s]\n")
        self.fh.close()
        wall = time.monotonic() - self.t0
        text = self.log.read_text(errors="replace")
        print(f"== {self.name}: rc={rc} in {wall:.0f} s", flush=True)
        print("\n".join(text.strip().splitlines()[-25:]), flush=True)
        return {"name": self.name, "rc": rc, "wall_s": round(wall, 1)}


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    t_all = time.monotonic()
    info = {}
    try:
        import torch

        info = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(),
                "capability": ".".join(map(str, torch.cuda.get_device_capability())), "cpus": os.cpu_count()}
    except Exception as exc:  # pragma: no cover - reported
        info = {"error": str(exc)}
    (WORK / "env.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info), flush=True)
    # the GPU tests and the compile benchmark run side by side (the tests use the GPU and a
    # core or two, the benchmark the other cores); the timing benchmark runs alone after them
    tests = Phase("pytest_gpu", [sys.executable, "-m", "pytest", "tests/evaluate", "-m", "gpu", "-q", "-rA",
                                 "-p", "no:cacheprovider", f"--basetemp={WORK / 'pytest_tmp'}",
                                 f"--junitxml={WORK / 'pytest_gpu.xml'}"], 230)
    bench = Phase("compile_bench", [sys.executable, "benchmarks/compile/bench_compile.py", "--device", "cuda",
                                    "--n", "8", "--workers", "8", "--out", str(WORK / "compile")], 200)
    results = [bench.finish(), tests.finish()]
    results.append(Phase("timing_fidelity", [sys.executable, "benchmarks/timing/fidelity.py", "--out", str(WORK),
                                             "--procs", "10", "--ncu"], 100).finish())
    for name in ("compile/compile.json",):
        p = WORK / name
        if p.exists():
            (WORK / "compile.json").write_text(p.read_text())
    summary = {"env": info, "phases": results, "total_s": round(time.monotonic() - t_all, 1)}
    (WORK / "summary.json").write_text(json.dumps(summary, indent=1))
    keep = []
    for p in WORK.rglob("*"):
        rel = p.relative_to(WORK)
        if not p.is_file() or any(part.startswith(("cache", "test_build_cache")) for part in rel.parts):
            continue
        if (p.suffix in (".log", ".json", ".xml") or p.name == "status.txt") and p.stat().st_size < 1 << 20:
            keep.append(p)
    with tarfile.open(OUT / "evaluator.tar.gz", "w:gz") as tar:
        for p in keep:
            tar.add(p, arcname=str(p.relative_to(WORK)))
            if tar.fileobj.tell() > 10 << 20:  # stay under the 12 MB limit
                break
    print("\nphase              rc   wall_s")
    for r in results:
        print(f"{r['name']:18s} {r['rc']:4d} {r['wall_s']:7.1f}")
    print(f"total {summary['total_s']} s; wrote {OUT / 'evaluator.tar.gz'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
