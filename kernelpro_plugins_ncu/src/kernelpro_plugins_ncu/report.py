"""Reading Nsight Compute results: ``.ncu-rep`` files and CSV exports.

Three readers, one output (a list of :class:`kernelpro.api.KernelProfile` plus a
payload dict):

* :func:`read_ncu_rep` uses the ``ncu_report`` Python module (PyPI ``ncu-report`` works
  without a GPU; ncu also ships it under ``extras/python``), and falls back to
  ``ncu --import FILE --csv --page raw`` when the module is missing and ncu exists.
* :func:`parse_raw_csv` reads ``--page raw --csv`` (one row per kernel, raw metric names).
* :func:`parse_details_csv` reads ``--page details --csv`` (one row per metric, display
  names); known display names are mapped to raw names.

Values are converted to base units: bytes, nanoseconds for durations, hertz for rates,
percent for percentages.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

import attrs

from kernelpro.api import CollectorError, KernelProfile, ProfileData

from kernelpro_plugins_ncu import metrics as M

COLLECTOR_NAME = "ncu"

# columns of the raw page that are not metrics
_RAW_ID_COLUMNS = {
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
    "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
    "Metric Unit", "Metric Value", "Rule Name", "Rule Type", "Rule Description",
    "Estimated Speedup Type", "Estimated Speedup", "Function Name", "Demangled Name",
}

# display names of the details page -> raw metric names (Nsight Compute 2025.x sections)
DETAILS_NAME_MAP = {
    ("GPU Speed Of Light Throughput", "Duration"): M.DURATION_NS,
    ("GPU Speed Of Light Throughput", "DRAM Throughput"): M.DRAM_THROUGHPUT_PCT,
    ("GPU Speed Of Light Throughput", "Memory Throughput"): M.MEM_THROUGHPUT_PCT,
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput"): M.SM_THROUGHPUT_PCT,
    ("GPU Speed Of Light Throughput", "L1/TEX Cache Throughput"): M.L1_THROUGHPUT_PCT,
    ("GPU Speed Of Light Throughput", "L2 Cache Throughput"): M.L2_THROUGHPUT_PCT,
    ("GPU Speed Of Light Throughput", "SM Frequency"): M.SM_CLOCK_HZ,
    ("GPU Speed Of Light Throughput", "DRAM Frequency"): M.DRAM_CLOCK_HZ,
    ("Launch Statistics", "Grid Size"): M.GRID_SIZE,
    ("Launch Statistics", "Block Size"): M.BLOCK_SIZE,
    ("Launch Statistics", "Registers Per Thread"): M.REGISTERS_PER_THREAD,
    ("Launch Statistics", "Static Shared Memory Per Block"): M.SMEM_STATIC,
    ("Launch Statistics", "Dynamic Shared Memory Per Block"): M.SMEM_DYNAMIC,
    ("Launch Statistics", "Waves Per SM"): M.WAVES_PER_SM,
    ("Launch Statistics", "# SMs"): M.SM_COUNT,
    ("Occupancy", "Block Limit Registers"): M.LIMIT_REGISTERS,
    ("Occupancy", "Block Limit Shared Mem"): M.LIMIT_SMEM,
    ("Occupancy", "Block Limit Warps"): M.LIMIT_WARPS,
    ("Occupancy", "Block Limit SM"): M.LIMIT_BLOCKS,
    ("Occupancy", "Theoretical Occupancy"): M.THEORETICAL_OCCUPANCY_PCT,
    ("Occupancy", "Achieved Occupancy"): M.ACHIEVED_OCCUPANCY_PCT,
    ("Memory Workload Analysis", "L1/TEX Hit Rate"): M.L1_HIT_PCT,
    ("Memory Workload Analysis", "L2 Hit Rate"): M.L2_HIT_PCT,
    ("Scheduler Statistics", "Issue Slots Busy"): M.ISSUE_ACTIVE_PCT,
    ("Scheduler Statistics", "Eligible Warps Per Scheduler"): M.ELIGIBLE_WARPS,
    ("Scheduler Statistics", "Active Warps Per Scheduler"): M.ACTIVE_WARPS_PER_SCHEDULER,
    ("Compute Workload Analysis", "Executed Ipc Active"): M.IPC,
}

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40}
_TIME_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0,
            "us": 1e3, "ms": 1e6, "s": 1e9}
_SCALED = r"(Ki|Mi|Gi|Ti|[KMGTP]?)(byte|B|hz|Hz|cycle|inst|sector|request|warp|thread)"
# unit words ncu prints that count things and carry no prefix
_COUNTS = {"%", "inst", "cycle", "warp", "thread", "block", "sector", "sectors", "request", "register",
           "byte", "hz", "Hz", "ratio", "SM", "cluster", "sample", "pass", "branches", "instance"}


def unit_scale(unit: str) -> float:
    """Factor that turns a value printed in ``unit`` into base units (bytes, ns, Hz); 1.0 for
    a unit it does not know (:func:`known_unit` tells those apart)."""
    unit = (unit or "").strip()
    if not unit or unit in ("%", "inst", "cycle", "warp", "thread", "block", "sector",
                            "request", "register/thread", "byte", "hz", "Hz", "ratio"):
        return 1.0
    if unit in _TIME_NS:
        return _TIME_NS[unit]
    m = re.fullmatch(_SCALED + r"(/.*)?", unit)
    if m:
        scale = _PREFIX[m.group(1)]
        per = m.group(3)
        if per:  # e.g. "byte/second", "Gbyte/second", "cycle/nsecond"
            denom = per[1:]
            if denom in _TIME_NS:
                scale *= 1e9 / _TIME_NS[denom]  # per second
        return scale
    return 1.0


def known_unit(unit: str) -> bool:
    """Whether :func:`unit_scale` knows every part of ``unit`` ("Kbyte/block", "inst/cycle");
    a value in any other unit is taken as printed."""
    parts = (unit or "").strip().split("/")
    return all(not p or p in _COUNTS or p in _TIME_NS or re.fullmatch(_SCALED, p) for p in parts)


def parse_number(text: str) -> float | None:
    """A number as ncu prints it ("1,234.5", "12.3"); None when not a finite number ("n/a",
    "nan", "inf" are no measurement)."""
    t = (text or "").strip().replace(",", "")
    if not t:
        return None
    try:
        value = float(t)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_dim3(text: str) -> tuple[int, int, int] | None:
    nums = re.findall(r"\d+", text or "")
    if len(nums) == 3:
        return (int(nums[0]), int(nums[1]), int(nums[2]))
    return None


def _csv_rows(text: str) -> list[list[str]]:
    # ncu prints "==PROF==" / "==WARNING==" lines before the table when run live; an editor
    # may have put a byte-order mark before the header
    lines = [ln for ln in (ln.lstrip("\ufeff") for ln in text.splitlines()) if ln.startswith('"')]
    if lines and '","' not in lines[0]:
        for sep, name in ((";", "semicolons"), ("\t", "tabs")):
            if f'"{sep}"' in lines[0]:
                raise CollectorError(f"the CSV's fields are separated by {name}, not commas (a spreadsheet "
                                     "re-saved it?): export it again with ncu --csv")
    try:
        return list(csv.reader(io.StringIO("\n".join(lines))))
    except csv.Error as exc:
        raise CollectorError(f"not a CSV table ncu writes: {exc}") from None


def _check_columns(header: list[str], needed: tuple[str, ...], page: str) -> None:
    missing = [name for name in needed if name not in header]
    if missing:
        raise CollectorError(f"not an ncu {page}-page CSV: no {', '.join(repr(n) for n in missing)} "
                             f"column{'s' if len(missing) > 1 else ''}")


def _truncated(row_number: int, got: int, wanted: int) -> CollectorError:
    return CollectorError(f"the CSV is truncated or corrupt: row {row_number} has {got} of the "
                          f"{wanted} fields the header names")


def _device_column(value: str) -> dict[str, str]:
    # the "Device" column holds the device's index ("0"), not its name
    value = value.strip()
    return {"device": value} if value and not value.isdigit() else {}


def _unit_notes(unknown: dict[str, str]) -> list[str]:
    if not unknown:
        return []
    listed = ", ".join(f"{unit!r} (e.g. {metric})" for unit, metric in list(unknown.items())[:3])
    return [f"unknown unit{'s' if len(unknown) > 1 else ''} {listed}: values taken as printed, which "
            "is wrong unless that is already bytes, ns or Hz; export with --print-units base"]


def parse_raw_csv(text: str) -> tuple[list[KernelProfile], dict[str, Any]]:
    """Parse ``ncu --csv --page raw`` output: a header row, an optional units row, then one
    row per profiled kernel. Returns the kernels and a payload (device name, strings, and
    ``notes`` on what was read with doubt)."""
    rows = _csv_rows(text)
    if not rows:
        raise CollectorError("the ncu CSV holds no table (expected --page raw --csv output)")
    header = rows[0]
    _check_columns(header, ("Kernel Name",), "raw")
    body = rows[1:]
    units: list[str] = [""] * len(header)
    first_row = 2
    if body and (not body[0][0].strip() or parse_number(body[0][0]) is None):
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
        first_row = 3
    kernels: list[KernelProfile] = []
    strings: list[dict[str, str]] = []
    unknown: dict[str, str] = {}
    col = {name: i for i, name in enumerate(header)}
    for number, row in enumerate(body, first_row):
        if len(row) < len(header):  # ncu writes every field of every row
            raise _truncated(number, len(row), len(header))
        values: dict[str, float] = {}
        text_values: dict[str, str] = {}
        for i, name in enumerate(header):
            if name in _RAW_ID_COLUMNS:
                continue
            value = parse_number(row[i])
            if value is None:
                if row[i].strip() and row[i].strip() != "n/a":
                    text_values[name] = row[i].strip()
                continue
            if not known_unit(units[i]):
                unknown.setdefault(units[i].strip(), name)
            values[name] = value * unit_scale(units[i])
        name = row[col["Kernel Name"]]
        kernels.append(KernelProfile(
            name=name,
            duration_ns=values.get(M.DURATION_NS),
            grid=parse_dim3(row[col["Grid Size"]]) if "Grid Size" in col else None,
            block=parse_dim3(row[col["Block Size"]]) if "Block Size" in col else None,
            metrics=values,
        ))
        if "Device" in col:
            for key, value_text in _device_column(row[col["Device"]]).items():
                text_values.setdefault(key, value_text)
        strings.append(text_values)
    return kernels, {"strings": strings, "notes": _unit_notes(unknown)}


#: the details page's columns without which its rows cannot be told apart or read
_DETAILS_COLUMNS = ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Value")


def parse_details_csv(text: str) -> tuple[list[KernelProfile], dict[str, Any]]:
    """Parse ``ncu --csv --page details`` output (one row per section metric). Display names
    listed in :data:`DETAILS_NAME_MAP` become raw metric names; others are kept under
    ``"<Section>/<Name>"``."""
    rows = _csv_rows(text)
    if not rows or "Metric Name" not in rows[0]:
        raise CollectorError("not an ncu details-page CSV: no 'Metric Name' column")
    header = rows[0]
    _check_columns(header, _DETAILS_COLUMNS, "details")
    col = {name: i for i, name in enumerate(header)}
    order: list[str] = []
    by_id: dict[str, dict[str, Any]] = {}
    unknown: dict[str, str] = {}
    # rule columns are left off when empty, but every row reaches the metric's value
    needed = max(col[name] for name in _DETAILS_COLUMNS) + 1
    for number, row in enumerate(rows[1:], 2):
        if len(row) < needed:
            raise _truncated(number, len(row), needed)
        row = row + [""] * (len(header) - len(row))
        kid = row[col["ID"]]
        entry = by_id.get(kid)
        if entry is None:
            entry = by_id[kid] = {
                "name": row[col["Kernel Name"]],
                "grid": parse_dim3(row[col["Grid Size"]]) if "Grid Size" in col else None,
                "block": parse_dim3(row[col["Block Size"]]) if "Block Size" in col else None,
                "metrics": {},
                "strings": _device_column(row[col["Device"]]) if "Device" in col else {},
            }
            order.append(kid)
        section = row[col["Section Name"]]
        metric = row[col["Metric Name"]]
        value = parse_number(row[col["Metric Value"]])
        if value is None:
            if metric == M.DEVICE_NAME and row[col["Metric Value"]].strip():
                entry["strings"][M.DEVICE_NAME] = row[col["Metric Value"]].strip()
            continue
        unit = row[col["Metric Unit"]] if "Metric Unit" in col else ""
        if re.fullmatch(r"[a-z0-9]+__[\w.]+", metric):  # "Command line profiler metrics": raw names
            raw = metric
        else:
            raw = DETAILS_NAME_MAP.get((section, metric), f"{section}/{metric}")
        if unit == "%" or raw.endswith("pct") or ".pct" in raw:
            entry["metrics"][raw] = value
        else:
            if not known_unit(unit):
                unknown.setdefault(unit.strip(), raw)
            entry["metrics"][raw] = value * unit_scale(unit)
    kernels = [
        KernelProfile(name=e["name"], duration_ns=e["metrics"].get(M.DURATION_NS),
                      grid=e["grid"], block=e["block"], metrics=e["metrics"])
        for e in (by_id[k] for k in order)
    ]
    return kernels, {"strings": [by_id[k]["strings"] for k in order], "notes": _unit_notes(unknown)}


def parse_csv(text: str) -> tuple[list[KernelProfile], dict[str, Any]]:
    """Either CSV page, told apart by its header."""
    rows = _csv_rows(text)
    if rows and "Metric Name" in rows[0]:
        return parse_details_csv(text)
    return parse_raw_csv(text)


# --- .ncu-rep --------------------------------------------------------------------------------


def import_ncu_report(ncu_path: str | None = None):
    """The ``ncu_report`` module: the installed package, else the copy ncu ships under
    ``extras/python``; None when neither loads."""
    try:
        import ncu_report  # type: ignore

        return ncu_report
    except Exception:
        pass
    exe = ncu_path or shutil.which("ncu")
    if exe:
        root = Path(exe).resolve().parent
        for candidate in (root / "extras" / "python", root.parent / "extras" / "python"):
            if (candidate / "ncu_report.py").exists():
                sys.path.insert(0, str(candidate))
                try:
                    import ncu_report

                    return ncu_report
                except Exception:
                    sys.path.remove(str(candidate))
    return None


def _metric_value(metric) -> float | str | None:
    try:
        value = metric.value()
    except Exception:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return value
    return None


def _source_hotspots(action, metric, top: int = 5) -> list[tuple[str, float]]:
    """Top source lines (file:line) by an instanced per-PC metric, best effort."""
    try:
        if metric.num_instances() <= 0 or not metric.has_correlation_ids():
            return []
        pcs = metric.correlation_ids()
        pairs = []
        for i in range(metric.num_instances()):
            v = metric.as_double(i)
            if v and v > 0:
                pairs.append((pcs.as_uint64(i), v))
    except Exception:
        return []
    by_line: dict[str, float] = {}
    for pc, v in pairs:
        try:
            info = action.source_info(pc)
        except Exception:
            info = None
        if info is None:
            continue
        try:
            key = f"{Path(info.file_name()).name}:{info.line()}"
        except Exception:
            continue
        by_line[key] = by_line.get(key, 0.0) + v
    return sorted(by_line.items(), key=lambda kv: -kv[1])[:top]


#: instanced per-PC metrics of the Source Counters section (names as ncu 2025.3 writes them
#: on Hopper) whose hot source lines are kept, with what they count
SOURCE_METRICS = {
    "derived__memory_l2_theoretical_sectors_global_excessive": "excess global sectors",
    "derived__memory_l1_wavefronts_shared_excessive": "excess shared wavefronts",
    "memory_l2_theoretical_sectors_local": "local-memory sectors",
    "smsp__branch_targets_threads_divergent": "divergent branch targets",
    "smsp__pcsamp_sample_count": "warp samples",
    "inst_executed": "instructions executed",
    **{M.pcsamp_metric(r): f"{r.replace('_', ' ')} stall samples" for r in M.STALL_REASONS},
}
#: the ones summarised in KernelProfile.source_lines
SUMMARY_SOURCE_METRICS = ("smsp__pcsamp_sample_count", "derived__memory_l2_theoretical_sectors_global_excessive",
                          "derived__memory_l1_wavefronts_shared_excessive", "memory_l2_theoretical_sectors_local",
                          "smsp__branch_targets_threads_divergent")


def _launch_dims(values: dict[str, float], which: str) -> tuple[int, int, int] | None:
    """The launch's grid or block dimensions from its ``launch__<which>_dim_{x,y,z}`` metrics."""
    x, y, z = (values.get(f"launch__{which}_dim_{d}") for d in "xyz")
    if x is None or y is None or z is None:
        return None
    return int(x), int(y), int(z)


