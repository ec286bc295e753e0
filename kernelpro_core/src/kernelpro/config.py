"""Configuration: YAML into frozen attrs classes through one cattrs converter.

What the user wrote (``Config``) is kept apart from what a run resolves (the plugin
settings objects, built by :func:`resolve`). Every problem in a file is reported as one
line with its path, e.g. ``search.params.c_puct: expected float, got 'high'``.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import attrs
import cattrs
import yaml
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

DEFAULT_CONFIG_PATH = Path(__file__).with_name("default_config.yaml")


class ConfigError(Exception):
    """Bad configuration. ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


@attrs.frozen
class Choice:
    """A named plugin and its parameters, validated by that plugin's Settings class."""

    name: str
    params: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Tolerance:
    atol: float
    rtol: float


def _default_tolerances() -> dict[str, Tolerance]:
    return {
        "float64": Tolerance(atol=1e-8, rtol=1e-7),
        "float32": Tolerance(atol=1e-4, rtol=1e-4),
        "float16": Tolerance(atol=1e-2, rtol=1e-2),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    }


@attrs.frozen
class EvaluatorConfig:
    trials: int = 5  # correctness trials, each with fresh inputs from another seed
    other_distribution: bool = True  # one more trial with inputs drawn from N(0, 1)
    tolerances: dict[str, Tolerance] = attrs.field(factory=_default_tolerances)
    timeout_s: float = 600.0  # the whole evaluation, a backstop: each stage has its own limit below
    compile_timeout_s: float = 300.0
    load_timeout_s: float = 300.0  # importing the candidate and constructing ModelNew (and the reference)
    first_call_timeout_s: float = 300.0  # a model's first forward (Triton and torch.compile compile there)
    # every later call: call_timeout_factor x the reference's call, within floor .. ceiling
    call_timeout_factor: float = 50.0
    call_timeout_floor_s: float = 10.0
    call_timeout_ceiling_s: float = 300.0
    warmup_ms: float = 25.0  # warm-up time per callable before timing
    rep_ms: float = 200.0  # timing budget per callable
    min_reps: int = 10
    max_reps: int = 1000
    rounds: int = 0  # 0: calls alternate one by one; N > 0: N rounds of a block of calls each
    time_compiled_reference: bool = True  # torch.compile of the reference, timed too (GPU)
    # the baseline job also times eager and compiled in strict fp32 (no TF32), a second column
    # beside the headline timings under PyTorch's default flags (GPU, where the two differ)
    time_strict_baselines: bool = True
    # an optional third baseline in the baseline job: torch.compile with this mode (e.g.
    # "max-autotune-no-cudagraphs"; null: none), compiled within autotune_timeout_s
    compiled_autotune_mode: str | None = None
    autotune_timeout_s: float = 1800.0
    # False: the compiled reference is timed once, in the problem's baseline job, and every
    # candidate's speedup over torch.compile uses that time (saves a torch.compile per candidate)
    compiled_reference_per_candidate: bool = True
    call_policy: str = "any"  # any | no_torch_compute | own_kernel
    max_speedup: float = 100.0  # above this, stricter re-verification and a flag
    reverify_trials: int = 10  # extra trials (fresh seeds) when a speedup is suspicious
    recheck_calls: int = 8  # timed candidate calls whose outputs are re-checked (at least 1 per round)
    # after timing, calls on input sets no call has seen (seeds the candidate cannot know):
    # checked, and timed against calls on seen values beside them and against the timed calls
    # (0: none); a candidate slower there than fresh_input_factor x either (the reference's
    # ratio divided out), confirmed on as many new sets, is charged the difference, from
    # fresh_input_reject x rejected. Short calls get more sets, up to fresh_input_max_calls,
    # until a look holds about fresh_input_min_ms of the candidate's timed calls, as long as
    # a look's calls take about fresh_input_max_ms at most
    fresh_input_calls: int = 3
    fresh_input_max_calls: int = 24
    fresh_input_min_ms: float = 30.0
    fresh_input_max_ms: float = 500.0
    # and as many as fit in about this many seconds of the look's wall time at its first
    # set's pace (inputs drawn, outputs checked), never fewer than fresh_input_calls
    fresh_input_max_s: float = 2.0
    fresh_input_factor: float = 1.5
    fresh_input_reject: float = 3.0
    # how a re-checked call's output is kept: auto (whole on the GPU when the copies fit in
    # device_copy_share of its available memory, else a sample of positions on the GPU;
    # whole on a CPU), full (whole: on the GPU when they fit, else on the host), sampled
    # (always sampled)
    recheck_copies: str = "auto"
    recheck_sample_elements: int = 1 << 20  # positions per output tensor in a sample
    # share of the device's available memory the evaluator's own copies may take (the
    # reference's outputs, whole re-check copies); a reference output that does not fit is
    # computed again when correctness needs it, a re-check copy that does not fit is sampled
    device_copy_share: float = 0.25
    # an fp32 output that fails the check is judged again against the reference run in
    # fp64: it passes when its error there is within the tolerance plus
    # reference_error_factor x the fp32 reference's own largest error
    fp64_second_opinion: bool = True
    reference_error_factor: float = 2.0
    impossible_margin: float = 0.9  # flag when time < margin x the bytes/FLOPs lower bound (datasheet)
    compile_stage: bool = True  # build load_inline / nvcc / CuTe candidates in a separate process first
    build_cache_dir: str | None = None  # content-addressed builds; null: $KERNELPRO_BUILD_CACHE or ~/.cache
    compile_workers: int = 0  # compile_many() processes; 0: one per CPU core, at most 8
    cuda_arch: str = "auto"  # auto (the GPU's own, sm_90a when the source needs it) or e.g. "9.0", "9.0a"
    include_paths: list[str] = attrs.field(factory=list)  # added to every load_inline / load / nvcc build
    cuda_flags: list[str] = attrs.field(factory=list)  # added to nvcc's flags for every build
    memory_limit_mb: int | None = None  # host address-space limit of the candidate's process (cpu device only)
    # the candidate's processes stopped (SIGSTOP) while the reference is timed, so nothing of
    # theirs competes with it for the CPU; false: they run on (the idle-CPU check alone)
    stop_candidate: bool = True
    # the cross-check of the candidate's reported times against the judge's clock: a call may
    # not have taken longer than reported by more than max(slack_ms, slack_fraction x its time)
    envelope_slack_ms: float = 0.05
    envelope_slack_ms_cpu: float = 0.25  # on a CPU the processes' overheads differ more (0.07 ms seen)
    envelope_slack_fraction: float = 0.1
    # CPU the candidate's process may use between its calls, beyond the reference's (share of a core)
    idle_cpu_share: float = 0.2
    noisy_cv: float = 0.2  # a timing with a larger coefficient of variation is flagged noisy_timing
    # the extra measurements (energy, ...) only for candidates at most this much slower than
    # the run's fastest correct candidate so far (0.1: 10 %); the others are timed and checked
    # but not measured (flag measurement_skipped). null: every candidate is measured
    measure_within: float | None = None
    # auto: Landlock where the kernel has it, and a watch of the files around; landlock: refuse to
    # evaluate without it; detect: the watch only (no Landlock)
    write_guard: str = "auto"
    # a run starts the next evaluation's processes (the judge, the two harnesses: torch
    # imported; the judge's and the reference's CUDA contexts opened once nothing is timed)
    # ahead, while it evaluates, profiles and generates (docs/evaluation.md); false: each
    # evaluation starts its own when it begins
    prestart: bool = True

    def __attrs_post_init__(self) -> None:
        if self.call_policy not in ("any", "no_torch_compute", "own_kernel"):
            raise ValueError(
                f"call_policy: expected one of any, no_torch_compute, own_kernel, got {self.call_policy!r}"
            )
        if not self.reference_error_factor >= 0:
            raise ValueError(f"reference_error_factor: expected a number >= 0, got {self.reference_error_factor}")
        if self.recheck_copies not in ("auto", "full", "sampled"):
            raise ValueError(f"recheck_copies: expected one of auto, full, sampled, got {self.recheck_copies!r}")
        if self.recheck_sample_elements < 1:
            raise ValueError(f"recheck_sample_elements: expected a positive integer, got "
                             f"{self.recheck_sample_elements}")
        if not 0 < self.device_copy_share <= 1:
            raise ValueError(f"device_copy_share: expected a fraction in (0, 1], got {self.device_copy_share}")
        if self.trials < 1:
            raise ValueError(f"trials: expected a positive integer, got {self.trials}")
        if self.fresh_input_calls < 0:
            raise ValueError(f"fresh_input_calls: expected an integer >= 0, got {self.fresh_input_calls}")
        if self.fresh_input_max_calls < self.fresh_input_calls:
            raise ValueError(f"fresh_input_max_calls: expected at least fresh_input_calls "
                             f"({self.fresh_input_calls}), got {self.fresh_input_max_calls}")
        if not self.fresh_input_max_s > 0:
            raise ValueError(f"fresh_input_max_s: expected a number > 0, got {self.fresh_input_max_s}")
        if self.fresh_input_min_ms < 0 or self.fresh_input_max_ms < 0:
            raise ValueError(f"fresh_input_min_ms, fresh_input_max_ms: expected numbers >= 0, got "
                             f"{self.fresh_input_min_ms} and {self.fresh_input_max_ms}")
        if not 1 <= self.fresh_input_factor <= self.fresh_input_reject:
            raise ValueError(f"fresh_input_factor, fresh_input_reject: expected 1 <= factor <= reject, got "
                             f"{self.fresh_input_factor} and {self.fresh_input_reject}")
        for name in ("timeout_s", "compile_timeout_s", "load_timeout_s", "first_call_timeout_s",
                     "call_timeout_factor", "call_timeout_floor_s", "call_timeout_ceiling_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: expected a positive number, got {getattr(self, name)}")
        if self.call_timeout_floor_s > self.call_timeout_ceiling_s:
            raise ValueError("call_timeout_floor_s: must not exceed call_timeout_ceiling_s")
        for name in ("envelope_slack_ms", "envelope_slack_ms_cpu", "envelope_slack_fraction", "idle_cpu_share",
                     "noisy_cv"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: expected a number >= 0, got {getattr(self, name)}")
        if self.measure_within is not None and not self.measure_within >= 0:
            raise ValueError(f"measure_within: expected a number >= 0 or null, got {self.measure_within}")
        if self.write_guard not in ("auto", "landlock", "detect"):
            raise ValueError(f"write_guard: expected one of auto, landlock, detect, got {self.write_guard!r}")
        if not re.fullmatch(r"auto|\d+\.\d+a?", self.cuda_arch):
            raise ValueError(f"cuda_arch: expected auto or a capability like 9.0 or 9.0a, got {self.cuda_arch!r}")
        for dtype, tol in self.tolerances.items():
            if tol.atol < 0 or tol.rtol < 0:
                raise ValueError(f"tolerances: {dtype}: atol and rtol must be >= 0")


@attrs.frozen
class ProfilingConfig:
    enabled: bool = True
    classifier: str = "roofline"
    collectors: list[str] | None = None  # None: every registered collector that can run
    block_micro_profilers: list[str] = attrs.field(factory=list)
    # the classifier's settings (its Settings class's fields), e.g. {busy_pct: 70}
    classifier_params: dict[str, Any] = attrs.field(factory=dict)
    # settings per micro-profiler by name, e.g. {warp_stalls: {...}}
    micro_profiler_params: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    # settings per collector by name, e.g. {ncu: {max_kernels: 64}}
    collector_params: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    timeout_s: float = 600.0
    # each: every correct candidate is profiled right after its evaluation; expand: only when
    # the search expands it (its findings are needed then) and the winner at the end
    when: str = attrs.field(default="each")
    # the metrics a kernel-level collector that combines stages (ncu) takes with stage 1, so
    # that stage 2 (a second profiled process) is not needed: parent (those the profiled
    # parent's bottleneck gated in), all (those of every kernel-level micro-profiler: one
    # pass always, more replay passes per kernel), none (two passes always)
    stage1_ahead: str = attrs.field(default="parent")

    @when.validator
    def _check_when(self, _attr: Any, value: str) -> None:
        if value not in ("each", "expand"):
            raise ValueError(f"when: expected 'each' or 'expand', got {value!r}")

    @stage1_ahead.validator
    def _check_ahead(self, _attr: Any, value: str) -> None:
        if value not in ("parent", "all", "none"):
            raise ValueError(f"stage1_ahead: expected 'parent', 'all' or 'none', got {value!r}")


@attrs.frozen
class MemoryConfig:
    enabled: bool = True
    path: str | None = None  # None: the user data directory


@attrs.frozen
class PluginsConfig:
    block: list[str] = attrs.field(factory=list)


@attrs.frozen
class Config:
    device: str = "auto"  # auto | cuda | cpu
    budget: int = 8  # candidates to evaluate
    parallel: int = 1  # expansions selected at once
    seed: int = 0
    generator: Choice = Choice("torch_compile")
    # the run stops (best so far kept) after this many generator failures in a row
    max_generator_failures: int = 3
    search: Choice = Choice("greedy")
    reward: Choice = Choice("log_speedup")
    # where evaluations and profiles (and a bench's problems) run: local (this host, one worker
    # per visible GPU) or ray (a Ray cluster; the kernelpro-core[ray] extra)
    executor: Choice = Choice("local")
    measurements: list[str] = attrs.field(factory=list)
    measurement_params: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    heuristic_params: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # settings per heuristic
    # the GPU whose spec and heuristics apply instead of the detected one (a spec name such as
    # "H200 SXM", or a device name); None: the device in hand, or the one a file names
    gpu: str | None = None
    evaluator: EvaluatorConfig = EvaluatorConfig()
    profiling: ProfilingConfig = ProfilingConfig()
    memory: MemoryConfig = MemoryConfig()
    plugins: PluginsConfig = PluginsConfig()

    def __attrs_post_init__(self) -> None:
        if self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"device: expected auto, cuda or cpu, got {self.device!r}")
        if self.budget < 1:
            raise ValueError(f"budget: expected a positive integer, got {self.budget}")
        if self.parallel < 1:
            raise ValueError(f"parallel: expected a positive integer, got {self.parallel}")
        if self.max_generator_failures < 1:
            raise ValueError(f"max_generator_failures: expected a positive integer, got {self.max_generator_failures}")


