"""End-to-end check of the anthropic generator inside ``kernelpro optimize``.

A scripted Messages API server on 127.0.0.1 stands in for the model: it answers the first
generation with a slow CUDA kernel and the refinement with a faster one (both written for
this test, in tests/llm/e2e/), after one compile_check tool call. The real
``kernelpro optimize --generator anthropic`` runs as a subprocess with
``ANTHROPIC_BASE_URL`` pointing at that server and no API key, so the loop compiles,
verifies, times and profiles both kernels on the GPU. The script then checks that the
second request's prompt carries the evaluation and the profiler findings of the first
kernel, and packs the run directory and the recorded requests into
``$OUT/anthropic.tar.gz``.

No model is involved: the kernels are the test's own, and token counts are the mock's
estimates (a quarter of the request's JSON characters).

    python tests/llm/gpu_e2e.py                  # on the GPU machine (--device cuda)
    python tests/llm/gpu_e2e.py --device cpu     # plumbing test: PyTorch-only candidates

Exit status 0 when every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
E2E = HERE / "e2e"
sys.path.insert(0, str(HERE))

from llm_helpers import user_text  # noqa: E402
from mock_messages_server import MockMessagesServer, text_reply, tool_use_reply  # noqa: E402

#: largest file packed into the tarball (build outputs and big reports are left out)
MAX_PACKED_FILE_BYTES = 2 * 1024 * 1024
#: the ``Change:`` lines of the scripted replies, per device: (slow, fast)
CHANGES = {
    "cuda": ("first version: one thread per row, fused relu and scale",
             "coalesced float4 grid-stride loop: consecutive threads read consecutive 16-byte vectors"),
    "cpu": ("first version: relu through torch.where, then a copy and the multiply",
            "clamp_min, then the multiply in place on the fresh output"),
}


def answer(source: str, change: str) -> str:
    return f"Change: {change}\n\n```python\n{source}```\n"


def kernels_only(source: str) -> str:
    """The __global__ functions of a candidate's CUDA source, for compile_check."""
    cuda = re.search(r'cuda_src = r"""(.*?)"""', source, re.S).group(1)
    cuda = cuda.split("torch::Tensor scaled_relu(")[0]
    return "\n".join(line for line in cuda.splitlines() if "#include <c10" not in line).strip() + "\n"


class Script:
    """Replies by what the request asks: the slow kernel to a first-generation prompt;
    to a refinement, a compile_check call on the fast kernel (GPU only), then the fast
    kernel; the fast kernel to anything else (a repair)."""

    def __init__(self, slow: str, fast: str, changes: tuple[str, str], use_tool: bool) -> None:
        self.slow, self.fast, self.use_tool = slow, fast, use_tool
        self.slow_change, self.fast_change = changes

    def __call__(self, body: dict) -> dict:
        last = body["messages"][-1]["content"]
        after_tool = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        text = user_text(body)
        if "Version to improve:" in text:
            if self.use_tool and not after_tool:
                return tool_use_reply("compile_check", {"source": kernels_only(self.fast), "arch": "sm_90"},
                                      text="Checking the vectorized kernel's registers first.")
            return text_reply(answer(self.fast, self.fast_change))
        if "first optimized version" in text:
            return text_reply(answer(self.slow, self.slow_change))
        return text_reply(answer(self.fast, self.fast_change))


#: runs the CLI with the generator and tool modules registered by hand, for checkouts
#: whose kernelpro-core does not declare their entry points yet
SHIM = """
import sys
from kernelpro import cli, llm_tools, plugins
from kernelpro.generate import anthropic_gen

class WithLLM(plugins.Plugins):
    def __init__(self, block=(), extra=(), entry_points=True):
        extra = [*extra, ("core_anthropic", anthropic_gen), ("core_llm_tools", llm_tools)]
        super().__init__(block, extra, entry_points)

cli.Plugins = WithLLM
cli.main(sys.argv[1:])
"""


