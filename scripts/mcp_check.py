"""Evaluate and profile one candidate through `kernelpro mcp` (a scripted MCP client over
stdio) and through the command line, and compare what each says.

    .venv/bin/python scripts/mcp_check.py PROBLEM.py CANDIDATE.py [-c CONFIG] [--device cuda|cpu]

Prints one JSON object: both verdicts, both bottlenecks, the findings' (tool, title) of
each, and whether they agree. Timings differ between two evaluations and are shown, not
compared. Exit 0 when verdicts, bottleneck kinds and findings agree, 1 when not.
The problem and candidate are copied into a temporary workspace (the server's --root).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-c", "from kernelpro.cli import main; main()"]


def _cli(*args: str, cwd: Path) -> Any:
    res = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd)
    text = res.stdout.strip()
    if not text.startswith("{"):
        return {"error": res.stderr.strip().splitlines()[-1:] or [f"exit {res.returncode}"]}
    return json.loads(text)


def _findings(analysis: Any) -> list[list[str]]:
    return sorted([f.get("tool", ""), f.get("title", "")] for f in (analysis or {}).get("findings") or [])


def _kind(analysis: Any) -> Any:
    bn = (analysis or {}).get("bottleneck")
    return bn.get("kind") if isinstance(bn, dict) else None


async def _through_server(root: Path, options: list[str], source: str) -> tuple[Any, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    # the server gets this process's environment: the MCP client's default passes only a few
    # variables (no PYTHONPATH), and the server must import what the command line imported
    params = StdioServerParameters(command=sys.executable, args=[*CLI[1:], "mcp", "--root", str(root), *options],
                                   env=dict(os.environ))
    async with Client(params) as client:
        args = {"problem": "problem.py", "candidate_source": source}
        ev = await client.call_tool("evaluate", args)
        pr = await client.call_tool("profile", args)

    def unpack(res: Any) -> Any:
        if res.is_error:
            return {"error": "".join(getattr(b, "text", "") for b in res.content)}
        return res.structured_content

    return unpack(ev), unpack(pr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problem")
    ap.add_argument("candidate")
    ap.add_argument("-c", "--config")
    ap.add_argument("--device", choices=["cuda", "cpu"])
    a = ap.parse_args()
    import anyio

    options = (["-c", str(Path(a.config).resolve())] if a.config else []) + (["--device", a.device] if a.device else [])
    with tempfile.TemporaryDirectory(prefix="kernelpro-mcp-check-") as tmp:
        root = Path(tmp)
        shutil.copy(a.problem, root / "problem.py")
        shutil.copy(a.candidate, root / "candidate.py")
        cli_eval = _cli("eval", "problem.py", "candidate.py", "--json", *options, cwd=root)
        cli_prof = _cli("profile", "problem.py", "candidate.py", "--json", *options, cwd=root)
        try:
            mcp_eval, mcp_prof = anyio.run(_through_server, root, options, (root / "candidate.py").read_text())
        except Exception as exc:  # the server did not start or broke the connection: one line
            while getattr(exc, "exceptions", None):  # an exception group: its first
                exc = exc.exceptions[0]  # type: ignore[attr-defined]
            print(f"error: the MCP server failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            print(json.dumps({"cli": {"eval": cli_eval, "profile_error": cli_prof.get("error")}}, indent=1))
            return 1
    out = {
        "cli": {"verdict": cli_eval.get("verdict"), "correct": cli_eval.get("correct"),
                "speedup": cli_eval.get("speedup"), "flags": cli_eval.get("flags"),
                "bottleneck": _kind(cli_prof), "findings": _findings(cli_prof), "error": cli_prof.get("error")},
        "mcp": {"verdict": mcp_eval.get("verdict"), "correct": mcp_eval.get("correct"),
                "speedup": mcp_eval.get("speedup"), "flags": mcp_eval.get("flags"),
                "bottleneck": _kind(mcp_prof), "findings": _findings(mcp_prof), "error": mcp_prof.get("error")},
    }
    same = all(out["cli"][k] == out["mcp"][k] for k in ("verdict", "correct", "bottleneck", "findings"))
    out["agree"] = same
    print(json.dumps(out, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
