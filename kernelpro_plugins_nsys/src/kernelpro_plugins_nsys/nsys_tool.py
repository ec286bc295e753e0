"""Finding Nsight Systems and recording a timeline with it.

An nsys binary can exist and still be unable to make a report (on the H200 image the
one shipped inside Nsight Compute writes a ``.qdstrm`` and stops, because the importer
that turns it into a report is missing). So usability is decided by trying: the first
recording either yields an SQLite export or marks that binary unusable for the rest of
the process, with the reason, and the collector falls back to the PyTorch profiler.
"""

from __future__ import annotations

import glob
import json
import os
import signal
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
VERDICT_FILE = "nsys_unusable.json"  # under the user cache dir: verdicts kept across runs


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelpro"


def _binary_key(nsys: str) -> str:
    """The binary's identity: real path, size and modification time (a new install is retried)."""
    try:
        st = os.stat(nsys)
        return f"{os.path.realpath(nsys)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        return nsys


def known_unusable(nsys: str) -> str | None:
    """Why this nsys cannot report, if this process or an earlier run found out; else None."""
    if nsys in UNUSABLE:
        return UNUSABLE[nsys]
    try:
        verdicts = json.loads((_cache_dir() / VERDICT_FILE).read_text())
    except (OSError, ValueError):
        return None
    reason = verdicts.get(_binary_key(nsys)) if isinstance(verdicts, dict) else None
    if isinstance(reason, str):
        UNUSABLE[nsys] = reason
        return reason
    return None


def mark_unusable(nsys: str, reason: str) -> None:
    """Remember the verdict for this process and, best effort, for later runs."""
    UNUSABLE[nsys] = reason
    path = _cache_dir() / VERDICT_FILE
    try:
        verdicts = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(verdicts, dict):
            verdicts = {}
        verdicts[_binary_key(nsys)] = reason
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(verdicts, indent=1))
    except (OSError, ValueError):
        pass


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
    import shutil

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
    rc, stdout, stderr = _run_group(argv, timeout_s, env, cwd)
    if rc is None:
        # seen on the H200 image: nsys profile neither finished nor wrote a file in 45 s
        left = sorted(p.name for p in out_base.parent.glob(out_base.name + ".*"))
        raise NsysUnusable(f"{nsys} did not finish within {timeout_s:.0f} s (left {', '.join(left) or 'no files'})")
    failed = [ln for ln in stderr.splitlines() if ln.startswith("trace failed:")]
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
    tail = (stderr.strip().splitlines() or stdout.strip().splitlines() or [""])[-1][:200]
    what = ", ".join(left) if left else "no files"
    raise NsysUnusable(f"{nsys} (exit {rc}) left {what} and no report: {tail}")


def _run_group(argv: Sequence[str], timeout_s: float, env: Mapping[str, str], cwd: Path):
    """Run in a new process group; on timeout kill the whole group (nsys and the program it
    started) and return rc None. OSError (no such binary) comes back as NsysUnusable."""
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(env), cwd=cwd, start_new_session=True)
    except OSError as exc:
        raise NsysUnusable(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        return None, out or "", err or ""