def cli_command() -> tuple[list[str], str]:
    """How to run ``kernelpro``: the real CLI when the anthropic generator is registered
    through its entry point, else the CLI with the modules registered by :data:`SHIM`."""
    probe = subprocess.run(
        [sys.executable, "-c", "from kernelpro.plugins import Plugins; "
         "print('anthropic' in Plugins().names('generator'))"],
        capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() == "True":
        return [sys.executable, "-m", "kernelpro.cli"], "entry-point"
    return [sys.executable, "-c", SHIM], "shim (core declares no entry point for the anthropic generator yet)"


def write_config(path: Path, device: str, memory_path: Path) -> None:
    enforce = "true" if device == "cuda" else "false"
    collectors = "[ncu, sass]" if device == "cuda" else "null"
    path.write_text(f"""device: {device}
budget: 2
generator:
  name: anthropic
  params:
    model: claude-sonnet-4-6
    max_tool_rounds: 2
    stream: true
    enforce_language: {enforce}
    retry_base_delay_s: 0.1
search:
  name: greedy
  params: {{}}
evaluator:
  trials: 3
  rounds: 3
  rep_ms: 100
  time_compiled_reference: false
profiling:
  # ncu gives the findings the refinement prompt must carry; sass is a quick disassembly.
  # The system-level collector and energy add about a minute per candidate on the H200.
  collectors: {collectors}
memory:
  enabled: true
  path: {memory_path}
""")


def check(checks: list, name: str, ok: bool, detail: str = "") -> None:
    checks.append({"check": name, "ok": bool(ok), "detail": detail})


def verify(run: Path, requests: list[dict], device: str, rc: int) -> list[dict]:
    checks: list[dict] = []
    check(checks, "kernelpro optimize exited 0", rc == 0, f"exit status {rc}")
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()] \
        if (run / "candidates.jsonl").exists() else []
    by_id = {r["id"]: r for r in records}
    check(checks, "two candidates evaluated", len(records) == 2, ", ".join(by_id))
    first, second = by_id.get("c0001"), by_id.get("c0002")
    check(checks, "both correct", bool(first and second and first["correct"] and second["correct"]),
          "; ".join(f"{r['id']}: {r['verdict']} {r['reason'][:200]}" for r in records))
    if first and second and first["runtime_ms"] and second["runtime_ms"]:
        check(checks, "second kernel faster than the first", second["runtime_ms"] < first["runtime_ms"],
              f"{first['runtime_ms']:.4f} ms -> {second['runtime_ms']:.4f} ms")
    check(checks, "second candidate refines the first", bool(second and second["parent"] == "c0001"),
          str(second and second["parent"]))
    check(checks, "records carry LLM usage",
          bool(records) and all(r.get("usage", {}).get("calls", 0) >= 1 for r in records),
          json.dumps([r.get("usage") for r in records]))

    refine = [b for b in requests if "Version to improve: c0001" in user_text(b)]
    check(checks, "a refinement request for c0001 was sent", bool(refine), f"{len(requests)} requests")
    prompt = user_text(refine[0]) if refine else ""
    if first and first["runtime_ms"]:
        check(checks, "refinement prompt has c0001's runtime", f"Runtime: {first['runtime_ms']:.4g} ms" in prompt)
    analysis_path = run / "analyses" / "c0001.json"
    analysis = json.loads(analysis_path.read_text()) if analysis_path.exists() else None
    if device == "cuda":
        findings = analysis["findings"] if analysis else []
        bottleneck = analysis.get("bottleneck") if analysis else None
        check(checks, "c0001 was profiled: bottleneck and findings", bool(bottleneck and findings),
              f"bottleneck {bottleneck and bottleneck['kind']}, {len(findings)} findings")
        if bottleneck:
            check(checks, "refinement prompt has c0001's bottleneck", bottleneck["summary"] in prompt,
                  bottleneck["summary"])
        missing = [f["title"] for f in findings if f["title"] not in prompt or f["message"] not in prompt
                   or f["action"] not in prompt]
        check(checks, "refinement prompt has every finding of c0001 (title, message, action)",
              bool(findings) and not missing, f"{len(findings)} findings; missing: {missing}")
        tool_results = [b for body in requests for m in body["messages"] if m["role"] == "user"
                        and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
        check(checks, "compile_check tool ran and returned ptxas info",
              any(not t["is_error"] and "ptxas info" in str(t["content"]) for t in tool_results),
              "; ".join(str(t["content"])[:300] for t in tool_results))
    report = (run / "report.md").read_text() if (run / "report.md").exists() else ""
    check(checks, "report.md has the LLM usage section", "## LLM usage (anthropic)" in report)
    return checks


def pack(out: Path, work: Path) -> Path:
    tar_path = out / "anthropic.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            rel = path.relative_to(work)
            if not path.is_file() or "builds" in rel.parts or path.stat().st_size > MAX_PACKED_FILE_BYTES:
                continue
            tar.add(path, arcname=str(Path("anthropic") / rel))
    return tar_path


class Stopped(Exception):
    """SIGTERM arrived (a step limit): stop kernelpro, then check and pack what exists."""


def _stop(signum: int, frame: object) -> None:
    raise Stopped(f"signal {signum}")


def run_optimize(cmd: list[str], env: dict[str, str], work: Path, timeout_s: float) -> int:
    """Run ``kernelpro optimize`` with its output going straight to files in ``work`` (so
    that a stopped run still leaves its log); returns its exit status, 124 when it was
    stopped by ``timeout_s`` or by SIGTERM to this script."""
    with open(work / "optimize.stdout.txt", "w") as out, open(work / "optimize.stderr.txt", "w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True, start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s)
        except (subprocess.TimeoutExpired, Stopped) as exc:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # finish checking and packing
            why = f"timed out after {timeout_s:.0f} s" if isinstance(exc, subprocess.TimeoutExpired) else str(exc)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=4)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            err.write(f"\n[kernelpro optimize stopped: {why}]\n")
            print(f"kernelpro optimize stopped: {why}", flush=True)
            return 124


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--timeout", type=float, default=225.0, help="seconds for kernelpro optimize")
    args = parser.parse_args()

    out = Path(args.out).resolve()
    work = out / "anthropic_e2e"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    run = work / "run"
    names = ("slow_rows.py", "fast_vec4.py") if args.device == "cuda" else ("cpu_slow.py", "cpu_fast.py")
    slow, fast = ((E2E / n).read_text() for n in names)
    config = work / "config.yaml"
    write_config(config, args.device, work / "memory.sqlite")

    kernelpro, cli_mode = cli_command()
    print("kernelpro CLI:", cli_mode, flush=True)
    script = Script(slow, fast, CHANGES[args.device], use_tool=args.device == "cuda")
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    with MockMessagesServer([script] * 12, lifetime_s=args.timeout + 30) as server:
        env["ANTHROPIC_BASE_URL"] = server.url
        cmd = [*kernelpro, "optimize", str(E2E / "scaled_relu.py"), "-c", str(config), "-o", str(run),
               "--device", args.device, "--budget", "2", "--generator", "anthropic", "--quiet"]
        print("$ kernelpro", " ".join(cmd[len(kernelpro):]), flush=True)
        t0 = time.monotonic()
        rc = run_optimize(cmd, env, work, args.timeout)
        wall = time.monotonic() - t0
        requests = [r["body"] for r in server.requests]
    (work / "requests.json").write_text(json.dumps(requests, indent=1))
    stdout = (work / "optimize.stdout.txt").read_text()
    stderr = (work / "optimize.stderr.txt").read_text()

    checks = verify(run, requests, args.device, rc)
    summary = {"device": args.device, "command": ["kernelpro", *cmd[len(kernelpro):]], "cli": cli_mode,
               "exit_status": rc, "wall_s": round(wall, 1), "requests": len(requests), "checks": checks}
    (work / "checks.json").write_text(json.dumps(summary, indent=1))
    tar_path = pack(out, work)

    print(stdout[-2000:])
    if stderr.strip():
        print("stderr (tail):", stderr[-3000:])
    print(f"\n{len(requests)} requests to the scripted server; optimize exit {rc} in {wall:.0f} s")
    if (run / "candidates.jsonl").exists():
        print(f"{'id':6} {'verdict':14} {'runtime_ms':>10} {'speedup':>8}  bottleneck  findings")
        for line in (run / "candidates.jsonl").read_text().splitlines():
            r = json.loads(line)
            rt = f"{r['runtime_ms']:.4f}" if r["runtime_ms"] else "-"
            sp = f"{r['speedup']:.2f}" if r["speedup"] else "-"
            print(f"{r['id']:6} {r['verdict']:14} {rt:>10} {sp:>8}  {r['bottleneck'] or '-':10}  "
                  f"{len(r['findings'])}")
    for c in checks:
        print(f"[{'PASS' if c['ok'] else 'FAIL'}] {c['check']}" + (f" ({c['detail'][:300]})" if c["detail"] else ""))
    print(f"packed {tar_path} ({tar_path.stat().st_size / 1e6:.1f} MB)")
    return 0 if all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
