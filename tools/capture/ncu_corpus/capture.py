#!/usr/bin/env python3
"""Capture the micro-profiler corpus on a GPU: every workload of ``workloads.py`` under Nsight
Compute's full set plus every metric a KernelPro micro-profiler or classifier asks for.

Run from the repository root on the GPU machine, with the distributions installed:

    python3 tools/capture/ncu_corpus/capture.py

``KP_CORPUS_GROUPS`` (comma-separated) names the groups to capture, default
``eager,template,compiled`` (the first corpus). The validation corpus v2
(``benchmarks/ncu_corpus/validation_v2.md``) is the groups ``eager_v2`` and
``compiled_v2``, captured once, into an archive of its own name so that a capture of both
corpora in one call keeps both:

    KP_CORPUS_GROUPS=eager_v2,compiled_v2 KP_CORPUS_TAR=ncu_corpus_v2.tar.gz \
        python3 tools/capture/ncu_corpus/capture.py

Corpus v3 (``validation_v3.md``) is the group ``eager_v3``, likewise
(``KP_CORPUS_GROUPS=eager_v3 KP_CORPUS_TAR=ncu_corpus_v3.tar.gz``). ``KP_CORPUS_WORKLOADS``
(comma-separated family names) captures only those, for the workloads a capture did not
reach (``validation_v3.md``: the rest of v3 goes to ``ncu_corpus_v3b.tar.gz``).
``KP_CORPUS_LIMIT_S=START,STOP`` replaces the group's limits (seconds after which no workload
starts, and after which the profiler is stopped), for such a continuation whose workloads are
not the group's first ones. Corpus v4 (``validation_v4.md``) is the group ``eager_v4``, corpus v5 (``validation_v5.md``)
``eager_v5``, corpus v6 (``validation_v6.md``) ``eager_v6``, corpus v7 (``validation_v7.md``) ``eager_v7``.

Writes ``$OUT/$KP_CORPUS_TAR`` (default ``ncu_corpus.tar.gz``; its top directory is the
archive's name without ``.tar.gz``) holding, per group:

* ``<group>.raw.csv``: ``--page raw --csv --print-units base``, one row per kernel, every
  collected metric (what ``kernelpro analyze`` reads);
* ``<group>.ranges.csv``: the same export with kernels renamed by their NVTX range
  (``<workload>@<size>``), to tell which workload launched which kernel;
* ``<group>.rules.csv``: Nsight Compute's rule results (name, type, message, estimated
  speedup) from the details page, one row per rule and kernel;
* ``<group>.log``: the workload run's output (which workloads ran, and why one did not);
* ``sources/``: the template candidates and torch.compile's generated Triton code
  (``compiled`` and ``compiled_v2``).

Also ``env.json`` (GPU, driver, versions). The ``.ncu-rep`` files stay on the machine
(too large to keep). Clocks, power limits and modes are never changed: ncu always runs with
``--clock-control none``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="kp_corpus_out_"))
STAGE = Path(tempfile.mkdtemp(prefix="kp_corpus_")) / "ncu_corpus"
# each group's workloads stop starting at the first number; the profiler is stopped at the second
GROUP_LIMIT_S = {"eager": (140.0, 180.0), "template": (55.0, 85.0), "compiled": (80.0, 120.0),
                 "eager_v2": (125.0, 165.0), "compiled_v2": (65.0, 95.0), "eager_v3": (100.0, 140.0),
                 "eager_v4": (150.0, 200.0), "eager_v5": (150.0, 200.0), "eager_v6": (150.0, 200.0),
                 "eager_v7": (150.0, 200.0)}


def limits(group: str) -> tuple[float, float]:
    """The group's (start, stop) limits in seconds, or ``KP_CORPUS_LIMIT_S``'s."""
    given = os.environ.get("KP_CORPUS_LIMIT_S")
    if not given:
        return GROUP_LIMIT_S[group]
    try:
        start, stop = (float(x) for x in given.split(","))
    except ValueError:
        raise SystemExit(f"error: KP_CORPUS_LIMIT_S must be START,STOP in seconds, not {given!r}") from None
    if not 0 < start < stop:
        raise SystemExit(f"error: KP_CORPUS_LIMIT_S: need 0 < START < STOP, got {given!r}")
    return start, stop


#: the groups whose torch.compile-generated Triton sources are kept
COMPILED_GROUPS = ("compiled", "compiled_v2")
#: the archive written to $OUT
TAR_NAME = os.environ.get("KP_CORPUS_TAR") or "ncu_corpus.tar.gz"
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def ncu_path() -> str:
    found = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    if not Path(found).exists():
        raise SystemExit("error: ncu not found")
    return found


def kernelpro_metrics() -> list[str]:
    """Every metric a registered kernel-level micro-profiler declares, plus the collector's
    own stage-1 and stage-2 base metrics."""
    from kernelpro.plugins import installed
    from kernelpro_plugins_ncu import metrics as M

    wanted = set(M.STAGE1_METRICS) | set(M.STAGE2_BASE_METRICS)
    for mp in installed().micro_profilers():
        if getattr(mp, "level", "kernel") == "kernel":  # as the pipeline asks the kernel-level collector
            wanted |= set(getattr(mp, "metrics", ()) or ())
    return sorted(wanted)


def accepted(ncu: str, metrics: list[str]) -> list[str]:
    """The metrics this GPU's ncu knows (``--query-metrics``); base names are matched so
    that ``.sum``/``.avg.pct_of_peak_sustained_active`` forms pass."""
    out = subprocess.run([ncu, "--query-metrics", "--csv"], capture_output=True, text=True, timeout=120).stdout
    known = {row[0] for row in csv.reader(io.StringIO(out)) if row}
    if len(known) < 100:  # the query did not work: ask for everything, ncu names what it rejects
        log(f"--query-metrics gave {len(known)} names; asking for all {len(metrics)} metrics")
        return metrics
    keep = [m for m in metrics if m.split(".")[0] in known or m in known]
    dropped = sorted(set(metrics) - set(keep))
    if dropped:
        log(f"metrics this ncu does not know ({len(dropped)}): {', '.join(dropped[:12])}")
    return keep


def export(ncu: str, rep: Path, *extra: str) -> str:
    cmd = [ncu, "--import", str(rep), "--csv", "--print-units", "base", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        log(f"export {' '.join(extra)} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def rules_only(details_csv: str) -> str:
    """The details page keeps one row per section metric; only the rule rows are kept."""
    rows = list(csv.reader(io.StringIO(details_csv)))
    if not rows:
        return ""
    head = rows[0]
    try:
        ri = head.index("Rule Name")
    except ValueError:
        return ""
    keep_cols = [head.index(c) for c in ("ID", "Kernel Name", "Section Name", "Rule Name", "Rule Type",
                                         "Rule Description", "Estimated Speedup Type", "Estimated Speedup")
                 if c in head]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([head[i] for i in keep_cols])
    seen = set()
    for r in rows[1:]:
        if len(r) > ri and r[ri].strip():
            key = tuple(r[i] for i in keep_cols)
            if key not in seen:
                seen.add(key)
                w.writerow(key)
    return buf.getvalue()


def nvtx_ranges(rep: Path, ncu: str) -> list[list[str]]:
    """Per kernel of the report, in order, the NVTX push/pop ranges around its launch (read
    with Nsight Compute's own Python module; empty when that is not available)."""
    try:
        from kernelpro_plugins_ncu.report import import_ncu_report

        mod = import_ncu_report(ncu)
        ctx = mod.load_report(str(rep))
        out: list[list[str]] = []
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            for a in range(rng.num_actions()):
                state = rng.action_by_idx(a).nvtx_state()
                names: list[str] = []
                for d in state.domains():
                    names += list(state.domain_by_id(d).push_pop_ranges())
                out.append(names)
        return out
    except Exception as exc:
        log(f"nvtx ranges through ncu_report: {type(exc).__name__}: {str(exc)[:200]}")
        return []


def capture(group: str, ncu: str, metrics: list[str], work: Path) -> None:
    rep = work / f"{group}.ncu-rep"
    sources = STAGE / "sources" / group
    sources.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(work / f"inductor_{group}"),
           "TORCHINDUCTOR_COMPILE_THREADS": "1", "PYTHONUNBUFFERED": "1",
           "KP_CORPUS_DEADLINE": str(time.time() + limits(group)[0])}
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
           "--cache-control", "all", "--set", "full", "--metrics", ",".join(metrics), "--nvtx",
           "--import-source", "no", "-f", "-o", str(rep.with_suffix("")),
           sys.executable, str(HERE / "workloads.py"), "run", group, "--sources", str(sources)]
    log(f"{group}: profiling")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limits(group)[1], env=env)
        output, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output += f"\n<stopped at the group's limit of {limits(group)[1]:.0f} s>"
        rc = -1
    (STAGE / f"{group}.log").write_text(output[-200_000:])
    log(f"{group}: ncu exit {rc}; {sum(1 for l in output.splitlines() if l.startswith('{'))} workload lines")
    if not rep.exists():
        log(f"{group}: no report written")
        return
    (STAGE / f"{group}.raw.csv").write_text(export(ncu, rep, "--page", "raw"))
    (STAGE / f"{group}.ranges.csv").write_text(
        export(ncu, rep, "--page", "raw", "--print-nvtx-rename", "kernel", "--metrics", "gpu__time_duration.sum"))
    details = export(ncu, rep, "--page", "details", "--print-details", "all") or export(ncu, rep, "--page", "details")
    (STAGE / f"{group}.rules.csv").write_text(rules_only(details))
    (STAGE / f"{group}.nvtx.json").write_text(json.dumps(nvtx_ranges(rep, ncu)))
    if group in COMPILED_GROUPS:
        cache = work / f"inductor_{group}"
        for py in sorted(cache.rglob("*.py")) if cache.exists() else []:
            text = py.read_text(errors="replace")
            if "@triton.jit" in text and len(text) < 200_000:
                (sources / py.name).write_text(text)
    log(f"{group}: exported ({', '.join(f'{p.name} {p.stat().st_size // 1024} KiB' for p in sorted(STAGE.glob(group + '.*')))})")


def main() -> int:
    STAGE.mkdir(parents=True)
    ncu = ncu_path()
    env = {"ncu": subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:],
           "gpu": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit",
                                  "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()}
    import torch
    import triton

    env.update(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda,
               date=time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    metrics = accepted(ncu, kernelpro_metrics())
    env["kernelpro_metrics"] = len(metrics)
    (STAGE / "env.json").write_text(json.dumps(env, indent=1))
    work = Path(tempfile.mkdtemp(prefix="kp_corpus_work_"))
    groups = os.environ.get("KP_CORPUS_GROUPS", "eager,template,compiled").split(",")
    for group in groups:
        try:
            capture(group, ncu, metrics, work)
        except Exception as exc:  # the next group still runs
            log(f"{group}: {type(exc).__name__}: {exc}")
    tar_path = OUT / TAR_NAME
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(STAGE, arcname=TAR_NAME.removesuffix(".gz").removesuffix(".tgz").removesuffix(".tar"))
    log(f"wrote {tar_path} ({tar_path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
