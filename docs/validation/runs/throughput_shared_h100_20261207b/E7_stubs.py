"""Does the shared cuda_utils module take its build out of a Triton candidate's first call? (session 33)"""
import json, os, subprocess, sys, time
from pathlib import Path
from kernelpro.evaluate import triton_stubs
D = Path(__file__).parent
CHILD = r'''
import sys, time, json, torch
from kernelpro.evaluate.loader import load_module
p = load_module(sys.argv[1], "kernelpro_problem"); c = load_module(sys.argv[2], "kernelpro_candidate")
torch.manual_seed(0)
m = c.ModelNew(*p.get_init_inputs()).cuda()
xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in p.get_inputs()]
torch.cuda.synchronize()
t = time.monotonic(); m(*xs); torch.cuda.synchronize(); first = time.monotonic() - t
print(json.dumps({"first_s": round(first, 3)}))
'''
t = time.monotonic()
store = triton_stubs.ensure(Path("/tmp/stubs/cache"))
print("store", store, "built in %.2f s" % (time.monotonic() - t), "failed:", triton_stubs.failed(Path("/tmp/stubs/cache")),
      [d.name[:12] for d in triton_stubs.built(store)] if store else None)
for rep in range(3):
    for tag, prob, cand in (("L1_2", "p2.py", "c2.py"), ("L1_94", "p94.py", "c94.py")):
        for mode in ("cold", "seeded"):
            cache = Path(f"/tmp/stubs/{tag}_{mode}_{rep}/triton")
            cache.mkdir(parents=True)
            if mode == "seeded":
                triton_stubs.seed(store, cache)
            before = {d.name for d in cache.iterdir()}
            out = subprocess.run([sys.executable, "-c", CHILD, str(D / prob), str(D / cand)],
                                 env=dict(os.environ, TRITON_CACHE_DIR=str(cache)), capture_output=True, text=True)
            new = sorted(f.name for d in cache.iterdir() if d.name not in before for f in d.iterdir() if f.suffix == ".so")
            print(rep, tag, mode, out.stdout.strip(), "built at the first call:", new, out.stderr.strip()[-200:])
