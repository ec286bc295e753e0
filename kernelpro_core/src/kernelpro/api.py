"""KernelPro's public API: the one module of core a plugin imports.

It holds the base classes for everything a plugin can contribute and the contexts they
receive, and re-exports what else a plugin needs: ``hookimpl``, the records (results,
profiles, findings, GPU specs) with their JSON converters, the search tree types and
the built-in GPU specs. ``__all__`` is the API; everything else in ``kernelpro`` is
internal and may change without notice.

A plugin subclasses one of the base classes, sets ``name`` (and ``Settings``, a frozen
attrs class whose fields are the plugin's config keys), and registers the class through
the matching hook in :mod:`kernelpro.hookspecs`. Core instantiates it with the validated
settings: ``Cls(settings)``.

Versioning: :data:`API_VERSION` is ``"MAJOR.MINOR"``. A minor release only adds; a major
one may break plugins. A plugin declares the version it was written for as
``KERNELPRO_API_VERSION = "1.0"`` in the module its entry point names; the plugin manager
refuses (one line, the plugin left out) a plugin of another major version or of a newer
minor one. A plugin that declares nothing is loaded unchecked.
"""

from __future__ import annotations

import abc
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Mapping, Sequence

import attrs

from kernelpro.records import (
    Analysis,
    Bottleneck,
    CandidateDraft,
    EvalResult,
    Finding,
    GpuSpec,
    ProfileData,
)

if TYPE_CHECKING:  # pragma: no cover
    from kernelpro.problem import Problem

#: the API's version, "MAJOR.MINOR" (see the module's docstring)
API_VERSION = "1.9"


@attrs.frozen
class NoSettings:
    """Settings of a plugin that takes none."""


class Plugin(abc.ABC):
    """Common shape: a name, a settings class, constructed with its settings."""

    name: ClassVar[str]
    Settings: ClassVar[type] = NoSettings
    description: ClassVar[str] = ""

    def __init__(self, settings: Any = None) -> None:
        self.settings = settings if settings is not None else self.Settings()


# --- Generation ------------------------------------------------------------------------


@attrs.frozen
class Attempt:
    """An earlier expansion of the same parent (a sibling of the draft being asked for):
    what it changed and how it fared, so that a generator does not try it again."""

    id: str
    source: str
    description: str
    verdict: str
    reason: str = ""
    speedup: float | None = None
    runtime_ms: float | None = None


@attrs.frozen
class ParentInfo:
    """A node of the search tree as a generator sees it."""

    id: str
    source: str
    result: EvalResult | None
    analysis: Analysis | None
    params: dict[str, Any] = attrs.field(factory=dict)
    description: str = ""


@attrs.frozen
class GenerationRequest:
    """What a generator is asked: ``n`` drafts for ``problem``, refining ``parent``.

    ``parent`` is None for the root: a first generation from the reference.
    """

    problem: "Problem"
    n: int
    device: str
    parent: ParentInfo | None = None
    gpu: GpuSpec | None = None
    memory: tuple[str, ...] = ()  # search memory, one note per line
    tried: tuple[dict[str, Any], ...] = ()  # params of every draft already generated this run
    heuristic_notes: tuple[str, ...] = ()  # from architecture heuristics
    seed: int = 0
    run_dir: Path | None = None
    tools: Any = None  # a kernelpro.llm_tools.ToolBox for generators that call tools
    # earlier expansions of the same parent (the root for a first generation), oldest first
    attempts: tuple[Attempt, ...] = ()
    # the reference as the run measured it (runtime, bytes and FLOPs lower bounds); None
    # before the baseline exists
    baseline: EvalResult | None = None
    # the evaluator's tolerances per output dtype: {"float32": (atol, rtol), ...}
    tolerances: Mapping[str, tuple[float, float]] = attrs.field(factory=dict)
    # the forward inputs of one call, one line each ("x: float32 [4096, 4096] contiguous")
    inputs: tuple[str, ...] = ()
    # what the run's reward ranks when it is not plain speed (``Reward.goal()``); "" for speed
    goal: str = ""


