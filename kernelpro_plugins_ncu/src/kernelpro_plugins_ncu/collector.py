"""``NcuCollector``: runs a candidate's forward under Nsight Compute.

The command is ``ncu --clock-control none --profile-from-start off --target-processes all
... python -m kernelpro.evaluate.forward ... --io-json ...``:
clocks are never locked, and only the kernels launched inside the forward driver's
``cudaProfilerStart``/``Stop`` range are profiled (the candidate's own kernels, after
warm-up; not the reference, not an L2 flush). Every kernel launched there is profiled;
consumers weight them by duration.

Stage 1 collects the Speed Of Light, Launch Statistics and Occupancy sections plus DRAM
bytes, FLOP counts and tensor-pipe activity. Stage 2 collects only the metrics asked for
(the gated micro-profilers' union) and, optionally, the Source Counters section with
source import for per-line attribution. The report is exported to a ``.ncu-rep`` in the
target's workdir, with a JSON sidecar (command, wall time, forward I/O bytes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import atexit
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import ClassVar, Mapping, Sequence

import attrs

from kernelpro.api import Collector, CollectorError, ProfileData, ProfileTarget, forward_command

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu import report as R

_FIXES = (
    (re.compile(r"ERR_NVGPUCTRPERM"),
     "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root, or load "
     "the nvidia driver with NVreg_RestrictProfilingToAdminUsers=0 "
     "(https://developer.nvidia.com/ERR_NVGPUCTRPERM); continuing with timing only"),
    (re.compile(r"LibraryNotLoaded"),
     "ncu cannot load its profiling library here (LibraryNotLoaded): this runtime (for example "
     "a gVisor sandbox) gives no access to hardware counters; profile on a host or VM with "
     "direct GPU access; continuing with timing only"),
    (re.compile(r"(?i)profiling is not supported on this device|device.*not supported"),
     "ncu does not support this GPU (too old or unsupported by this Nsight Compute version): "
     "install a newer Nsight Compute; continuing with timing only"),
    (re.compile(r"(?i)no cuda-capable device|CUDA driver version is insufficient"),
     "ncu found no usable CUDA device or driver: check nvidia-smi; continuing with timing only"),
)
_UNKNOWN_METRIC = re.compile(
    r"(?:Failed to find metric|(?:Invalid|Unknown) metric(?: name)?)[:\s]+(?:regex:)?['\"]?([A-Za-z0-9_.]+)")
_NO_KERNELS = re.compile(r"No kernels were profiled")

# metric families that ``ncu --query-metrics`` lists; others (launch__, device__, ...) are
# kept without checking
_QUERIED_PREFIXES = ("sm__", "smsp__", "l1tex__", "lts__", "dram__", "gpu__", "gpc__",
                     "tpc__", "fbpa__", "idc__", "pcie__", "nvlrx__", "nvltx__")


def find_ncu(configured: str | None = None) -> str | None:
    """The ncu executable: the configured path, PATH, or the usual install places."""
    if configured:
        return configured if Path(configured).exists() or shutil.which(configured) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu",
                    "/usr/local/NVIDIA-Nsight-Compute*/ncu"):
        hits = sorted(Path("/").glob(pattern.lstrip("/")))
        if hits:
            return str(hits[-1])
    return None


def rejected_metrics(output: str, asked: Sequence[str]) -> list[str]:
    """Asked metric names that ncu's error lines reject (any wording that names them)."""
    named = set(_UNKNOWN_METRIC.findall(output))
    errors = " ".join(ln for ln in output.splitlines() if "ERROR" in ln)
    out = []
    for name in asked:
        if name in named or re.search(r"(?<![\w.])" + re.escape(name) + r"(?![\w.])", errors):
            out.append(name)
    return out


def diagnose(output: str) -> str | None:
    """One line with the fix when ncu's output shows it cannot profile here at all."""
    for pattern, line in _FIXES:
        if pattern.search(output):
            return line
    return None