# --- the one converter ------------------------------------------------------------------


def _strict(kind: type, accept: tuple[type, ...], reject: tuple[type, ...] = ()):
    def hook(value: Any, _: Any) -> Any:
        if isinstance(value, reject) or not isinstance(value, accept):
            raise TypeError(f"expected {kind.__name__}, got {value!r}")
        return kind(value)

    return hook


def make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(float, _strict(float, (int, float), (bool,)))
    conv.register_structure_hook(int, _strict(int, (int,), (bool,)))
    conv.register_structure_hook(bool, _strict(bool, (bool,)))
    conv.register_structure_hook(str, _strict(str, (str,)))
    conv.register_structure_hook(Path, lambda v, _: Path(_strict(str, (str,))(v, None)))
    conv.register_structure_hook(
        typing.Any, lambda v, _: v
    )
    return conv


converter = make_converter()


def _format_errors(exc: BaseException, path: str) -> list[str]:
    out: list[str] = []
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [f.name for f in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        for key in sorted(exc.extra_fields):
            out.append(f"{_join(path, key)}: unknown key{did_you_mean(key, known)}")
        return out
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        for sub in exc.exceptions:
            note = _note_of(sub)
            out.extend(_format_errors(sub, _join(path, note) if note else path))
        return out
    if isinstance(exc, KeyError):
        return [f"{path or '(top)'}: missing required key {exc.args[0]!r}" if exc.args else f"{path}: missing key"]
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, (TypeError, ValueError)) and ": " in msg and msg.split(": ", 1)[0].replace(".", "").replace("_", "").isalnum() and " " not in msg.split(": ", 1)[0]:
        # our own validators already name the field: "device: expected ..."
        head, tail = msg.split(": ", 1)
        if not path.endswith(head):
            return [f"{_join(path, head)}: {tail}"]
        return [f"{path}: {tail}"]
    return [f"{path or '(top)'}: {msg}"]


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``choices`` to a misspelt ``word``, or ""."""
    import difflib

    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _note_of(exc: BaseException) -> str | None:
    for note in getattr(exc, "__notes__", []) or []:
        # cattrs notes: "Structuring class X @ attribute y" / "... @ index 3" / "... @ key k"
        if "@ attribute " in note:
            return note.rsplit("@ attribute ", 1)[1].strip()
        if "@ index " in note:
            return note.rsplit("@ index ", 1)[1].strip()
        if "@ key " in note:
            return note.rsplit("@ key ", 1)[1].strip()
    return getattr(exc, "name", None) if hasattr(exc, "name") else None


def _join(path: str, key: Any) -> str:
    key = str(key)
    return f"{path}.{key}" if path else key


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _got(value: Any) -> str:
    return f"got {type(value).__name__} {_shown(value)}"


def _shape_problems(data: Any, tp: Any, path: str) -> list[str]:
    """Where ``data`` has the wrong shape for ``tp`` (a scalar where a mapping or a list is
    expected, a mapping where a list is), one line per place saying what was expected:
    cattrs would answer those with Python's own words ("'int' object is not iterable").
    Scalars are left to the converter's hooks."""
    where = path or "(top)"
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or (origin is not None and type(tp).__name__ == "UnionType"):
        if data is None and type(None) in args:
            return []
        arms = [a for a in args if a is not type(None)]
        return _shape_problems(data, arms[0], path) if len(arms) == 1 else []
    if isinstance(tp, type) and attrs.has(tp):
        if not isinstance(data, dict):
            if tp is Choice and isinstance(data, str):
                return [f"{where}: expected a mapping such as {{name: {data}}}, {_got(data)}"]
            return [f"{where}: expected a mapping, {_got(data)}"]
        try:
            hints = typing.get_type_hints(tp)
        except Exception:  # a plugin's Settings with names it cannot resolve: the converter decides
            hints = {}
        out: list[str] = []
        for f in attrs.fields(tp):
            key = f.alias if f.alias is not None else f.name
            if key in data and f.name in hints:
                out.extend(_shape_problems(data[key], hints[f.name], _join(path, key)))
        return out
    if origin in (dict, typing.Mapping) or tp is dict:
        if not isinstance(data, dict):
            return [f"{where}: expected a mapping, {_got(data)}"]
        if len(args) == 2:
            return [p for k, v in data.items() for p in _shape_problems(v, args[1], _join(path, k))]
        return []
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        if not isinstance(data, (list, tuple)):
            return [f"{where}: expected a list, {_got(data)}"]
        if len(args) == 1:
            return [p for i, v in enumerate(data) for p in _shape_problems(v, args[0], _join(path, i))]
        return []
    return []


