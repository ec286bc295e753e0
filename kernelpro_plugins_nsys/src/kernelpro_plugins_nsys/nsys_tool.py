"""Finding Nsight Systems and recording a timeline with it.

An nsys binary can exist and still be unable to make a report (on the H200 image the
one shipped inside Nsight Compute writes a ``.qdstrm`` and stops, because the importer
that turns it into a report is missing). So usability is decided by trying: the first
recording either yields an SQLite export or marks that binary unusable for the rest of
the process, with the reason, and the collector falls back to the PyTorch profiler.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from kernelpro.api import CollectorError

NSYS_ENV = "KERNELPRO_NSYS"  # path of the nsys binary to use, or "off"
_SEARCH = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda*/nsight-systems*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)

#: nsys path -> why it cannot make a report (absent: not tried yet in this process)
UNUSABLE: dict[str, str] = {}


class NsysUnusable(Exception):
    """nsys ran but produced no report; the message says what it left."""


def find_nsys(explicit: str = "") -> str | None:
    """The nsys to use: ``explicit``, else $KERNELPRO_NSYS, else PATH, else known install
    locations (newest first). None when none exists or $KERNELPRO_NSYS is "off"."""
    choice = explicit or os.environ.get(NSYS_ENV, "")
    if choice.lower() == "off":
        return None
    if choice:
        return choice if os.access(choice, os.X_OK) else None
    on_path = shutil.which("nsys")
    if on_path:
        return on_path
    for pattern in _SEARCH:
        for path in sorted(glob.glob(pattern), reverse=True):
            if os.access(path, os.X_OK):
                return path
    return None


def profile_argv(nsys: str, out_base: Path, program: Sequence[str]) -> list[str]:
    """nsys command recording CUDA and NVTX between cudaProfilerStart/Stop, exporting SQLite."""
    return [
        nsys, "profile", "--trace=cuda,nvtx", "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop", "--force-overwrite=true", "--export=sqlite",
        "-o", str(out_base), *program,
    ]


def record(
    nsys: str,
    program: Sequence[str],
    out_base: Path,
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
) -> Path:
    """Run ``program`` under nsys; return the SQLite export.

    Raises NsysUnusable when nsys ran but left no report, CollectorError when the program
    itself failed or timed out."""
    for old in out_base.parent.glob(out_base.name + ".*"):
        old.unlink()
    argv = profile_argv(nsys, out_base, program)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=dict(env), cwd=cwd)
    except subprocess.TimeoutExpired:
        raise CollectorError(f"timeline: nsys did not finish within {timeout_s:.0f} s") from None
    except OSError as exc:
        raise NsysUnusable(f"cannot run {nsys}: {exc.strerror or exc}") from None
    failed = [ln for ln in proc.stderr.splitlines() if ln.startswith("trace failed:")]
    if failed:
        raise CollectorError(f"timeline: {failed[-1]}")
    sqlite = out_base.with_name(out_base.name + ".sqlite")
    if sqlite.exists():
        return sqlite
    report = out_base.with_name(out_base.name + ".nsys-rep")
    if report.exists():
        try:
            subprocess.run(
                [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(report)],
                capture_output=True, text=True, timeout=timeout_s, env=dict(env), cwd=cwd,
            )
        except (subprocess.TimeoutExpired, OSError):
            pass
        if sqlite.exists():
            return sqlite
        raise NsysUnusable(f"{nsys} made {report.name} but could not export it to SQLite")
    left = sorted(p.name for p in out_base.parent.glob(out_base.name + ".*"))
    tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1][:200]
    what = ", ".join(left) if left else "no files"
    raise NsysUnusable(f"{nsys} (exit {proc.returncode}) left {what} and no report: {tail}")
