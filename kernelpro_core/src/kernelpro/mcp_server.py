"""``kernelpro mcp``: KernelPro's evaluator, profilers and LLM tools as a Model Context
Protocol server for coding agents.

Needs the ``mcp`` extra (``pip install kernelpro-core[mcp]``); this module imports the MCP
library only inside :func:`serve`, so the worker entry point (:func:`llm_tool_main`) and
the path rules can be used without it.

Rules the server keeps:

- **No candidate code in the server.** Every tool that evaluates, profiles or analyzes
  runs the ``kernelpro`` command line (``eval --json``, ``profile --json``,
  ``analyze --json``, ``optimize``) in a worker process of its own session; the candidate
  then runs where it always runs, in the evaluator's sandboxed harness processes. The
  plugins' LLM tools run in a worker process too (:func:`llm_tool_main`), so a tool that
  crashes or hangs cannot take the server with it.
- **Paths are confined to the workspace** (``--root``): a path is taken relative to the
  root, resolved with every symlink followed, and refused when the result lies outside the
  root. What the server writes (candidate files, evaluation work directories, runs) goes
  under ``<root>/.kernelpro-mcp`` and ``<root>/runs``.
- **Every failure is a tool error** (``isError``, one line of text), never a crash of the
  server: a bad argument, a path outside the root, a worker that failed or died.
- **Cancellation stops the work**: a cancelled call sends SIGTERM to its worker (the
  command line then kills the evaluator's processes, as on Ctrl-C), then SIGKILL after
  a grace period (the evaluator's reaper then kills the rest, as its parent died).
- **Long work reports progress** when the client asks for it: the evaluator's stage
  (``compile``, ``reference``, ``candidate``, ...) for ``evaluate`` and ``profile``, the
  number of candidates evaluated out of the budget for ``optimize``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

#: folder under the root where the server writes candidate files and work directories
CALLS_DIR = ".kernelpro-mcp"
#: largest candidate source accepted, in characters
MAX_SOURCE_CHARS = 1_000_000
#: seconds a cancelled worker has to end after SIGTERM before it is killed
STOP_GRACE_S = 10.0
#: the names of the context inputs added to every plugin LLM tool's schema
CONTEXT_INPUTS = ("run_dir", "candidate")

Progress = Callable[[float, "float | None", "str | None"], Awaitable[None]]


class ToolFailure(Exception):
    """A tool call that failed: its one-line message becomes the tool error."""


# --- the workspace ----------------------------------------------------------------------


class Workspace:
    """The directory every path of a tool call must lie in."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise NotADirectoryError(str(root))

    def path(self, value: Any, what: str, *, kind: str = "file", must_exist: bool = True) -> Path:
        """``value`` (relative to the root, or absolute) resolved with every symlink
        followed; a ToolFailure when it is not a string, lies outside the root, or (with
        ``must_exist``) is not an existing file (``kind="file"``) or directory (``"dir"``)."""
        if not isinstance(value, str) or not value.strip():
            raise ToolFailure(f"{what} must be a non-empty path string")
        if "\x00" in value:
            raise ToolFailure(f"{what}: a path may not contain NUL")
        raw = Path(value)
        joined = raw if raw.is_absolute() else self.root / raw
        try:
            resolved = joined.resolve(strict=False)
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise ToolFailure(f"{what} {value!r}: cannot be resolved ({exc})") from None
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolFailure(f"{what} {value!r} is outside the workspace root {self.root}; "
                              "only paths inside it may be used")
        if must_exist:
            if not resolved.exists():
                raise ToolFailure(f"{what} {value!r}: no such {'directory' if kind == 'dir' else 'file'} "
                                  "in the workspace")
            if kind == "file" and not resolved.is_file():
                raise ToolFailure(f"{what} {value!r} is not a file")
            if kind == "dir" and not resolved.is_dir():
                raise ToolFailure(f"{what} {value!r} is not a directory")
        return resolved

    def show(self, path: Path) -> str:
        """``path`` as the client should name it: relative to the root."""
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)

    def call_dir(self, tool: str) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self.root / CALLS_DIR / f"{tool}-{stamp}-{secrets.token_hex(4)}"
        path.mkdir(parents=True)
        return path


# --- worker processes ---------------------------------------------------------------------


def cli_argv(*args: str) -> list[str]:
    """The ``kernelpro`` command line in this interpreter (no PATH lookup)."""
    return [sys.executable, "-c", "from kernelpro.cli import main; main()", *args]


