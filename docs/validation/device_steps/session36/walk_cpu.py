"""CPU machine, session 36: procwatch.descendants (the walk) against the scan of every process, for a
harness-like process (torch, 16 intra-op threads) under a reaper-like parent, with N extra sleeping
processes on the host: .venv/bin/python walk_cpu.py N (N = 0 and 300 in throughput.md)."""
import subprocess, sys, time, os
from kernelpro.evaluate import procwatch
# a reaper-like parent and a harness-like child: torch imported, its intra-op threads started
h = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', \"import torch, time; torch.set_num_threads(16); torch.ones(4096,4096).sum(); print('up', flush=True); time.sleep(60)\"]); p.wait()"], stdout=subprocess.PIPE, text=True)
h.stdout.readline()
n = int(sys.argv[1])
others = subprocess.Popen(["bash", "-c", f"for i in $(seq {n}); do sleep 60 & done; wait"]) if n else None
time.sleep(1)
n_proc = sum(1 for x in os.listdir("/proc") if x.isdigit())
for name, f in (("scan", procwatch._descendants_by_scan), ("walk", procwatch.descendants)):
    t0 = time.perf_counter()
    for _ in range(200):
        r = f(h.pid)
    threads = len(os.listdir(f"/proc/{r[0]}/task"))
    print(name, "processes in /proc", n_proc, "harness threads", threads, "found", len(r), "ms per call %.3f" % ((time.perf_counter() - t0) / 200 * 1e3))
subprocess.run(["pkill", "-f", "sleep 60"])
h.kill()
