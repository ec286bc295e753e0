"""Session 34, after e2b30ec and 78c4f38: a Triton candidate's first call in a fresh process
(Triton cache warm), with and without Triton's cache key computed ahead, for the reduction
as the bench generated it (torch.broadcast_shapes), the same candidate rendered by the
current template (its own broadcast), and a pool kernel."""
import os, shutil, subprocess, sys
from pathlib import Path
D = Path(__file__).parent
CHILD = r'''
import sys, time, json
import torch
from kernelpro.evaluate.loader import load_module
from kernelpro.evaluate.triton_stubs import warm_cache_key
key_s = warm_cache_key() if sys.argv[3] == "key" else None
p = load_module(sys.argv[1], "kernelpro_problem"); c = load_module(sys.argv[2], "kernelpro_candidate")
torch.manual_seed(0)
with torch.device("cuda"):
    xs = list(p.get_inputs())
m = c.ModelNew(*p.get_init_inputs()).cuda()
torch.cuda.synchronize()
t = time.monotonic(); out = m(*xs); torch.cuda.synchronize(); first = time.monotonic() - t
ref = p.Model(*p.get_init_inputs()).cuda()(*xs)
print(json.dumps({"key_s": None if key_s is None else round(key_s, 3), "first_s": round(first, 3),
                  "agrees": bool(torch.allclose(out.float(), ref.float(), rtol=1e-4, atol=1e-5))}))
'''
for prob, cand in (("p94.py", "c94.py"), ("p94.py", "c94new.py"), ("p42.py", "c42.py")):
    cache = Path(f"/tmp/f3/{cand}/triton"); shutil.rmtree(cache.parent, ignore_errors=True); cache.mkdir(parents=True)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    for mode in ("fill", "plain", "key", "plain", "key"):
        out = subprocess.run([sys.executable, "-c", CHILD, str(D / prob), str(D / cand), mode], env=env,
                             capture_output=True, text=True)
        line = [l for l in out.stdout.splitlines() if l.startswith("{")]
        print(cand, mode, line[-1] if line else out.stderr.strip()[-400:], flush=True)
