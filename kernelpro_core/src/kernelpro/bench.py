"""``kernelpro bench SUITE``: run the optimizer over a suite of problems and summarise.

A suite is a directory of KernelBench-format ``.py`` files (the level is read from a
``levelN`` folder or file-name prefix) or a JSONL file whose lines hold ``level``,
``problem_id``, ``name`` and ``code``. Problems are filtered by level, sampled (per level,
with a fixed seed, before anything runs) and limited, then each is optimized in-process
into its own run directory under ``<out>/runs/``; a run directory that already holds a
``summary.json`` is read back instead of run again, so an interrupted bench continues
(one that holds part of a run is resumed). Problems run on the config's executor
(``executor:``): with ``local``, one at a time per GPU of the host; with ``ray``, one per
GPU of the Ray cluster; a problem whose worker is lost runs once more elsewhere, resumed.
The bench's own files (``results.json``, ``report.md``) are written once, at the end, by
the command.

Per level it reports: the correct rate (problems with at least one correct candidate),
the geometric-mean speedup of the best candidate over eager and over torch.compile (a
problem without a correct candidate counts as 1.0: the reference is kept), fast_1 (share
of problems whose best correct candidate is faster than eager) and the mean fraction of
the roofline reached by the winners (from their profile analysis). The eager and
torch.compile times are measured under PyTorch's default flags (as users run their models;
on a GPU cuDNN convolutions may use TF32); the baseline job's strict-fp32 times are a
second column. It writes
``results.json``, ``report.md`` with a per-problem table and a roofline plot
(``roofline.png`` with matplotlib, otherwise an ASCII chart inside the report).
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from pathlib import Path
from typing import Any, Iterable

import attrs
import click

from kernelpro.hookspecs import hookimpl


class SuiteError(ValueError):
    """The suite cannot be read; one line."""


@attrs.frozen
class SuiteProblem:
    level: int | None
    problem_id: int | None
    name: str
    source: str

    @property
    def key(self) -> str:
        prefix = f"L{self.level}_" if self.level is not None else ""
        return re.sub(r"\W+", "_", prefix + self.name).strip("_")[:100]


_LEVEL = re.compile(r"level[_-]?(\d+)", re.I)


def read_suite(path: Path) -> list[SuiteProblem]:
    """Problems of a suite directory or JSONL file, in a stable order."""
    if path.is_dir():
        out = []
        for f in sorted(path.rglob("*.py")):
            rel = f.relative_to(path)
            level = None
            for part in [*rel.parts[:-1], f.stem]:
                m = _LEVEL.search(part)
                if m:
                    level = int(m.group(1))
            pid = re.match(r"(\d+)_", f.stem)
            try:
                source = f.read_text()
            except UnicodeDecodeError as exc:
                raise SuiteError(f"{f}: not a text file (byte {exc.start} is not UTF-8)") from None
            except OSError as exc:
                raise SuiteError(f"{f}: cannot read: {exc.strerror or exc}") from None
            out.append(SuiteProblem(level=level, problem_id=int(pid.group(1)) if pid else None,
                                    name=f.stem, source=source))
        if not out:
            raise SuiteError(f"{path}: no .py problems in this directory")
        return out
    if not path.exists():
        raise SuiteError(f"{path}: no such suite (a directory of .py files or a .jsonl file)")
    out = []
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read: {exc}") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append(SuiteProblem(level=int(row["level"]) if row.get("level") is not None else None,
                                    problem_id=int(row["problem_id"]) if row.get("problem_id") is not None
                                    else None, name=str(row["name"]), source=str(row["code"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise SuiteError(f"{path}:{i}: not a suite line (needs level, problem_id, name, code): "
                             f"{type(exc).__name__}: {exc}") from None
    if not out:
        raise SuiteError(f"{path}: the suite is empty")
    return out


def select(problems: list[SuiteProblem], levels: Iterable[int] | None = None, sample: int | None = None,
           seed: int = 0, limit: int | None = None) -> list[SuiteProblem]:
    """Filter by level, draw ``sample`` problems per level with ``seed`` (before any run),
    then keep the first ``limit``."""
    chosen = [p for p in problems if levels is None or p.level in set(levels)]
    if sample is not None:
        rng = random.Random(seed)
        by_level: dict[Any, list[SuiteProblem]] = {}
        for p in chosen:
            by_level.setdefault(p.level, []).append(p)
        chosen = []
        for level in sorted(by_level, key=lambda v: (v is None, v)):
            group = by_level[level]
            picked = sorted(rng.sample(range(len(group)), min(sample, len(group))))
            chosen.extend(group[i] for i in picked)
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


BENCH_META = "bench.json"  # per run directory: the code that ran it and its wall time


def code_digest() -> str:
    """A digest of the Python sources of the installed ``kernelpro`` package and of every
    plugin package loaded beside it (12 hex digits): which code optimized a problem, with
    or without a git checkout (a bench may span sessions and machines, and problems run by
    other code must be told apart). Plugins count because their findings and generators
    steer the search."""
    import hashlib
    import importlib.util

    from kernelpro.plugins import installed

    h = hashlib.sha256()
    roots: dict[str, Path | None] = {"kernelpro": Path(__file__).resolve().parent}
    for info in installed().infos:
        top = info.module.split(":")[0].split(".")[0]
        if info.error or info.blocked or top in roots:
            continue
        spec = importlib.util.find_spec(top)
        origin = spec.origin if spec is not None else None
        roots[top] = Path(origin).resolve().parent if origin else None
    for name, root in sorted(roots.items()):
        h.update(name.encode())
        if root is None:
            continue
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is absent or not one (invalid JSON, binary)."""
    try:
        data = json.loads(path.read_bytes().decode())
    except (OSError, ValueError):  # ValueError: JSONDecodeError and UnicodeDecodeError
        return None
    return data if isinstance(data, dict) else None