def structure(data: Any, cls: type, path: str = "") -> Any:
    """Structure ``data`` into ``cls``; raise ConfigError with one line per problem."""
    if data is None:
        data = {}
    shape = _shape_problems(data, cls, path)
    if shape:
        raise ConfigError(shape)
    try:
        return converter.structure(data, cls)
    except Exception as exc:  # cattrs raises exception groups and plain errors
        raise ConfigError(_format_errors(exc, path) or [f"{path or '(top)'}: invalid"]) from None


def unstructure(obj: Any) -> Any:
    return converter.unstructure(obj)


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError([f"{p}: no such config file"]) from None
    except OSError as exc:
        raise ConfigError([f"{p}: cannot read: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{p}: not a text file (byte {exc.start} is not UTF-8)"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError([f"{p}: not valid YAML{where}: {getattr(exc, 'problem', exc)}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"{p}: expected a mapping at the top, got {type(data).__name__}"])
    return data


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Defaults, then the file, then command-line overrides (dotted keys)."""
    data = read_yaml(DEFAULT_CONFIG_PATH)
    if path is not None:
        data = _merge(data, read_yaml(path))
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        cur = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            cur = cur.setdefault(part, {})
        cur[parts[-1]] = value
    gen = data.get("generator")
    if isinstance(gen, dict) and gen.get("name") == AUTO_GENERATOR:
        data["generator"] = {**gen, "name": auto_generator()}
    return structure(data, Config)


#: the generator name that picks one: the LLM when it is configured, else the offline expert
AUTO_GENERATOR = "auto"


def auto_generator() -> str:
    """What ``generator.name: auto`` (the default) stands for: ``anthropic`` when its API key
    is set (``ANTHROPIC_API_KEY``), else ``expert`` (the offline Triton generator of
    kernelpro-plugins-expert) when it is installed, else ``torch_compile``."""
    import os
    from importlib.metadata import entry_points

    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if any(ep.name == "expert" for ep in entry_points(group="kernelpro")):
        return "expert"
    return "torch_compile"


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if key in ("generator", "search", "reward", "executor") and isinstance(value, dict):
            # choosing another plugin resets that plugin's params
            if "name" in value and value.get("name") != base.get(key, {}).get("name"):
                out[key] = value
                continue
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "params":
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def plugin_settings(cls: type, params: dict[str, Any], path: str) -> Any:
    """Validate a plugin's params with its own Settings class."""
    settings_cls = getattr(cls, "Settings", None)
    if settings_cls is None:
        if params:
            raise ConfigError([f"{path}: this plugin takes no parameters"])
        return None
    return structure(params or {}, settings_cls, path)


def validate(config: Config, plugins: Any) -> dict[str, Any]:
    """Resolve every plugin choice and validate its params. Returns the settings objects
    keyed by role; raises ConfigError listing every problem."""
    from kernelpro.plugins import UnknownName

    problems: list[str] = []
    resolved: dict[str, Any] = {}
    for role, kind in (("generator", "generator"), ("search", "search"), ("reward", "reward"),
                       ("executor", "executor")):
        choice: Choice = getattr(config, role)
        try:
            cls = plugins.get(kind, choice.name).obj
        except UnknownName as exc:
            problems.append(f"{role}.name: {exc}")
            continue
        try:
            resolved[role] = (cls, plugin_settings(cls, choice.params, f"{role}.params"))
        except ConfigError as exc:
            problems.extend(exc.problems)
    measurements = plugins.measurements()
    resolved["measurements"] = []

    def add_measurement(name: str, unknown: str) -> None:
        if name not in measurements:
            avail = ", ".join(sorted(measurements)) or "none"
            problems.append(f"{unknown}; available: {avail}")
            return
        try:
            params = config.measurement_params.get(name, {})
            resolved["measurements"].append(
                (measurements[name], plugin_settings(measurements[name], params, f"measurement_params.{name}"))
            )
        except ConfigError as exc:
            problems.extend(exc.problems)

    for i, name in enumerate(config.measurements):
        add_measurement(name, f"measurements[{i}]: unknown measurement {name!r}")
    # a reward that needs a measurement (energy) gets it even when the config did not list it
    reward_cls = resolved.get("reward", (None, None))[0]
    for name in getattr(reward_cls, "requires_measurements", ()) or ():
        if name not in config.measurements:
            add_measurement(name, f"reward.name: {reward_cls.name!r} needs the measurement {name!r}, "
                                  "which is not installed")
    _resolve_profiling(config, plugins, problems, resolved)
    for name in config.measurement_params:
        if name not in config.measurements and name not in {c.name for c, _ in resolved["measurements"]}:
            problems.append(f"measurement_params.{name}: not listed in measurements")
    problems.extend(check_plugin_names(config, plugins))
    if problems:
        raise ConfigError(problems)
    return resolved


def profiling_settings(config: Config, plugins: Any) -> dict[str, Any]:
    """What ``kernelpro profile`` and ``analyze`` take from a config: the settings of the
    heuristics (key ``heuristics``, by name), of the classifier (``classifier``) and of the
    micro-profilers (``micro_profilers``, by name) and of the collectors (``collectors``, by
    name), and the ``gpu`` checked against the
    registered specs.
    Raises ConfigError listing every problem; the generator, search and reward are not
    looked at (those commands use none)."""
    problems: list[str] = []
    resolved: dict[str, Any] = {}
    _resolve_profiling(config, plugins, problems, resolved)
    if problems:
        raise ConfigError(problems)
    return resolved


def _resolve_profiling(config: Config, plugins: Any, problems: list[str], resolved: dict[str, Any]) -> None:
    # shared by validate() and profiling_settings(): problems are appended, settings stored
    from kernelpro.plugins import UnknownName

    heuristics = {r.name: r.obj for r in plugins.registrations("heuristic").values()}
    resolved["heuristics"] = {}
    for name, params in config.heuristic_params.items():
        if name not in heuristics:
            avail = ", ".join(sorted(heuristics)) or "none"
            problems.append(f"heuristic_params.{name}: unknown heuristic {name!r}{_failed_hint(plugins, 'heuristic')}"
                            f"; available: {avail}")
            continue
        try:
            resolved["heuristics"][name] = plugin_settings(heuristics[name], params, f"heuristic_params.{name}")
        except ConfigError as exc:
            problems.extend(exc.problems)
    _resolve_profiler_settings(config.profiling, plugins, problems, resolved)
    if config.gpu:
        try:
            plugins.gpu_for(None, "", config.gpu)
        except UnknownName as exc:
            problems.append(f"gpu: {exc}")


def _resolve_profiler_settings(profiling: ProfilingConfig, plugins: Any, problems: list[str],
                               resolved: dict[str, Any]) -> None:
    # the classifier's and the micro-profilers' params, each validated by its Settings class
    resolved["classifier"] = None
    if profiling.classifier_params:
        classifiers = {r.name: r.obj for r in plugins.registrations("classifier").values()}
        cls = classifiers.get(profiling.classifier) if profiling.classifier else None
        if cls is None:
            avail = ", ".join(sorted(classifiers)) or "none"
            problems.append(f"profiling.classifier_params: the classifier {profiling.classifier!r} is not "
                            f"installed; available: {avail}")
        else:
            try:
                resolved["classifier"] = plugin_settings(cls, profiling.classifier_params,
                                                         "profiling.classifier_params")
            except ConfigError as exc:
                problems.extend(exc.problems)
    resolved["micro_profilers"] = _settings_by_name(plugins, "micro_profiler", "micro-profiler",
                                                    profiling.micro_profiler_params,
                                                    "profiling.micro_profiler_params", problems)
    resolved["collectors"] = _settings_by_name(plugins, "collector", "collector", profiling.collector_params,
                                               "profiling.collector_params", problems)


def _settings_by_name(plugins: Any, kind: str, human: str, params_by_name: dict[str, dict[str, Any]],
                      path: str, problems: list[str]) -> dict[str, Any]:
    """Each named plugin's params validated by its Settings class; unknown names and bad
    params appended to ``problems`` (one line each)."""
    classes = {r.name: r.obj for r in plugins.registrations(kind).values()}
    settings: dict[str, Any] = {}
    for name, params in params_by_name.items():
        where = f"{path}.{name}"
        if name not in classes:
            avail = ", ".join(sorted(classes)) or "none"
            problems.append(f"{where}: unknown {human} {name!r}{_failed_hint(plugins, kind)}"
                            f"{did_you_mean(name, classes)}; available: {avail}")
            continue
        try:
            settings[name] = plugin_settings(classes[name], params, where)
        except ConfigError as exc:
            problems.extend(exc.problems)
    return settings


def _failed_hint(plugins: Any, kind: str) -> str:
    """Which plugin's registration hook of ``kind`` raised, for a line about an unknown name
    (a stand-in registry without ``failed_hint``, as in some tests, gives none)."""
    from kernelpro.plugins import KINDS

    hint = getattr(plugins, "failed_hint", None)
    return hint(kind) if hint is not None and kind in KINDS else ""


def check_plugin_names(config: Config, plugins: Any) -> list[str]:
    """One line per name in the profiling and plugins sections that no installed plugin
    has: a typo there would otherwise be ignored (a block list) or end a run half-way
    (a collector). The default classifier may be missing: profiling then goes on unclassified."""
    from kernelpro.plugins import HINTS, KINDS

    problems: list[str] = []

    def unknown(path: str, kind: str, name: str, known: list[str]) -> None:
        hint = f" (install {HINTS[name]})" if name in HINTS else ""
        hint += _failed_hint(plugins, kind)
        problems.append(f"{path}: unknown {KINDS[kind][1] if kind in KINDS else kind} {name!r}{hint}"
                        f"{did_you_mean(name, known)}; available: {', '.join(sorted(known)) or 'none'}")

    prof = config.profiling
    classifiers = plugins.names("classifier")
    if prof.classifier and prof.classifier not in classifiers and prof.classifier != ProfilingConfig().classifier:
        unknown("profiling.classifier", "classifier", prof.classifier, classifiers)
    collectors = plugins.names("collector")
    for i, name in enumerate(prof.collectors or []):
        if name not in collectors:
            unknown(f"profiling.collectors[{i}]", "collector", name, collectors)
    micro = plugins.names("micro_profiler")
    for i, name in enumerate(prof.block_micro_profilers):
        if name not in micro:
            unknown(f"profiling.block_micro_profilers[{i}]", "micro_profiler", name, micro)
    entry_points = sorted({info.name for info in getattr(plugins, "infos", [])})
    for i, name in enumerate(config.plugins.block):
        if name not in entry_points:
            unknown(f"plugins.block[{i}]", "plugin", name, entry_points)
    return problems


def to_yaml(config: Config) -> str:
    return yaml.safe_dump(unstructure(config), sort_keys=False)
