#!/usr/bin/env python3
"""A stand-in for Nsight Compute's ncu used by the collector tests (no GPU needed).

Behaviour comes from environment variables:
FAKE_NCU_LOG   append each argv as one JSON line
FAKE_NCU_MODE  ok | perm | library | nokernels | sleep | fail | run | run_nostdin
               (run: the profiled command runs, on the CPU, then the report is written;
               a forward started with --job-on-stdin gets the job line this process reads;
               run_nostdin: it gets nothing on its stdin, as under an ncu that passes none on)
FAKE_NCU_BAD   comma-separated metric names to reject with "Failed to find metric"
FAKE_NCU_CSV   file whose text ``--import ... --csv`` prints
FAKE_NCU_QUERY file whose text ``--query-metrics`` prints
"""
import json
import os
import sys
import time

argv = sys.argv[1:]
if os.environ.get("FAKE_NCU_LOG"):
    with open(os.environ["FAKE_NCU_LOG"], "a") as fh:
        fh.write(json.dumps(argv) + "\n")
mode = os.environ.get("FAKE_NCU_MODE", "ok")
if "--version" in argv:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0 (fake)")
    sys.exit(0)
if "--query-metrics" in argv:
    path = os.environ.get("FAKE_NCU_QUERY")
    print(open(path).read() if path else "")
    sys.exit(0)
if "--import" in argv:
    print(open(os.environ["FAKE_NCU_CSV"]).read())
    sys.exit(0)
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0.")
    sys.exit(1)
if mode == "library":
    print("==ERROR== Failed to initialize the profiler: LibraryNotLoaded")
    sys.exit(1)
if mode == "run_nostdin":
    import subprocess

    i = argv.index("kernelpro.evaluate.forward") - 2
    done = subprocess.run([("cpu" if a.startswith("cuda") else a) for a in argv[i:]], stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        sys.exit(done.returncode)
    if "--job-on-stdin" in argv:
        print("==WARNING== No kernels were profiled.")
        sys.exit(0)
if mode == "run":
    import subprocess

    i = argv.index("kernelpro.evaluate.forward") - 2  # python -m kernelpro.evaluate.forward ...
    cmd = [("cpu" if a.startswith("cuda") else a) for a in argv[i:]]
    job = None
    if "--job-on-stdin" in cmd:
        line = sys.stdin.readline()
        if line.strip():
            job = json.loads(line)
            job["argv"] = [("cpu" if a.startswith("cuda") else a) for a in job["argv"]]
    done = subprocess.run(cmd, input=(json.dumps(job) + "\n") if job else "", text=True)
    if done.returncode != 0 or ("--job-on-stdin" in cmd and job is None):
        sys.exit(done.returncode)
if mode == "sleep":
    time.sleep(30)
if mode == "fail":
    print("forward failed: RuntimeError: CUDA error: an illegal memory access was encountered", file=sys.stderr)
    sys.exit(1)
if "--metrics" in argv:
    asked = argv[argv.index("--metrics") + 1].split(",")
    bad = [m for m in os.environ.get("FAKE_NCU_BAD", "").split(",") if m and m in asked]
    if bad:
        for m in bad:
            print(f"==ERROR== Failed to find metric {m}")
        sys.exit(1)
if mode == "nokernels":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
out = argv[argv.index("--export") + 1]
with open(out if out.endswith(".ncu-rep") else out + ".ncu-rep", "w") as fh:
    fh.write("fake report")
print("==PROF== Disconnected from process 1")