def problem_row(problem: SuiteProblem, run_dir: Path, error: str | None = None) -> dict[str, Any]:
    """One problem's outcome, read from its run directory."""
    row: dict[str, Any] = {"level": problem.level, "problem_id": problem.problem_id, "name": problem.name,
                           "run_dir": str(run_dir), "error": error, "evaluated": 0, "correct": False,
                           "best_id": None, "speedup_eager": None, "speedup_compiled": None,
                           "bottleneck": None, "roofline_fraction": None, "best_description": None,
                           "stopped_because": None, "code": None, "wall_s": None,
                           # the times each speedup divides (ms): the best's, the eager reference's
                           # from the same evaluation, torch.compile's; with their CVs
                           "best_ms": None, "eager_ms": None, "compiled_ms": None,
                           "best_cv": None, "eager_cv": None, "retimed": False,
                           # the baseline job's eager and compiled times in strict fp32 (no TF32):
                           # the second column; the headline times run under PyTorch's defaults
                           "eager_strict_ms": None, "compiled_strict_ms": None,
                           # the problem's minimum-traffic bound (inputs read once, outputs
                           # written once, its FLOPs) against the run's GPU ceilings, over the
                           # best's time; ncu's achieved fraction is roofline_fraction
                           "min_traffic_fraction": None, "min_traffic_calibrated": None,
                           # that fraction over the bytes' part alone: the best ran faster than
                           # the reference's FLOPs allow (fewer FLOPs, e.g. an algebraic rewrite)
                           "min_traffic_bytes_only": False,
                           # the optional third baseline (evaluator.compiled_autotune_mode) and its compile time
                           "autotune_ms": None, "autotune_compile_s": None}
    meta = _read_object(run_dir / BENCH_META)  # unreadable: as if absent (the next call of the problem rewrites it)
    if meta is not None:
        row["code"], row["wall_s"] = meta.get("code"), meta.get("wall_s")
    summary_path = run_dir / "summary.json"
    if error is not None or not summary_path.exists():
        return row
    summary = _read_object(summary_path)
    if summary is None:
        row["error"] = f"{summary_path}: not a JSON object"
        return row
    try:
        base = json.loads((run_dir / "baseline.json").read_text())
    except (OSError, ValueError):
        base = {}
    row["eager_strict_ms"] = (base.get("baseline_strict") or {}).get("median_ms")
    row["compiled_strict_ms"] = (base.get("baseline_compiled_strict") or {}).get("median_ms")
    row["autotune_ms"] = (base.get("baseline_compiled_autotune") or {}).get("median_ms")
    row["autotune_compile_s"] = ((base.get("measurements") or {}).get("evaluator") or {}).get("compile_autotune_s")
    row["evaluated"] = summary.get("evaluated", 0)
    row["stopped_because"] = summary.get("stopped_because")
    best = summary.get("best_id")
    if not best:
        # no correct candidate: the reference is kept, so over torch.compile the problem
        # scores the eager reference against the compiled one (both from the baseline job)
        eager, comp = (base.get("baseline") or {}).get("median_ms"), \
            (base.get("baseline_compiled") or {}).get("median_ms")
        if eager and comp:
            # the kept reference's time (no candidate) against the compiled reference's
            row.update(speedup_compiled=comp / eager, best_ms=eager, eager_ms=eager, compiled_ms=comp)
        notes = (base.get("measurements") or {}).get("evaluator") or {}
        if eager:  # the kept reference's own fraction
            _min_traffic_fraction(row, notes, eager)
        return row
    from kernelpro.report import read_records, record_timings

    # retimes applied: the numbers the run chose its best on (candidates.jsonl keeps the first)
    record = next((rec for rec in read_records(run_dir) if rec["id"] == best), None)
    if record is None:
        return row
    row.update(correct=True, best_id=best, speedup_eager=record.get("speedup"),
               best_description=record.get("description"), bottleneck=record.get("bottleneck"))
    runtime, compiled = record.get("runtime_ms"), record.get("compiled_baseline_ms")
    cand, ref = record_timings(record)
    notes = ((record.get("result") or {}).get("measurements") or {}).get("evaluator") or {}
    if runtime:
        _min_traffic_fraction(row, notes, runtime)
    row.update(best_ms=runtime, eager_ms=record.get("baseline_ms"), compiled_ms=compiled,
               best_cv=(cand or {}).get("cv"), eager_cv=(ref or {}).get("cv"), retimed=bool(record.get("retimed")))
    if runtime and compiled:
        row["speedup_compiled"] = compiled / runtime
    analysis_path = run_dir / "analyses" / f"{best}.json"
    analysis = _read_object(analysis_path)
    if analysis is not None:
        bottleneck = analysis.get("bottleneck") or {}
        row["roofline_fraction"] = bottleneck.get("roofline_fraction")
        # the analysis may postdate the record (profiling.when = expand profiles the winner last)
        row["bottleneck"] = bottleneck.get("kind") or row["bottleneck"]
    return row


