"""The optimization loop: generate → evaluate → profile → classify → advise → search.

:func:`optimize` runs it for one problem into a run directory and can resume a run that
was killed: evaluated candidates are read back from ``candidates.jsonl`` (never
evaluated again), drafts written but not evaluated are evaluated first, and the search
tree is rebuilt from ``tree.json`` plus any records it had not caught up with.
"""

from __future__ import annotations

import math
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import attrs

from kernelpro import config as cfg
from kernelpro.api import (
    Attempt,
    Executor,
    GenerationBudgetExhausted,
    GenerationRequest,
    Job,
    JobOutcome,
    ParentInfo,
    ProfileContext,
    ProfileTarget,
    RewardContext,
    RunInfo,
)
from kernelpro.evaluate.runner import profile_env
from kernelpro.executors.calls import EvaluateCall, ProfileCall, make_profiler
from kernelpro.plugins import PluginFailed, Plugins, _first_line
from kernelpro.problem import Problem, ProblemError, check_candidate, detect_language
from kernelpro.profile.pipeline import no_gpu_notes, save_profiles
from kernelpro.records import Analysis, EvalResult, GpuSpec, Verdict, from_json, to_json
from kernelpro.rundir import RunDir, RunDirError, write_atomic
from kernelpro.search.tree import ROOT, Tree


class _Rejected(Exception):
    """A draft its generator rejected: recorded without evaluation."""


class RunError(Exception):
    """The run cannot go on; one line for the user."""


class ProblemFailed(RunError):
    """The problem fails on its own (its import, Model, get_inputs() or forward): the input is
    at fault, as for ``kernelpro eval`` (exit 2), not a run that found no correct candidate."""


class SetupError(RunError):
    """The run cannot start because of its set-up (a plugin's settings or environment)."""


class InvocationError(RunError):
    """The run directory cannot be used as asked (in use, already holds a run, not a run)."""


#: a correct candidate whose timing is flagged noisy_timing is timed again before it can be
#: the run's best; at most this many re-timings per run
MAX_RETIMES = 3


def noisy(result: EvalResult) -> bool:
    return any(f.startswith("noisy_timing") for f in result.flags)


