"""The LLM loop against a scripted model: how the loop spends calls and dollars when the
model's answers fail in realistic ways. Not a language model's result (see README.md).

The real anthropic SDK talks to the scripted Messages server of the tests
(``tests/llm/mock_messages_server.py``) on 127.0.0.1. The scripted model reads each
request and answers by its content: a first draft or a refinement draws from
``DRAFT_MIX`` (compile errors, wrong results, timeouts, slower and faster kernels,
refusals); a repair prompt ("Version that failed") gets a repaired, correct answer with
probability ``P_FIX`` and another failure otherwise; a contract-repair turn after a reply
without code gets a correct answer, and after a refusal another refusal. Draws come from
one seeded generator per run, so the same seed gives the same answers to the same
sequence of prompt kinds.

Usage (from the repository root, with the project's virtual environment):

    .venv/bin/python benchmarks/llm_loop/run.py --out /tmp/llm_loop --seeds 0 1 --budget 8

It writes ``results.json`` (one row per problem and seed) and prints a summary. Run the
same command with ``PYTHONPATH`` pointing at another checkout's ``kernelpro_core/src`` to
measure that version of the loop.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "llm"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_messages_server import MockMessagesServer, text_reply  # noqa: E402
from problems import PROBLEMS  # noqa: E402

#: what a first draft or a refinement turns out to be
DRAFT_MIX = {"compile_error": 0.20, "wrong": 0.20, "timeout": 0.05, "slow": 0.15, "fast": 0.20,
             "fastest": 0.10, "refusal": 0.10}
#: chance that a repair prompt gets a correct answer; otherwise DRAFT_MIX's failures
P_FIX = 0.6
FAILURES = ("compile_error", "wrong", "timeout")
REFUSAL = "I can't help with that request."
CHANGE = {"compile_error": "fused the ops into one expression", "wrong": "simplified the expression",
          "timeout": "overlapped the work", "slow": "split the work into blocks", "fast": "fewer passes",
          "fastest": "one fused pass, in place"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


class ScriptedModel:
    """Answers a Messages request by what the prompt asks for."""

    def __init__(self, variants: dict[str, str], seed: int) -> None:
        self.variants = variants
        self.rng = random.Random(seed)
        self.log: list[dict[str, str]] = []

    def _draw(self, mix: dict[str, float]) -> str:
        r, acc = self.rng.random(), 0.0
        for name, p in mix.items():
            acc += p
            if r < acc:
                return name
        return list(mix)[-1]

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        task = _text(messages[0]["content"])
        last = _text(messages[-1]["content"]) if messages[-1]["role"] == "user" else ""
        if "Your answer could not be used" in last:  # a contract-repair turn
            previous = _text(messages[-2]["content"]) if len(messages) >= 2 else ""
            kind = "refusal" if previous.startswith(REFUSAL) else self._draw({"fast": 0.5, "slow": 0.5})
            mode = "contract_repair"
        elif "Version that failed" in task:
            mode = "repair"
            if self.rng.random() < P_FIX:
                kind = self._draw({"fast": 0.5, "fastest": 0.25, "slow": 0.25})
            else:
                kind = self._draw({k: DRAFT_MIX[k] for k in FAILURES})
        else:
            mode = "refine" if "Version to improve" in task else "first"
            kind = self._draw(DRAFT_MIX)
        self.log.append({"mode": mode, "kind": kind})
        if kind == "refusal":
            return text_reply(REFUSAL)
        return text_reply(f"Change: {CHANGE[kind]}\n\n```python\n{self.variants[kind]}```\n")


def one_run(name: str, seed: int, budget: int, search: str, out: Path) -> dict[str, Any]:
    reference, variants = PROBLEMS[name]
    run_dir = out / f"{name}-s{seed}-{search}"
    problem_path = out / f"{name}.py"
    problem_path.write_text(reference)
    model = ScriptedModel(variants, seed=1000 * seed + sum(map(ord, name)))
    with MockMessagesServer([model] * 1000, lifetime_s=3600) as server:
        config = out / f"{name}-s{seed}-{search}.yaml"
        config.write_text(
            "generator:\n  name: anthropic\n  params:\n"
            f"    base_url: {server.url}\n    enforce_language: false\n    retry_base_delay_s: 0.01\n"
            f"budget: {budget}\nseed: {seed}\nsearch:\n  name: {search}\n"
            "profiling:\n  enabled: false\nmemory:\n  enabled: false\n"
            "evaluator:\n  trials: 1\n  rep_ms: 20\n  warmup_ms: 2\n  rounds: 1\n"
            "  first_call_timeout_s: 4\n  call_timeout_floor_s: 4\n"
        )
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", "import sys; from kernelpro.cli import main; main(sys.argv[1:])",
             "optimize", str(problem_path), "-c", str(config), "-o", str(run_dir),
             "--device", "cpu", "--quiet"],
            capture_output=True, text=True, timeout=3000,
        )
        wall = time.monotonic() - t0
    records = [json.loads(x) for x in (run_dir / "candidates.jsonl").read_text().splitlines()] \
        if (run_dir / "candidates.jsonl").exists() else []
    usage = json.loads((run_dir / "llm" / "usage.json").read_text()) if (run_dir / "llm" / "usage.json").exists() \
        else {"totals": {"calls": len(server.requests)}}
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    by_id = {r["id"]: r for r in records}
    failed = [r for r in records if not r["correct"]]
    repairs = [r for r in records if r["parent"] in by_id and not by_id[r["parent"]]["correct"]]
    fixed = {r["parent"] for r in repairs if r["correct"]}
    return {
        "problem": name, "seed": seed, "search": search, "exit": proc.returncode,
        "stderr_tail": proc.stderr.strip().splitlines()[-1:] if proc.returncode else [],
        "evaluated": len(records), "correct": sum(r["correct"] for r in records),
        "verdicts": {v: sum(1 for r in records if r["verdict"] == v) for v in sorted({r["verdict"] for r in records})},
        "calls": int(usage["totals"].get("calls", 0)),
        "dollars": usage["totals"].get("dollars"),
        "failed": len(failed), "repair_attempts": len(repairs), "repaired": len(fixed),
        "best_speedup": summary.get("best_speedup"), "stopped_because": summary.get("stopped_because"),
        "model_answers": {k: sum(1 for e in model.log if e["kind"] == k) for k in sorted({e["kind"] for e in model.log})},
        "prompt_modes": {k: sum(1 for e in model.log if e["mode"] == k) for k in sorted({e["mode"] for e in model.log})},
        "wall_s": round(wall, 1),
    }


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    calls = sum(r["calls"] for r in rows)
    correct = sum(r["correct"] for r in rows)
    failed = sum(r["failed"] for r in rows)
    dollars = [r["dollars"] for r in rows if r["dollars"] is not None]
    return {
        "runs": len(rows),
        "evaluated": sum(r["evaluated"] for r in rows),
        "correct": correct,
        "calls": calls,
        "calls_per_correct": round(calls / correct, 2) if correct else None,
        "failed": failed,
        "repair_attempts": sum(r["repair_attempts"] for r in rows),
        "repaired": sum(r["repaired"] for r in rows),
        "repaired_fraction": round(sum(r["repaired"] for r in rows) / failed, 3) if failed else None,
        "dollars_per_problem": round(sum(dollars) / len(dollars), 4) if dollars else None,
        "runs_short_of_budget": sum(1 for r in rows if r["evaluated"] < r.get("budget", 0)),
        "runs_without_a_correct_candidate": sum(1 for r in rows if not r["correct"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--search", default="greedy")
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.problems:
        for seed in args.seeds:
            row = one_run(name, seed, args.budget, args.search, args.out)
            row["budget"] = args.budget
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"budget": args.budget, "search": args.search, "seeds": args.seeds, "rows": rows,
              "total": aggregate(rows)}
    (args.out / "results.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result["total"], indent=1))


if __name__ == "__main__":
    main()