def _min_traffic_fraction(row: dict[str, Any], notes: dict[str, Any], ms: float) -> None:
    """The problem's least time over ``ms`` (:func:`kernelpro.api.least_time_fraction`)."""
    from kernelpro.api import least_time_fraction

    got = least_time_fraction(notes, ms)
    if got is None:
        return
    row["min_traffic_fraction"] = got[0]
    if got[1]:
        row["min_traffic_bytes_only"] = True
    row["min_traffic_calibrated"] = bool(notes.get("min_traffic_bound_calibrated"))


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def kept_reference(row: dict[str, Any]) -> bool:
    """A problem whose correct candidates are all no faster than the eager reference: the
    run advises keeping the reference (report.md, ``kernelpro optimize``)."""
    from kernelpro.report import faster_than_reference

    return bool(row.get("correct")) and faster_than_reference(row.get("speedup_eager") or 0.0) is False


def delivered_compiled(row: dict[str, Any]) -> float | None:
    """Over torch.compile, what the run hands back: the best candidate where it beats the
    eager reference, else the reference itself (as for a problem without a correct one)."""
    if kept_reference(row):
        eager, comp = row.get("eager_ms"), row.get("compiled_ms")
        return comp / eager if eager and comp else None
    return row.get("speedup_compiled")


def level_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics of one level's rows (see the module docstring for each definition)."""
    n = len(rows)
    eager = [r["speedup_eager"] if r["correct"] and r["speedup_eager"] else 1.0 for r in rows]
    compiled_known = [r for r in rows if r["speedup_compiled"] is not None]
    fractions = [r["roofline_fraction"] for r in rows if r["correct"] and r["roofline_fraction"] is not None]
    minimal = [r["min_traffic_fraction"] for r in rows if r["correct"] and r.get("min_traffic_fraction") is not None]
    return {
        "problems": n,
        "correct_rate": sum(r["correct"] for r in rows) / n if n else None,
        "geomean_speedup_eager": geomean(eager),
        # over torch.compile: only where the compiled reference was timed (not on CPU)
        "geomean_speedup_compiled": geomean([r["speedup_compiled"] for r in compiled_known])
        if compiled_known else None,
        "compiled_timed": len(compiled_known),
        "fast_1": sum(1 for r in rows if r["correct"] and (r["speedup_eager"] or 0) > 1.0) / n if n else None,
        "mean_roofline_fraction": sum(fractions) / len(fractions) if fractions else None,
        "mean_min_traffic_fraction": sum(minimal) / len(minimal) if minimal else None,
        "profiled_winners": len(fractions),
        # the same two means with the reference kept where no correct candidate beat eager
        # (what `kernelpro optimize` advises then): a second reading, not the headline
        "kept_reference": sum(kept_reference(r) for r in rows),
        "geomean_delivered_eager": geomean([max(e, 1.0) for e in eager]),
        "geomean_delivered_compiled": geomean([v for v in (delivered_compiled(r) for r in compiled_known)
                                               if v is not None]) if compiled_known else None,
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    levels: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        levels.setdefault(str(r["level"]) if r["level"] is not None else "-", []).append(r)
    out = {lv: level_summary(rs) for lv, rs in sorted(levels.items())}
    out["all"] = level_summary(rows)
    return out


def _fmt(value: Any, pct: bool = False, x: bool = False) -> str:
    if value is None:
        return "n/a"
    if pct:
        return f"{100 * value:.0f}%"
    if x:
        return f"{value:.2f}x"
    return str(value)


def summary_table(summary: dict[str, dict[str, Any]]) -> str:
    lines = ["| level | problems | correct | geomean vs eager | geomean vs torch.compile | fast_1 | "
             "winners' roofline (min traffic) | winners' roofline (ncu) |", "|---|---|---|---|---|---|---|---|"]
    for level, s in summary.items():
        lines.append(f"| {level} | {s['problems']} | {_fmt(s['correct_rate'], pct=True)} | "
                     f"{_fmt(s['geomean_speedup_eager'], x=True)} | "
                     f"{_fmt(s['geomean_speedup_compiled'], x=True)} ({s['compiled_timed']} timed) | "
                     f"{_fmt(s['fast_1'], pct=True)} | {_fmt(s.get('mean_min_traffic_fraction'), pct=True)} | "
                     f"{_fmt(s['mean_roofline_fraction'], pct=True)} ({s['profiled_winners']} profiled) |")
    return "\n".join(lines)


def kept_table(summary: dict[str, dict[str, Any]]) -> str:
    """The geometric means again, with the reference kept where no correct candidate beat eager."""
    lines = ["| level | reference kept | geomean vs eager | geomean vs torch.compile |", "|---|---|---|---|"]
    for level, s in summary.items():
        lines.append(f"| {level} | {s.get('kept_reference', 0)} | {_fmt(s.get('geomean_delivered_eager'), x=True)} | "
                     f"{_fmt(s.get('geomean_delivered_compiled'), x=True)} |")
    return "\n".join(lines)


def _ms_cv(ms: Any, cv: Any, noisy_cv: float | None) -> str:
    from kernelpro.report import NOISY_MARK, fmt_ms, is_noisy

    if ms is None:
        return "n/a"
    if cv is None:
        return fmt_ms(ms)
    return f"{fmt_ms(ms)} (CV {cv:.2f}{' ' + NOISY_MARK if is_noisy(cv, noisy_cv) else ''})"


PROBLEM_COLUMNS = ("level", "id", "problem", "correct", "evaluated", "best ms", "eager ms", "vs eager",
                   "torch.compile ms", "vs torch.compile", "eager / compile ms, strict fp32",
                   "torch.compile autotune ms (compile s)", "bottleneck",
                   "roofline (min traffic)", "roofline (ncu)", "best candidate", "wall s", "code")


def _min_traffic(row: dict[str, Any]) -> str:
    f = row.get("min_traffic_fraction")
    if f is None:
        return "n/a"
    # against datasheet ceilings (no `kernelpro calibrate` on this GPU) the fraction reads low
    notes = ([] if row.get("min_traffic_calibrated") else ["datasheet"]) + \
        (["bytes only: fewer FLOPs than the reference"] if row.get("min_traffic_bytes_only") else [])
    return f"{100 * f:.0f}%" + (f" ({'; '.join(notes)})" if notes else "")


def _autotune(row: dict[str, Any]) -> str:
    from kernelpro.report import fmt_ms

    if row.get("autotune_ms") is None:
        return "not timed"  # evaluator.compiled_autotune_mode unset (the default), or a CPU
    secs = row.get("autotune_compile_s")
    return fmt_ms(row["autotune_ms"]) + (f" ({secs:.0f} s)" if secs is not None else "")


def _strict(row: dict[str, Any]) -> str:
    from kernelpro.report import fmt_ms

    e, c = row.get("eager_strict_ms"), row.get("compiled_strict_ms")
    if e is None and c is None:
        return "not timed"  # on a CPU the flags change nothing; or evaluator.time_strict_baselines off
    return f"{fmt_ms(e) if e is not None else 'n/a'} / {fmt_ms(c) if c is not None else 'n/a'}"


def problem_table(rows: list[dict[str, Any]], noisy_cv: float | None = None) -> str:
    """One row per problem. `vs eager` = `eager ms` / `best ms` (both medians of the best's
    evaluation); `vs torch.compile` = `torch.compile ms` / `best ms` (for a problem without
    a correct candidate, `best ms` is the kept reference's time from the baseline job)."""
    lines = ["| " + " | ".join(PROBLEM_COLUMNS) + " |", "|" + "---|" * len(PROBLEM_COLUMNS)]
    for r in rows:
        desc = (r["error"] or r["best_description"] or r["stopped_because"] or "").replace("|", "/")[:80]
        if r.get("retimed"):
            desc = f"{desc} (timed again)"
        wall = f"{r['wall_s']:.0f}" if r.get("wall_s") is not None else "n/a"
        lines.append(f"| {_fmt(r['level'])} | {_fmt(r['problem_id'])} | {r['name']} | "
                     f"{'yes' if r['correct'] else 'no'} | {r['evaluated']} | "
                     f"{_ms_cv(r.get('best_ms'), r.get('best_cv'), noisy_cv)} | "
                     f"{_ms_cv(r.get('eager_ms'), r.get('eager_cv'), noisy_cv)} | {_fmt(r['speedup_eager'], x=True)} | "
                     f"{_ms_cv(r.get('compiled_ms'), None, noisy_cv)} | {_fmt(r['speedup_compiled'], x=True)} | "
                     f"{_strict(r)} | {_autotune(r)} | "
                     f"{r['bottleneck'] or 'n/a'} | {_min_traffic(r)} | {_fmt(r['roofline_fraction'], pct=True)} | "
                     f"{desc} | {wall} | "
                     f"{r.get('code') or 'n/a'} |")
    return "\n".join(lines)


def ascii_roofline(rows: list[dict[str, Any]], width: int = 40) -> str:
    """One bar per profiled winner: its fraction of the roofline (| marks 80 %)."""
    pts = [r for r in rows if r["roofline_fraction"] is not None]
    if not pts:
        return "(no winner was profiled: no roofline fractions to plot)"
    mark = int(0.8 * width)
    lines = []
    for r in pts:
        n = max(0, min(width, round(r["roofline_fraction"] * width)))
        bar = ("#" * n).ljust(width)
        bar = bar[:mark] + ("|" if n <= mark else "#") + bar[mark + 1:]
        lines.append(f"{r['name'][:28]:28s} {bar} {100 * r['roofline_fraction']:5.1f}% {r['bottleneck'] or ''}")
    return "\n".join(lines)


def roofline_plot(rows: list[dict[str, Any]], out_dir: Path) -> str:
    """Markdown for the roofline plot: a PNG when matplotlib is importable, else ASCII."""
    pts = [r for r in rows if r["roofline_fraction"] is not None]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "```\n" + ascii_roofline(rows) + "\n```"
    if not pts:
        return "(no winner was profiled: no roofline fractions to plot)"
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(pts) + 1.5))
    names = [r["name"][:40] for r in pts]
    colors = {"memory": "tab:blue", "compute": "tab:red", "latency": "tab:orange"}
    ax.barh(names, [100 * r["roofline_fraction"] for r in pts],
            color=[colors.get(r["bottleneck"], "tab:gray") for r in pts])
    ax.axvline(80, color="black", linestyle="--", linewidth=1)
    ax.set_xlabel("winner's fraction of the roofline (%)")
    ax.set_xlim(0, 100)
    fig.tight_layout()
    fig.savefig(out_dir / "roofline.png", dpi=120)
    plt.close(fig)
    return "![roofline](roofline.png)"