class Worker:
    """How a finished worker ended."""

    def __init__(self, rc: int, stdout: str, stderr: str) -> None:
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr

    def error_line(self) -> str:
        """The worker's own error line (the last ``error:`` line, else the last line)."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        if errors:
            return errors[-1][len("error:"):].strip()
        if self.rc < 0:
            name = signal.Signals(-self.rc).name if -self.rc in signal.Signals._value2member_map_ else str(-self.rc)
            return f"the worker process died from {name}"
        return lines[-1] if lines else f"the worker process exited with status {self.rc} and said nothing"

    def json(self) -> Any:
        """The JSON object the worker printed, or None."""
        text = self.stdout.strip()
        if not text.startswith("{"):
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return None


async def run_worker(argv: list[str], *, cwd: Path, stdin: bytes | None = None,
                     poll: Callable[[], Awaitable[None]] | None = None, poll_s: float = 1.0) -> Worker:
    """Run ``argv`` in a new session and wait for it; ``poll`` is awaited every ``poll_s``
    seconds while it runs (progress). Cancelled, the worker gets SIGTERM, then SIGKILL
    after :data:`STOP_GRACE_S` seconds, before the cancellation goes on."""
    import anyio
    from anyio.streams.text import TextReceiveStream

    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    proc = await anyio.open_process(argv, stdin=None if stdin is None else -1, cwd=str(cwd), env=env,
                                    start_new_session=True)
    out: list[str] = []
    err: list[str] = []

    async def drain(stream: Any, into: list[str]) -> None:
        if stream is None:
            return
        async for chunk in TextReceiveStream(stream, errors="replace"):
            into.append(chunk)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, proc.stdout, out)
            tg.start_soon(drain, proc.stderr, err)
            if stdin is not None and proc.stdin is not None:
                await proc.stdin.send(stdin)
                await proc.stdin.aclose()
            if poll is not None:
                while proc.returncode is None:
                    with anyio.move_on_after(poll_s):
                        await proc.wait()
                    if proc.returncode is None:
                        await poll()
            await proc.wait()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _stop(proc)
        raise
    return Worker(proc.returncode if proc.returncode is not None else -1, "".join(out), "".join(err))


async def _stop(proc: Any) -> None:
    import anyio

    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    with anyio.move_on_after(STOP_GRACE_S):
        await proc.wait()
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        await proc.wait()


# --- the tools ------------------------------------------------------------------------------

_PATH_NOTE = "relative to the workspace root (or absolute inside it)"

_EVAL_OUTPUT: dict[str, Any] = {
    "type": "object",
    "description": "The evaluator's verdict, as `kernelpro eval --json` prints it.",
    "properties": {
        "correct": {"type": "boolean", "description": "outputs matched the reference within tolerance"},
        "verdict": {"type": "string", "description": "correct, incorrect, compile_error, crash, timeout, "
                    "invalid, integrity_violation, ... (docs/evaluation.md)"},
        "reason": {"type": "string", "description": "why, in one line"},
        "runtime_ms": {"type": ["number", "null"], "description": "candidate's median time"},
        "baseline_ms": {"type": ["number", "null"], "description": "eager reference's median time"},
        "compiled_baseline_ms": {"type": ["number", "null"], "description": "torch.compile reference's time"},
        "speedup": {"type": ["number", "null"], "description": "baseline_ms / runtime_ms"},
        "flags": {"type": "array", "items": {"type": "string"}, "description": "integrity and timing flags"},
        "measurements": {"type": "object"},
        "device": {"type": "string"},
        "gpu": {"type": ["string", "null"]},
        "result": {"type": "object", "description": "the full evaluation record"},
    },
    "required": ["correct", "verdict", "reason", "speedup", "flags"],
}

_ANALYSIS_OUTPUT: dict[str, Any] = {
    "type": "object",
    "description": "Bottleneck and findings, as `kernelpro profile --json` / `analyze --json` print them.",
    "properties": {
        "bottleneck": {"type": ["object", "null"], "description": "kind (memory, compute, latency, ...), "
                       "roofline fraction, summary; null when not classified"},
        "findings": {"type": "array", "items": {"type": "object"},
                     "description": "each: tool, severity, title, message, action, evidence, estimated_gain"},
        "notes": {"type": "array", "items": {"type": "string"},
                  "description": "what could not be collected or was skipped, and why"},
    },
    "required": ["bottleneck", "findings", "notes"],
}

_RUN_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_dir": {"type": "string"},
        "running": {"type": "boolean", "description": "a process holds the run directory's lock"},
        "finished": {"type": "boolean", "description": "summary.json was written (the run ended)"},
        "evaluated": {"type": "integer"},
        "correct": {"type": "integer"},
        "pending": {"type": "integer", "description": "drafts written but not yet evaluated"},
        "budget": {"type": ["integer", "null"]},
        "best_id": {"type": ["string", "null"]},
        "best_speedup": {"type": ["number", "null"]},
        "summary": {"type": ["object", "null"], "description": "summary.json of a finished run"},
        "last": {"type": "array", "items": {"type": "object"},
                 "description": "the last candidates evaluated: id, parent, verdict, speedup, bottleneck"},
    },
    "required": ["run_dir", "running", "finished", "evaluated", "correct"],
}

_BEST_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_dir": {"type": "string"},
        "final": {"type": "boolean", "description": "true: the run ended and chose this one (best.py); "
                  "false: the run is not finished, this is the correct candidate of highest recorded reward"},
        "id": {"type": ["string", "null"]},
        "speedup": {"type": ["number", "null"]},
        "record": {"type": ["object", "null"], "description": "its line of candidates.jsonl"},
        "source": {"type": ["string", "null"]},
    },
    "required": ["run_dir", "final", "id"],
}


class Tool:
    def __init__(self, name: str, description: str, input_schema: dict[str, Any],
                 output_schema: dict[str, Any] | None,
                 run: Callable[[dict[str, Any], Progress], Awaitable[tuple[str, Any]]]) -> None:
        self.name = name
        self.description = description
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.run = run


def _string(arguments: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = arguments.get(key)
    if value is None:
        if required:
            raise ToolFailure(f"missing required input {key!r}")
        return None
    if not isinstance(value, str):
        raise ToolFailure(f"input {key!r} must be a string")
    return value


def _int(arguments: dict[str, Any], key: str, low: int, high: int) -> int | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolFailure(f"input {key!r} must be an integer")
    if not low <= value <= high:
        raise ToolFailure(f"input {key!r} must be between {low} and {high}")
    return value


def _source(arguments: dict[str, Any]) -> str:
    source = _string(arguments, "candidate_source")
    assert source is not None
    if not source.strip():
        raise ToolFailure("candidate_source is empty")
    if len(source) > MAX_SOURCE_CHARS:
        raise ToolFailure(f"candidate_source is longer than {MAX_SOURCE_CHARS} characters")
    return source


class KernelProTools:
    """The server's tools, bound to a workspace and the command line's options."""

    def __init__(self, workspace: Workspace, config: Path | None = None, device: str | None = None,
                 keep: bool = False) -> None:
        self.ws = workspace
        self.config = config
        self.device = device
        self.keep = keep
        self.tools: dict[str, Tool] = {}
        problem = {"type": "string", "description": f"the problem file (KernelBench format), {_PATH_NOTE}"}
        candidate = {"type": "string", "description": "Python source of the candidate: a module defining "
                     "class ModelNew (PyTorch, Triton, CUDA via load_inline, ...)"}
        self._add(Tool(
            "evaluate",
            "Evaluate a candidate against a problem with KernelPro's evaluator: correctness on the "
            "problem's inputs, then timing against the eager reference and torch.compile, with the "
            "integrity checks (a candidate that cheats gets a flag or an invalid verdict). The candidate "
            "runs only in the evaluator's sandboxed worker processes. Same result as `kernelpro eval --json`. "
            "An incorrect, crashing or hanging candidate is a verdict, not an error.",
            {"type": "object", "properties": {"problem": problem, "candidate_source": candidate},
             "required": ["problem", "candidate_source"], "additionalProperties": False},
            _EVAL_OUTPUT, self._evaluate))
        self._add(Tool(
            "profile",
            "Profile a correct candidate: collect (Nsight Compute, SASS, Nsight Systems where available), "
            "classify the bottleneck, run the micro-profilers the bottleneck gates, and return the "
            "bottleneck and findings with the numbers behind them. Same result as `kernelpro profile --json`. "
            "Needs a GPU for kernel-level data; on a CPU the notes say what was not collected.",
            {"type": "object", "properties": {"problem": problem, "candidate_source": candidate},
             "required": ["problem", "candidate_source"], "additionalProperties": False},
            _ANALYSIS_OUTPUT, self._profile))
        self._add(Tool(
            "analyze",
            "Analyze an existing file without running anything: an Nsight Compute report (.ncu-rep) or its "
            "CSV export, a cubin, shared object, object file or .cu source (SASS), or a timeline trace. "
            "Same result as `kernelpro analyze --json`.",
            {"type": "object", "properties": {
                "path": {"type": "string", "description": f"the file, {_PATH_NOTE}"},
                "gpu": {"type": "string", "description": "GPU whose spec applies, e.g. 'H200 SXM' "
                        "(default: the device the file names)"}},
             "required": ["path"], "additionalProperties": False},
            _ANALYSIS_OUTPUT, self._analyze))
        self._add(Tool(
            "optimize",
            "Run KernelPro's closed loop on a problem (generate, evaluate, profile, search) for `budget` "
            "candidates, in a new run directory under the workspace. Long-running: reports progress "
            "(candidates evaluated of the budget); cancelling stops the run (continue it later with "
            "`kernelpro optimize --resume RUN_DIR`). Returns the run's summary; see run_status and best.",
            {"type": "object", "properties": {
                "problem": problem,
                "budget": {"type": "integer", "minimum": 1, "maximum": 10000,
                           "description": "candidates to evaluate (default: the config's)"},
                "generator": {"type": "string", "description": "code generator, e.g. expert, anthropic, "
                              "torch_compile (default: the config's)"},
                "search": {"type": "string", "description": "search policy: greedy, mcts, beam "
                           "(default: the config's)"},
                "run_dir": {"type": "string", "description": f"a new run directory, {_PATH_NOTE} "
                            "(default: runs/<problem>-<time>)"}},
             "required": ["problem"], "additionalProperties": False},
            _RUN_OUTPUT, self._optimize))
        run_dir = {"type": "string", "description": f"a run directory of `kernelpro optimize`, {_PATH_NOTE}"}
        self._add(Tool(
            "run_status",
            "State of a run directory: whether it is running or finished, candidates evaluated and "
            "correct, the best so far, and the last candidates.",
            {"type": "object", "properties": {"run_dir": run_dir}, "required": ["run_dir"],
             "additionalProperties": False},
            _RUN_OUTPUT, self._run_status))
        self._add(Tool(
            "best",
            "The best candidate of a run directory with its source and record: the one the run chose "
            "(best.py) when it has ended, else the correct candidate of highest recorded reward so far.",
            {"type": "object", "properties": {"run_dir": run_dir}, "required": ["run_dir"],
             "additionalProperties": False},
            _BEST_OUTPUT, self._best))

    def _add(self, tool: Tool) -> None:
        self.tools[tool.name] = tool

    def _options(self) -> list[str]:
        args: list[str] = []
        if self.config is not None:
            args += ["-c", str(self.config)]
        if self.device is not None:
            args += ["--device", self.device]
        return args

    def _cleanup(self, call: Path) -> None:
        if not self.keep:
            shutil.rmtree(call, ignore_errors=True)

    def _stage_poll(self, work: Path, progress: Progress) -> Callable[[], Awaitable[None]]:
        """Report the evaluator's stage (its status.txt) each time it changes."""
        seen: list[str] = []

        async def poll() -> None:
            try:
                stage = (work / "status.txt").read_text().strip()
            except OSError:
                return
            if stage and (not seen or seen[-1] != stage):
                seen.append(stage)
                await progress(float(len(seen)), None, f"evaluator stage: {stage}")
        return poll

    async def _evaluate(self, arguments: dict[str, Any], progress: Progress) -> tuple[str, Any]:
        problem = self.ws.path(_string(arguments, "problem"), "problem")
        source = _source(arguments)
        call = self.ws.call_dir("evaluate")
        try:
            candidate = call / "candidate.py"
            candidate.write_text(source)
            work = call / "eval"
            worker = await run_worker(cli_argv("eval", str(problem), str(candidate), "--json", "--workdir", str(work),
                                               *self._options()),
                                      cwd=self.ws.root, poll=self._stage_poll(work, progress))
        finally:
            self._cleanup(call)
        data = worker.json()
        if data is None:
            raise ToolFailure(worker.error_line())
        if data.get("verdict") == "problem_error":
            raise ToolFailure(f"the problem is at fault, not the candidate: {data.get('reason')}")
        if data.get("correct"):
            text = (f"correct: {data['runtime_ms']:.4f} ms vs reference {data['baseline_ms']:.4f} ms "
                    f"-> {data['speedup']:.2f}x ({data.get('device')})")
        else:
            text = f"{data.get('verdict')}: {data.get('reason')}"
        text += "".join(f"\nflag: {f}" for f in data.get("flags") or [])
        return text, data

    async def _profile(self, arguments: dict[str, Any], progress: Progress) -> tuple[str, Any]:
        problem = self.ws.path(_string(arguments, "problem"), "problem")
        source = _source(arguments)
        call = self.ws.call_dir("profile")
        try:
            candidate = call / "candidate.py"
            candidate.write_text(source)
            worker = await run_worker(cli_argv("profile", str(problem), str(candidate), "--json", "--workdir",
                                               str(call / "work"), *self._options()),
                                      cwd=self.ws.root, poll=self._stage_poll(call / "work" / "eval", progress))
        finally:
            self._cleanup(call)
        data = worker.json()
        if data is None:
            raise ToolFailure(worker.error_line().removeprefix("not profiled: "))
        return _analysis_text(data), data

    async def _analyze(self, arguments: dict[str, Any], progress: Progress) -> tuple[str, Any]:
        path = self.ws.path(_string(arguments, "path"), "path")
        gpu = _string(arguments, "gpu", required=False)
        args = ["analyze", str(path), "--json"]
        if gpu:
            args += ["--gpu", gpu]
        if self.config is not None:
            args += ["-c", str(self.config)]
        worker = await run_worker(cli_argv(*args), cwd=self.ws.root)
        data = worker.json()
        if data is None:
            raise ToolFailure(worker.error_line())
        return _analysis_text(data), data

    async def _optimize(self, arguments: dict[str, Any], progress: Progress) -> tuple[str, Any]:
        problem = self.ws.path(_string(arguments, "problem"), "problem")
        budget = _int(arguments, "budget", 1, 10000)
        generator = _string(arguments, "generator", required=False)
        search = _string(arguments, "search", required=False)
        given = _string(arguments, "run_dir", required=False)
        if given is not None:
            run_dir = self.ws.path(given, "run_dir", kind="dir", must_exist=False)
            if run_dir.exists() and any(run_dir.iterdir()):
                raise ToolFailure(f"run_dir {given!r} is not empty; give a new directory")
        else:
            stem = re.sub(r"[^\w.-]", "_", problem.stem)
            run_dir = self.ws.root / "runs" / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        args = ["optimize", str(problem), "-o", str(run_dir), "--quiet"]
        if budget is not None:
            args += ["--budget", str(budget)]
        if generator:
            args += ["--generator", generator]
        if search:
            args += ["--search", search]
        args += self._options()
        seen = [-1]

        async def poll() -> None:
            records = _read_jsonl(run_dir / "candidates.jsonl")
            if len(records) != seen[0]:
                seen[0] = len(records)
                last = records[-1] if records else None
                message = (f"{last.get('id')}: {last.get('verdict')}"
                           + (f" {last['speedup']:.2f}x" if last.get("speedup") else "") if last else "started")
                await progress(float(len(records)), float(budget) if budget else None, message)

        worker = await run_worker(cli_argv(*args), cwd=self.ws.root, poll=poll)
        await poll()  # the last candidate, when it was recorded after the last look
        if not (run_dir / "summary.json").is_file():
            raise ToolFailure(worker.error_line())
        text, status = self._status(run_dir)
        return text, status

    async def _run_status(self, arguments: dict[str, Any], progress: Progress) -> tuple[str, Any]:
        run_dir = self.ws.path(_string(arguments, "run_dir"), "run_dir", kind="dir")
        return self._status(run_dir)

    def _status(self, run_dir: Path) -> tuple[str, dict[str, Any]]:
        if not (run_dir / "candidates").is_dir() and not (run_dir / "candidates.jsonl").exists():
            raise ToolFailure(f"{self.ws.show(run_dir)} is not a run directory (no candidates/)")
        records = _read_jsonl(run_dir / "candidates.jsonl")
        summary = _read_json(run_dir / "summary.json")
        pending = _read_json(run_dir / "pending.json")
        config = _read_yaml(run_dir / "config.yaml")
        best = _best_record(records)
        out: dict[str, Any] = {
            "run_dir": self.ws.show(run_dir),
            "running": _locked(run_dir),
            "finished": isinstance(summary, dict),
            "evaluated": len(records),
            "correct": sum(1 for r in records if r.get("correct")),
            "pending": len(pending) if isinstance(pending, list) else 0,
            "budget": config.get("budget") if isinstance(config, dict) else None,
            "best_id": summary.get("best_id") if isinstance(summary, dict) else (best or {}).get("id"),
            "best_speedup": (summary.get("best_speedup") if isinstance(summary, dict)
                             else (best or {}).get("speedup")),
            "summary": summary if isinstance(summary, dict) else None,
            "last": [{k: r.get(k) for k in ("id", "parent", "verdict", "speedup", "bottleneck", "description")}
                     for r in records[-10:]],
        }
        state = "running" if out["running"] else ("finished" if out["finished"] else "stopped")
        best_text = (f"best {out['best_id']}: {out['best_speedup']:.2f}x" if out["best_speedup"]
                     else "no correct candidate yet")
        from kernelpro.report import KEEP_REFERENCE, faster_than_reference

        if out["best_speedup"] and faster_than_reference(out["best_speedup"]) is False:
            best_text += f" ({KEEP_REFERENCE})"
        text = (f"{out['run_dir']}: {state}; {out['evaluated']} evaluated"
                + (f" of {out['budget']}" if out["budget"] else "") + f", {out['correct']} correct; {best_text}")
        return text, out

    async def _best(self, arguments: dict[str, Any], progress: Progress) -> tuple[str, Any]:
        run_dir = self.ws.path(_string(arguments, "run_dir"), "run_dir", kind="dir")
        if not (run_dir / "candidates").is_dir():
            raise ToolFailure(f"{self.ws.show(run_dir)} is not a run directory (no candidates/)")
        records = _read_jsonl(run_dir / "candidates.jsonl")
        summary = _read_json(run_dir / "summary.json")
        final = isinstance(summary, dict)
        if final:
            best_id = summary.get("best_id")
            record = next((r for r in records if r.get("id") == best_id), None)
            source_path = run_dir / "best.py"
        else:
            record = _best_record(records)
            best_id = record.get("id") if record else None
            source_path = run_dir / "candidates" / f"{best_id}.py"
        out: dict[str, Any] = {"run_dir": self.ws.show(run_dir), "final": final, "id": best_id,
                               "speedup": record.get("speedup") if record else None, "record": record,
                               "source": None}
        if best_id is None:
            return f"{out['run_dir']}: no correct candidate" + ("" if final else " yet"), out
        resolved = self.ws.path(str(source_path), "best source")
        out["source"] = resolved.read_text(errors="replace")
        head = (f"{'best' if final else 'best so far (run not finished)'}: {best_id}"
                + (f", {out['speedup']:.2f}x over eager" if out["speedup"] else ""))
        return head + "\n\n" + out["source"], out


