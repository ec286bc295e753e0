"""What a Triton reduction's first call spends with its Triton cache warm (session 34):
torch's own small ops timed first in a fresh process, then the call under cProfile."""
import os, shutil, subprocess, sys
from pathlib import Path
D = Path(__file__).parent
CHILD = r'''
import sys, time, json, cProfile, pstats, io
import torch
from kernelpro.evaluate.loader import load_module
p = load_module(sys.argv[1], "kernelpro_problem"); c = load_module(sys.argv[2], "kernelpro_candidate")
torch.manual_seed(0)
with torch.device("cuda"):
    xs = list(p.get_inputs())
m = c.ModelNew(*p.get_init_inputs()).cuda()
torch.cuda.synchronize()
if sys.argv[3] == "ops":
    part = torch.rand(528, device="cuda"); torch.cuda.synchronize()
    for what, f in (("sum", lambda: part.sum()), ("div", lambda: part.sum() / 7), ("sum_again", lambda: part.sum())):
        t = time.monotonic(); f(); torch.cuda.synchronize(); print(what, round(time.monotonic() - t, 4))
pr = cProfile.Profile()
t = time.monotonic(); pr.enable(); m(*xs); torch.cuda.synchronize(); pr.disable(); print("first_s", round(time.monotonic() - t, 3))
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(22); print(s.getvalue()[-5000:])
'''
for prob, cand in (("p94.py", "c94.py"), ("p42.py", "c42.py")):
    cache = Path(f"/tmp/fp/{cand}/triton"); shutil.rmtree(cache.parent, ignore_errors=True); cache.mkdir(parents=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    for mode in ("warmcache", "plain", "ops"):
        out = subprocess.run([sys.executable, "-c", CHILD, str(D / prob), str(D / cand), mode], env=env, capture_output=True, text=True)
        print("=====", cand, mode, out.returncode, flush=True)
        if mode != "warmcache":
            print(out.stdout[-5000:], out.stderr[-500:], flush=True)