def plugin_sections(plugins: Any, config: Any, rows: list[dict[str, Any]], warn: Any = None) -> list[str]:
    """Every plugin's ``kernelpro_bench_sections``; a plugin that fails gets a warning line
    and a section saying so instead of its own."""
    import copy

    sections: list[str] = []
    caller = plugins.hook.kernelpro_bench_sections
    for impl in reversed(caller.get_hookimpls()):
        try:
            returned = impl.function(config=config, problems=copy.deepcopy(rows)) or []
            if not isinstance(returned, (list, tuple)) or not all(isinstance(x, str) for x in returned):
                raise TypeError(f"expected a list of markdown strings, got {repr(returned).splitlines()[0][:80]}")
            sections.extend(returned)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            who = plugins.who(impl.plugin_name) if hasattr(plugins, "who") else f"plugin {impl.plugin_name!r}"
            line = f"{who} failed in kernelpro_bench_sections: {type(exc).__name__}: {first}"
            if warn is not None:
                warn(f"{line}; report.md says so in its place (fix it, or block it with "
                     f"KERNELPRO_BLOCK_PLUGINS={impl.plugin_name})")
            sections.append(f"## {impl.plugin_name}\n\n(not written: {line})\n")
    return sections


def write_report(out_dir: Path, rows: list[dict[str, Any]], summary: dict[str, dict[str, Any]],
                 meta: dict[str, Any], sections: list[str] | None = None) -> Path:
    from kernelpro.report import NOISY_MARK

    text = [
        "# KernelPro bench", "",
        f"Suite: `{meta['suite']}`; generator `{meta['generator']}`, search `{meta['search']}`, "
        f"reward `{meta.get('reward', 'log_speedup')}`, budget {meta['budget']} per problem, "
        f"device {meta['device']}.", "",
        "Problems without a correct candidate count as 1.0x in the geometric means (the reference is kept); "
        "the torch.compile column uses only problems whose compiled reference was timed. Each geometric mean "
        "is over the per-problem speedups below; each of those is printed beside the two times it divides: "
        "`vs eager` = `eager ms` / `best ms`, both medians from the best candidate's own evaluation "
        "(interleaved), `vs torch.compile` = `torch.compile ms` / `best ms`. The best of a problem is its run's "
        "(highest reward; see the run's report.md). "
        + (f"`{NOISY_MARK}`: CV above evaluator.noisy_cv {meta['noisy_cv']:g}." if meta.get("noisy_cv") is not None
           else ""), "",
        "## Per level", "", summary_table(summary), "",
        "Where every correct candidate of a problem was no faster than the eager reference, its run "
        "advises keeping the reference; counted that way (the reference's own times, as for a problem "
        "without a correct candidate), the means are:", "", kept_table(summary), "",
        "## Per problem", "", problem_table(rows, meta.get("noisy_cv")), "",
        "## Roofline (winners)", "", roofline_plot(rows, out_dir), "",
    ]
    for section in sections or ():
        text += [section.rstrip("\n"), ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(text))
    return path


