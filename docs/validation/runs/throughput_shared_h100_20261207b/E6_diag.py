"""Does the harness's first call hit the Triton cache the compile stage warmed? (session 33)"""
import json, os, subprocess, sys, time
from pathlib import Path
D = Path(__file__).parent
CHILD = r'''
import os, sys, time, json, torch
sys.path.insert(0, "")
from kernelpro.evaluate.loader import load_module
p = load_module(sys.argv[1], "kernelpro_problem"); c = load_module(sys.argv[2], "kernelpro_candidate")
torch.manual_seed(0)
m = c.ModelNew(*p.get_init_inputs()).cuda()
xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in p.get_inputs()]
torch.cuda.synchronize()
t = time.monotonic(); m(*xs); torch.cuda.synchronize(); first = time.monotonic() - t
t = time.monotonic(); m(*xs); torch.cuda.synchronize(); second = time.monotonic() - t
print(json.dumps({"first_s": first, "second_s": second}))
'''
def dirs(cache):
    return {d.name: sorted(f.name for f in d.iterdir()) for d in Path(cache).iterdir()} if Path(cache).exists() else {}
for tag, prob, cand in (("L1_94", "p94.py", "c94.py"), ("L1_2", "p2.py", "c2.py")):
    for mode in ("cold", "warmed"):
        root = Path(f"/tmp/diag/{tag}_{mode}"); root.mkdir(parents=True, exist_ok=True)
        cache = root / "triton"
        env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
        if mode == "warmed":
            from kernelpro.evaluate import triton_warm
            wenv = dict(env, CUDA_VISIBLE_DEVICES="", KERNELPRO_CONFINE="0")
            res = triton_warm.warm(root, D / cand, D / prob, "9.0", wenv, 120, "x")
            print(tag, "warm:", res["kernels"], round(res["seconds"], 2), res["stopped"])
        before = dirs(cache)
        out = subprocess.run([sys.executable, "-c", CHILD, str(D / prob), str(D / cand)], env=env,
                             capture_output=True, text=True)
        after = dirs(cache)
        new = {k: v for k, v in after.items() if k not in before}
        print(tag, mode, out.stdout.strip()[-200:], out.stderr.strip()[-300:])
        print(tag, mode, "cache dirs before", len(before), "new at the first call:", json.dumps(new)[:600])
