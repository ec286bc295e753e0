"""On the GPU host: (1) a timed call's input fill, copy then scale (two passes) against one
torch.mul into the buffer, bits compared; (2) finding a harness's processes by the children
walk against the scan of every process."""
import os, subprocess, sys, time
import torch
from kernelpro.evaluate import inputs, procwatch

dev = "cuda"
for dtype, n in ((torch.float32, 1 << 30), (torch.bfloat16, 1 << 30), (torch.float16, 1 << 28)):
    src = torch.rand(n, device=dev, dtype=torch.float32).to(dtype)
    a = torch.empty_like(src)
    b = torch.empty_like(src)
    u = 1.0 + 77 / 4096
    f = 1.0 + u * max(1e-3, 4 * torch.finfo(dtype).eps)
    times = {"two": [], "one": []}
    for _ in range(10):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        a.copy_(src); a.mul_(f)
        torch.cuda.synchronize(); times["two"].append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        inputs.fill([b], [src], u)
        torch.cuda.synchronize(); times["one"].append((time.perf_counter() - t0) * 1e3)
    same = torch.equal(a.view(torch.int16) if dtype != torch.float32 else a.view(torch.int32),
                       b.view(torch.int16) if dtype != torch.float32 else b.view(torch.int32))
    gb = src.numel() * src.element_size() / 1e9
    print(f"fill {dtype} {gb:.2f} GB: copy+mul median {sorted(times['two'])[5]:.2f} ms, one mul {sorted(times['one'])[5]:.2f} ms, bits equal {same}")
    del src, a, b
    torch.cuda.empty_cache()

h = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', \"import torch, time; torch.ones(1, device='cuda'); torch.ones(4096,4096).sum(); print('up', flush=True); time.sleep(60)\"]); p.wait()"], stdout=subprocess.PIPE, text=True)
h.stdout.readline()
n_proc = sum(1 for x in os.listdir("/proc") if x.isdigit())
print("children files:", procwatch._HAS_CHILDREN, "processes in /proc:", n_proc)
for name, fn in (("scan", procwatch._descendants_by_scan), ("walk", procwatch.descendants)):
    t0 = time.perf_counter()
    for _ in range(200):
        r = fn(h.pid)
    print(f"{name}: {len(r)} found, threads of the harness {len(os.listdir(f'/proc/{r[0]}/task'))}, {(time.perf_counter() - t0) / 200 * 1e3:.3f} ms a call")
h.kill()
subprocess.run(["pkill", "-f", "time.sleep\\(60\\)"])
