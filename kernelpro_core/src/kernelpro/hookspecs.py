"""KernelPro's hook specifications (pluggy project name ``kernelpro``).

Registration hooks receive a ``register`` callable: a plugin calls it once per thing it
contributes. Things are named (``name`` class attribute) and the user picks them by name
in config. Their base classes live in :mod:`kernelpro.api`.

Lifecycle hooks let observers follow a run. None of them may change it.

Every hook is documented in ``hookspecs.md`` at the repository root; a test fails when
the two disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    import click

    from kernelpro.api import (
        Analyzer,
        ArchHeuristic,
        BottleneckClassifier,
        CandidateRecord,
        Collector,
        Executor,
        Generator,
        LLMTool,
        Measurement,
        MicroProfiler,
        Reward,
        RunInfo,
        RunSummary,
        SearchPolicy,
    )
    from kernelpro.records import GpuSpec

hookspec = pluggy.HookspecMarker("kernelpro")
hookimpl = pluggy.HookimplMarker("kernelpro")


# --- Registration: what a plugin contributes -------------------------------------------


@hookspec
def kernelpro_register_generators(register: Callable[[type[Generator]], None]) -> None:
    """Register code generators (subclasses of :class:`kernelpro.api.Generator`).

    :param register: call ``register(GeneratorClass)`` for each generator.
    """


@hookspec
def kernelpro_register_search_policies(register: Callable[[type[SearchPolicy]], None]) -> None:
    """Register search policies (subclasses of :class:`kernelpro.api.SearchPolicy`).

    :param register: call ``register(PolicyClass)`` for each policy.
    """


@hookspec
def kernelpro_register_rewards(register: Callable[[type[Reward]], None]) -> None:
    """Register reward functions (subclasses of :class:`kernelpro.api.Reward`).

    :param register: call ``register(RewardClass)`` for each reward.
    """


@hookspec
def kernelpro_register_classifiers(register: Callable[[type[BottleneckClassifier]], None]) -> None:
    """Register bottleneck classifiers (subclasses of :class:`kernelpro.api.BottleneckClassifier`).

    :param register: call ``register(ClassifierClass)`` for each classifier.
    """


@hookspec
def kernelpro_register_micro_profilers(register: Callable[[type[MicroProfiler]], None]) -> None:
    """Register micro-profilers (subclasses of :class:`kernelpro.api.MicroProfiler`).

    Each declares the bottleneck kinds it applies to (``applies_to``): the second stage of
    the two-stage gate runs only those that match the classified bottleneck.

    :param register: call ``register(MicroProfilerClass)`` for each micro-profiler.
    """


@hookspec
def kernelpro_register_collectors(register: Callable[[type[Collector]], None]) -> None:
    """Register profilers / metric collectors (subclasses of :class:`kernelpro.api.Collector`).

    :param register: call ``register(CollectorClass)`` for each collector.
    """


@hookspec
def kernelpro_register_analyzers(register: Callable[[type[Analyzer]], None]) -> None:
    """Register file analyzers for ``kernelpro analyze FILE`` (subclasses of
    :class:`kernelpro.api.Analyzer`): each turns a file (a profiler report, a binary,
    a trace) into :class:`kernelpro.records.ProfileData`.

    :param register: call ``register(AnalyzerClass)`` for each analyzer.
    """


@hookspec
def kernelpro_register_measurements(register: Callable[[type[Measurement]], None]) -> None:
    """Register measurements the evaluation takes next to timing
    (subclasses of :class:`kernelpro.api.Measurement`), for example energy.

    :param register: call ``register(MeasurementClass)`` for each measurement.
    """


@hookspec
def kernelpro_register_gpu_specs(register: Callable[["GpuSpec"], None]) -> None:
    """Register GPU specifications (:class:`kernelpro.records.GpuSpec` instances).

    A vendor package adds an architecture's ceilings here without touching core.

    :param register: call ``register(spec)`` for each GPU model.
    """


@hookspec
def kernelpro_register_heuristics(register: Callable[[type[ArchHeuristic]], None]) -> None:
    """Register architecture-specific heuristics (subclasses of
    :class:`kernelpro.api.ArchHeuristic`): findings and generation notes that apply only
    to the architectures they name.

    :param register: call ``register(HeuristicClass)`` for each heuristic.
    """


@hookspec
def kernelpro_register_executors(register: Callable[[type[Executor]], None]) -> None:
    """Register executors (subclasses of :class:`kernelpro.api.Executor`): where a run's
    evaluations and profiles, and a bench's problems, run (config ``executor.name``).

    :param register: call ``register(ExecutorClass)`` for each executor.
    """


# empty-body: pluggy calls the implementations, never a spec's body
@hookspec
def kernelpro_build_include_dirs() -> "list[str]":  # type: ignore[empty-body]
    """Header directories added to every candidate's CUDA/C++ build, after the configured
    ``evaluator.include_paths`` (and to the ``compile_check`` LLM tool's), for example a
    CUTLASS/CuTe tree. Directories that do not exist are left out.

    :returns: a list of directory paths (possibly empty).
    """


@hookspec
def kernelpro_register_llm_tools(register: Callable[[type[LLMTool]], None]) -> None:
    """Register tools offered to LLM code generators (subclasses of
    :class:`kernelpro.api.LLMTool`).

    :param register: call ``register(ToolClass)`` for each tool.
    """


@hookspec
def kernelpro_register_commands(cli: "click.Group") -> None:
    """Add commands to the ``kernelpro`` command line.

    :param cli: the top-level click group; add commands with ``@cli.command()``.
    """


@hookspec(firstresult=True)
def kernelpro_resolve_gpu_spec(device_name: str, arch: str) -> "GpuSpec | None":
    """Return the ceilings to use for the GPU in hand, overriding the registered table
    (for example with calibrated measurements).

    This hook is firstresult: the first non-None value wins and later implementations are
    not called.

    :param device_name: the driver's name of the device, e.g. ``"NVIDIA H200"``.
    :param arch: its architecture, e.g. ``"sm_90"``.
    :returns: a :class:`kernelpro.records.GpuSpec`, or None to fall back to the table.
    """


# empty-body: pluggy calls the implementations, never a spec's body
@hookspec
def kernelpro_report_sections(run: "RunInfo", records: "list[CandidateRecord]") -> "list[str]":  # type: ignore[empty-body]
    """Contribute sections to a run's ``report.md``.

    Called once when the report is written, after the built-in sections.

    :param run: the run's :class:`kernelpro.api.RunInfo`.
    :param records: every candidate record of the run, as in ``candidates.jsonl``.
    :returns: a list of markdown strings, each a section starting with a ``##`` heading.
    """


@hookspec
def kernelpro_bench_sections(config: Any, problems: "list[dict[str, Any]]") -> "list[str]":  # type: ignore[empty-body]
    """Contribute sections to a bench's ``report.md`` (``kernelpro bench``).

    Called once when the bench report is written, after the built-in sections.

    :param config: the bench's configuration (every problem's run used it).
    :param problems: one row per problem as in the bench's ``results.json`` (``name``,
        ``level``, ``run_dir``, ``best_id``, ...); each ``run_dir`` holds that problem's
        ``candidates.jsonl``.
    :returns: a list of markdown strings, each a section starting with a ``##`` heading.
    """


# --- Lifecycle: observers ---------------------------------------------------------------


@hookspec
def kernelpro_run_started(run: "RunInfo") -> None:
    """Called once when ``kernelpro optimize`` has set up its run directory, after the
    baseline was measured and before the first candidate is generated.

    :param run: the run's :class:`kernelpro.api.RunInfo`.
    """


@hookspec
def kernelpro_candidate_evaluated(run: "RunInfo", record: "CandidateRecord") -> None:
    """Called after each candidate is evaluated (and profiled, when profiling is on),
    with the line just written to ``candidates.jsonl``.

    :param run: the run's :class:`kernelpro.api.RunInfo`.
    :param record: the candidate's record as written to ``candidates.jsonl``.
    """


@hookspec
def kernelpro_run_finished(run: "RunInfo", summary: "RunSummary") -> None:
    """Called once when a run ends, normally or through a budget stop, after
    ``report.md`` was written.

    :param run: the run's :class:`kernelpro.api.RunInfo`.
    :param summary: ``{"best_id", "best_speedup", "faster_than_reference", "evaluated", "correct",
        "stopped_because"}``.
    """