@attrs.define
class ProblemCall:
    """Optimize one problem of a bench on an executor's worker (a job of kind ``problem``):
    into its run directory, continuing it when it holds part of a run, with the problem's
    evaluations pinned to the worker's GPU. Returns None, an error line, or ``NOT_RUN``
    when the bench's deadline had passed before it began. Picklable: a Ray actor loads the
    installed plugins itself."""

    problem: SuiteProblem
    config: Any  # kernelpro.config.Config
    run_dir: Path
    deadline: float | None = None  # time.time() after which no problem starts
    plugins: Any = None  # in this process: the command's plugins (not pickled)

    def __getstate__(self) -> dict[str, Any]:
        state = {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}
        state["plugins"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def __call__(self, slot: Any) -> str | None:
        from kernelpro.executors.local import LocalExecutor, LocalSettings
        from kernelpro.loop import RunError, optimize
        from kernelpro.plugins import Plugins
        from kernelpro.problem import ProblemError, parse_problem

        if self.deadline is not None and time.time() > self.deadline:
            return NOT_RUN
        pinned = slot.env.get("CUDA_VISIBLE_DEVICES")
        from kernelpro import gpulock

        shared = {gpulock.ENV: slot.env[gpulock.ENV]} if gpulock.ENV in slot.env else {}  # a GPU shared with other problems
        executor = LocalExecutor(LocalSettings(devices=[pinned] if pinned is not None else None), env=shared)
        executor.start(slot.device)
        plugins = self.plugins if self.plugins is not None else Plugins(block=self.config.plugins.block)
        t0, started = time.monotonic(), time.time()  # when: problems of a bench may run at once
        resume = (self.run_dir / "problem.py").exists()
        error = None
        try:
            problem = parse_problem(self.problem.source, name=self.problem.key)
            optimize(problem, self.config, plugins, self.run_dir, slot.device, resume=resume, executor=executor,
                     next_problem=True)
        except (RunError, ProblemError) as exc:
            error = str(exc)
        except Exception as exc:  # one broken problem must not stop the bench
            error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if self.config.evaluator.prestart and error is None:
            # the next problem on this worker starts with its baseline job: its judge starts now
            from kernelpro.evaluate import runner

            try:
                runner.prestart_judge(slot.device, runner.judge_env(dict(slot.env)), baseline=True)
            except OSError:
                pass
        if self.run_dir.is_dir():  # a resumed problem's wall time is this call's part only
            (self.run_dir / BENCH_META).write_text(json.dumps(
                {"code": code_digest(), "wall_s": time.monotonic() - t0, "resumed": resume, "worker": slot.name,
                 "started_unix_s": started, "ended_unix_s": time.time()}))
        return error


#: what :class:`ProblemCall` returns for a problem the deadline kept from starting
NOT_RUN = "not run"


def run_bench(problems: list[SuiteProblem], config: Any, plugins: Any, out_dir: Path, device: str,
              say: Any = print, executor: Any = None, deadline: float | None = None) -> list[dict[str, Any]]:
    """Optimize each problem into ``out_dir/runs/<key>`` on the workers of ``executor`` (by
    default the config's, started here: one problem per GPU of the host or of the Ray
    cluster at a time); return one row per problem, in the order of ``problems``. A problem
    whose run directory holds a summary is read back; one with part of a run continues it.
    No problem starts after ``deadline`` (a ``time.time()``); its row says ``not run``."""
    from kernelpro import config as cfg
    from kernelpro.api import Job
    from kernelpro.loop import RunError

    errors: dict[str, str | None] = {}
    jobs = []
    for i, p in enumerate(problems, 1):
        run_dir = out_dir / "runs" / p.key
        if _read_object(run_dir / "summary.json") is not None:
            say(f"[{i}/{len(problems)}] {p.key}: already run, reading {run_dir}")
        else:
            if (run_dir / "summary.json").exists():  # the run's records are intact: it is resumed, which writes it anew
                say(f"[{i}/{len(problems)}] {p.key}: {run_dir / 'summary.json'} is unreadable; running it again "
                    "(resumed)")
            jobs.append(Job(id=p.key, fn=ProblemCall(p, config, run_dir, deadline, plugins), kind="problem"))
    own = executor is None
    if jobs and own:
        exe_cls, exe_settings = cfg.validate(config, plugins)["executor"]
        try:
            executor = exe_cls(exe_settings)
            executor.start(device)
        except (OSError, ValueError) as exc:
            raise RunError(str(exc)) from None
    try:
        if jobs:
            say(f"{len(jobs)} problem(s) to run on {len(executor.slots())} worker(s) ({executor.name})")
        for n, outcome in enumerate(executor.run(jobs) if jobs else (), 1):
            errors[outcome.id] = outcome.error or outcome.value
            state = f"error: {errors[outcome.id]}" if errors[outcome.id] else "done"
            say(f"[{n}/{len(jobs)}] {outcome.id}: {state}"
                + (f" ({outcome.worker})" if outcome.worker else "")
                + (f" (attempt {outcome.attempts})" if outcome.attempts > 1 else ""))
    finally:
        if jobs and own:
            executor.shutdown()
    return [problem_row(p, out_dir / "runs" / p.key, errors.get(p.key)) for p in problems]


@hookimpl
def kernelpro_register_commands(cli):
    @cli.command(name="bench")
    @click.argument("suite", type=click.Path())
    @click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file.")
    @click.option("-o", "--output", "out", type=click.Path(file_okay=False), help="Bench directory.")
    @click.option("--levels", help="Comma-separated levels to run, e.g. 1,2.")
    @click.option("--limit", type=int, help="Run at most this many problems.")
    @click.option("--sample", type=int, help="Draw this many problems per level (with --seed) before running.")
    @click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
    @click.option("--budget", type=int, help="Candidates per problem.")
    @click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Where candidates run (default: auto).")
    @click.option("--generator", help="Code generator (see `kernelpro plugins`).")
    @click.option("--reward", help="Reward (see `kernelpro plugins`), e.g. energy_at_matched_speed.")
    @click.option("--deadline-s", "deadline_s", type=float,
                  help="Start no problem after this many seconds; the rest are listed as not run, and a "
                       "later call with the same -o continues (problems already run are read back).")
    @click.option("--json", "as_json", is_flag=True, help="Print the results as one JSON object.")
    def bench(suite: str, config_path: str | None, out: str | None, levels: str | None, limit: int | None,
              sample: int | None, seed: int, budget: int | None, device: str | None, generator: str | None,
              reward: str | None, deadline_s: float | None, as_json: bool) -> None:
        """Optimize every problem of SUITE (a directory of KernelBench .py files or a JSONL
        file) and report, per level, correct rate, geomean speedups, fast_1 and the
        winners' roofline fraction. Writes report.md and results.json."""
        import time

        from kernelpro import config as cfg
        from kernelpro.cli import EXIT_FAIL, Abort, config_abort, load_config_or_abort, load_plugins
        from kernelpro.loop import RunError, resolve_device

        try:
            wanted = [int(v) for v in levels.split(",") if v.strip()] if levels else None
        except ValueError:
            raise Abort(f"--levels: expected comma-separated integers, got {levels!r}") from None
        if sample is not None and sample < 1 or limit is not None and limit < 1:
            raise Abort("--sample and --limit take positive integers")
        if deadline_s is not None and deadline_s < 0:
            raise Abort("--deadline-s takes a number of seconds, 0 or more")
        deadline = time.time() + deadline_s if deadline_s is not None else None
        try:
            problems = select(read_suite(Path(suite)), wanted, sample, seed, limit)
        except SuiteError as exc:
            raise Abort(str(exc)) from None
        if not problems:
            raise Abort(f"{suite}: no problem matches --levels {levels}")
        overrides: dict[str, Any] = {"device": device, "budget": budget}
        if generator:
            overrides["generator"] = {"name": generator, "params": {}}
        if reward:
            overrides["reward"] = {"name": reward}  # the config's params stay when it names the same reward
        config = load_config_or_abort(config_path, overrides)
        plugins = load_plugins(config.plugins.block)
        try:
            cfg.validate(config, plugins)
        except cfg.ConfigError as exc:
            raise config_abort(exc.problems) from None
        try:
            dev = resolve_device(config.device)
        except RunError as exc:  # --device cuda without a GPU: this machine cannot (exit 3)
            raise Abort(str(exc), 3) from None
        out_dir = Path(out) if out else Path("bench") / time.strftime("%Y%m%d-%H%M%S")
        if out_dir.is_dir() and not (out_dir / "problems.json").exists() and not (out_dir / "runs").is_dir() \
                and any(out_dir.iterdir()):
            # a bench writes report.md, results.json, problems.json: never over the user's files
            raise Abort(f"{out_dir}: exists, is not empty and is not a bench directory (a new bench needs an empty "
                        "or new directory; one of an earlier bench is continued); use another -o")
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "problems.json").write_text("[]")  # writable: checked before any problem runs
        except OSError as exc:
            raise Abort(f"{out_dir}: cannot write the bench directory: {exc.strerror or exc}") from None
        (out_dir / "problems.json").write_text(json.dumps(
            [{"level": p.level, "problem_id": p.problem_id, "name": p.name} for p in problems], indent=1))
        from kernelpro.progress import Display

        # a live line with each problem's evaluation and profiling stages on a terminal
        with Display(as_json, "bench") as display:
            def say(line: str) -> None:  # each problem's line stays, above the live one
                if as_json:
                    click.echo(line, err=True)
                else:
                    display.print(line)

            try:
                rows = run_bench(problems, config, plugins, out_dir, dev, say=say, deadline=deadline)
            except RunError as exc:  # the executor cannot start (no Ray, no cluster)
                raise Abort(str(exc)) from None
        summary = summarise(rows)
        meta = {"suite": str(suite), "generator": config.generator.name, "search": config.search.name,
                "reward": config.reward.name, "budget": config.budget, "device": dev, "seed": seed,
                "sample": sample, "noisy_cv": config.evaluator.noisy_cv}
        (out_dir / "results.json").write_text(json.dumps({"meta": meta, "levels": summary, "problems": rows},
                                                         indent=1))
        sections = plugin_sections(plugins, config, rows, warn=lambda s: click.echo(f"warning: {s}", err=True))
        report = write_report(out_dir, rows, summary, meta, sections)
        if as_json:
            click.echo(json.dumps({"meta": meta, "levels": summary, "problems": rows}))
        else:
            click.echo(summary_table(summary))
            click.echo("")
            click.echo(problem_table(rows, config.evaluator.noisy_cv))
            for section in sections:
                click.echo("")
                click.echo(section.rstrip("\n"))
            click.echo(f"report: {report}")
        # every problem that started failed (no run, no result): the bench measured nothing,
        # which a script must see in the exit status; problems the deadline kept back are not
        # failures, and a bench where some problems ran keeps exit 0 with a warning
        failed = [r for r in rows if r["error"] and r["error"] != NOT_RUN]
        started = [r for r in rows if r["error"] != NOT_RUN]
        if failed and len(failed) == len(started):
            first = failed[0]
            raise Abort(f"every problem that started failed ({len(failed)} of {len(started)}); the first, "
                        f"L{first['level']} {first['name']}: {first['error']} (report: {report})", EXIT_FAIL)
        if failed:
            click.echo(f"warning: {len(failed)} of {len(started)} problems failed (their errors are in {report})",
                       err=True)