class Generator(Plugin):
    """Writes candidate sources."""

    @abc.abstractmethod
    def generate(self, request: GenerationRequest) -> list[CandidateDraft]:
        """Return up to ``request.n`` drafts; an empty list means nothing left to try."""

    def why_nothing(self, request: GenerationRequest) -> str:
        """Why :meth:`generate` returned no draft for ``request``, in one line (e.g. the
        problem is of no form the generator knows), or "" to say nothing (API 1.6). Asked
        when a run ends without a candidate, for its stop reason."""
        return ""

    def expandable(self, request: GenerationRequest) -> bool:
        """Whether :meth:`generate` could propose anything for ``request``'s parent, whatever
        the parent's profile would say (API 1.8). With ``profiling.when: expand`` the loop
        asks before it profiles a parent it is about to expand (``request.parent.analysis``
        is None then) and, on False, closes the parent without the profile, which costs an
        Nsight Compute pass. Answer False only when no analysis could change the answer;
        the default, True, always profiles (an LLM can always propose)."""
        return True


class GenerationBudgetExhausted(Exception):
    """Raised by a generator whose own budget (calls, tokens, dollars) is spent: the run
    stops generating cleanly and reports why."""


# --- Search ----------------------------------------------------------------------------


class SearchPolicy(Plugin):
    """Decides which node of the tree to expand next.

    The loop owns the tree (:class:`kernelpro.search.tree.Tree`): it adds a child node for
    every evaluated draft, with its reward, then calls :meth:`update`.
    """

    def __init__(self, settings: Any = None, rng: random.Random | None = None) -> None:
        super().__init__(settings)
        self.rng = rng or random.Random(0)

    @abc.abstractmethod
    def select(self, tree: "Tree", n: int) -> list[str]:
        """Return up to ``n`` node ids to expand now (repeats allowed); [] ends the search."""

    def update(self, tree: "Tree", node_id: str) -> None:
        """Called after node ``node_id`` was added with its reward."""

    def release(self, tree: "Tree", node_id: str) -> None:
        """Called when an expansion of ``node_id`` selected earlier produced nothing."""

    def failed(self, tree: "Tree", node_id: str) -> None:
        """Called when an expansion of ``node_id`` selected earlier failed in the generator
        (an API error after its retries): the node is not to blame and stays open. The
        default treats it as :meth:`release` for policies written before this method."""
        self.release(tree, node_id)

    def state(self) -> dict[str, Any]:
        """JSON-serialisable internal state, saved in ``tree.json`` for resume."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state` returned."""



# --- Rewards ---------------------------------------------------------------------------


@attrs.frozen
class RewardContext:
    """What a reward may look at besides the candidate itself."""

    baseline_ms: float | None
    population: tuple[EvalResult, ...] = ()  # every evaluated candidate of the run so far
    baseline_measurements: dict[str, dict[str, float]] = attrs.field(factory=dict)


class Reward(Plugin):
    """Scores an evaluated candidate. Higher is better."""

    #: every incorrect or failed candidate scores exactly this; correct ones score above it
    floor: ClassVar[float] = -10.0

    @abc.abstractmethod
    def score(self, result: EvalResult, context: RewardContext) -> float:
        """Return the reward; ``self.floor`` for anything not correct."""

    def goal(self) -> str:
        """What this reward ranks, in a few sentences for generators (an LLM prompt's
        objective); "" (the default) when it ranks speed."""
        return ""


# --- Profiling -------------------------------------------------------------------------