@attrs.frozen
class NcuSettings:
    ncu_path: str | None = None  # default: PATH, then /usr/local/cuda/bin, /opt/nvidia/...
    timeout_s: float = 600.0  # per ncu invocation
    warmup: int = 3  # forward calls before the profiled one (compilation, autotuning)
    kernel_filter: str | None = None  # regex on kernel names (ncu --kernel-name regex:...)
    max_kernels: int = 256  # ncu --launch-count: bounds the replay time of large forwards
    source_lines: bool = True  # stage 2: Source Counters section with --import-source yes
    cache_control: str = "all"  # flush caches between replay passes (ncu default)
    export_csv: bool = False  # also write <report>.raw.csv next to the .ncu-rep
    filter_metrics: bool = True  # drop names ncu --query-metrics does not list
    record_io_bytes: bool = True  # record the forward's input/parameter/output bytes
    # start the next pass's ncu and interpreter (torch imported) when a profile ends, so the
    # next profile of the same settings only sends its job (docs/profiling.md, "Started ahead")
    start_ahead: bool = True


@attrs.define(eq=False)
class _Ahead:
    """An ncu pass started ahead of its job: ncu runs ``python -m kernelpro.evaluate.forward
    --job-on-stdin``, which has imported torch and waits for its job's line; the report
    goes to ``report`` in a directory of its own until the pass is taken."""

    key: tuple[object, ...]
    proc: subprocess.Popen[bytes]
    dir: Path
    report: Path
    log: Path
    argv: list[str]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, job: Mapping[str, object], timeout_s: float) -> subprocess.CompletedProcess[str] | None:
        """Send the job and wait for the pass; None when it could not be sent (ended meanwhile)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.close()
        except OSError:
            self.discard()
            return None
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.discard()
            raise CollectorError(
                f"ncu did not finish within {timeout_s:.0f} s (raise the ncu collector's timeout_s or "
                "narrow kernel_filter/max_kernels)") from None
        try:
            out = self.log.read_text(errors="replace")
        except OSError:
            out = ""
        return subprocess.CompletedProcess(self.argv, self.proc.returncode, out, "")

    def discard(self) -> None:
        """End it (and the interpreter under it) without a job."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()  # the waiting interpreter reads the end and leaves
            except OSError:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


#: passes started ahead, one per key (ncu command, interpreter, visible devices)
_AHEAD: dict[tuple[object, ...], _Ahead] = {}
_AHEAD_GUARD = threading.Lock()
#: one pass of this process at a time, from taking a pass started ahead (or starting one)
#: to its end: ncu lets one profiled process run at a time, and a pass waiting ahead holds
#: that turn, so two profiles of this process at once (jobs sharing a GPU, several GPUs)
#: must not start a pass beside one that waits for a job only they could give it
_PASSES = threading.RLock()


def discard_ahead() -> None:
    """End every ncu pass started ahead that no profile took (at exit)."""
    with _AHEAD_GUARD:
        waiting = list(_AHEAD.values())
        _AHEAD.clear()
    for a in waiting:
        a.discard()


atexit.register(discard_ahead)


