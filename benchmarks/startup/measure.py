"""Start-up time of ``kernelpro --help`` and each ``kernelpro <command> --help``.

Runs each command in a fresh interpreter ``--repeat`` times and prints the median and the
range of the wall time, and which heavy modules (torch, anthropic, triton, numpy) the
command imported. Usage (from the repository root, with the project's virtualenv):

    .venv/bin/python benchmarks/startup/measure.py [--repeat 5] [--json] [--src DIR]

``--src DIR`` runs the sources of another checkout of the repository instead of the
installed ones (its distributions' ``src`` folders go first on PYTHONPATH; the entry
points stay those installed), e.g. an older commit exported with
``git archive COMMIT | tar -x -C DIR``, to measure before and after on one machine.

Numbers depend on the machine and its load; docs/validation/first_hour.md records runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("torch", "anthropic", "triton", "numpy", "rich")

# run the real entry point, then say which heavy modules it left imported
PROBE = (
    "import sys, json\n"
    "from kernelpro.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    f"print('@@' + json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)\n"
)


ENV = dict(os.environ)


def use_sources(root: Path) -> None:
    paths = sorted(str(p) for p in root.glob("*/src") if p.is_dir())
    if not paths:
        raise SystemExit(f"{root}: no <distribution>/src folders")
    ENV["PYTHONPATH"] = os.pathsep.join(paths + ([ENV["PYTHONPATH"]] if ENV.get("PYTHONPATH") else []))


def commands() -> list[list[str]]:
    """Every command and sub-command, read from the CLI parser itself."""
    out = subprocess.run([sys.executable, "-c", (
        "import json, click\n"
        "from kernelpro.cli import cli, load_plugins\n"
        "load_plugins(check=False).register_commands(cli)\n"
        "def walk(group, path):\n"
        "    for name, cmd in sorted(group.commands.items()):\n"
        "        yield path + [name]\n"
        "        if isinstance(cmd, click.Group):\n"
        "            yield from walk(cmd, path + [name])\n"
        "print(json.dumps(list(walk(cli, []))))\n")], capture_output=True, text=True, check=True, env=ENV)
    return [[]] + json.loads(out.stdout.strip().splitlines()[-1])


def measure(args: list[str], repeat: int) -> dict[str, object]:
    times, cpu, heavy = [], [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", PROBE, *args, "--help"], capture_output=True, text=True,
                             env=ENV)
        times.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU seconds (user + system) of the command: far less sensitive to a loaded machine
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if res.returncode != 0 or "Usage:" not in res.stdout:
            raise SystemExit(f"kernelpro {' '.join(args)} --help failed: {res.stderr[-500:]}")
        marker = [ln for ln in res.stderr.splitlines() if ln.startswith("@@")]
        heavy = json.loads(marker[-1][2:]) if marker else ["?"]
    return {"command": " ".join(["kernelpro", *args, "--help"]), "median_s": statistics.median(times),
            "median_cpu_s": statistics.median(cpu),
            "min_s": min(times), "max_s": max(times), "repeat": repeat, "imported": heavy}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--src", type=Path, help="a checkout whose sources to run instead of the installed ones")
    opts = ap.parse_args()
    if opts.src:
        use_sources(opts.src)
    machine = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
               "load_before": os.getloadavg()[0], "sources": str(opts.src or "installed")}
    rows = [measure(cmd, opts.repeat) for cmd in commands()]
    machine["load_after"] = os.getloadavg()[0]
    if opts.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=1))
        return 0
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine['cpus']} CPUs; python "
          f"{machine['python']}; load average {machine['load_before']:.1f} -> {machine['load_after']:.1f}; "
          f"sources: {machine['sources']}")
    print(f"{'command':40s} {'median s':>9s} {'min':>6s} {'max':>6s} {'CPU s':>6s}  heavy modules imported")
    for r in rows:
        print(f"{r['command']:40s} {r['median_s']:9.2f} {r['min_s']:6.2f} {r['max_s']:6.2f} {r['median_cpu_s']:6.2f}  "
              f"{', '.join(r['imported']) or '-'}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