def _analysis_text(data: dict[str, Any]) -> str:
    lines = [f"note: {n}" for n in data.get("notes") or []]
    bn = data.get("bottleneck")
    lines.append(f"bottleneck: {bn.get('kind')}: {bn.get('summary', '')}" if isinstance(bn, dict)
                 else "bottleneck: not classified")
    findings = data.get("findings") or []
    if not findings:
        lines.append("no findings")
    for f in findings:
        lines.append(f"[{f.get('severity')}] {f.get('tool')}: {f.get('title')}\n    {f.get('message')}\n"
                     f"    action: {f.get('action')}")
    return "\n".join(lines)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    from kernelpro.rundir import RunDir

    return RunDir(path.parent).read_jsonl(path.name)  # a line being written is skipped


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _read_yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None


def _best_record(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    correct = [r for r in records if r.get("correct")]
    if not correct:
        return None

    def rank(rec: dict[str, Any]) -> float:
        value = rec.get("reward")
        if not isinstance(value, (int, float)):
            value = rec.get("speedup")
        return float(value) if isinstance(value, (int, float)) else 0.0

    return max(correct, key=rank)


def _locked(run_dir: Path) -> bool:
    """Whether a process holds the run directory's lock (without taking it)."""
    import fcntl

    lock = run_dir / ".lock"
    if not lock.exists():
        return False
    try:
        with open(lock, "r") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


# --- plugins' LLM tools ---------------------------------------------------------------------


def llm_tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A plugin tool's input schema with the two context inputs added."""
    out = dict(schema)
    out.setdefault("type", "object")
    props = dict(out.get("properties") or {})
    props["run_dir"] = {"type": "string", "description": "optional: a run directory of `kernelpro optimize` "
                        f"({_PATH_NOTE}); the tool then sees that run and its problem"}
    props["candidate"] = {"type": "string", "description": "optional, with run_dir: the id of a candidate of "
                          "that run (e.g. c3), the kernel the tool looks at (the 'parent')"}
    out["properties"] = props
    return out


def plugin_llm_tools(plugins: Any, server_tools: KernelProTools, warn: Callable[[str], None]) -> list[Tool]:
    """The installed plugins' LLM tools as server tools; each call runs in a worker."""
    taken = set(server_tools.tools)
    tools = []
    for cls in plugins.llm_tools():
        name = getattr(cls, "name", None)
        schema = getattr(cls, "input_schema", None)
        if not isinstance(name, str) or not isinstance(schema, dict):
            warn(f"LLM tool {cls!r} has no name or input schema; not served")
            continue
        if name in taken:
            warn(f"LLM tool {name!r} has the name of a built-in tool; not served")
            continue
        clash = [k for k in CONTEXT_INPUTS if k in (schema.get("properties") or {})]
        if clash:
            warn(f"LLM tool {name!r} has an input named {clash[0]!r}, which the server uses; not served")
            continue
        taken.add(name)
        tools.append(Tool(name, getattr(cls, "description", "") or name, llm_tool_schema(schema), None,
                          _llm_runner(name, server_tools)))
    return tools


def _llm_runner(name: str, self: KernelProTools) -> Callable[[dict[str, Any], Progress], Awaitable[tuple[str, Any]]]:
    async def run(arguments: dict[str, Any], progress: Progress) -> tuple[str, Any]:
        args = dict(arguments)
        run_dir = args.pop("run_dir", None)
        candidate = args.pop("candidate", None)
        job: dict[str, Any] = {"name": name, "arguments": args, "root": str(self.ws.root), "run_dir": None,
                               "candidate": None, "device": self.device,
                               "config": str(self.config) if self.config else None}
        if run_dir is not None:
            path = self.ws.path(run_dir, "run_dir", kind="dir")
            job["run_dir"] = str(path)
        if candidate is not None:
            if run_dir is None:
                raise ToolFailure("candidate needs run_dir (the run it belongs to)")
            if not isinstance(candidate, str) or not re.fullmatch(r"[\w.-]+", candidate):
                raise ToolFailure("candidate must be a candidate id such as c3")
            job["candidate"] = candidate
        worker = await run_worker([sys.executable, "-c", "from kernelpro.mcp_server import llm_tool_main; "
                                   "llm_tool_main()"], cwd=self.ws.root, stdin=json.dumps(job).encode())
        data = worker.json()
        if data is None or not isinstance(data.get("text"), str):
            raise ToolFailure(f"{name}: {worker.error_line()}")
        if data.get("is_error"):
            raise ToolFailure(data["text"])
        return data["text"], None
    return run


def llm_tool_main() -> None:
    """Worker: run one plugin LLM tool. Reads a JSON job on stdin, prints
    ``{"text": ..., "is_error": ...}`` on stdout."""
    try:
        job = json.loads(sys.stdin.read())
        text, is_error = _run_llm_tool(job)
    except ToolFailure as exc:
        text, is_error = str(exc), True
    print(json.dumps({"text": text, "is_error": is_error}))


def _run_llm_tool(job: dict[str, Any]) -> tuple[str, bool]:
    from kernelpro import config as cfg
    from kernelpro.api import ParentInfo, ToolContext
    from kernelpro.llm_tools import ToolBox
    from kernelpro.plugins import PluginError, Plugins
    from kernelpro.problem import ProblemError, load_problem
    from kernelpro.records import Analysis, EvalResult, from_json

    block: tuple[str, ...] = ()
    blocked_micro: set[str] = set()
    if job.get("config"):
        try:
            config = cfg.load_config(job["config"])
        except cfg.ConfigError as exc:
            raise ToolFailure(f"the server's config: {exc.problems[0]}") from None
        block = tuple(config.plugins.block)
        blocked_micro = set(config.profiling.block_micro_profilers)
    try:
        plugins = Plugins(block=block)
        plugins.collect()
    except PluginError as exc:
        raise ToolFailure(str(exc)) from None
    tools = [cls for cls in plugins.llm_tools() if cls.name == job["name"]]
    if not tools:
        raise ToolFailure(f"no LLM tool named {job['name']!r} is installed")
    ws = Workspace(job["root"])
    run_dir = Path(job["run_dir"]) if job.get("run_dir") else None
    problem = None
    parent = None
    if run_dir is not None:
        try:
            problem = load_problem(ws.path(str(run_dir / "problem.py"), "the run's problem.py"))
        except ProblemError as exc:
            raise ToolFailure(str(exc)) from None
        cid = job.get("candidate")
        if cid:
            record = next((r for r in _read_jsonl(run_dir / "candidates.jsonl") if r.get("id") == cid), None)
            if record is None:
                raise ToolFailure(f"no candidate {cid!r} in {ws.show(run_dir)}/candidates.jsonl")
            source = ws.path(str(run_dir / "candidates" / f"{cid}.py"), "candidate source")
            result = analysis = None
            try:
                result = from_json(record["result"], EvalResult) if record.get("result") else None
            except Exception:
                result = None
            raw = _read_json(run_dir / "analyses" / f"{cid}.json")
            if isinstance(raw, dict):
                try:
                    analysis = from_json(raw, Analysis)
                except Exception:
                    analysis = None
            parent = ParentInfo(id=cid, source=source.read_text(errors="replace"), result=result,
                                analysis=analysis, params=record.get("params") or {},
                                description=record.get("description") or "")
    workdir = (run_dir / "tools") if run_dir is not None else ws.root / CALLS_DIR / "tools"

    def micro_profilers() -> list[type]:
        return [cls for cls in plugins.micro_profilers() if cls.name not in blocked_micro]

    context = ToolContext(problem=problem, parent=parent, device=job.get("device") or "cuda", gpu=None,
                          run_dir=run_dir, profile_parent=None, workdir=workdir, micro_profilers=micro_profilers)
    box = ToolBox([tools[0]()], context)
    return box.call(job["name"], job["arguments"])


# --- serving ----------------------------------------------------------------------------------


def parse_http(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); ValueError with one line."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--http {value!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def build_server(tools: KernelProTools, extra: list[Tool]) -> Any:
    """The MCP server (the library's low-level ``Server``) serving ``tools`` and ``extra``."""
    import mcp_types as types
    from mcp.server import Server

    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        version = dist_version("kernelpro-core")
    except PackageNotFoundError:
        version = "0"

    table: dict[str, Tool] = dict(tools.tools)
    for tool in extra:
        table[tool.name] = tool
    listing = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema,
                          output_schema=t.output_schema) for t in table.values()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: Any) -> Any:
        tool = table.get(params.name)
        if tool is None:
            return _error(types, f"unknown tool {params.name!r}; available: {', '.join(table)}")
        arguments = params.arguments or {}

        async def progress(done: float, total: float | None, message: str | None) -> None:
            try:
                await ctx.session.report_progress(done, total, message)
            except Exception:  # a client that went away must not fail the call
                pass

        try:
            text, data = await tool.run(arguments, progress)
        except ToolFailure as exc:
            return _error(types, str(exc))
        except Exception as exc:  # a bug of ours: the call fails, the server goes on
            return _error(types, f"{tool.name} failed: {type(exc).__name__}: {exc}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=data if tool.output_schema is not None else None)

    instructions = ("KernelPro: evaluate, profile and optimize GPU kernels for PyTorch modules. Paths are relative "
                    f"to the workspace root {tools.ws.root}; nothing outside it can be read or written.")
    return Server("kernelpro", version=version, instructions=instructions, on_list_tools=list_tools,
                  on_call_tool=call_tool)


def _error(types: Any, text: str) -> Any:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def serve(root: Path, config: Path | None, device: str | None, http: str | None, plugins: Any,
          warn: Callable[[str], None], keep: bool = False) -> None:
    """Serve until the client closes stdin (stdio) or the process is stopped (HTTP)."""
    import anyio

    tools = KernelProTools(Workspace(root), config=config, device=device, keep=keep)
    extra = plugin_llm_tools(plugins, tools, warn)
    server = build_server(tools, extra)
    if http is None:
        from mcp.server.stdio import stdio_server

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(main)
        return
    import uvicorn

    host, port = parse_http(http)
    app = server.streamable_http_app(host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")


__all__ = ["Workspace", "KernelProTools", "ToolFailure", "serve", "build_server", "llm_tool_main",
           "plugin_llm_tools", "parse_http"]