def read_ncu_rep_module(path: Path, ncu_report) -> tuple[list[KernelProfile], dict[str, Any]]:
    """Read a .ncu-rep with the ``ncu_report`` module: every kernel of every range."""
    try:
        ctx = ncu_report.load_report(str(path))
    except Exception as exc:
        raise CollectorError(f"cannot read {path.name} with ncu_report: {str(exc).strip()[:200]}")
    kernels: list[KernelProfile] = []
    strings: list[dict[str, str]] = []
    hotspots: list[dict[str, list]] = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            try:
                name = action.name(ncu_report.IAction.NameBase_DEMANGLED)
            except Exception:
                name = action.name()
            if not name and not tuple(action.metric_names()):
                # what ncu_report makes of a kernel record cut off by the end of the file
                raise CollectorError(f"{path.name} is truncated or corrupt: kernel {len(kernels) + 1} of "
                                     f"range {r + 1} has no name and no metric")
            values: dict[str, float] = {}
            texts: dict[str, str] = {}
            spots: dict[str, list] = {}
            for mname in action.metric_names():
                metric = action.metric_by_name(mname)
                if metric is None:
                    continue
                if mname in SOURCE_METRICS:
                    found = _source_hotspots(action, metric)
                    if found:
                        spots[mname] = found
                value = _metric_value(metric)
                if isinstance(value, float):
                    values[mname] = value
                elif isinstance(value, str) and value:
                    texts[mname] = value
            grid = _launch_dims(values, "grid")
            block = _launch_dims(values, "block")
            lines = tuple(f"{loc} ({SOURCE_METRICS[key]}: {value:.0f})"
                          for key in SUMMARY_SOURCE_METRICS if key in spots
                          for loc, value in spots[key][:3])
            kernels.append(KernelProfile(
                name=name, duration_ns=values.get(M.DURATION_NS), grid=grid, block=block,
                metrics=values, source_lines=lines))
            if M.DEVICE_NAME in texts:
                texts.setdefault("device", texts[M.DEVICE_NAME])
            strings.append(texts)
            hotspots.append(spots)
    return kernels, {"strings": strings, "source_hotspots": hotspots}


