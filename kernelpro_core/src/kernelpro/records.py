"""Frozen records that flow through the loop.

problem -> generate (CandidateDraft) -> evaluate (EvalResult) -> profile (ProfileData)
-> classify (Bottleneck) -> advise (Finding) -> search -> report.

Every record is a frozen attrs class with units in field names (``median_ms``,
``energy_j``). Failures are values with a kind and a message, never sentinels.
They serialise to JSON through :func:`kernelpro.records.to_json`.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs
import cattrs


class Verdict(str, enum.Enum):
    """What happened to a candidate. One value per distinct outcome."""

    CORRECT = "correct"
    INCORRECT = "incorrect"  # ran, but outputs differ from the reference
    INVALID = "invalid"  # source breaks the contract (no ModelNew, syntax error, ...)
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    RUNTIME_ERROR = "runtime_error"  # a Python exception while running
    CUDA_ERROR = "cuda_error"  # sticky CUDA error: illegal address, device assert, ...
    TIMEOUT = "timeout"  # a stage outlived its time limit
    CRASH = "crash"  # segfault, abort: the candidate's process died from a signal
    EXITED = "exited"  # the candidate's process exited on its own (os._exit, sys.exit) without a result
    OOM = "oom"  # host or device out of memory
    INTEGRITY = "integrity_violation"  # caught cheating the evaluator
    POLICY = "policy_violation"  # broke the configured call policy
    PROBLEM_ERROR = "problem_error"  # the problem itself failed (its Model, inputs or outputs): not the candidate's fault
    # the generator's reply broke its answer contract (no code, a refusal, the wrong kernel
    # language): recorded without evaluation, never the run's best
    CONTRACT = "contract_violation"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


SEVERITIES = ("high", "medium", "low", "info")


@attrs.frozen
class TimingStats:
    """Statistics of repeated timed calls of one callable, in milliseconds."""

    median_ms: float
    iqr_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    cv: float  # coefficient of variation (std / mean)
    n: int
    method: str  # how it was measured, e.g. "cuda_event+l2_flush" or "perf_counter"


@attrs.frozen
class CompileResult:
    ok: bool
    seconds: float = 0.0
    cached: bool = False
    language: str = "pytorch"
    log: str = ""  # trimmed to the relevant lines


@attrs.frozen
class CorrectnessResult:
    passed: bool
    trials: int
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str = ""


@attrs.frozen
class EvalResult:
    """The evaluator's judgement of one candidate against its problem."""

    verdict: Verdict
    reason: str = ""
    compile: CompileResult | None = None
    correctness: CorrectnessResult | None = None
    timing: TimingStats | None = None  # the candidate
    baseline: TimingStats | None = None  # the eager reference, same process, interleaved
    baseline_compiled: TimingStats | None = None  # torch.compile of the reference, when measured
    # the same two in strict fp32 (no TF32), timed in the baseline job where the flags differ
    baseline_strict: TimingStats | None = None
    baseline_compiled_strict: TimingStats | None = None
    # torch.compile with evaluator.compiled_autotune_mode (e.g. max-autotune-no-cudagraphs),
    # timed in the baseline job when asked for; its compile seconds: measurements.evaluator
    baseline_compiled_autotune: TimingStats | None = None
    flags: tuple[str, ...] = ()  # warnings that do not fail the candidate
    measurements: dict[str, dict[str, float]] = attrs.field(factory=dict)  # e.g. {"energy": {...}}
    device: str = "cpu"
    gpu_name: str | None = None
    wall_s: float = 0.0

    @property
    def correct(self) -> bool:
        return self.verdict is Verdict.CORRECT

    @property
    def runtime_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    @property
    def baseline_ms(self) -> float | None:
        return self.baseline.median_ms if self.baseline else None

    @property
    def speedup(self) -> float | None:
        if self.correct and self.timing and self.baseline and self.timing.median_ms > 0:
            return self.baseline.median_ms / self.timing.median_ms
        return None


@attrs.frozen
class CandidateDraft:
    """What a code generator returns: source code and why it was written."""

    source: str
    generator: str
    language: str = "pytorch"  # pytorch | cuda | triton | cu | cute
    description: str = ""  # one line: the change made
    params: dict[str, Any] = attrs.field(factory=dict)  # the generator's knobs for this draft
    usage: dict[str, float] = attrs.field(factory=dict)  # tokens, dollars, calls (LLM generators)
    # why the generator itself rejects this draft (a refusal, a reply without code, the wrong
    # kernel language); the loop records it as contract_violation without evaluating it
    contract_error: str | None = None


