"""After a bench: which Triton kernels each candidate's cache entry holds (cubin sizes) and
when each was written, next to when the candidate's evaluation and profiles wrote their
files (a kernel written during a profile is a cache miss in the profile's forward)."""
import json, sys
from pathlib import Path
out_dir = Path(sys.argv[1])

def times(d):
    ms = [p.stat().st_mtime for p in d.rglob("*") if p.is_file()] if d.is_dir() else []
    return [round(min(ms), 2), round(max(ms), 2)] if ms else None

rows = []
for run in sorted((out_dir / "runs").iterdir()):
    for b in sorted((run / "builds").glob("c*")):
        entry = b.resolve()
        tri = entry / "triton"
        kernels = []
        if tri.is_dir():
            for h in sorted(tri.iterdir()):
                if not h.is_dir():
                    continue
                files = {p.name: p.stat().st_size for p in h.iterdir() if p.suffix in (".json", ".so", ".cubin")}
                mt = min((p.stat().st_mtime for p in h.iterdir()), default=0)
                kernels.append({"hash": h.name[:10], "files": files, "mtime": round(mt, 2)})
        rows.append({"run": run.name, "cid": b.name, "entry": entry.name, "linked": b.is_symlink(),
                     "eval": times(run / "evals" / b.name), "profile": times(run / "profiles" / b.name),
                     "kernels": kernels})
json.dump(rows, sys.stdout, indent=0)