class FrozenDict(dict):
    """A dict a plugin can read (and serialize) but not change."""

    def _frozen(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("this record is read-only; copy it to change it")

    __setitem__ = __delitem__ = _frozen
    clear = pop = popitem = setdefault = update = __ior__ = _frozen  # type: ignore[assignment]


def freeze(value: Any) -> Any:
    """A deep read-only copy: dicts become :class:`FrozenDict`, lists become tuples."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


#: earlier expansions of a parent shown to the generator (the newest)
MAX_ATTEMPTS_SHOWN = 6


_DESCRIBE_INPUTS = """
import importlib.util, json, sys, torch
spec = importlib.util.spec_from_file_location("problem", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
try:  # shapes, dtypes and strides without the data: no time or memory for large inputs
    torch.manual_seed(0)
    with torch.device("meta"):
        inputs = mod.get_inputs()
except Exception:  # get_inputs() needs real values (data-dependent sizes, .item(), ...)
    torch.manual_seed(0)
    inputs = mod.get_inputs()
out = []
for x in inputs:
    if isinstance(x, torch.Tensor):
        layout = "contiguous" if x.is_contiguous() else f"strides {list(x.stride())}"
        out.append(f"{str(x.dtype).replace('torch.', '')} {list(x.shape)} {layout}")
    else:
        out.append(f"{type(x).__name__} {x!r}"[:80])
print(json.dumps(out))
"""


class InputsDescription:
    """One line per forward input of the problem (dtype, shape, layout, or a scalar's
    value), worked out by a child process that runs ``get_inputs()`` (on the meta device
    where it can); started when the run starts, so that its interpreter and torch import
    overlap the baseline job instead of delaying the first generation. :meth:`lines` is
    () when ``get_inputs()`` cannot be run within ``timeout_s``."""

    def __init__(self, problem_path: Path, names: tuple[str, ...], timeout_s: float = 60.0) -> None:
        import subprocess

        self.names = names
        self.deadline = time.monotonic() + timeout_s
        self._lines: tuple[str, ...] | None = None
        try:
            self._proc: Any = subprocess.Popen([sys.executable, "-c", _DESCRIBE_INPUTS, str(problem_path)],
                                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self._proc, self._lines = None, ()

    def lines(self) -> tuple[str, ...]:
        import json
        import subprocess

        if self._lines is None:
            assert self._proc is not None
            try:
                out, _ = self._proc.communicate(timeout=max(0.0, self.deadline - time.monotonic()))
                found = json.loads(out.strip().splitlines()[-1]) if self._proc.returncode == 0 else []
            except (subprocess.SubprocessError, ValueError, IndexError):
                self.close()
                found = []
            names = self.names
            self._lines = tuple(f"{names[i] if i < len(names) else f'input {i}'}: {line}"
                                for i, line in enumerate(found))
        return self._lines

    def close(self) -> None:
        """End the child if it still runs (the run ended first)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()


def describe_inputs(problem_path: Path, names: tuple[str, ...]) -> tuple[str, ...]:
    """:class:`InputsDescription`'s lines, worked out now."""
    return InputsDescription(problem_path, names).lines()


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RunError("--device cuda: no CUDA GPU is visible to PyTorch (use --device cpu)")
    return requested


def gpu_spec(plugins: Plugins, device: str, requested: str | None = None) -> GpuSpec | None:
    """The spec of the GPU in hand, or of ``requested`` (config ``gpu``) when given, also on
    a CPU run."""
    if requested or not device.startswith("cuda"):
        return plugins.gpu_for(None, "", requested)
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    arch = f"sm_{props.major}{props.minor}"
    return plugins.gpu_for(props.name, arch)


@attrs.define
class Progress:
    """Callbacks the CLI uses to show progress; all optional."""

    baseline: Callable[[EvalResult], None] = lambda r: None
    candidate: Callable[[dict[str, Any]], None] = lambda rec: None
    message: Callable[[str], None] = lambda s: None
    # something went wrong that the user must see even with --quiet (a plugin that failed)
    warning: Callable[[str], None] = lambda s: print(f"warning: {s}", file=sys.stderr)


class Optimizer:
    def __init__(self, problem: Problem, config: cfg.Config, plugins: Plugins, run_dir: Path,
                 device: str, progress: Progress | None = None, executor: Executor | None = None,
                 next_problem: bool = False) -> None:
        self.problem = problem
        #: another problem's run follows on this device (a bench): the last evaluation starts
        #: the judge of its baseline job ahead
        self.next_problem = next_problem
        self.config = config
        self.plugins = plugins
        self.run = RunDir(Path(run_dir).resolve())
        self.device = device
        self.progress = progress or Progress()
        resolved = cfg.validate(config, plugins)
        gen_cls, gen_settings = resolved["generator"]
        pol_cls, pol_settings = resolved["search"]
        rew_cls, rew_settings = resolved["reward"]
        self.generator = self._construct("generator", gen_cls, lambda: gen_cls(gen_settings))
        self.policy = self._construct("search", pol_cls,
                                      lambda: pol_cls(pol_settings, rng=random.Random(config.seed)))
        self.reward = self._construct("reward", rew_cls, lambda: rew_cls(rew_settings))
        # where evaluations and profiles run; one given by the caller (a bench's worker) is the caller's
        self._own_executor = executor is None
        if executor is None:
            exe_cls, exe_settings = resolved["executor"]
            executor = self._construct("executor", exe_cls, lambda: exe_cls(exe_settings))
        self.executor: Executor = executor
        self._started = False
        self.generator_failures = 0
        self.empty_reason = ""  # the generator's word on why it proposed nothing (a run without candidates)
        self.measurements = resolved["measurements"]
        self.heuristic_settings = resolved["heuristics"]
        self.gpu = gpu_spec(plugins, device, config.gpu)
        if self.gpu is None:
            # said once, and only for heuristics the config asked for (heuristic_params)
            for line in no_gpu_notes(plugins, f"device {device}", config.heuristic_params):
                self.progress.warning(line)
        self.profiler = None
        if config.profiling.enabled:
            try:
                self.profiler = make_profiler(config, plugins, resolved)
            except PluginFailed as exc:  # before the run directory is touched
                raise SetupError(f"{exc}; fix, replace or block the plugin") from None
        self.memory = None
        if config.memory.enabled:
            try:
                from kernelpro.search.memory import SearchMemory  # optional until present

                self.memory = SearchMemory(config.memory.path)
            except ImportError:
                self.memory = None
            except Exception as exc:
                raise RunError(f"search memory: {exc}") from None
        self.tree = Tree.new()
        self.records: list[dict[str, Any]] = []
        self.results: dict[str, EvalResult] = {}
        self.analyses: dict[str, Analysis] = {}
        self._unprofilable: set[str] = set()  # profiling failed once: not tried again
        self.baseline: EvalResult | None = None
        self.stopped_because = "budget reached"
        self._pool: Any = None
        self.retimed: set[str] = set()
        self._input_lines: InputsDescription | None = None
        self._lock: Any = None
        self._resolved = resolved
        self._profilers: dict[str, Any] = {}  # one per worker of the executor (profile calls)
        self._last_profile_seconds: dict[str, float] = {}
        self.run_id = run_dir.name  # replaced by the id stored in run.json at start()

    # --- set-up and resume ---------------------------------------------------------------

    def info(self) -> RunInfo:
        return RunInfo(run_dir=self.run.path, problem=self.problem, config=self.config, device=self.device,
                       gpu=self.gpu)

    def start(self, resume: bool) -> None:
        # the workers first: an executor that cannot start (no Ray cluster) leaves no run directory
        if self._own_executor:
            try:
                self.executor.start(self.device)
            except (OSError, ValueError) as exc:
                raise SetupError(str(exc)) from None
            except Exception as exc:
                failed = PluginFailed(self.plugins.provider("executor", self.executor.name), "start()", exc)
                raise SetupError(f"{failed}; fix, replace or block the plugin") from None
        self._started = True
        self.run.path.mkdir(parents=True, exist_ok=True)
        self._lock = self.run.lock()
        if self._lock is None:
            holder = self.run.lock_holder()
            raise InvocationError(f"{self.run.path} is in use by another kernelpro process"
                                  + (f" (pid {holder})" if holder else "") + "; wait for it or use another -o")
        if not resume and (self.run.records_path.exists() or (self.run.path / "problem.py").exists()):
            raise InvocationError(f"{self.run.path} already holds a run; use --resume {self.run.path} or another -o")
        if not resume and not self.run.is_run() and self.run.foreign_entries():
            # a new run writes config.yaml, problem.py, best.py, report.md: never over the user's files
            raise InvocationError(f"{self.run.path}: exists, is not empty and is not a KernelPro run directory "
                                  "(a new run needs an empty or new directory); use another -o")
        try:
            meta = self.run.read_json("run.json")
            if resume:
                self._restore()
        except RunDirError as exc:  # before anything is written: the run directory stays as it was
            raise InvocationError(str(exc)) from None
        self.run.create()
        if meta is None:
            import uuid

            meta = {"run_id": f"{self.run.path.name}-{uuid.uuid4().hex[:12]}"}
            self.run.write_json("run.json", meta)
        self.run_id = meta["run_id"]
        if not resume:
            write_atomic(self.run.path / "config.yaml", cfg.to_yaml(self.config))
            write_atomic(self.run.path / "problem.py", self.problem.source)
        # the evaluator watches the directory of the problem file it is given for changes, and
        # the loop writes its records into the run directory while other evaluations run: the
        # evaluations get a copy of the problem in a directory of its own
        if not self._eval_problem_path().exists() or self._eval_problem_path().read_text() != self.problem.source:
            self._eval_problem_path().parent.mkdir(exist_ok=True)
            write_atomic(self._eval_problem_path(), self.problem.source)
        if self._input_lines is None:  # for the generators; worked out beside the baseline job
            self._input_lines = InputsDescription(self._problem_path(), self.problem.forward_args)
        if self.baseline is None:
            self.progress.message("measuring the reference")
            call = EvaluateCall(self._eval_problem_path(), None, self.config.evaluator, self.run.eval_dir("baseline"),
                                self.config.seed, list(self.measurements), ceilings=self.gpu,
                                prestart=self.config.budget > len(self.records))
            base = self._run_one(Job(id="baseline", fn=call), "the reference")["result"]
            if base.verdict is Verdict.PROBLEM_ERROR:
                raise ProblemFailed(f"{self.problem.path or self.problem.name}: the reference itself failed ({base.verdict.value}): "
                                    f"{base.reason}")
            if base.verdict is not Verdict.CORRECT:
                raise RunError(f"the reference itself failed ({base.verdict.value}): {base.reason}")
            self.baseline = base
            self.run.write_json("baseline.json", to_json(base))
        self.progress.baseline(self.baseline)
        self.notify("kernelpro_run_started", run=self.info())

    def _problem_path(self) -> Path:
        return self.run.path / "problem.py"

    def _eval_problem_path(self) -> Path:
        """The problem as evaluations read it (a copy no record is written beside)."""
        return self.run.path / "reference" / "problem.py"

    def _restore(self) -> None:
        if not (self.run.path / "problem.py").exists():
            raise InvocationError(f"{self.run.path}: not a run directory (no problem.py)")
        if (self.run.path / "problem.py").read_text() != self.problem.source:
            raise InvocationError(f"{self.run.path}: holds a run of another problem")
        base = self.run.read_json("baseline.json")
        if base is not None:
            self.baseline = from_json(base, EvalResult)
        pending = self.run.read_json("pending.json", [])
        if not isinstance(pending, list) or not all(isinstance(p, dict) and "id" in p for p in pending):
            raise RunDirError(f"{self.run.path / 'pending.json'}: not a list of drafts; repair or remove it "
                              "(nothing was changed)")
        tree_data = self.run.read_json(self.run.tree_path.name)  # checked: a clear line, not Tree.load's error
        self.records, dropped = self.run.checked_records({p["id"] for p in pending})
        if tree_data is not None:
            self.tree = Tree.load(self.run.tree_path)
            self._policy("load_state", self.tree.policy_state)
        for said in dropped:
            self.progress.warning(said)
        for rec in self.records:
            self.results[rec["id"]] = from_json(rec["result"], EvalResult)
            ap = self.run.analysis_path(rec["id"])
            if ap.exists():
                from kernelpro.records import Bottleneck, Finding

                data = self.run.read_json(str(ap.relative_to(self.run.path)))
                self.analyses[rec["id"]] = Analysis(
                    bottleneck=from_json(data["bottleneck"], Bottleneck) if data.get("bottleneck") else None,
                    findings=tuple(from_json(f, Finding) for f in data.get("findings", [])),
                    notes=tuple(data.get("notes", [])),
                )
            if rec["id"] not in self.tree:
                # the record was written but the tree not yet saved when the run stopped
                self._add_node(rec)
        by_id = {rec["id"]: rec for rec in self.records}
        for line in self.run.read_jsonl("retimes.jsonl"):
            if line.get("id") in by_id:
                self._apply_retime(by_id[line["id"]], from_json(line["result"], EvalResult))
        self.progress.message(f"resumed: {len(self.records)} candidates already evaluated")

    # --- the loop ------------------------------------------------------------------------

    def next_id(self) -> str:
        used = ({r["id"] for r in self.records} | {p["id"] for p in self.run.read_json("pending.json", [])}
                | self.run.used_ids())  # never over a candidate's files (a record lost to a damaged file)
        i = len(used) + 1
        while f"c{i:04d}" in used:
            i += 1
        return f"c{i:04d}"

    def loop(self) -> dict[str, Any]:
        # drafts written before a kill but never evaluated come first
        left: list[dict[str, Any]] = []
        for pending in list(self.run.read_json("pending.json", [])):
            if any(r["id"] == pending["id"] for r in self.records):
                self._drop_pending(pending["id"])
            elif len(self.records) + len(left) < self.config.budget:
                left.append(pending)
        self._evaluate_batch(left)
        while len(self.records) < self.config.budget:
            # a raising policy stops the run; tree.json is the one saved after the last batch
            parents = self._select()
            if not parents:
                self.stopped_because = "search exhausted"
                if not self.records:  # nothing was ever proposed: say what the generator said
                    self.stopped_because += (f": generator {self.generator.name} proposed no candidate"
                                             + (f" ({self.empty_reason})" if self.empty_reason else ""))
                break
            batch: list[dict[str, Any]] = []
            for parent_id in parents:
                if len(self.records) + len(batch) >= self.config.budget:
                    # selected but not expanded: let the policy undo its bookkeeping (virtual loss)
                    self._policy("release", self.tree, parent_id)
                    continue
                try:
                    drafts = [] if self._nothing_whatever_the_profile(parent_id) else \
                        self.generator.generate(self._request(parent_id))
                except GenerationBudgetExhausted as exc:
                    self.stopped_because = f"generator budget exhausted: {exc}"
                    self._evaluate_batch(batch)
                    return self.finish()
                except Exception as exc:
                    # not the node's fault: it stays open; the failure is on record
                    line = f"generator {self.generator.name} failed: {type(exc).__name__}: {_first_line(str(exc))}"
                    self.progress.warning(line)
                    self._policy("failed", self.tree, parent_id)
                    self.generator_failures += 1
                    self.run.append_jsonl("errors.jsonl", {
                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "parent": parent_id,
                        "generator": self.generator.name, "error": line,
                        "in_a_row": self.generator_failures, "evaluated": len(self.records)})
                    if self.generator_failures >= self.config.max_generator_failures:
                        self.stopped_because = f"{line} ({self.generator_failures} times in a row)"
                        self._evaluate_batch(batch)
                        return self.finish()
                    continue
                self.generator_failures = 0
                if not drafts:
                    if not self.records and not batch and not self.empty_reason:
                        self.empty_reason = self._why_nothing(parent_id)
                    self._policy("release", self.tree, parent_id)
                    continue
                for draft in drafts:
                    if len(self.records) + len(batch) >= self.config.budget:
                        break
                    batch.append(self._write_draft(parent_id, draft))
            self._evaluate_batch(batch)
            self._save_tree()
        return self.finish()

    def _evaluate_batch(self, batch: list[dict[str, Any]]) -> None:
        """Evaluate the drafts of one round on the executor's workers, several at once when
        it has several (one GPU each); with an in-process executor the later ones compile in
        the background pool (CPU cores) meanwhile. Each result is recorded here, in this
        thread, as it comes back (the run directory has one writer)."""
        jobs: list[Job] = []
        by_id: dict[str, dict[str, Any]] = {}
        use_pool = len(batch) > 1 and self.config.evaluator.compile_stage and self.executor.in_process
        failed: PluginFailed | None = None
        for pending in batch:
            early = self._screen(pending)
            if early is not None:  # rejected by its generator or invalid: nothing of it runs
                failed = failed or self._record(pending, {"result": early, "profile": None, "notes": [],
                                                          "seconds": {"evaluate": 0.0, "profile": 0.0}})
                continue
            by_id[pending["id"]] = pending
            jobs.append(Job(id=pending["id"], fn=self._evaluate_call(pending, use_pool, ahead=len(jobs))))
        for outcome in self.executor.run(jobs):
            pending = by_id[outcome.id]
            failed = failed or self._record(pending, self._outcome_value(outcome, pending["id"]))
        if failed is not None:
            raise failed

    def _screen(self, pending: dict[str, Any]) -> EvalResult | None:
        """The verdict of a draft decided without running it, or None."""
        cid = pending["id"]
        if pending.get("contract_error"):  # the generator refused its own reply
            return EvalResult(verdict=Verdict.CONTRACT, reason=pending["contract_error"], device=self.device)
        try:
            check_candidate(self.run.source_path(cid).read_text(), self.problem, where=f"{cid}.py")
        except ProblemError as exc:
            return EvalResult(verdict=Verdict.INVALID, reason=str(exc), device=self.device)
        return None

    def _language(self, cid: str, stored: str | None = None) -> str:
        return stored or detect_language(self.run.source_path(cid).read_text())

    def _evaluate_call(self, pending: dict[str, Any], use_pool: bool, ahead: int = 0) -> EvaluateCall:
        """``ahead``: candidates of the same batch before this one (not yet recorded): with
        them counted, the run's last evaluation is the one that starts the judge of the next
        problem's baseline job (a bench), also where the last batch holds two."""
        cid = pending["id"]
        done = len(self.records) + ahead
        path = self.run.source_path(cid)
        compiled = self._compile_pool().submit(path) if use_pool else None
        profile = self._profile_call(cid, parent=pending.get("parent")) \
            if self.config.profiling.when == "each" and self.profiler else None
        return EvaluateCall(self._eval_problem_path(), path, self.config.evaluator, self.run.eval_dir(cid),
                            self.config.seed, list(self.measurements), build_dir=self.run.build_dir(cid),
                            language=self._language(cid, pending.get("language")),
                            reference_flops=self._reference_flops(), compiled=compiled, profile=profile,
                            ceilings=self.gpu, prestart=self.next_problem or done + 1 < self.config.budget,
                            next_is_baseline=self.next_problem and done + 1 >= self.config.budget,
                            measure_max_ms=self._measure_max_ms(), reference_history=self._reference_history(),
                            reference_history_file=str(self.run.reference_history_path) if self.measurements else None)

    #: earlier reference measurements handed to an evaluation, per worker and measurement
    REFERENCE_HISTORY = 8

    def _reference_history(self) -> dict[str, dict[str, list[dict[str, float]]]]:
        """Per worker, per measurement: the reference's measurements taken beside this run's
        latest candidates on that worker, newest first (from the records, so that a resumed
        run has them too); a measurement plugin decides in the judge whether they still count."""
        out: dict[str, dict[str, list[dict[str, float]]]] = {}
        for record in reversed(self.records):
            worker = record.get("worker")
            if not worker:
                continue
            for name, values in (record.get("measurements") or {}).items():
                if name == "evaluator" or not isinstance(values, dict):
                    continue
                ref = {k[len("reference_"):]: v for k, v in values.items()
                       if k.startswith("reference_") and isinstance(v, (int, float)) and not isinstance(v, bool)}
                entries = out.setdefault(worker, {}).setdefault(name, [])
                if "measured_at_unix_s" in ref and len(entries) < self.REFERENCE_HISTORY:
                    entries.append(ref)
        return out

    def _measure_max_ms(self) -> float | None:
        """The slowest time a new candidate may have and still get the extra measurements:
        ``evaluator.measure_within`` over the fastest correct candidate so far (None: all)."""
        within = self.config.evaluator.measure_within
        times = [r["runtime_ms"] for r in self.records if r.get("correct") and r.get("runtime_ms")]
        if within is None or not self.measurements or not times:
            return None
        return min(times) * (1 + within)

    def _profile_call(self, cid: str, result: EvalResult | None = None, parent: str | None = None) -> ProfileCall:
        if parent is None and cid in self.tree:
            parent = self.tree[cid].parent
        parent_analysis = self.analyses.get(parent) if parent is not None else None
        return ProfileCall(config=self.config, problem_path=self._problem_path(),
                           candidate_path=self.run.source_path(cid), workdir=self.run.profile_dir(cid),
                           build_dir=self.run.build_dir(cid), gpu=self.gpu, result=result,
                           predicted=parent_analysis.bottleneck if parent_analysis is not None else None,
                           factory=lambda: make_profiler(self.config, self.plugins, self._resolved),
                           profilers=self._profilers)

    def _outcome_value(self, outcome: JobOutcome, cid: str) -> dict[str, Any]:
        """An evaluation's outcome as :meth:`_record` takes it: one whose job failed (its
        worker lost twice, an error outside the evaluator) is a crash with that reason."""
        if outcome.error is None:
            value: dict[str, Any] = outcome.value
            if outcome.attempts > 1:
                value["notes"] = [*value.get("notes", []), f"evaluated again after its worker was lost"]
            return value
        result = EvalResult(verdict=Verdict.CRASH, reason=f"not evaluated: {outcome.error}", device=self.device)
        return {"result": result, "profile": None, "notes": [], "seconds": {"evaluate": 0.0, "profile": 0.0}}

    def _run_one(self, job: Job, what: str) -> Any:
        """One job on the executor; its value, or RunError when it failed."""
        outcomes = list(self.executor.run([job]))
        if not outcomes:
            raise RunError(f"{what}: the executor returned nothing")
        if outcomes[0].error is not None:
            raise RunError(f"{what}: {outcomes[0].error}")
        return outcomes[0].value

    def _compile_pool(self) -> Any:
        if self._pool is None:
            from kernelpro.evaluate.compile import CompilePool

            self._pool = CompilePool(self.config.evaluator)
        return self._pool

    def _nothing_whatever_the_profile(self, parent_id: str) -> bool:
        """profiling.when = expand, a parent not yet profiled: whether the generator says no
        profile of it could make it propose anything (``Generator.expandable``); the parent is
        then closed without that profile (an Nsight Compute pass on the GPU)."""
        if parent_id == ROOT or parent_id in self.analyses or self.results.get(parent_id) is None:
            return False
        if self.generator.expandable(self._request(parent_id, profile=False)):
            return False
        self.progress.message(f"{parent_id}: not profiled: generator {self.generator.name} has nothing to "
                              "propose from it, whatever its profile says")
        return True

    def _request(self, parent_id: str, profile: bool = True) -> GenerationRequest:
        parent = None
        if parent_id != ROOT:
            if profile:
                self._profile_late(parent_id, "expanded")
            node = self.tree[parent_id]
            parent = ParentInfo(
                id=parent_id,
                source=self.run.source_path(parent_id).read_text(),
                result=self.results.get(parent_id),
                analysis=self.analyses.get(parent_id),
                params=node.stats.get("params", {}),
                description=node.description,
            )
        memory: tuple[str, ...] = ()
        if self.memory is not None:
            bottleneck = None
            if parent is not None and parent.analysis and parent.analysis.bottleneck:
                bottleneck = parent.analysis.bottleneck.kind
            memory = tuple(self.memory.notes(self.problem.digest, bottleneck=bottleneck))
        notes: list[str] = []
        if self.gpu is not None:
            for h in self.plugins.heuristics():
                notes.extend(self._prompt_notes(h))
        return GenerationRequest(
            problem=self.problem,
            n=getattr(self.generator.settings, "candidates_per_expansion", 1),
            device=self.device,
            parent=parent,
            gpu=self.gpu,
            memory=memory,
            tried=tuple(r.get("params", {}) for r in self.records),
            heuristic_notes=tuple(notes),
            seed=self.config.seed + len(self.records),
            run_dir=self.run.path,
            tools=self._toolbox(parent),
            attempts=self._attempts(parent_id),
            baseline=self.baseline,
            tolerances={dtype: (tol.atol, tol.rtol) for dtype, tol in self.config.evaluator.tolerances.items()},
            inputs=self._inputs(),
            goal=self._goal(),
        )

    def _prompt_notes(self, heuristic: Any) -> list[str]:
        """One heuristic's notes for generators. One that raises or returns anything but a
        list of strings is named once and left out of the prompts: it is not the generator's
        failure, and the run goes on (as for a heuristic that raises in ``advise()``)."""
        try:
            inst = heuristic(self.heuristic_settings.get(heuristic.name))
            if not inst.applies(self.gpu):
                return []
            got = inst.prompt_notes(self.gpu)
            if not isinstance(got, (list, tuple)) or not all(isinstance(n, str) for n in got):
                raise TypeError(f"returned {type(got).__name__}, expected a list of strings")
            return list(got)
        except Exception as exc:
            warned = self.__dict__.setdefault("_notes_warned", set())
            if heuristic.name not in warned:
                warned.add(heuristic.name)
                self.progress.warning(f"{self.plugins.provider('heuristic', heuristic.name)} failed in prompt_notes(): "
                                      f"{type(exc).__name__}: {_first_line(str(exc))}; its notes are left out of "
                                      f"the generators' requests")
            return []

    def _goal(self) -> str:
        """The reward's objective for generators; a reward whose ``goal()`` fails is named once
        and generators get the speed objective."""
        try:
            return str(self.reward.goal() or "")
        except Exception as exc:
            if not getattr(self, "_goal_warned", False):
                self._goal_warned = True
                self.progress.warning(f"{self.plugins.provider('reward', self.reward.name)} failed in goal(): "
                                      f"{type(exc).__name__}: {_first_line(str(exc))}; generators aim at speed")
            return ""

    def _inputs(self) -> tuple[str, ...]:
        """The reference's forward inputs described once per run (a child process runs
        ``get_inputs()``); () when that fails."""
        if self._input_lines is None:
            self._input_lines = InputsDescription(self._problem_path(), self.problem.forward_args)
        return self._input_lines.lines()

    def _attempts(self, parent_id: str) -> tuple[Attempt, ...]:
        """The earlier expansions of ``parent_id`` (its children), newest last."""
        out = []
        for cid in self.tree[parent_id].children[-MAX_ATTEMPTS_SHOWN:]:
            result = self.results.get(cid)
            path = self.run.source_path(cid)
            if result is None or not path.exists():
                continue
            node = self.tree[cid]
            out.append(Attempt(id=cid, source=path.read_text(), description=node.description,
                               verdict=result.verdict.value, reason=_first_line(result.reason or "")[:300],
                               speedup=result.speedup, runtime_ms=result.runtime_ms))
        return tuple(out)

    def _toolbox(self, parent: ParentInfo | None) -> Any:
        tools = self.plugins.llm_tools()
        if not tools:
            return None
        try:
            from kernelpro.llm_tools import ToolBox
        except ImportError:
            return None
        from kernelpro.api import ToolContext

        def profile_parent(names: list[str]) -> Analysis:
            if parent is None:
                raise ValueError("there is no parent kernel to profile (first generation)")
            if self.profiler is None:
                raise ValueError("profiling is disabled in the config")
            analysis, _ = self.profiler.profile(self._target(parent.id), self._profile_context(parent.id),
                                                only=names)
            return analysis

        blocked = set(self.config.profiling.block_micro_profilers)

        def micro_profilers() -> list[type]:
            return [cls for cls in self.plugins.micro_profilers() if cls.name not in blocked]

        can_profile = self.profiler is not None and self.device.startswith("cuda")
        ctx = ToolContext(problem=self.problem, parent=parent, device=self.device, gpu=self.gpu,
                          run_dir=self.run.path, profile_parent=profile_parent if can_profile else None,
                          workdir=self.run.path / "tools", micro_profilers=micro_profilers)
        offered = []
        for make in tools:
            tool = make()
            try:
                ok = tool.available(ctx)
            except Exception:
                ok = False  # a tool that cannot tell is not offered
            if ok:
                offered.append(tool)
        return ToolBox(offered, ctx) if offered else None

    def _write_draft(self, parent_id: str, draft: Any) -> dict[str, Any]:
        cid = self.next_id()
        path = self.run.source_path(cid)
        write_atomic(path, draft.source)
        pending = {"id": cid, "parent": parent_id, "generator": draft.generator, "language": draft.language,
                   "description": draft.description, "params": draft.params, "usage": draft.usage}
        if getattr(draft, "contract_error", None):
            pending["contract_error"] = draft.contract_error
        queue = self.run.read_json("pending.json", [])
        queue.append(pending)
        self.run.write_json("pending.json", queue)
        return pending

    def _drop_pending(self, cid: str) -> None:
        queue = [p for p in self.run.read_json("pending.json", []) if p["id"] != cid]
        self.run.write_json("pending.json", queue)

    def _record(self, pending: dict[str, Any], done: dict[str, Any]) -> PluginFailed | None:
        """Record one evaluated draft (``done``: what :class:`EvaluateCall` returned): its
        profile, its line in candidates.jsonl, its node. Returns the failure of the
        configured classifier, if its profiling raised one (the run stops after the round)."""
        cid = pending["id"]
        language = self._language(cid, pending.get("language"))
        result: EvalResult = done["result"]
        for note in done.get("notes", []):
            self.progress.message(f"{cid}: {note}")
        # the speedup is against the reference timed in the same evaluation as the candidate; the
        # compiled reference too, unless it is timed once per problem (in the baseline job)
        compiled_ms, compiled_from = None, None
        if result.baseline_compiled is not None:
            compiled_ms, compiled_from = result.baseline_compiled.median_ms, "candidate evaluation"
        elif result.correct and self.baseline is not None and self.baseline.baseline_compiled is not None:
            compiled_ms, compiled_from = self.baseline.baseline_compiled.median_ms, "baseline job"
        analysis = None
        failed: PluginFailed | None = None
        if done.get("profile") is not None:
            try:
                analysis = self._keep_profile(cid, done["profile"])
            except PluginFailed as exc:  # raised once the record is written: the evaluation is kept
                failed = exc
        self.results[cid] = result
        reward = self._score(result, self._reward_context())
        record = {
            "id": cid,
            "parent": pending["parent"],
            "generator": pending["generator"],
            "language": language,
            "description": pending["description"],
            "params": pending["params"],
            "source": f"candidates/{cid}.py",
            "verdict": result.verdict.value,
            "correct": result.correct,
            "reason": result.reason,
            "runtime_ms": result.runtime_ms,
            "baseline_ms": result.baseline_ms,
            "compiled_baseline_ms": compiled_ms,
            "compiled_baseline_from": compiled_from,
            "speedup": result.speedup,
            "reward": reward,
            "bottleneck": analysis.bottleneck.kind if analysis and analysis.bottleneck else None,
            "findings": [f.title for f in analysis.findings] if analysis else [],
            "flags": list(result.flags),
            "measurements": result.measurements,
            "usage": pending.get("usage", {}),
            "worker": done.get("worker"),  # the executor's worker (GPU) that evaluated it; None: not run
            # wall time of this candidate's evaluation (all its processes included) and profiling
            # (profile: None when profiling.when = expand; profiles.jsonl has the later ones)
            "seconds": {"evaluate": done["seconds"]["evaluate"],
                        "profile": done["seconds"]["profile"] if self.config.profiling.when == "each" else None},
            "result": to_json(result),
        }
        self.run.append_record(record)
        self.records.append(record)
        if self.measurements and record.get("worker"):
            # a judge already started (the next of a batch) reads it when it measures: its
            # job was written before this record
            try:
                self.run.write_json(self.run.reference_history_path.name, self._reference_history())
            except OSError as exc:
                self.progress.message(f"reference history not written: {exc}")
        self._drop_pending(cid)
        self._add_node(record)
        self._save_tree()
        if self.memory is not None and result.verdict is not Verdict.CONTRACT:
            # a reply without a usable kernel says nothing about the change it names
            parent_analysis = self.analyses.get(pending["parent"])
            try:
                self.memory.record(
                    problem_digest=self.problem.digest, problem_name=self.problem.name, node_id=cid,
                    parent_id=pending["parent"], generator=pending["generator"],
                    description=pending["description"], params=pending["params"],
                    bottleneck=(parent_analysis.bottleneck.kind if parent_analysis and parent_analysis.bottleneck
                                else None),
                    findings=[f.title for f in parent_analysis.findings] if parent_analysis else [],
                    verdict=result.verdict.value, speedup=result.speedup, run_id=self.run_id,
                )
            except Exception as exc:
                self.progress.message(f"search memory not updated: {exc}")
        self.notify("kernelpro_candidate_evaluated", run=self.info(), record=freeze(record))
        self.progress.candidate(record)
        return failed

    def notify(self, hook: str, **kwargs: Any) -> None:
        """Call an observer hook of every plugin; a plugin that fails is named in one line and
        the run goes on (observers get read-only copies: they cannot change the run's data)."""
        caller = getattr(self.plugins.hook, hook)
        for impl in reversed(caller.get_hookimpls()):
            try:
                impl.function(**{k: v for k, v in kwargs.items() if k in impl.argnames})
            except Exception as exc:
                self.progress.warning(f"{self.plugins.who(impl.plugin_name)} failed in {hook}: {type(exc).__name__}: "
                                      f"{_first_line(str(exc))}; the run goes on without it (fix it, or block it "
                                      f"with KERNELPRO_BLOCK_PLUGINS={impl.plugin_name})")

    def _reference_flops(self) -> float | None:
        """The reference's FLOPs as the baseline job counted them (None: not counted there)."""
        if self.baseline is None:
            return None
        value = (self.baseline.measurements or {}).get("evaluator", {}).get("flops")
        return float(value) if value is not None else None

    def _keep_profile(self, cid: str, profiled: tuple[Any, ...]) -> Analysis | None:
        """Save what a :class:`ProfileCall` returned; raise the classifier's failure."""
        if profiled[0] == "plugin_failed":
            self._unprofilable.add(cid)
            raise PluginFailed.from_line(profiled[1], "classify()")
        if profiled[0] != "ok":
            self.progress.message(f"{cid}: profiling failed: {profiled[1]}")
            self._unprofilable.add(cid)
            return None
        _, analysis, profiles, seconds = profiled
        save_profiles(profiles, self.run.profile_dir(cid))
        self.run.write_json(f"analyses/{cid}.json", analysis.to_dict())
        self.analyses[cid] = analysis
        self._last_profile_seconds = seconds
        return analysis

    def _profile(self, cid: str, result: EvalResult) -> Analysis | None:
        """Profile a correct candidate (once, on a worker of the executor) and keep its
        analysis; None when it cannot be."""
        if cid in self.analyses:
            return self.analyses[cid]
        if not result.correct or self.profiler is None or cid in self._unprofilable:
            return None
        call = self._profile_call(cid, result)
        outcome = list(self.executor.run([Job(id=cid, fn=call, kind="profile")]))[0]
        if outcome.error is not None:
            self.progress.message(f"{cid}: profiling failed: {outcome.error}")
            self._unprofilable.add(cid)
            return None
        return self._keep_profile(cid, outcome.value)

    def _profile_late(self, cid: str, why: str) -> None:
        """profiling.when = expand: profile a candidate evaluated earlier, now that its
        findings are needed, and complete its record (the one in candidates.jsonl keeps what
        was known when it was written; analyses/<id>.json holds the profile)."""
        result = self.results.get(cid)
        if result is None or cid in self.analyses:
            return
        t0 = time.monotonic()
        analysis = self._profile(cid, result)
        if analysis is None:
            return
        seconds = time.monotonic() - t0
        self.progress.message(f"{cid}: profiled ({seconds:.0f} s, {why})")
        bottleneck = analysis.bottleneck.kind if analysis.bottleneck else None
        findings = [f.title for f in analysis.findings]
        collect_s = {k: round(v, 3) for k, v in self._last_profile_seconds.items()}
        self.run.append_jsonl("profiles.jsonl", {"id": cid, "why": why, "seconds": seconds, "bottleneck": bottleneck,
                                                 "collect_s": collect_s})
        for rec in self.records:
            if rec["id"] == cid:
                rec["bottleneck"], rec["findings"] = bottleneck, findings
                rec.setdefault("seconds", {})["profile"] = seconds

    def _construct(self, kind: str, cls: Any, make: Callable[[], Any]) -> Any:
        """A configured plugin's instance. A ValueError, TypeError or OSError is the plugin
        saying what is wrong with its settings or environment (a missing API key); anything
        else is the plugin failing; both end the command in one line before the run starts."""
        try:
            return make()
        except (ValueError, TypeError, OSError) as exc:
            raise SetupError(f"{exc}") from None
        except Exception as exc:
            failed = PluginFailed(self.plugins.provider(kind, cls.name), "__init__()", exc)
            raise SetupError(f"{failed}; fix, replace or block the plugin") from None

    def _policy(self, method: str, *args: Any) -> Any:
        """A call of the search policy; one that raises stops the run (PluginFailed): the
        tree it keeps its statistics in can no longer be trusted."""
        try:
            return getattr(self.policy, method)(*args)
        except Exception as exc:
            raise PluginFailed(self.plugins.provider("search", self.policy.name), f"{method}()", exc) from None

    def _select(self) -> list[str]:
        """The policy's ``select()``, checked: a list of ids of nodes in the tree. Anything else
        would fail later, in the generator's request, and be blamed on the generator."""
        parents = self._policy("select", self.tree, self.config.parallel)
        try:
            if not isinstance(parents, (list, tuple)):
                raise TypeError(f"returned {type(parents).__name__}, expected a list of node ids")
            for node_id in parents:
                if not isinstance(node_id, str) or node_id not in self.tree:
                    raise ValueError(f"returned {node_id!r}, which is no node of the tree")
        except Exception as exc:
            raise PluginFailed(self.plugins.provider("search", self.policy.name), "select()", exc) from None
        return list(parents)

    def _why_nothing(self, parent_id: str) -> str:
        """The generator's one line on why it proposed nothing (``Generator.why_nothing``);
        "" when it says nothing, or fails to (the stop reason is then the plain one)."""
        try:
            why = self.generator.why_nothing(self._request(parent_id))
        except Exception:
            return ""
        return _first_line(why)[:300] if isinstance(why, str) else ""

    def _score(self, result: EvalResult, context: RewardContext) -> float:
        try:
            raw = self.reward.score(result, context)
            # a number (a 0-d tensor or numpy scalar converts too); float("1.5") would pass a
            # string, and a bool is an int
            if raw is None or isinstance(raw, (str, bytes, bool)):
                raise TypeError(f"returned {type(raw).__name__} {raw!r:.40}, expected a number")
            value = float(raw)
            if not math.isfinite(value):  # NaN poisons every comparison of the search; an
                raise ValueError(f"returned {value}")  # infinity is no JSON (tree.json, candidates.jsonl)
            return value
        except Exception as exc:
            raise PluginFailed(self.plugins.provider("reward", self.reward.name), "score()", exc) from None

    def _add_node(self, record: dict[str, Any]) -> None:
        parent = record["parent"] if record["parent"] in self.tree else ROOT
        self.tree.add(record["id"], parent, reward=record["reward"], correct=record["correct"],
                      verdict=record["verdict"], speedup=record["speedup"], description=record["description"],
                      stats={"params": record.get("params", {}), **_node_numbers(record)})
        self.tree[parent].expansions += 1
        self._policy("update", self.tree, record["id"])

    def _save_tree(self) -> None:
        self.tree.policy_state = self._policy("state")
        self.tree.save(self.run.tree_path)

    def _reward_context(self) -> RewardContext:
        return RewardContext(
            baseline_ms=self.baseline.baseline_ms if self.baseline else None,
            population=tuple(self.results.values()),
            baseline_measurements=self.baseline.measurements if self.baseline else {},
        )

    def _target(self, cid: str) -> ProfileTarget:
        import sys

        build = self.run.build_dir(cid)
        return ProfileTarget(problem_path=self._problem_path(), candidate_path=self.run.source_path(cid),
                             device=self.device, workdir=self.run.profile_dir(cid), build_dir=build,
                             python=sys.executable,
                             # between rounds nothing of the run is in flight: the first worker's GPU
                             env={**profile_env(build, self.device, self.run.source_path(cid)),
                                  **(self.executor.slots()[0].env if self._started else {})})

    def _profile_context(self, cid: str, result: EvalResult | None = None) -> ProfileContext:
        return ProfileContext(gpu=self.gpu, device=self.device, result=result or self.results.get(cid))

    # --- the end -------------------------------------------------------------------------

    def finish(self) -> dict[str, Any]:
        if self._input_lines is not None:
            self._input_lines.close()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._save_tree()
        try:
            return self._finish()
        finally:
            self._stop_executor()

    def _stop_executor(self) -> None:
        if self._own_executor and self._started:
            self._started = False
            try:
                self.executor.shutdown()
            except Exception as exc:
                self.progress.warning(f"executor {self.executor.name!r}: shutdown failed: {type(exc).__name__}: "
                                      f"{_first_line(str(exc))}")

    def _finish(self) -> dict[str, Any]:
        from kernelpro.report import faster_than_reference

        best = self._choose_best()
        if self.retimed:  # tree.json shows the numbers the best was chosen on, as report.md does
            self._save_tree()
        if best is not None:
            self._profile_late(best["id"], "winner")
            shutil.copyfile(self.run.source_path(best["id"]), self.run.path / "best.py")
        summary = {
            "best_id": best["id"] if best else None,
            "best_speedup": best["speedup"] if best else None,
            # False: the best is no faster than the eager reference, so the run advises keeping
            # the reference (report.md says so); None: no correct candidate, or untimed
            "faster_than_reference": faster_than_reference(best["speedup"] if best else None),
            "evaluated": len(self.records),
            "correct": sum(1 for r in self.records if r["correct"]),
            "stopped_because": self.stopped_because,
        }
        from kernelpro.report import write_report

        sections = self._report_sections()
        write_report(self, summary, best, sections)
        self.run.write_json("summary.json", summary)
        self.notify("kernelpro_run_finished", run=self.info(), summary=freeze(summary))
        return summary

    def _report_sections(self) -> list[str]:
        """Every plugin's report sections; a plugin that fails gets a line in the report instead."""
        sections: list[str] = []
        caller = self.plugins.hook.kernelpro_report_sections
        records = freeze(self.records)
        for impl in reversed(caller.get_hookimpls()):
            try:
                returned = impl.function(run=self.info(), records=records) or []
                # a section that is not markdown text would stop report.md from being written
                if not isinstance(returned, (list, tuple)) or not all(isinstance(x, str) for x in returned):
                    raise TypeError(f"expected a list of markdown strings, got {_first_line(repr(returned))[:80]}")
                sections.extend(returned)
            except Exception as exc:
                line = (f"{self.plugins.who(impl.plugin_name)} failed in kernelpro_report_sections: "
                        f"{type(exc).__name__}: "
                        f"{_first_line(str(exc))}")
                self.progress.warning(f"{line}; report.md says so in its place (fix it, or block it with "
                                      f"KERNELPRO_BLOCK_PLUGINS={impl.plugin_name})")
                sections.append(f"## {impl.plugin_name}\n\n(not written: {line})\n")
        return sections

    def abandon(self) -> None:
        """The run stops early (a plugin failed): background compiles are ended; the records,
        drafts and tree.json stay as last written, so ``--resume`` continues from there."""
        if self._input_lines is not None:
            self._input_lines.close()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._stop_executor()

    # --- the best candidate ---------------------------------------------------------------

    def _choose_best(self) -> dict[str, Any] | None:
        """The correct candidate with the highest reward whose timing is not flagged noisy; a
        noisy one that would be best is timed again first (at most MAX_RETIMES per run)."""
        retimes = 0
        while True:
            ctx = self._reward_context()
            ranked = sorted((rec for rec in self.records if self.results[rec["id"]].correct),
                            key=lambda rec: self._score(self.results[rec["id"]], ctx), reverse=True)
            eligible = [rec for rec in ranked if rec["id"] in self.retimed or not noisy(self.results[rec["id"]])]
            if not ranked or ranked[0] in eligible or retimes >= MAX_RETIMES:
                return eligible[0] if eligible else None
            retimes += 1
            self._retime(ranked[0])

    def _retime(self, rec: dict[str, Any]) -> None:
        """Evaluate a candidate again because its timing was noisy; the new result replaces the
        old one everywhere but in candidates.jsonl (retimes.jsonl keeps it for --resume)."""
        cid = rec["id"]
        self.progress.message(f"{cid}: timing was noisy; timing it again")
        k = sum(1 for line in self.run.read_jsonl("retimes.jsonl") if line.get("id") == cid) + 1
        call = EvaluateCall(self._eval_problem_path(), self.run.source_path(cid), self.config.evaluator,
                            self.run.eval_dir(f"{cid}-retime{k}"), self.config.seed, list(self.measurements),
                            build_dir=self.run.build_dir(cid), language=rec.get("language") or "pytorch",
                            reference_flops=self._reference_flops(), ceilings=self.gpu)
        result = self._run_one(Job(id=f"{cid}-retime{k}", fn=call), f"{cid}: timing it again")["result"]
        self.run.append_jsonl("retimes.jsonl", {"id": cid, "result": to_json(result),
                                                "was": {"runtime_ms": rec["runtime_ms"], "speedup": rec["speedup"]}})
        self._apply_retime(rec, result)

    def _apply_retime(self, rec: dict[str, Any], result: EvalResult) -> None:
        cid = rec["id"]
        self.results[cid] = result
        self.retimed.add(cid)
        rec.update(verdict=result.verdict.value, correct=result.correct, reason=result.reason,
                   runtime_ms=result.runtime_ms, baseline_ms=result.baseline_ms, speedup=result.speedup,
                   flags=list(result.flags), retimed=True, result=to_json(result))
        if result.baseline_compiled is not None:
            rec["compiled_baseline_ms"] = result.baseline_compiled.median_ms
        rec["reward"] = self._score(result, self._reward_context())
        if cid in self.tree:  # the report's tree shows the numbers the best was chosen on
            node = self.tree[cid]
            node.speedup, node.reward, node.correct, node.verdict = (result.speedup, rec["reward"], result.correct,
                                                                     result.verdict.value)
            node.stats.update(_node_numbers(rec))


def _node_numbers(record: dict[str, Any]) -> dict[str, Any]:
    """What a search policy may rank on besides the reward, kept in the node's ``stats``: the
    candidate's ``runtime_ms`` and its configured measurements (``energy``, ...; the
    evaluator's own notes are left in ``candidates.jsonl``)."""
    measurements = {k: dict(v) for k, v in (record.get("measurements") or {}).items() if k != "evaluator"}
    return {"runtime_ms": record.get("runtime_ms"), "measurements": measurements}


def optimize(problem: Problem, config: cfg.Config, plugins: Plugins, run_dir: Path, device: str,
             resume: bool = False, progress: Progress | None = None,
             executor: Executor | None = None, next_problem: bool = False) -> dict[str, Any]:
    """Optimize ``problem`` into ``run_dir``. ``executor``: a started executor to run the
    evaluations on (a bench's worker pins one problem to its GPU); by default the config's
    is built, started and shut down by the run. ``next_problem``: another problem's run
    follows on this device (a bench), so the last evaluation starts its baseline job's
    judge ahead."""
    opt = Optimizer(problem, config, plugins, run_dir, device, progress, executor, next_problem=next_problem)
    try:
        opt.start(resume)
    except BaseException:
        opt.abandon()
        raise
    t0 = time.monotonic()
    try:
        summary = opt.loop()
    except BaseException:
        opt.abandon()
        raise
    summary["wall_s"] = time.monotonic() - t0
    return summary