@attrs.frozen
class KernelProfile:
    """One GPU kernel's counters from a profiler (ncu, SASS, trace)."""

    name: str
    duration_ns: float | None = None
    invocations: int = 1
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    metrics: dict[str, float] = attrs.field(factory=dict)
    source_lines: tuple[str, ...] = ()


@attrs.frozen
class ProfileData:
    """What a profiler collector returns for one candidate at one level.

    ``level`` is "kernel" (Nsight Compute), "instruction" (SASS) or "system" (timeline).
    ``payload`` holds level-specific structured data owned by the collecting plugin
    (for example the disassembly); micro-profilers of the same plugin read it.
    """

    level: str
    collector: str
    kernels: tuple[KernelProfile, ...] = ()
    payload: Any = None
    notes: tuple[str, ...] = ()  # what could not be collected, one line each
    # the driver's name of the GPU it was taken on, when the source says (e.g. "NVIDIA H200"):
    # core resolves the GPU spec and architecture heuristics from it
    device_name: str | None = None
    # where the collection's seconds went, by part ("driver_startup", "replay", ...): the
    # run keeps them beside each pass's total (profiles.jsonl), none reach the LLM
    seconds: dict[str, float] = attrs.field(factory=dict)


@attrs.frozen
class Bottleneck:
    """A bottleneck classifier's verdict for a candidate."""

    kind: str  # memory | compute | latency | too_little_work | unknown
    summary: str
    pipe: str | None = None  # for compute: tensor | fp32 | fp64 | int | ...
    roofline_fraction: float | None = None  # achieved / attainable at this intensity
    evidence: dict[str, float] = attrs.field(factory=dict)
    classifier: str = ""


BOTTLENECK_KINDS = ("memory", "compute", "latency", "too_little_work", "unknown")


@attrs.frozen
class Finding:
    """A micro-profiler's diagnosis: what is wrong, the numbers, what to do."""

    tool: str
    severity: str  # high | medium | low | info
    title: str
    message: str  # natural language, with the numbers that justify it
    action: str  # the concrete change to make
    estimated_gain: float | None = None  # expected fractional time saved, 0..1
    level: str = "kernel"
    kernel: str | None = None
    evidence: dict[str, float] = attrs.field(factory=dict)
    source_lines: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")


@attrs.frozen
class Analysis:
    """Output of profiling a candidate: the bottleneck and the gated findings."""

    bottleneck: Bottleneck | None
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()  # collectors that were unavailable and why

    def to_dict(self) -> dict[str, Any]:
        return {
            "bottleneck": to_json(self.bottleneck) if self.bottleneck else None,
            "findings": [to_json(f) for f in self.findings],
            "notes": list(self.notes),
        }


@attrs.frozen
class GpuSpec:
    """Ceilings of one GPU model, used by the roofline classifier and prompts.

    Rates are dense (no sparsity). ``match`` holds names of the device as the driver
    reports it, compared as lower-cased alphanumeric tokens: ``"H200 NVL"`` matches
    "NVIDIA H200 NVL" but not "NVIDIA GH200"; empty, the spec matches any device of its
    ``arch``. ``exact`` makes a match string stand for the whole device name only.
    ``priority`` decides between specs that match the same device (higher wins; the
    built-in table uses 0). The full rule: hookspecs.md, ``kernelpro_register_gpu_specs``.
    """

    name: str
    match: tuple[str, ...]
    arch: str  # e.g. "sm_90"
    sm_count: int
    dram_bandwidth_gbs: float
    l2_bytes: int
    smem_per_sm_bytes: int
    fp32_tflops: float
    fp64_tflops: float
    tf32_tflops: float
    bf16_tflops: float
    fp16_tflops: float
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    max_threads_per_sm: int = 2048
    registers_per_sm: int = 65536
    source: str = "datasheet"  # or "calibrated"
    priority: int = 0  # between specs matching the same device, the higher wins
    exact: bool = False  # match strings must equal the whole device name


_converter = cattrs.Converter()
_converter.register_unstructure_hook(Verdict, lambda v: v.value)
_converter.register_structure_hook(Verdict, lambda v, _: Verdict(v))


def to_json(record: Any) -> Any:
    """Unstructure a record (or list/dict of records) into JSON-compatible values."""
    return _converter.unstructure(record)


def from_json(data: Any, cls: type) -> Any:
    return _converter.structure(data, cls)