@attrs.frozen
class ProfileTarget:
    """A candidate to profile: a subprocess runs the model's forward with these paths;
    :func:`forward_command` gives its argv, :func:`prepare_forward` builds the model and
    inputs in-process."""

    problem_path: Path
    candidate_path: Path
    device: str
    workdir: Path
    build_dir: Path | None = None  # where the candidate's compiled binaries were built
    python: str = "python"
    env: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class ProfileContext:
    gpu: GpuSpec | None
    device: str
    result: EvalResult | None = None


class Collector(Plugin):
    """Collects profile data at one level: "kernel", "instruction" or "system"."""

    level: ClassVar[str] = "kernel"
    #: (API 1.3) True when ``collect(target, stage=1, metrics=...)`` collects the stage-1
    #: data and those metrics in one pass. Core then asks for the metrics the parent's
    #: bottleneck gated in along with a child's stage 1, and skips stage 2 when the child's
    #: own bottleneck gates in no other metric. False: stage 1 is always called without
    #: metrics.
    combines_stages: ClassVar[bool] = False

    def unavailable_reason(self, target: ProfileTarget) -> str | None:
        """None when this collector can run here; else one line saying what is missing
        and how to fix it."""
        return None

    def start_ahead(self, target: ProfileTarget, stage: int = 1, metrics: Sequence[str] = ()) -> None:
        """(API 1.4) Another profile like this one (``target``'s device and interpreter,
        this stage and these metrics) is likely to follow: start what can be started before
        its candidate is known (a process, an import), so that the next :meth:`collect`
        only hands it its job. CPU work only: a timing may run on the device meanwhile.
        Called by core when a profile ends; the default does nothing."""
        return None

    @abc.abstractmethod
    def collect(
        self, target: ProfileTarget, stage: int, metrics: Sequence[str] = ()
    ) -> ProfileData:
        """Stage 1: the cheap pass (with ``metrics`` too, for a collector that
        ``combines_stages``). Stage 2: only ``metrics`` (the names the gated
        micro-profilers declared). Raise :class:`CollectorError` on failure."""


class CollectorError(Exception):
    """A collector could not collect; the message is one line for the user."""


class Analyzer(Plugin):
    """Turns an existing file (report, binary, trace) into profile data."""

    level: ClassVar[str] = "kernel"

    @abc.abstractmethod
    def accepts(self, path: Path) -> bool:
        """Whether this analyzer reads that file."""

    @abc.abstractmethod
    def load(self, path: Path) -> ProfileData:
        """Read it. Raise :class:`CollectorError` with one line when it cannot."""


class BottleneckClassifier(Plugin):
    @abc.abstractmethod
    def classify(
        self, profiles: Mapping[str, ProfileData], context: ProfileContext
    ) -> Bottleneck | None:
        """Name the bottleneck from the stage-1 profiles (keyed by level); None when the
        profiles hold nothing this classifier can use."""


#: ``applies_to`` value meaning every bottleneck kind, and no bottleneck at all
ANY = "any"


class MicroProfiler(Plugin):
    """Turns raw counters of one level into findings, for the bottleneck kinds it names."""

    level: ClassVar[str] = "kernel"
    applies_to: ClassVar[frozenset[str]] = frozenset({ANY})
    metrics: ClassVar[tuple[str, ...]] = ()  # raw metric names it needs from stage 2

    def applies(self, bottleneck: Bottleneck | None) -> bool:
        """The gate. With no classified bottleneck (none, or kind ``unknown``: the profile
        lacked what the classifier needs) there is nothing to gate on: it runs."""
        if ANY in self.applies_to or bottleneck is None or bottleneck.kind == "unknown":
            return True
        return bottleneck.kind in self.applies_to

    @abc.abstractmethod
    def analyze(
        self, profile: ProfileData, bottleneck: Bottleneck | None, context: ProfileContext
    ) -> list[Finding]:
        """Return findings (possibly none) for this profile."""


