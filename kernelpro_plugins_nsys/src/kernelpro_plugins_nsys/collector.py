"""The system-level collector: a timeline of a candidate's forward calls.

Method. With a CUDA device and an nsys binary that can make a report, the trace driver
runs in ``--mode nvtx`` under ``nsys profile`` and the SQLite export is read. Otherwise
(no nsys, nsys that leaves only a ``.qdstrm``, a CPU device, or ``prefer_nsys: false``) the
trace driver records with the PyTorch profiler (Kineto) and its JSON is read. Both run in a
subprocess with the target's interpreter and environment (``ProfileTarget.env``, so the
candidate's compiled build is reused), ``warmup`` unrecorded and ``iters`` recorded calls.

Stage 2 returns the stage-1 timeline: no system micro-profiler asks for extra metrics.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import ClassVar, Sequence

import attrs
from kernelpro.api import Collector, CollectorError, ProfileData, ProfileTarget

from kernelpro_plugins_nsys import kineto, nsys_sqlite, nsys_tool
from kernelpro_plugins_nsys.profile import LEVEL, to_profile_data
from kernelpro_plugins_nsys.trace import command as trace_command


@attrs.frozen
class TimelineSettings:
    prefer_nsys: bool = True  # use Nsight Systems when it can make a report
    nsys_path: str = ""  # explicit nsys binary; "" = search ($KERNELPRO_NSYS, PATH, /opt/nvidia)
    warmup: int = 3  # unrecorded calls before recording
    iters: int = 3  # recorded forward calls
    seed: int = 0
    timeout_s: float = 300.0  # per recording subprocess
    # nsys gets less: on the H200 image it hung (no file in 45 s); a hung nsys is marked
    # unusable (for later runs too) and the PyTorch profiler records instead
    nsys_timeout_s: float = 90.0


def _stages(trace_path: Path) -> dict[str, float]:
    """The driver's own account of its seconds (written beside its trace)."""
    try:
        raw = json.loads(trace_path.with_name(trace_path.name + ".stages.json").read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float))} if isinstance(raw, dict) else {}


def cost_seconds(driver_s: float, stages: dict[str, float], read_s: float) -> dict[str, float]:
    """Where a recording's seconds went: the driver's own stages, its start-up (what they do
    not cover of its wall clock) and the reading of its trace."""
    out = {"driver_startup": max(0.0, driver_s - sum(stages.values()))} if stages else {"driver": driver_s}
    out.update({f"driver_{k}": v for k, v in stages.items()})
    out["read_trace"] = read_s
    return out


class TimelineCollector(Collector):
    """Timeline of a forward call: Nsight Systems where it reports, else the PyTorch profiler."""

    name: ClassVar[str] = "timeline"
    level: ClassVar[str] = LEVEL
    Settings: ClassVar[type] = TimelineSettings
    description: ClassVar[str] = "timeline of one forward call (nsys where usable, else the PyTorch profiler trace)"

    def __init__(self, settings: TimelineSettings | None = None) -> None:
        super().__init__(settings)
        self._cache: dict[tuple, ProfileData] = {}

    def unavailable_reason(self, target: ProfileTarget) -> str | None:
        if not (target.device.startswith("cuda") or target.device == "cpu"):
            return f"timeline collector records cuda or cpu devices, not {target.device!r}"
        python = target.python
        if not (shutil.which(python) or (os.path.isfile(python) and os.access(python, os.X_OK))):
            return f"timeline collector: python interpreter {python!r} not found; set ProfileTarget.python"
        return None

    def _key(self, target: ProfileTarget) -> tuple:
        def stamp(p: Path | None) -> float | None:
            try:
                return p.stat().st_mtime if p else None
            except OSError:
                return None

        return (str(target.problem_path), str(target.candidate_path), target.device,
                stamp(target.problem_path), stamp(target.candidate_path))

    def collect(self, target: ProfileTarget, stage: int, metrics: Sequence[str] = ()) -> ProfileData:
        """Record and read the timeline (stage 1); stage 2 returns the same data."""
        key = self._key(target)
        if key in self._cache:
            return self._cache[key]
        reason = self.unavailable_reason(target)
        if reason:
            raise CollectorError(reason)
        outdir = Path(target.workdir) / "timeline"
        outdir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(target.env)
        notes: list[str] = []

        timeline = None
        seconds: dict[str, float] = {}
        t_start = time.perf_counter()
        if self.settings.prefer_nsys and target.device.startswith("cuda"):
            nsys = nsys_tool.find_nsys(self.settings.nsys_path)
            known = nsys_tool.known_unusable(nsys) if nsys is not None else None
            if known is not None:
                notes.append(f"timeline: nsys unusable ({known}); used the PyTorch profiler")
            elif nsys is not None:
                program = self._program(target, outdir / "unused.json", mode="nvtx")
                try:
                    sqlite = nsys_tool.record(nsys, program, outdir / "nsys", env, Path(target.workdir),
                                              min(self.settings.nsys_timeout_s, self.settings.timeout_s))
                    timeline = nsys_sqlite.read(sqlite)
                except nsys_tool.NsysUnusable as exc:
                    nsys_tool.mark_unusable(nsys, str(exc))
                    notes.append(f"timeline: nsys unusable ({exc}); used the PyTorch profiler")
                    seconds["nsys_attempt"] = time.perf_counter() - t_start
        if timeline is None:
            trace_path = outdir / "trace.json.gz"
            t_driver = time.perf_counter()
            self._run_driver(target, trace_path, env)
            t_read = time.perf_counter()
            timeline = kineto.read(trace_path)
            seconds.update(cost_seconds(t_read - t_driver, _stages(trace_path), time.perf_counter() - t_read))
        data = attrs.evolve(to_profile_data(timeline, self.name, tuple(notes)), seconds=seconds)
        self._cache = {key: data}  # stage 2 of the same candidate follows stage 1
        return data

    def _program(self, target: ProfileTarget, out: Path, mode: str) -> list[str]:
        return trace_command(
            target.problem_path, target.candidate_path, out, device=target.device,
            warmup=self.settings.warmup, iters=self.settings.iters, seed=self.settings.seed,
            mode=mode, python=target.python,
        )

    def _run_driver(self, target: ProfileTarget, out: Path, env: dict[str, str]) -> None:
        argv = self._program(target, out, mode="kineto")
        out.unlink(missing_ok=True)
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=self.settings.timeout_s,
                env=env, cwd=target.workdir,
            )
        except subprocess.TimeoutExpired:
            raise CollectorError(f"timeline: the trace driver did not finish within {self.settings.timeout_s:.0f} s") from None
        except OSError as exc:
            raise CollectorError(f"timeline: cannot run {argv[0]}: {exc.strerror or exc}") from None
        if proc.returncode != 0 or not out.exists():
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("USDT:")]
            last = next((ln for ln in reversed(lines) if ln.startswith("trace failed:")), lines[-1] if lines else "")
            raise CollectorError(f"timeline: trace driver exited {proc.returncode}: {last[:300]}")