def ncu_import_csv(path: Path, ncu: str, page: str = "raw", timeout_s: float = 120.0) -> str:
    """``ncu --import FILE --csv --page PAGE --print-units base`` output."""
    cmd = [ncu, "--import", str(path), "--csv", "--page", page, "--print-units", "base"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CollectorError(f"ncu --import {path.name} took longer than {timeout_s:.0f} s")
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CollectorError(f"ncu --import {path.name} failed: {last[0][:200]}")
    return proc.stdout


def read_report(path: Path, ncu_path: str | None = None) -> tuple[list[KernelProfile], dict[str, Any]]:
    """Read a .ncu-rep (ncu_report module, else ``ncu --import`` CSV) or a CSV export."""
    path = Path(path)
    if not path.exists():
        raise CollectorError(f"no such report: {path}")
    if path.suffix in (".csv", ".txt"):
        try:
            return parse_csv(path.read_text(encoding="utf-8-sig", errors="replace"))
        except CollectorError as exc:  # the parsers see text only: name the file here
            raise CollectorError(f"{path.name}: {exc}") from None
    module = import_ncu_report(ncu_path)
    if module is not None:
        kernels, payload = read_ncu_rep_module(path, module)
        payload["reader"] = "ncu_report"
        return kernels, payload
    ncu = ncu_path or shutil.which("ncu")
    if ncu is None:
        raise CollectorError(
            f"cannot read {path.name}: install the ncu-report package "
            "(pip install ncu-report) or put Nsight Compute's ncu on PATH")
    kernels, payload = parse_raw_csv(ncu_import_csv(path, ncu))
    payload["reader"] = "ncu --import csv"
    return kernels, payload


def load_sidecar(path: Path) -> dict[str, Any]:
    """The collector's JSON written next to a report (``<report>.json``): forward input and
    output bytes, the command, stage, timing; {} when absent, unreadable, or some other JSON
    that merely shares the name (a trace, a list)."""
    for cand in (path.with_suffix(".json"), path.parent / (path.name + ".json")):
        if cand.exists():
            try:
                data = json.loads(cand.read_text())
            except (OSError, ValueError):
                return {}
            if not isinstance(data, dict) or not isinstance(data.get("io", {}), dict):
                return {}
            return data
    return {}


def device_name_of(payload: dict[str, Any]) -> str | None:
    for strings in payload.get("strings", ()):
        for key in (M.DEVICE_NAME, "device"):
            if strings.get(key):
                return strings[key]
    return payload.get("device_name")


def profile_data(kernels: Iterable[KernelProfile], payload: dict[str, Any],
                 notes: Iterable[str] = ()) -> ProfileData:
    payload = dict(payload)
    payload.setdefault("device_name", device_name_of(payload))
    notes = tuple(notes) + tuple(payload.pop("notes", ()))  # the readers' doubts about the file
    return ProfileData(level="kernel", collector=COLLECTOR_NAME, kernels=tuple(kernels),
                       payload=payload, notes=notes, device_name=payload["device_name"])


def kernel_key(name: str) -> str:
    """A kernel name comparable across readers: ncu_report writes template arguments with
    casts ("tiled<(int)0>"), the CSV pages without ("tiled<0>")."""
    return re.sub(r"\((?:unsigned |signed |long |short )*\w+\)(?=-?\d)", "", name).strip()


def merge_kernels(first: list[KernelProfile], second: list[KernelProfile]) -> list[KernelProfile]:
    """Stage-2 kernels with stage-1 metrics filled in (matched by position and name);
    stage-2 values win where both have a metric."""
    if len(first) != len(second):
        return list(second)
    out = []
    for a, b in zip(first, second):
        if kernel_key(a.name) != kernel_key(b.name):
            return list(second)
        metrics = dict(a.metrics)
        metrics.update(b.metrics)
        out.append(attrs.evolve(b, metrics=metrics, duration_ns=b.duration_ns or a.duration_ns,
                                grid=b.grid or a.grid, block=b.block or a.block,
                                source_lines=b.source_lines or a.source_lines))
    return out
