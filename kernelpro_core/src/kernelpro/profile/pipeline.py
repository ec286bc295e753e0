"""Profile → classify → advise: the two-stage gate.

1. Stage 1: every available collector of level "kernel" runs its cheap pass. For a
   candidate whose parent was profiled, a collector that ``combines_stages`` (ncu) also
   collects, in the same pass, the metrics the parent's bottleneck gated in; when the
   candidate's own bottleneck gates in no other, step 4 costs no second pass
   (``profiling.stage1_ahead``: ``all`` takes every kernel-level micro-profiler's metrics
   there, so step 4 never needs one; ``none`` never combines).
2. The configured bottleneck classifier names the bottleneck from those profiles.
3. Gate: only micro-profilers whose ``applies_to`` matches the bottleneck run (when no
   bottleneck could be classified, for example without a kernel-level collector, there
   is nothing to gate on and every micro-profiler runs on the levels collected).
4. Stage 2: kernel-level collectors collect just the metrics the gated micro-profilers
   declared; collectors of the other levels (instruction, system) collect once, as stage
   2 with the metrics their own gated micro-profilers declared, and only when one of
   those is gated in.
5. Each gated micro-profiler reads the profile of its own level; architecture
   heuristics for the GPU add theirs. Findings are sorted by severity, then gain.

A collector that cannot run here contributes one note saying why, and the loop carries
on with what the others found (or with timing alone).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs

from kernelpro.api import (
    ANY,
    Analyzer,
    Collector,
    CollectorError,
    MicroProfiler,
    ProfileContext,
    ProfileTarget,
)
from kernelpro import progress
from kernelpro.plugins import PluginFailed, Plugins, UnknownName, _first_line
from kernelpro.records import BOTTLENECK_KINDS, Analysis, Bottleneck, Finding, ProfileData, to_json

SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), -(f.estimated_gain or 0.0), f.tool))


class Profiler:
    """Runs the gate for one candidate with the installed plugins."""

    def __init__(self, plugins: Plugins, classifier: str | None = "roofline",
                 collectors: list[str] | None = None, block_micro_profilers: Iterable[str] = (),
                 heuristic_settings: dict[str, Any] | None = None, classifier_settings: Any = None,
                 micro_profiler_settings: dict[str, Any] | None = None,
                 collector_settings: dict[str, Any] | None = None, ahead: str = "parent") -> None:
        self.plugins = plugins
        #: what a collector that combines stages takes with stage 1 (profiling.stage1_ahead)
        self.ahead = ahead
        self.notes: list[str] = []
        #: seconds of each collector pass of the last :meth:`profile` ("<collector>:<stage>")
        self.last_seconds: dict[str, float] = {}
        self.classifier = None
        if classifier:
            try:
                cls = plugins.classifier(classifier)
            except UnknownName as exc:
                self.notes.append(f"no bottleneck classification: {exc}")
            else:
                try:
                    self.classifier = cls(classifier_settings)
                except Exception as exc:
                    raise PluginFailed(plugins.provider("classifier", classifier), "__init__()", exc) from None
        all_collectors = plugins.collectors()
        if collectors is not None:
            names = {c.name for c in all_collectors}
            for name in collectors:
                if name not in names:
                    raise UnknownName(f"unknown collector {name!r}; available: {', '.join(sorted(names)) or 'none'}")
            all_collectors = [c for c in all_collectors if c.name in collectors]
        by_name = collector_settings or {}  # from profiling.collector_params
        self.collectors: list[Collector] = [c(by_name.get(c.name)) for c in all_collectors]
        blocked = set(block_micro_profilers)
        micro_settings = micro_profiler_settings or {}  # by name, from profiling.micro_profiler_params
        self.micro_profilers: list[MicroProfiler] = [m(micro_settings.get(m.name)) for m in plugins.micro_profilers()
                                                     if m.name not in blocked]
        settings = heuristic_settings or {}
        self.heuristics = [h(settings.get(h.name)) for h in plugins.heuristics()]

    def _classify(self, profiles: dict[str, ProfileData], context: ProfileContext) -> Any:
        """The configured classifier's verdict; one that raises ends in :class:`PluginFailed`,
        since every later step (the gate, the search's choices) depends on it."""
        classifier = self.classifier
        assert classifier is not None  # called only when a classifier is configured
        try:
            verdict = classifier.classify(profiles, context)
            if verdict is not None and not isinstance(verdict, Bottleneck):
                # a wrong return would fail later, in core, as an internal error naming no plugin
                raise TypeError(f"returned {type(verdict).__name__}, expected a Bottleneck or None")
            if verdict is not None and verdict.kind not in BOTTLENECK_KINDS:
                raise ValueError(f"returned a Bottleneck of kind {verdict.kind!r}, expected one of "
                                 f"{', '.join(BOTTLENECK_KINDS)}")
            return verdict
        except Exception as exc:
            raise PluginFailed(self.plugins.provider("classifier", classifier.name), "classify()", exc) from None

    def _parts(self, key: str, data: ProfileData | None) -> None:
        """A pass's own account of where its seconds went, beside its total."""
        for part, v in (getattr(data, "seconds", None) or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.last_seconds[f"{key}:{part}"] = float(v)

    def gated(self, bottleneck, level: str | None = None) -> list[MicroProfiler]:
        return [m for m in self.micro_profilers
                if (level is None or m.level == level) and m.applies(bottleneck)]

    def profile(self, target: ProfileTarget, context: ProfileContext,
                only: Iterable[str] | None = None,
                predicted: Bottleneck | None = None) -> tuple[Analysis, dict[str, ProfileData]]:
        """Profile a candidate. ``only`` restricts the micro-profilers to those names
        (still gated), as the LLM tool "run a named micro-profiler" asks. ``predicted``: a
        bottleneck expected for this candidate (its parent's): a kernel-level collector
        that ``combines_stages`` collects the metrics it gates in with stage 1, and its
        stage 2 runs only when the candidate's own bottleneck gates in another metric."""
        notes = list(self.notes)
        ahead: list[str] = []  # kernel metrics asked for with stage 1
        why = ""
        if only is None and self.ahead == "all":
            ahead = sorted({x for m in self.micro_profilers if m.level == "kernel" for x in m.metrics})
            why = "every micro-profiler's metrics"
        elif only is None and self.ahead == "parent" and predicted is not None:
            ahead = sorted({x for m in self.gated(predicted) if m.level == "kernel" for x in m.metrics})
            why = "the metrics its parent needed"
        self.last_seconds = {}
        available: list[Collector] = []
        for c in self.collectors:
            reason = c.unavailable_reason(target)
            if reason:
                notes.append(f"{c.name}: {reason}")
            else:
                available.append(c)
        stage1: dict[str, ProfileData] = {}
        collected_ahead: dict[str, set[str]] = {}  # collector name -> metrics its stage 1 took
        for c in available:
            if c.level != "kernel":
                continue
            t0 = time.monotonic()
            combined = bool(ahead) and getattr(c, "combines_stages", False)
            progress.stage(f"{_what(target)}: profile, {c.name} pass 1 ({c.level}"
                           f"{', with ' + why if combined else ''})")
            try:
                stage1[c.level] = c.collect(target, stage=1, metrics=ahead) if combined else c.collect(target, stage=1)
                if combined:
                    collected_ahead[c.name] = set(ahead)
            except CollectorError as exc:
                notes.append(f"{c.name}: {exc}")
            except Exception as exc:  # a broken collector costs its own data, not the run
                notes.append(_broken(c.name, "collect()", exc))
            self.last_seconds[f"{c.name}:1"] = time.monotonic() - t0
            self._parts(f"{c.name}:1", stage1.get(c.level))
        bottleneck = None
        if self.classifier is not None and stage1:
            bottleneck = self._classify(stage1, context)
        gated = self.gated(bottleneck)  # with no bottleneck, every micro-profiler applies
        if only is not None:
            wanted = set(only)
            unknown = wanted - {m.name for m in self.micro_profilers}
            if unknown:
                raise UnknownName(f"unknown micro-profiler(s) {', '.join(sorted(unknown))}; available: "
                                  f"{', '.join(sorted(m.name for m in self.micro_profilers))}")
            gated = [m for m in self.micro_profilers if m.name in wanted]
        profiles = dict(stage1)
        for c in available:
            t0, collected = time.monotonic(), False
            try:
                if c.level == "kernel":
                    metrics = sorted({x for m in gated if m.level == "kernel" for x in m.metrics})
                    if metrics and c.name in collected_ahead and set(metrics) <= collected_ahead[c.name]:
                        notes.append(f"{c.name}: one pass: the metrics this bottleneck's micro-profilers "
                                     "read were collected with stage 1 ("
                                     + ("profiling.stage1_ahead: all" if self.ahead == "all"
                                        else "its parent's bottleneck gated them in") + ")")
                    elif metrics:
                        collected = True
                        progress.stage(f"{_what(target)}: profile, {c.name} pass 2 ({c.level})")
                        profiles["kernel"] = c.collect(target, stage=2, metrics=metrics)
                        # keep stage-1 numbers the stage-2 pass did not repeat
                        profiles["kernel"] = merge_profiles(stage1.get("kernel"), profiles["kernel"])
                elif any(m.level == c.level for m in gated):
                    # other levels collect once, for the metrics their gated micro-profilers need
                    metrics = sorted({x for m in gated if m.level == c.level for x in m.metrics})
                    collected = True
                    progress.stage(f"{_what(target)}: profile, {c.name} ({c.level})")
                    profiles[c.level] = c.collect(target, stage=2, metrics=metrics)
            except CollectorError as exc:
                notes.append(f"{c.name}: {exc}")
            except Exception as exc:
                notes.append(_broken(c.name, "collect()", exc))
            if collected:
                self.last_seconds[f"{c.name}:2"] = time.monotonic() - t0
                self._parts(f"{c.name}:2", profiles.get(c.level))
        if only is None and self.ahead in ("all", "none"):
            self._start_next(available, target, ahead)
        for p in profiles.values():
            notes.extend(p.notes)
        findings = run_micro_profilers(gated, profiles, bottleneck, context, notes, who=self._who)
        findings += self.advise(bottleneck, profiles, context, notes)
        return Analysis(bottleneck=bottleneck, findings=tuple(sort_findings(findings)), notes=tuple(notes)), profiles

    def _start_next(self, available: list[Collector], target: ProfileTarget, ahead: list[str]) -> None:
        """The next profile's first kernel-level pass asks for the same metrics as this one's
        (``stage1_ahead`` all or none): its collectors may start it now (``start_ahead``);
        one that fails there costs nothing but the head start."""
        for c in available:
            if c.level != "kernel":
                continue
            combined = bool(ahead) and getattr(c, "combines_stages", False)
            try:
                c.start_ahead(target, 1, ahead if combined else ())
            except Exception:
                pass

    def _analyzer_call(self, analyzer: Any, method: str, fn: Callable[..., Any], *args: Any) -> Any:
        """An analyzer's call: its CollectorError is the user's one line already; anything
        else is the analyzer failing (PluginFailed)."""
        try:
            return fn(*args)
        except CollectorError:
            raise
        except Exception as exc:
            raise PluginFailed(self.plugins.provider("analyzer", analyzer.name), method, exc) from None

    def advise(self, bottleneck: Any, profiles: dict[str, ProfileData], context: ProfileContext,
               notes: list[str]) -> list[Finding]:
        """The findings of the architecture heuristics that apply to ``context.gpu``."""
        findings: list[Finding] = []
        for h in self.heuristics:
            if h.applies(context.gpu):
                try:
                    findings.extend(_findings(h.advise(bottleneck, profiles, context)))
                except Exception as exc:
                    notes.append(f"{self._who('heuristic', h.name)} failed: {type(exc).__name__}: "
                                 f"{_first_line(str(exc))}")
        return findings

    def _who(self, kind: str, name: str) -> str:
        """``micro-profiler 'x' (plugin 'p' from dist)``, for notes on a plugin's failure."""
        try:
            return self.plugins.provider(kind, name)
        except Exception:  # the note must not fail too
            return f"{kind.replace('_', '-')} {name!r}"

    def analyze_file(self, path: Path, context: ProfileContext) -> Analysis:
        """``kernelpro analyze``: read an existing report, binary or trace. ``context.gpu``
        is the GPU the user named; without one, the GPU the file names (its
        ``device_name``) gives the spec and the heuristics."""
        analyzers: list[Analyzer] = [self._analyzer_call(a, "__init__()", a) for a in self.plugins.analyzers()]
        chosen = next((a for a in analyzers if self._analyzer_call(a, "accepts()", a.accepts, path)), None)
        if chosen is None:
            names = ", ".join(sorted(a.name for a in analyzers)) or "none installed"
            raise CollectorError(f"{path}: no analyzer reads this file (analyzers: {names})")
        profile = self._analyzer_call(chosen, "load()", chosen.load, path)
        gpu_notes: list[str] = []
        if context.gpu is None and profile.device_name:
            context = attrs.evolve(context, gpu=self.plugins.gpu_for(profile.device_name))
        if context.gpu is None:
            what = f"device {profile.device_name!r}" if profile.device_name else "the device (the file does not name it)"
            gpu_notes = no_gpu_notes(self.plugins, what, hint="name the GPU with --gpu")
        return self.analyze_profile(profile, context, gpu_notes)

    def analyze_profile(self, profile: ProfileData, context: ProfileContext,
                        extra_notes: Iterable[str] = ()) -> Analysis:
        """Classify, gate and advise on one profile already collected (a report read from
        disk, one kernel of a corpus): the steps of :meth:`profile` after collection. A
        kernel-level profile is classified and gates the micro-profilers; nothing classifies
        the other levels by themselves, so every micro-profiler of that level runs."""
        bottleneck = None
        profiles = {profile.level: profile}
        if profile.level == "kernel" and self.classifier is not None:
            bottleneck = self._classify(profiles, context)
        gated = self.gated(bottleneck, level=profile.level)
        notes = list(self.notes) + list(profile.notes) + list(extra_notes)
        findings = run_micro_profilers(gated, profiles, bottleneck, context, notes, who=self._who)
        findings += self.advise(bottleneck, profiles, context, notes)
        return Analysis(bottleneck=bottleneck, findings=tuple(sort_findings(findings)), notes=tuple(notes))


def no_gpu_notes(plugins: Plugins, what: str, only: Iterable[str] | None = None,
                 hint: str = "name the GPU with gpu: in the config") -> list[str]:
    """One line saying that no GPU spec is known for ``what`` (e.g. "device cpu") and which
    architecture-specific heuristics therefore stay silent; none when none is installed
    (or, with ``only``, none of those named)."""
    wanted = None if only is None else set(only)
    specific = [h for h in plugins.heuristics() if h.archs and (wanted is None or h.name in wanted)]
    if not specific:
        return []
    names = ", ".join(f"{h.name} ({', '.join(h.archs)})" for h in specific)
    return [f"no GPU spec known for {what}: GPU ceilings and the architecture heuristics {names} "
            f"are not consulted; {hint}"]


def _findings(got: Any) -> list[Finding]:
    """What a micro-profiler or heuristic returned, checked to be a list of findings: anything
    else would fail later, in core (sorting, the report), as an error that names no plugin."""
    if not isinstance(got, (list, tuple)):
        raise TypeError(f"returned {type(got).__name__}, expected a list of Finding")
    for item in got:
        if not isinstance(item, Finding):
            raise TypeError(f"returned a list holding {type(item).__name__}, expected Finding")
    return list(got)


def run_micro_profilers(gated: list[MicroProfiler], profiles: dict[str, ProfileData], bottleneck: Any,
                        context: ProfileContext, notes: list[str],
                        who: Callable[[str, str], str] | None = None) -> list[Finding]:
    """Every gated micro-profiler's findings; one that fails leaves a note naming it (with its
    plugin and distribution when ``who(kind, name)`` says them) and the rest go on."""
    findings: list[Finding] = []
    for m in gated:
        profile = profiles.get(m.level)
        if profile is None:
            continue
        try:
            findings.extend(_findings(m.analyze(profile, bottleneck, context)))
        except Exception as exc:  # a broken micro-profiler must not end the run
            name = who("micro_profiler", m.name) if who is not None else f"micro-profiler {m.name!r}"
            notes.append(f"{name} failed: {type(exc).__name__}: {_first_line(str(exc))}")
    return findings


def merge_profiles(first: ProfileData | None, second: ProfileData) -> ProfileData:
    if first is None:
        return second
    by_name = {k.name: k for k in first.kernels}
    merged = []
    for k in second.kernels:
        old = by_name.get(k.name)
        if old is not None:
            k = attrs.evolve(k, metrics={**old.metrics, **k.metrics},
                             duration_ns=k.duration_ns if k.duration_ns is not None else old.duration_ns)
        merged.append(k)
    names = {k.name for k in merged}
    merged += [k for k in first.kernels if k.name not in names]
    return attrs.evolve(second, kernels=tuple(merged), notes=tuple(first.notes) + tuple(second.notes))


def analysis_json(analysis: Analysis) -> str:
    return json.dumps(analysis.to_dict(), indent=2)


def save_profiles(profiles: dict[str, ProfileData], directory: Path) -> None:
    """Keep the raw profiles of a candidate (for LLM tools that fetch raw numbers)."""
    directory.mkdir(parents=True, exist_ok=True)
    for level, p in profiles.items():
        data = {"level": p.level, "collector": p.collector, "notes": list(p.notes),
                "kernels": [to_json(k) for k in p.kernels]}
        (directory / f"{level}.json").write_text(json.dumps(data, indent=1, default=str))


_ = ANY  # re-exported for plugin authors reading this module


def _broken(name: str, method: str, exc: BaseException) -> str:
    return (f"{name} failed in {method}: {type(exc).__name__}: {_first_line(str(exc))} "
            "(a bug in that collector; its data is missing)")


def _what(target: ProfileTarget) -> str:
    """The profiled candidate's name for the progress display."""
    return Path(target.candidate_path).stem if target.candidate_path is not None else "reference"
