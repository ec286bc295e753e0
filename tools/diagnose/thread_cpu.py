#!/usr/bin/env python3
"""Which thread of a candidate's process works after its calls? Run on the GPU:

    python3 tools/diagnose/thread_cpu.py PROBLEM.py CANDIDATE.py

Builds the candidate's ``ModelNew`` on the problem's inputs in this plain process (no
evaluator around it), makes four calls, and after each one reads every thread's CPU time
(``/proc/self/task/*/stat``) over a 0.5-s pause: the busiest four threads, their names, which
of them are Python threads (with their stacks), and the busiest ones' kernel state. Used in
session 26 on the candidate the idle-CPU check had rejected (docs/validation/evaluator_boundary.md).
"""
import importlib.util
import os
import sys
import threading
import time
import traceback

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cpu_by_thread():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as fh:
                comm = fh.read().strip()
            out[int(tid)] = (comm, (int(rest[11]) + int(rest[12])) * 1000.0 / os.sysconf("SC_CLK_TCK"))
        except OSError:
            pass
    return out


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        prob, cand = load(sys.argv[1], "problem"), load(sys.argv[2], "candidate")
    except Exception as exc:  # a missing file, or one that does not import
        print(f"error: cannot load {sys.argv[1]} and {sys.argv[2]}: {type(exc).__name__}: {exc}".splitlines()[0],
              file=sys.stderr)
        return 2
    print("torch threads", torch.get_num_threads(), "interop", torch.get_num_interop_threads(),
          "OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS"), "OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY"))
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = cand.ModelNew(*prob.get_init_inputs()).to(device).eval()
    x = [t.to(device) if isinstance(t, torch.Tensor) else t for t in prob.get_inputs()]
    busy = []
    with torch.no_grad():
        for rnd in range(4):
            model(*x)
            if device == "cuda":
                torch.cuda.synchronize()
            a = cpu_by_thread()
            time.sleep(0.5)
            b = cpu_by_thread()
            busy = sorted(((b[t][1] - a.get(t, (None, 0.0))[1], t, b[t][0]) for t in b), reverse=True)[:4]
            print(f"call {rnd}: {len(b)} threads; busiest over the 0.5-s pause:",
                  [(round(ms, 1), tid, comm) for ms, tid, comm in busy])
    print("python threads:", {t.native_id: t.name for t in threading.enumerate()})
    frames = sys._current_frames()
    for t in threading.enumerate():
        if t is not threading.current_thread() and t.ident in frames:
            print("--- stack of", t.name, t.native_id)
            print("".join(traceback.format_stack(frames[t.ident])[-6:]))
    for _ms, tid, _comm in busy[:2]:
        for f in ("wchan", "status"):
            try:
                with open(f"/proc/self/task/{tid}/{f}") as fh:
                    print(tid, f, fh.read()[:300].replace("\n", " | "))
            except OSError as exc:
                print(tid, f, exc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
