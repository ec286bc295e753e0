"""Where a Triton candidate's first call goes, in a fresh process (session 34): its cache
empty, then the same cache again (kernels, launcher and cuda_utils all cached), then that
warm cache under ncu with profiling never started (what a profile's warm-up pays)."""
import json, os, shutil, subprocess, sys, time
from pathlib import Path
CHILD = r'''
import sys, time, json
t0 = time.monotonic()
import torch
from kernelpro.evaluate.loader import load_module
p = load_module(sys.argv[1], "kernelpro_problem"); c = load_module(sys.argv[2], "kernelpro_candidate")
t1 = time.monotonic()
torch.manual_seed(0)
with torch.device("cuda"):
    xs = list(p.get_inputs())
m = c.ModelNew(*p.get_init_inputs()).cuda()
torch.cuda.synchronize(); t2 = time.monotonic()
m(*xs); torch.cuda.synchronize(); t3 = time.monotonic()
m(*xs); torch.cuda.synchronize(); t4 = time.monotonic()
print(json.dumps({"import_s": round(t1 - t0, 3), "build_s": round(t2 - t1, 3), "first_s": round(t3 - t2, 3), "second_s": round(t4 - t3, 3)}))
'''
run = Path(sys.argv[1])
for cid in sys.argv[2:]:
    cache = Path(f"/tmp/fc/{run.name}_{cid}/triton")
    shutil.rmtree(cache.parent, ignore_errors=True)
    cache.mkdir(parents=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    for mode in ("empty", "warm", "warm_ncu"):
        argv = [sys.executable, "-c", CHILD, str(run / "problem.py"), str(run / "candidates" / f"{cid}.py")]
        if mode == "warm_ncu":
            argv = ["ncu", "--profile-from-start", "off", "--clock-control", "none", "-o", f"/tmp/fc/{cid}_ncu", "-f"] + argv
        t = time.monotonic()
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
        line = [l for l in out.stdout.splitlines() if l.startswith("{")]
        sizes = sorted((f.stat().st_size for f in cache.rglob("*.cubin")), reverse=True)
        print(run.name, cid, mode, line[-1] if line else out.stderr.strip()[-300:], "process_s=%.2f" % (time.monotonic() - t),
              "cubins:", sizes[:4], flush=True)