class NcuCollector(Collector):
    """Nsight Compute, kernel level: stage 1 (roofline inputs) and stage 2 (asked metrics);
    stage 1 with metrics is both in one ncu run (``combines_stages``): one process start,
    CUDA context and model load instead of two."""

    name = "ncu"
    level = "kernel"
    combines_stages = True
    Settings = NcuSettings
    description = "Nsight Compute counters of the candidate's own kernels (clocks unlocked)"

    #: reasons found by an earlier run that make ncu unusable on this machine, per ncu path
    _known_unavailable: ClassVar[dict[str, str]] = {}
    _metric_catalogue: ClassVar[dict[str, frozenset[str]]] = {}
    #: metric names ncu rejected earlier in this process, per ncu path
    _rejected: ClassVar[dict[str, set[str]]] = {}
    #: ncu paths whose passes started ahead never got their job
    _no_ahead: ClassVar[set[str]] = set()

    def __init__(self, settings: NcuSettings | None = None) -> None:
        super().__init__(settings)
        self._stage1: dict[str, list] = {}

    # --- availability -----------------------------------------------------------------------

    def unavailable_reason(self, target: ProfileTarget) -> str | None:
        if not str(target.device).startswith("cuda"):
            return f"ncu profiles CUDA devices only, and the device is {target.device!r}; timing only"
        ncu = find_ncu(self.settings.ncu_path)
        if ncu is None:
            return ("ncu (Nsight Compute) not found: install Nsight Compute (it comes with the "
                    "CUDA toolkit) and put ncu on PATH or set ncu_path; continuing with timing only")
        return self._known_unavailable.get(ncu)

    # --- command ------------------------------------------------------------------------------

    def metric_catalogue(self, ncu: str) -> frozenset[str]:
        """Base metric names ``ncu --query-metrics`` lists for the device in hand (cached per
        process); empty when the query fails."""
        if ncu in self._metric_catalogue:
            return self._metric_catalogue[ncu]
        names: set[str] = set()
        try:
            proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                                  timeout=60)
            for line in proc.stdout.splitlines():
                m = re.match(r"^([a-z0-9]+__[A-Za-z0-9_]+)\s", line)
                if m:
                    names.add(m.group(1))
        except (OSError, subprocess.TimeoutExpired):
            pass
        catalogue = frozenset(names) if len(names) > 200 else frozenset()
        self._metric_catalogue[ncu] = catalogue
        return catalogue

    def select_metrics(self, ncu: str, wanted: Sequence[str]) -> tuple[list[str], list[str]]:
        """Split ``wanted`` into (kept, dropped) by the device's metric catalogue."""
        wanted = M.unique(wanted)
        if not self.settings.filter_metrics:
            return wanted, []
        catalogue = self.metric_catalogue(ncu)
        rejected = self._rejected.get(ncu, set())
        kept, dropped = [], [m for m in wanted if m in rejected]
        wanted = [m for m in wanted if m not in rejected]
        for name in wanted:
            base = M.base_name(name)
            if catalogue and name not in M.SECTION_ONLY and base.startswith(_QUERIED_PREFIXES) \
                    and base not in catalogue:
                dropped.append(name)
            else:
                kept.append(name)
        return kept, dropped

    def forward_argv(self, target: ProfileTarget, io_json: Path | None) -> list[str]:
        return forward_command(target.problem_path, target.candidate_path, device=target.device,
                               warmup=self.settings.warmup, iters=1, python=target.python, io_json=io_json)

    def ncu_argv(self, ncu: str, stage: int, metric_names: Sequence[str], report: Path,
                 combined: bool = False) -> list[str]:
        """The ncu command line of a pass; ``combined``: stage 1 with stage-2 metrics."""
        argv = [ncu, "--clock-control", "none", "--profile-from-start", "off",
                "--target-processes", "all", "--cache-control", self.settings.cache_control,
                "--launch-count", str(self.settings.max_kernels), "--print-units", "base",
                "-f", "--export", str(report)]
        if self.settings.kernel_filter:
            argv += ["--kernel-name", f"regex:{self.settings.kernel_filter}"]
        sections = list(M.STAGE1_SECTIONS) if stage == 1 else []
        if (stage != 1 or combined) and self.settings.source_lines:
            sections.append("SourceCounters")
        # section-computed metrics come through their section, never through --metrics
        sections += [M.SECTION_ONLY[m] for m in metric_names if m in M.SECTION_ONLY]
        for section in M.unique(sections):
            argv += ["--section", section]
        if "SourceCounters" in sections:
            argv += ["--import-source", "yes"]
        plain = [m for m in metric_names if m not in M.SECTION_ONLY]
        if plain:
            argv += ["--metrics", ",".join(plain)]
        return argv

    # --- running ------------------------------------------------------------------------------

    def _run(self, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env, cwd=str(cwd), start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.settings.timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.communicate()
            raise CollectorError(
                f"ncu did not finish within {self.settings.timeout_s:.0f} s (raise the ncu "
                "collector's timeout_s or narrow kernel_filter/max_kernels)")
        return subprocess.CompletedProcess(argv, proc.returncode, out, "")

    def _env(self, target: ProfileTarget) -> dict[str, str]:
        env = dict(os.environ)
        env.update({k: str(v) for k, v in target.env.items()})
        # the profiled python must import this package and core, installed or not
        here = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
        return env

    def _ahead_env(self, target: ProfileTarget) -> dict[str, str]:
        """A pass started ahead starts with this process's environment and the target's
        visible devices; the rest of the target's variables come with its job."""
        env = self._env(ProfileTarget(problem_path=target.problem_path, candidate_path=target.candidate_path,
                                      device=target.device, workdir=target.workdir, python=target.python))
        if "CUDA_VISIBLE_DEVICES" in target.env:
            env["CUDA_VISIBLE_DEVICES"] = str(target.env["CUDA_VISIBLE_DEVICES"])
        return env

    def _wanted(self, stage: int, metrics: Sequence[str]) -> tuple[list[str], bool]:
        """The metric names a pass asks for, and whether it is stage 1 with stage-2 metrics."""
        combined = stage == 1 and bool(metrics)
        if stage == 1:
            return (M.unique([*M.STAGE1_METRICS, *M.STAGE2_BASE_METRICS, *metrics]) if combined
                    else list(M.STAGE1_METRICS)), combined
        return [*M.STAGE2_BASE_METRICS, *metrics], combined

    def _ahead_key(self, ncu: str, stage: int, kept: Sequence[str], combined: bool,
                   target: ProfileTarget) -> tuple[object, ...]:
        env = self._ahead_env(target)
        return (tuple(self.ncu_argv(ncu, stage, kept, Path("-"), combined)), target.python,
                env.get("PYTHONPATH"), env.get("CUDA_VISIBLE_DEVICES"))

    def start_ahead(self, target: ProfileTarget, stage: int = 1, metrics: Sequence[str] = ()) -> None:
        """Start the ncu pass that ``collect(target-like, stage, metrics)`` will run next, up
        to the interpreter waiting for its job: ncu's start and torch's import (4-5 s of a
        pass on the H200 host) are then done before the profile is asked for. CPU work only:
        the interpreter opens no CUDA context before its job comes. A pass already waiting
        with the same command is kept; one with another is ended when taken. (Started
        while another ncu pass runs, it waits for that pass before its interpreter runs:
        ncu profiles one process at a time, so a profile right after another gains nothing;
        docs/validation/throughput.md, session 10.)"""
        if not self.settings.start_ahead or self.unavailable_reason(target):
            return
        ncu = find_ncu(self.settings.ncu_path)
        assert ncu is not None
        if ncu in self._no_ahead:
            return
        wanted, combined = self._wanted(stage, metrics)
        kept, _ = self.select_metrics(ncu, wanted)
        key = self._ahead_key(ncu, stage, kept, combined, target)
        if not _PASSES.acquire(blocking=False):
            return  # another profile's pass runs: one started now would wait for it anyway
        try:
            self._start_ahead(key, ncu, stage, kept, combined, target)
        finally:
            _PASSES.release()

    def _start_ahead(self, key: tuple[object, ...], ncu: str, stage: int, kept: list[str], combined: bool,
                     target: ProfileTarget) -> None:
        with _AHEAD_GUARD:
            waiting = _AHEAD.get(key)
            if waiting is not None and waiting.alive():
                return
        tmp = Path(tempfile.mkdtemp(prefix="kernelpro-ncu-"))
        report, log = tmp / "report.ncu-rep", tmp / "ncu.log"
        argv = self.ncu_argv(ncu, stage, kept, report, combined) + [
            target.python, "-m", "kernelpro.evaluate.forward", "--job-on-stdin"]
        try:
            with open(log, "wb") as out:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                        env=self._ahead_env(target), cwd=str(tmp), start_new_session=True)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            return
        ahead = _Ahead(key=key, proc=proc, dir=tmp, report=report, log=log, argv=argv)
        with _AHEAD_GUARD:
            old = _AHEAD.pop(key, None)
            _AHEAD[key] = ahead
        if old is not None:
            old.discard()

    def _take_ahead(self, key: tuple[object, ...]) -> _Ahead | None:
        with _AHEAD_GUARD:
            ahead = _AHEAD.pop(key, None)
            # the others (another command) hold or wait for ncu's turn: ended, whether this one
            # waits too or a pass starts for the job
            stale = [_AHEAD.pop(k) for k in list(_AHEAD)]
        for a in stale:
            a.discard()
        if ahead is not None and not ahead.alive():
            ahead.discard()
            return None
        return ahead

    def _passes(self, ncu: str, stage: int, kept: list[str], combined: bool, target: ProfileTarget,
                workdir: Path, report: Path, io_json: Path | None, env: dict[str, str], notes: list[str],
                ahead: _Ahead | None) -> tuple[subprocess.CompletedProcess, str, list[str], float, float, list[str]]:
        """Run the pass (in ``ahead`` when one was taken), again without the metrics ncu
        rejects; (process, its output, metrics kept, launched, ended, argv)."""
        for _attempt in range(6):
            argv = self.ncu_argv(ncu, stage, kept, report, combined) + self.forward_argv(target, io_json)
            launched = time.time()
            ran = None
            if ahead is not None:  # its job: the forward's options, the target's variables, the workdir
                options = self.forward_argv(target, io_json)[3:]
                received = ahead.dir / "job_received"
                job = {"argv": options, "cwd": str(workdir), "env": {k: str(v) for k, v in target.env.items()},
                       "ack": str(received)}
                ran = ahead.run(job, self.settings.timeout_s)
                if ran is not None and not received.exists():
                    # the forward never got its job (this ncu does not pass stdin on): a
                    # pass started for the job, and none ahead with this ncu again
                    self._no_ahead.add(ncu)
                    with _AHEAD_GUARD:
                        useless = [_AHEAD.pop(k) for k in list(_AHEAD) if k[0][0] == ncu]  # type: ignore[index]
                    for a in useless:
                        a.discard()
                    notes.append("ncu: the pass started ahead did not get its job; ran one for it")
                    shutil.rmtree(ahead.dir, ignore_errors=True)
                    ran = None
                if ran is not None:
                    argv = ahead.argv + options
                    if ahead.report.exists():
                        shutil.move(str(ahead.report), str(report))
                    shutil.rmtree(ahead.dir, ignore_errors=True)
                ahead = None
            proc = ran if ran is not None else self._run(argv, env, workdir)
            ended = time.time()
            output = proc.stdout or ""
            unknown = rejected_metrics(output, kept) if proc.returncode != 0 else []
            if proc.returncode != 0 and unknown:
                kept = [m for m in kept if m not in unknown]
                self._rejected.setdefault(ncu, set()).update(unknown)
                notes.append(f"ncu rejected these metrics, skipped: {', '.join(unknown)}")
                continue
            break
        return proc, output, kept, launched, ended, argv

    def collect(self, target: ProfileTarget, stage: int, metrics: Sequence[str] = ()) -> ProfileData:
        reason = self.unavailable_reason(target)
        if reason:
            raise CollectorError(reason)
        ncu = find_ncu(self.settings.ncu_path)
        assert ncu is not None
        workdir = Path(target.workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        report = workdir / f"ncu_stage{stage}.ncu-rep"
        io_json = workdir / "forward_io.json" if self.settings.record_io_bytes else None
        wanted, combined = self._wanted(stage, metrics)
        kept, dropped = self.select_metrics(ncu, wanted)
        env = self._env(target)
        notes = [f"ncu does not know these metrics here, skipped: {', '.join(dropped)}"] if dropped else []

        for stale in (report, io_json):  # never read an earlier candidate's files
            if stale is not None and stale.exists():
                stale.unlink()
        started = time.perf_counter()
        with _PASSES:
            ahead = self._take_ahead(self._ahead_key(ncu, stage, kept, combined, target)) \
                if self.settings.start_ahead else None
            proc, output, kept, launched, ended, argv = self._passes(ncu, stage, kept, combined, target, workdir,
                                                                     report, io_json, env, notes, ahead)
        wall_s = time.perf_counter() - started
        (workdir / f"ncu_stage{stage}.log").write_text(output)

        fatal = diagnose(output)
        if fatal:
            self._known_unavailable[ncu] = fatal
            raise CollectorError(fatal)
        if _NO_KERNELS.search(output) or (proc.returncode == 0 and not report.exists()):
            return R.profile_data([], {"stage": stage, "wall_s": wall_s}, notes + [
                "ncu profiled no kernel: nothing ran on the GPU inside the profiled range"])
        if proc.returncode != 0 or not report.exists():
            raise CollectorError(_failure_line(output, proc.returncode))

        t_read = time.perf_counter()
        kernels, payload = R.read_report(report, ncu)
        seconds = {"ncu_run": wall_s, "read_report": time.perf_counter() - t_read}
        io = {}
        if io_json is not None and io_json.exists():
            try:
                io = json.loads(io_json.read_text())
            except ValueError:
                io = {}
        seconds.update(phase_seconds(io.pop("phases", None), launched, ended))
        sidecar = {"stage": stage, "with_stage2_metrics": combined, "wall_s": wall_s, "command": argv, "io": io,
                   "metrics_requested": kept, "metrics_dropped": dropped}
        report.with_suffix(".json").write_text(json.dumps(sidecar, indent=1))
        if self.settings.export_csv:
            t_csv = time.perf_counter()
            try:
                csv_text = R.ncu_import_csv(report, ncu, "raw")
                report.with_suffix(".raw.csv").write_text(csv_text)
            except CollectorError as exc:
                notes.append(str(exc))
            seconds["export_csv"] = time.perf_counter() - t_csv
        key = str(target.candidate_path)
        if stage == 1:
            self._stage1[key] = kernels
        elif key in self._stage1:
            kernels = R.merge_kernels(self._stage1[key], kernels)
        payload.update({"stage": stage, "wall_s": wall_s, "report": str(report), "io": io})
        return attrs.evolve(R.profile_data(kernels, payload, notes), seconds=seconds)


#: the forward's phases (:mod:`kernelpro.evaluate.forward`), each named by what ends it
_PHASES = (("start", "main"), ("import", "torch"), ("prepare", "prepared"), ("warmup", "warmup"),
           ("replay", "profiled"))


def phase_seconds(phases: object, launched: float, ended: float) -> dict[str, float]:
    """Where an ncu run's wall time went, from the forward's phase times (epoch seconds):
    ``start`` (ncu and the interpreter starting), ``import`` (torch), ``prepare`` (problem,
    candidate, model and inputs, CUDA context), ``warmup``, ``replay`` (the profiled calls,
    every replay pass; ``gpu_lock`` before ``prepare`` when the GPU is shared and the
    forward waited for it alone), ``finish`` (writing the report, ncu's exit). {} when the forward
    did not say (an older one, or one that failed)."""
    if not isinstance(phases, dict):
        return {}
    out: dict[str, float] = {}
    last = launched
    for name, key in _PHASES:
        at = phases.get(key)
        if not isinstance(at, (int, float)):
            return {}
        if name == "prepare" and isinstance(phases.get("locked"), (int, float)):
            # on a GPU shared with other jobs: waiting for it alone (kernelpro.gpulock)
            out["gpu_lock"] = max(0.0, float(phases["locked"]) - last)
            last = float(phases["locked"])
        out[name] = max(0.0, float(at) - last)
        last = float(at)
    out["finish"] = max(0.0, ended - last)
    return out


def _failure_line(output: str, returncode: int) -> str:
    """The most telling line of a failed ncu run."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("forward failed:"):
            return f"the profiled forward failed: {ln[len('forward failed:'):].strip()[:200]}"
    for ln in lines:
        if "==ERROR==" in ln:
            return f"ncu failed: {ln.replace('==ERROR==', '').strip()[:200]}"
    tail = lines[-1][:200] if lines else "no output"
    return f"ncu exited with status {returncode}: {tail}"