class ArchHeuristic(Plugin):
    """Architecture-specific advice, contributed by vendors without touching core.

    Consulted wherever a GPU is known: the GPU in hand (``optimize``, ``profile``), the
    device a file names (``analyze``), or the config's ``gpu``; its settings come from
    ``heuristic_params.<name>``.
    """

    archs: ClassVar[tuple[str, ...]] = ()  # e.g. ("sm_90",); empty = every architecture

    def applies(self, gpu: GpuSpec | None) -> bool:
        return not self.archs or (gpu is not None and gpu.arch in self.archs)

    def advise(
        self,
        bottleneck: Bottleneck | None,
        profiles: Mapping[str, ProfileData],
        context: ProfileContext,
    ) -> list[Finding]:
        """Findings for a profiled candidate on a matching GPU."""
        return []

    def prompt_notes(self, gpu: GpuSpec) -> list[str]:
        """Lines of guidance handed to generators for this GPU."""
        return []


# --- Measurements (taken by the evaluation's judge) ---------------------------------------


@attrs.frozen
class EarlierMeasurement:
    """A measurement of the same reference, taken by an earlier evaluation of the same run
    on the same worker (GPU): ``values`` as :meth:`Measurement.measure_reference` returned
    them, ``age_s`` the seconds since it ended."""

    values: Mapping[str, float]
    age_s: float


class Measurement(Plugin):
    """A measurement taken by the evaluation's judge for the reference and the candidate;
    each model's calls run in its own process (``call`` queues one there, ``sync`` waits)."""

    def unavailable_reason(self, device: str) -> str | None:
        return None

    def measure_reference(self, call: Callable[[], Any], sync: Callable[[], None],
                          earlier: Sequence[EarlierMeasurement]) -> dict[str, float]:
        """Measure the reference beside a candidate. ``earlier``: this run's earlier
        measurements of the same reference on this worker, newest first (API 1.5). A
        measurement may spend less time here by pooling them with a shorter fresh one, as
        long as it checks that they still agree. Default: :meth:`measure`, ignoring them."""
        return self.measure(call, sync)

    @abc.abstractmethod
    def measure(self, call: Callable[[], Any], sync: Callable[[], None]) -> dict[str, float]:
        """Measure ``call`` (one forward with fixed inputs); ``sync`` waits for the device.
        Return flat numbers with units in their keys, e.g. ``{"energy_j_per_call": ...}``.
        Raise :class:`MeasurementError` with one line when the measurement cannot be made."""


class MeasurementError(Exception):
    pass


# --- LLM tools -------------------------------------------------------------------------


@attrs.frozen
class ToolContext:
    """What an LLM tool can reach while a generator works on ``parent``.

    ``problem`` is None when the tool is called outside a run: through ``kernelpro mcp``
    without a run directory (then ``parent`` and ``run_dir`` are None too)."""

    problem: "Problem | None"
    parent: ParentInfo | None
    device: str
    gpu: GpuSpec | None
    run_dir: Path | None
    profile_parent: Callable[[list[str]], Analysis] | None = None  # run named micro-profilers
    workdir: Path | None = None
    #: the micro-profiler classes this run may use (the config's block list applied)
    micro_profilers: Callable[[], list[type]] | None = None


