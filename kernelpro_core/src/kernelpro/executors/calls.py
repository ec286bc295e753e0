"""The work the loop hands an executor, as self-contained calls.

Each is a picklable object called with the worker's :class:`kernelpro.api.Slot`, so the
same call runs in a thread of the ``local`` executor or in a Ray actor on another host.
They only compute and write inside the candidate's own evaluation and build directories;
what they return goes back to the loop, which writes the run's records (one writer).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from kernelpro.api import ProfileContext, ProfileTarget, Slot
from kernelpro.records import Bottleneck, EvalResult, GpuSpec


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def make_profiler(config: Any, plugins: Any, resolved: dict[str, Any]) -> Any:
    """The profiling pipeline a run's config asks for (:class:`kernelpro.profile.pipeline.Profiler`)."""
    from kernelpro.profile.pipeline import Profiler

    return Profiler(plugins, config.profiling.classifier, config.profiling.collectors,
                    config.profiling.block_micro_profilers, resolved["heuristics"], resolved["classifier"],
                    resolved["micro_profilers"], resolved["collectors"], ahead=config.profiling.stage1_ahead)


@attrs.define
class ProfileCall:
    """Profile one correct candidate on the worker's device. Returns ``("ok", analysis,
    profiles, seconds per collector pass)``, ``("plugin_failed", line)`` when the configured
    classifier raised (the run must stop), or ``("error", line)``.

    In this process the profilers come from ``factory`` (one per worker: a profiler keeps
    per-call state); in another (a Ray actor) the installed plugins are loaded there and
    the config resolved again."""

    config: Any  # kernelpro.config.Config
    problem_path: Path
    candidate_path: Path
    workdir: Path
    build_dir: Path
    gpu: GpuSpec | None
    result: EvalResult | None = None
    #: the bottleneck expected (its parent's): a collector that combines stages takes the
    #: metrics it gates in with stage 1 (Profiler.profile)
    predicted: Bottleneck | None = None
    factory: Any = None  # () -> Profiler, in this process only (not pickled)
    profilers: Any = None  # slot name -> Profiler, shared by the calls of one run (not pickled)

    def __getstate__(self) -> dict[str, Any]:
        state = {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}
        state["factory"] = state["profilers"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def _profiler(self, slot: Slot) -> Any:
        if self.factory is None:  # in another process: its own plugins, same config
            from kernelpro import config as cfg
            from kernelpro.plugins import Plugins

            plugins = Plugins(block=self.config.plugins.block)
            return make_profiler(self.config, plugins, cfg.validate(self.config, plugins))
        if self.profilers is None:
            self.profilers = {}
        with _PROFILERS_GUARD:
            if slot.name not in self.profilers:
                self.profilers[slot.name] = self.factory()
            return self.profilers[slot.name]

    def __call__(self, slot: Slot, result: EvalResult | None = None) -> tuple[Any, ...]:
        from kernelpro.evaluate.runner import profile_env
        from kernelpro.plugins import PluginFailed

        result = result if result is not None else self.result
        try:
            profiler = self._profiler(slot)
            env = {**profile_env(self.build_dir, slot.device, self.candidate_path), **slot.env}
            target = ProfileTarget(problem_path=self.problem_path, candidate_path=self.candidate_path,
                                   device=slot.device, workdir=self.workdir, build_dir=self.build_dir,
                                   python=sys.executable, env=env)
            analysis, profiles = profiler.profile(target, ProfileContext(gpu=self.gpu, device=slot.device,
                                                                         result=result), predicted=self.predicted)
        except PluginFailed as exc:
            return ("plugin_failed", str(exc))
        except Exception as exc:
            return ("error", _line(exc))
        return ("ok", analysis, profiles, dict(getattr(profiler, "last_seconds", {})))


_PROFILERS_GUARD = threading.Lock()


@attrs.define
class EvaluateCall:
    """Evaluate one candidate (or, with ``candidate_path`` None, time the reference) on the
    worker's device, then profile it there when ``profile`` is given and it is correct: the
    worker runs nothing else meanwhile, so the profiling never overlaps a timing on its
    device. Returns ``{"result", "profile", "seconds": {"evaluate", "profile"}, "notes"}``."""

    problem_path: Path
    candidate_path: Path | None
    config: Any  # kernelpro.config.EvaluatorConfig
    workdir: Path
    seed: int
    measurements: list[Any]
    build_dir: Path | None = None
    language: str = "pytorch"
    reference_flops: float | None = None
    compiled: Any = None  # a Future of the loop's compile pool (in-process executors only)
    profile: ProfileCall | None = None
    ceilings: Any = None  # the run's GpuSpec: the minimum-traffic bound is reported against it
    #: more evaluations follow on this worker: start the next one's processes ahead
    #: (``evaluator.prestart`` must allow it; docs/evaluation.md, "Started ahead")
    prestart: bool = False
    #: what follows on this worker is another problem's baseline job (a bench)
    next_is_baseline: bool = False
    #: the measurements run only if the candidate's time is at most this (evaluator.measure_within)
    measure_max_ms: float | None = None
    #: per worker name, per measurement name: this run's earlier measurements of the
    #: reference on that worker (the loop's ``reference_history``)
    reference_history: dict[str, dict[str, list[dict[str, float]]]] = attrs.field(factory=dict)
    #: the same, as the loop last wrote it (``reference_history.json``): the judge reads it
    #: again when it measures, for the records written after this call was made
    reference_history_file: str | None = None

    def __call__(self, slot: Slot) -> dict[str, Any]:
        from kernelpro.evaluate.runner import evaluate

        notes: list[str] = []
        compiled = None
        if self.compiled is not None:
            try:
                compiled = self.compiled.result()
            except Exception as exc:  # the evaluator compiles it itself then
                notes.append(f"background compile failed: {exc}")
        t0 = time.monotonic()
        result = evaluate(self.problem_path, self.candidate_path, device=slot.device, config=self.config,
                          workdir=self.workdir, seed=self.seed, measurements=self.measurements,
                          build_dir=self.build_dir, language=self.language, compiled=compiled,
                          reference_flops=self.reference_flops, env=dict(slot.env), ceilings=self.ceilings,
                          prestart=self.prestart, next_is_baseline=self.next_is_baseline,
                          measure_max_ms=self.measure_max_ms,
                          reference_history=self.reference_history.get(slot.name),
                          reference_history_file=self.reference_history_file, worker=slot.name)
        t1 = time.monotonic()
        profiled = None
        if self.profile is not None and result.correct:
            profiled = self.profile(slot, result)
        return {"result": result, "profile": profiled, "notes": notes, "worker": slot.name,
                "seconds": {"evaluate": t1 - t0, "profile": time.monotonic() - t1}}