class LLMTool(Plugin):
    #: JSON schema of the tool's input object
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    @abc.abstractmethod
    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Do the work and return text for the model. Raise ``ToolError`` for a bad call."""

    def available(self, context: ToolContext) -> bool:
        """Whether the tool can work for this request (it is offered only then): a tool
        that profiles the parent needs a correct parent on a GPU, say. Default: always."""
        return True


class ToolError(Exception):
    pass


# --- Executors -------------------------------------------------------------------------


@attrs.frozen
class Slot:
    """One worker of an executor, as a job sees it: ``device`` is what the job hands the
    evaluator (``cuda`` or ``cpu``) and ``env`` what it adds to the environment of every
    process it starts (``CUDA_VISIBLE_DEVICES`` pins those to the worker's GPU)."""

    name: str
    device: str
    env: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Job:
    """Work an executor runs on one of its workers: ``fn(slot)``. ``kind`` is ``evaluate``
    (an evaluation, with the candidate's profiling when the run profiles each one),
    ``profile`` or ``problem`` (a whole optimization, from ``kernelpro bench``). An executor
    whose jobs leave the process (``Executor.in_process`` false) pickles ``fn``."""

    id: str
    fn: Callable[[Slot], Any]
    kind: str = "evaluate"


@attrs.frozen
class JobOutcome:
    """What became of a job: ``value`` is what ``fn`` returned, or ``error`` (one line) says
    why there is none (``fn`` raised, or its worker was lost on every attempt)."""

    id: str
    value: Any = None
    error: str | None = None
    worker: str = ""
    attempts: int = 1


class Executor(Plugin):
    """Where evaluations, profiles and a bench's problems run.

    The loop starts the executor once (:meth:`start`), hands it the jobs of one round
    (:meth:`run`) and records what comes back itself, in one thread: the run directory's
    records have one writer. A worker runs one job at a time, so a profiling pass never
    shares its device with a timing measurement. A worker lost in the middle of a job
    (killed, out of memory, a GPU fault) costs that job one attempt: it runs once more on
    another worker; lost again, its outcome carries the error and the run goes on."""

    #: jobs run in this process (threads): ``Job.fn`` may hold objects that cannot be pickled
    in_process: ClassVar[bool] = True

    def start(self, device: str) -> None:
        """Get the workers ready for jobs on ``device`` (``cuda`` or ``cpu``). Raise
        ``OSError`` or ``ValueError`` with one line when that cannot be done."""

    @abc.abstractmethod
    def slots(self) -> list[Slot]:
        """The workers (after :meth:`start`)."""

    @abc.abstractmethod
    def run(self, jobs: Sequence[Job]) -> Iterator[JobOutcome]:
        """Run every job; yield one outcome per job as each ends (any order)."""

    def shutdown(self) -> None:
        """Release the workers."""


# --- Lifecycle -------------------------------------------------------------------------


#: a candidate's record as lifecycle hooks and report sections receive it: the line of
#: ``candidates.jsonl``, read-only (keys in hookspecs.md)
CandidateRecord = Mapping[str, Any]
#: what ``kernelpro_run_finished`` receives: ``best_id``, ``best_speedup``, ``evaluated``,
#: ``correct``, ``stopped_because``; read-only
RunSummary = Mapping[str, Any]


@attrs.frozen
class RunInfo:
    """Handed to lifecycle hooks."""

    run_dir: Path
    problem: "Problem"
    config: Any
    device: str
    gpu: GpuSpec | None = None


# --- API versions ---------------------------------------------------------------------------


def api_version_problem(declared: Any) -> str | None:
    """Why a plugin declaring ``KERNELPRO_API_VERSION = declared`` cannot be loaded by this
    core, in one line; None when it can."""
    major, minor = (int(x) for x in API_VERSION.split("."))
    try:
        parts = [int(x) for x in str(declared).strip().split(".")]
        if not 1 <= len(parts) <= 2 or min(parts) < 0:
            raise ValueError
    except ValueError:
        return f"KERNELPRO_API_VERSION {declared!r} is not 'MAJOR.MINOR' (this KernelPro provides {API_VERSION})"
    want_major, want_minor = parts[0], (parts[1] if len(parts) == 2 else 0)
    if want_major != major:
        return (f"written for KernelPro plugin API {declared}, this KernelPro provides {API_VERSION}: "
                f"install a version of the plugin for API {major}.x, or a KernelPro with API {want_major}.x")
    if want_minor > minor:
        return (f"needs KernelPro plugin API {declared}, this KernelPro provides {API_VERSION}: "
                f"upgrade kernelpro-core")
    return None


def gpu_spec_matches(spec: GpuSpec, device_name: str, arch: str = "") -> bool:
    """Whether ``spec`` claims the device, by the rule core resolves GPUs with
    (whole name tokens, compute capability; hookspecs.md, ``kernelpro_register_gpu_specs``)."""
    return _match_strength(spec, device_name, arch) is not None


# --- Reading an evaluation -----------------------------------------------------------------


def least_time_fraction(notes: Mapping[str, Any], ms: float) -> tuple[float, bool] | None:
    """(fraction, bytes_only): the problem's least time by the evaluator's minimum-traffic
    bound (the ``min_traffic_*`` notes of an evaluation, ``EvalResult.measurements
    ["evaluator"]``: its minimum bytes and FLOPs at the GPU's ceilings) over a call of ``ms``;
    None without the bound (a CPU evaluation, a GPU with no spec). A time below the FLOPs'
    part proves those FLOPs are not the problem's least (an algebraic rewrite does less
    arithmetic): the fraction is then over the bytes' part alone (``bytes_only``), so that no
    honest time reads above 100 %. API 1.9."""
    bound = notes.get("min_traffic_bound_ms")
    if not bound or not ms or ms <= 0:
        return None
    memory, compute = notes.get("min_traffic_memory_ms"), notes.get("min_traffic_compute_ms")
    if memory is not None and compute and ms < compute and compute > memory:
        return float(memory) / ms, True
    return float(bound) / ms, False


# --- The rest of the public surface ---------------------------------------------------------

from kernelpro.evaluate.forward import command as forward_command  # noqa: E402
from kernelpro.evaluate.forward import prepare as prepare_forward  # noqa: E402
from kernelpro.gpulock import GpuLock  # noqa: E402
from kernelpro.gpulock import from_env as gpu_lock  # noqa: E402
from kernelpro.gpus import SPECS as BUILTIN_GPU_SPECS  # noqa: E402
from kernelpro.gpus import match_strength as _match_strength  # noqa: E402
from kernelpro.hookspecs import hookimpl  # noqa: E402
from kernelpro.records import (  # noqa: E402
    BOTTLENECK_KINDS,
    SEVERITIES,
    CompileResult,
    CorrectnessResult,
    KernelProfile,
    TimingStats,
    Verdict,
    from_json,
    to_json,
)
from kernelpro.search.tree import ROOT, Node, Tree  # noqa: E402
from kernelpro.search.build import build_search_policy  # noqa: E402
from kernelpro.progress import Display as ProgressDisplay  # noqa: E402
from kernelpro.progress import stage as progress_stage  # noqa: E402

__all__ = [
    # versions and hooks
    "API_VERSION", "api_version_problem", "hookimpl",
    # plugin kinds and their contexts
    "Plugin", "NoSettings",
    "Generator", "GenerationRequest", "ParentInfo", "Attempt", "GenerationBudgetExhausted",
    "SearchPolicy", "build_search_policy", "Tree", "Node", "ROOT",
    "Reward", "RewardContext",
    "Collector", "CollectorError", "Analyzer", "ProfileTarget", "ProfileContext",
    "forward_command", "prepare_forward", "progress_stage", "ProgressDisplay", "GpuLock", "gpu_lock",
    "BottleneckClassifier", "MicroProfiler", "ANY", "ArchHeuristic",
    "Measurement", "MeasurementError", "EarlierMeasurement",
    "LLMTool", "ToolContext", "ToolError",
    "Executor", "Slot", "Job", "JobOutcome",
    "RunInfo", "CandidateRecord", "RunSummary",
    # records
    "Verdict", "TimingStats", "CompileResult", "CorrectnessResult", "EvalResult", "CandidateDraft",
    "KernelProfile", "ProfileData", "Bottleneck", "BOTTLENECK_KINDS", "Finding", "SEVERITIES",
    "Analysis", "GpuSpec", "BUILTIN_GPU_SPECS", "gpu_spec_matches", "to_json", "from_json",
    "least_time_fraction",
]
