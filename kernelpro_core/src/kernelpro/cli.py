"""The ``kernelpro`` command line.

Exit status (the table in README.md): 0 success; 1 the candidate or run did not succeed;
2 bad invocation or unreadable input (options, config, problem, report, run directory) or
a plugin that failed; 3 this machine lacks what the command needs (a CUDA GPU, a
profiler); 130 interrupted. Errors are one line each starting ``error:``, never a
traceback.

Imports are on demand: ``kernelpro --help`` and ``kernelpro <command> --help`` load the
plugins' entry points (to list their commands) but run no registration hook, so neither
torch nor the anthropic SDK is imported.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import click

from kernelpro import config as cfg
from kernelpro.plugins import BLOCK_ENV, PluginError, PluginFailed, Plugins

EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_MACHINE = 3  # a CUDA GPU or a profiler this machine does not have
EXIT_INTERRUPTED = 130


class Abort(click.ClickException):
    """A one-line error with an exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = code  # type: ignore[misc]  # click declares it on the class; each Abort has its own

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _err(lines: list[str]) -> None:
    for line in lines:
        click.echo(f"error: {line}", err=True)


def config_abort(problems: list[str], code: int = EXIT_USAGE) -> Abort:
    """The error for a configuration's problems: the problem itself when there is one (one
    line), else each on its line and a last one counting them."""
    if len(problems) == 1:
        return Abort(problems[0], code)
    _err(problems)
    return Abort(f"invalid configuration ({len(problems)} problems)", code)


_PLUGINS: dict[tuple[str, ...], Plugins] = {}
_COLLECTED: set[tuple[str, ...]] = set()
_SHOWN_HOOK_FAILURES: dict[tuple[str, ...], int] = {}


def load_plugins(block: list[str] | tuple[str, ...] = (), check: bool = True, collect: bool = True) -> Plugins:
    """The installed plugins minus ``block``. Load and registration failures are warnings;
    with ``check``, a name registered twice ends the command (exit 2, one line): which of
    the two a command would use would depend on the installation. Without ``collect`` the
    registration hooks are not run (they import what each plugin registers: torch, the
    anthropic SDK): listing the commands needs only the entry points."""
    key = tuple(sorted(block))
    if key not in _PLUGINS:
        try:
            plugins = Plugins(block=block)
        except PluginError as exc:
            raise Abort(str(exc)) from None
        for failure in plugins.failures:
            click.echo(f"warning: plugin {failure.name!r} from {failure.distribution or '?'} failed to load: "
                       f"{failure.error}; it is left out (fix, upgrade or uninstall it, or block it with "
                       f"{BLOCK_ENV}={failure.name})", err=True)
        _PLUGINS[key] = plugins
    if collect and key not in _COLLECTED:
        _PLUGINS[key].collect()
        _COLLECTED.add(key)
    show_hook_failures(key)
    if check:
        try:
            _PLUGINS[key].check()
        except PluginError as exc:
            raise Abort(str(exc)) from None
    return _PLUGINS[key]


def show_hook_failures(key: tuple[str, ...] = ()) -> None:
    """Warn once about each registration hook that raised so far."""
    plugins = _PLUGINS.get(key)
    if plugins is None:
        return
    shown = _SHOWN_HOOK_FAILURES.get(key, 0)
    for hook_failure in plugins.hook_failures[shown:]:
        click.echo(f"warning: {hook_failure.line()}", err=True)
    _SHOWN_HOOK_FAILURES[key] = len(plugins.hook_failures)


def check_names_or_abort(config: cfg.Config, plugins: Plugins) -> None:
    """For commands that only profile (profile, analyze): the plugin names they use checked
    against the installed plugins; the generator, search and reward are not theirs to check
    (they may run with only the profiling plugins loaded)."""
    problems = cfg.check_plugin_names(config, plugins)
    if len(problems) == 1:
        raise Abort(problems[0])
    if problems:
        _err(problems)
        raise Abort("invalid configuration")


def load_config_or_abort(path: str | None, overrides: dict[str, Any] | None = None) -> cfg.Config:
    try:
        return cfg.load_config(path, overrides)
    except cfg.ConfigError as exc:
        if len(exc.problems) == 1:  # the problem is the error line
            raise Abort(exc.problems[0]) from None
        _err(exc.problems)
        raise Abort("invalid configuration") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernelpro-core", prog_name="kernelpro")
def cli() -> None:
    """KernelPro: optimize a PyTorch module's GPU kernels in a closed loop.

    A problem is a KernelBench-format file (class Model, get_inputs, get_init_inputs);
    a candidate defines class ModelNew.
    """


# --- optimize ------------------------------------------------------------------------------


@cli.command()
@click.argument("problem", type=click.Path(dir_okay=False), required=False)
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file.")
@click.option("-o", "--output", "run_dir", type=click.Path(file_okay=False), help="Run directory (a new one).")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Where candidates run (default: auto).")
@click.option("--budget", type=int, help="Candidates to evaluate.")
@click.option("--generator", help="Code generator (see `kernelpro plugins`).")
@click.option("--search", "search", help="Search policy: greedy, mcts, beam, ...")
@click.option("--reward", help="Reward: log_speedup, energy, ...")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False),
              help="Continue a killed run (PROBLEM may be left out: the run directory has it).")
@click.option("--quiet", is_flag=True, help="No progress display.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON summary on stdout at the end (progress stays on stderr).")
def optimize(problem: str | None, config_path: str | None, run_dir: str | None, device: str | None, budget: int | None,
             generator: str | None, search: str | None, reward: str | None, resume_dir: str | None,
             quiet: bool, as_json: bool) -> None:
    """Optimize PROBLEM: generate, evaluate, profile and search candidates.

    Writes a run directory (candidates.jsonl, candidates/, best.py, report.md, tree.json,
    tree.svg). Exit 0 when a correct candidate was found, 1 when none was, 2 for a bad
    invocation (a run directory that is in use, already holds a run without --resume, is
    not one, or cannot be created) or a problem that fails on its own (its import, Model,
    get_inputs() or forward), 3 for --device cuda without a CUDA GPU. With --json
    the summary is printed whenever the run finished (exit 0 or 1).
    """
    from kernelpro.loop import InvocationError, ProblemFailed, RunError, SetupError, optimize as run_optimize
    from kernelpro.problem import ProblemError, load_problem

    if resume_dir:
        run_path = Path(resume_dir)
        if not (run_path / "problem.py").is_file():
            raise Abort(f"{run_path}: not a run directory (no problem.py)")
        if config_path is None and (run_path / "config.yaml").exists():
            config_path = str(run_path / "config.yaml")
        if run_dir and Path(run_dir) != run_path:
            raise Abort("--resume and -o name different directories")
        if problem is None:
            problem = str(run_path / "problem.py")
    elif problem is None:
        raise Abort("missing PROBLEM (it may be left out only with --resume RUN_DIR)")
    overrides: dict[str, Any] = {"device": device, "budget": budget}
    if generator:
        overrides["generator"] = {"name": generator, "params": {}}
    if search:
        overrides["search"] = {"name": search, "params": {}}
    if reward:
        overrides["reward"] = {"name": reward, "params": {}}
    config = _load_with_choices(config_path, overrides)
    plugins = load_plugins(config.plugins.block)
    try:
        cfg.validate(config, plugins)
    except cfg.ConfigError as exc:
        raise config_abort(exc.problems) from None
    try:
        prob = load_problem(problem)
    except ProblemError as exc:
        raise Abort(str(exc)) from None
    dev = _device_or_abort(config.device)
    if resume_dir:
        run_path = Path(resume_dir)
        if not (run_path / "candidates").is_dir():
            raise Abort(f"{run_path}: not a run directory")
    else:
        run_path = Path(run_dir) if run_dir else _default_run_dir(prob.name)
        _check_run_dir(run_path)
    progress = _progress(quiet, config.budget, config.evaluator.noisy_cv)
    try:
        with progress.live():
            summary = run_optimize(prob, config, plugins, run_path, dev, resume=bool(resume_dir),
                                   progress=progress.callbacks())
    except (SetupError, InvocationError, ProblemFailed) as exc:
        raise Abort(str(exc), EXIT_USAGE) from None
    except PluginFailed as exc:  # what was evaluated is on disk; the run can be continued
        raise Abort(f"{exc}; fix or replace the plugin, then continue with: kernelpro optimize --resume {run_path}",
                    EXIT_USAGE) from None
    except RunError as exc:
        raise Abort(str(exc), EXIT_FAIL) from None
    except OSError as exc:  # the disk, not the candidates: what was evaluated is on disk
        if not (run_path / "candidates").is_dir():  # the run directory could not even be made
            raise Abort(f"{run_path}: cannot create the run directory: {exc.strerror or exc}") from None
        raise Abort(f"{exc}; continue with: kernelpro optimize --resume {run_path}", EXIT_FAIL) from None
    except KeyboardInterrupt:
        click.echo(f"interrupted; continue with: kernelpro optimize --resume {run_path}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    code = 0 if summary["best_id"] else EXIT_FAIL
    _print_run_summary(summary, run_path, config.evaluator.noisy_cv, as_json, code)
    sys.exit(code)


def _device_or_abort(requested: str) -> str:
    from kernelpro.loop import RunError, resolve_device

    try:
        return resolve_device(requested)
    except RunError as exc:  # --device cuda without a CUDA GPU: this machine cannot
        raise Abort(str(exc), EXIT_MACHINE) from None


def _check_run_dir(path: Path) -> None:
    """A new run directory must be creatable, an existing one a writable directory (the
    run then checks it does not already hold a run): exit 2 with one line before anything
    runs, not an OSError mid-run. Nothing is created here."""
    if path.exists():
        if not path.is_dir():
            raise Abort(f"{path}: exists and is not a directory; use another -o")
        if not os.access(path, os.W_OK | os.X_OK):
            raise Abort(f"{path}: the run directory is not writable; use another -o")
        from kernelpro.rundir import RunDir

        run = RunDir(path)
        if not run.is_run() and run.foreign_entries():  # a run holding part of a run: the run refuses it
            raise Abort(f"{path}: exists, is not empty and is not a KernelPro run directory (a new run needs an "
                        "empty or new directory); use another -o")
        return
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise Abort(f"{path}: cannot be created: {parent} is not a directory; use another -o")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise Abort(f"{path}: cannot be created: {parent} is not writable; use another -o")


def _workdir_or_abort(workdir: str, ours: tuple[str, ...]) -> Path:
    """``--workdir``, created if absent: exit 2 with one line when it cannot be, or when it
    holds files of the user's (it is not empty and has none of ``ours``, what an earlier
    call of the same command left there): the command writes and removes files in it."""
    path = Path(workdir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Abort(f"--workdir {workdir}: cannot be created: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise Abort(f"--workdir {workdir}: not writable")
    if not any((path / name).exists() for name in ours) and any(path.iterdir()):
        raise Abort(f"--workdir {workdir}: exists, is not empty and is not a work directory of this command; "
                    "use an empty or new one")
    return path


def _print_run_summary(summary: dict[str, Any], run_path: Path, noisy_cv: float, as_json: bool, code: int) -> None:
    """The run's last word: one line for a person, or with --json one JSON object on stdout
    (the best's speedup with both times it divides and their spread)."""
    from kernelpro.report import KEEP_REFERENCE, best_summary, read_records, speedup_line

    records = {r["id"]: r for r in read_records(run_path)}
    best = records.get(summary["best_id"]) if summary.get("best_id") else None
    if as_json:
        click.echo(json.dumps({
            "exit_code": code, "run_dir": str(run_path), "evaluated": summary["evaluated"],
            "correct": summary["correct"], "stopped_because": summary["stopped_because"],
            "wall_s": summary.get("wall_s"), "noisy_cv": noisy_cv, "best": best_summary(best, noisy_cv),
            "faster_than_reference": summary.get("faster_than_reference"),
            "report": str(run_path / "report.md"),
        }, indent=2))
        return
    if best is not None:
        from kernelpro.report import record_timings

        cand, ref = record_timings(best)
        head = f"best {best['id']}: {speedup_line(best['speedup'], cand, ref, noisy_cv)} (same evaluation)"
        if summary.get("faster_than_reference") is False:
            head += f"; {KEEP_REFERENCE}"
    else:
        head = "no correct candidate"
        if not summary["evaluated"] and summary.get("stopped_because"):
            head += f" ({summary['stopped_because']})"
    click.echo(f"{summary['evaluated']} candidates, {summary['correct']} correct; {head}; "
               f"report: {run_path / 'report.md'}")


def _load_with_choices(config_path: str | None, overrides: dict[str, Any]) -> cfg.Config:
    # a plugin chosen on the command line keeps the file's params when it is the same plugin
    if config_path:
        try:
            data = cfg.read_yaml(config_path)
        except cfg.ConfigError as exc:
            raise config_abort(exc.problems) from None
        for role in ("generator", "search", "reward"):
            chosen = overrides.get(role)
            if chosen and isinstance(data.get(role), dict) and data[role].get("name") == chosen["name"]:
                overrides.pop(role)
    return load_config_or_abort(config_path, overrides)


def _default_run_dir(name: str) -> Path:
    import time

    return Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


class _progress:
    """optimize's display (kernelpro.progress): a live bar with the current stage on a
    terminal, plain lines on stderr elsewhere, nothing with --quiet."""

    def __init__(self, quiet: bool, budget: int, noisy_cv: float | None = None) -> None:
        from kernelpro.progress import Display

        self.quiet = quiet
        self.noisy_cv = noisy_cv  # timings above it are marked noisy
        self.display = Display(quiet, "optimizing", total=budget)

    def live(self) -> Any:
        return self.display

    def callbacks(self) -> Any:
        from kernelpro.loop import Progress

        say = self.display.print

        def baseline(res: Any) -> None:
            from kernelpro.report import fmt_timing

            b = res.baseline
            say(f"reference alone: {fmt_timing(b, self.noisy_cv)}, n={b.n}, {b.method} (each speedup divides "
                f"the reference's time from the candidate's own evaluation)")

        def candidate(rec: dict[str, Any]) -> None:
            from kernelpro.report import speedup_short

            sp = speedup_short(rec, self.noisy_cv)
            extra = f" [{rec['bottleneck']}]" if rec.get("bottleneck") else ""
            say(f"{rec['id']} <- {rec['parent']}: {rec['description'][:60]} -> {sp}{extra}")
            self.display.advance()

        def warn(text: str) -> None:
            # shown even with --quiet; one line whatever the terminal's width
            print(f"warning: {text}", file=sys.stderr, flush=True)

        return Progress(baseline=baseline, candidate=candidate, message=lambda s: say(s), warning=warn)


# --- eval ----------------------------------------------------------------------------------


@cli.command(name="eval")
@click.argument("problem", type=click.Path(dir_okay=False))
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Where to run (default: auto).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--workdir", type=click.Path(file_okay=False), help="Keep the evaluation's files here.")
def eval_cmd(problem: str, candidate: str, config_path: str | None, device: str | None, as_json: bool,
             workdir: str | None) -> None:
    """Evaluate CANDIDATE against PROBLEM: correctness, then timing against the reference.

    Exit 0 when the candidate is correct, 1 when it is not (a candidate that breaks the
    contract included: verdict invalid), 2 when the invocation, the config or the problem is
    at fault, 3 for --device cuda without a CUDA GPU. With --json one JSON object is
    printed in every case that has a verdict.
    """
    import tempfile

    from kernelpro.evaluate.runner import evaluate
    from kernelpro.problem import CandidateError, ProblemError, detect_language, load_candidate, load_problem
    from kernelpro.progress import Display
    from kernelpro.records import EvalResult, Verdict

    config = load_config_or_abort(config_path, {"device": device})
    plugins = load_plugins(config.plugins.block)
    try:
        measurements = cfg.validate(config, plugins)["measurements"]
    except cfg.ConfigError as exc:
        raise config_abort(exc.problems) from None
    try:
        prob = load_problem(problem)
    except ProblemError as exc:
        raise Abort(str(exc)) from None
    dev = _device_or_abort(config.device)
    try:
        source = load_candidate(candidate, prob)
        result = None
    except CandidateError as exc:  # the candidate's verdict, as in a run's candidates.jsonl
        source, result = "", EvalResult(verdict=Verdict.INVALID, reason=str(exc), device=dev)
    except ProblemError as exc:  # unreadable: a bad invocation
        raise Abort(str(exc)) from None
    if result is None:
        tmp = None
        if workdir is not None:
            _workdir_or_abort(workdir, ("job.json", "sandbox"))
        else:
            tmp = tempfile.TemporaryDirectory(prefix="kernelpro-eval-")
            workdir = tmp.name
        try:
            with Display(as_json, "evaluating"):  # compile, correctness, timing: minutes on a CPU
                result = evaluate(Path(problem), Path(candidate), device=dev, config=config.evaluator,
                                  workdir=Path(workdir), seed=config.seed, measurements=measurements,
                                  language=detect_language(source))
        finally:
            if tmp is not None:
                tmp.cleanup()
    _print_eval(result, as_json)
    if result.verdict is Verdict.PROBLEM_ERROR:  # the problem's fault, not the candidate's
        click.echo(f"error: {result.reason}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(0 if result.correct else EXIT_FAIL)


def _print_eval(result: Any, as_json: bool) -> None:
    from kernelpro.records import to_json

    if as_json:
        out = {
            "correct": result.correct,
            "verdict": result.verdict.value,
            "reason": result.reason,
            "runtime_ms": result.runtime_ms,
            "baseline_ms": result.baseline_ms,
            "compiled_baseline_ms": result.baseline_compiled.median_ms if result.baseline_compiled else None,
            "speedup": result.speedup,
            "flags": list(result.flags),
            "measurements": result.measurements,
            "device": result.device,
            "gpu": result.gpu_name,
            "result": to_json(result),
        }
        click.echo(json.dumps(out, indent=2))
        return
    if result.correct:
        click.echo(f"correct: {result.runtime_ms:.4f} ms vs reference {result.baseline_ms:.4f} ms "
                   f"-> {result.speedup:.2f}x ({result.device})")
    else:
        click.echo(f"{result.verdict.value}: {result.reason}")
    for flag in result.flags:
        click.echo(f"flag: {flag}")


# --- profile / analyze -------------------------------------------------------------------


@cli.command()
@click.argument("problem", type=click.Path(dir_okay=False))
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Where to run (default: auto).")
@click.option("--json", "as_json", is_flag=True, help="Print {bottleneck, findings} as JSON.")
@click.option("--workdir", type=click.Path(file_okay=False), help="Keep reports and builds here.")
def profile(problem: str, candidate: str, config_path: str | None, device: str | None, as_json: bool,
            workdir: str | None) -> None:
    """Profile CANDIDATE: collect, classify the bottleneck, run the gated micro-profilers.

    The bottleneck comes from the kernel-level counters (Nsight Compute on a CUDA GPU).
    Where they cannot be collected (a CPU, no ncu) the levels that can run still do (the
    timeline records CPU runs too) and are printed, then the command exits 3 naming what it
    could not do. Exit 1 when the candidate is not correct, 2 for bad input.
    """
    import tempfile

    import attrs

    from kernelpro.api import ProfileContext, ProfileTarget
    from kernelpro.evaluate.runner import evaluate, profile_env
    from kernelpro.loop import gpu_spec
    from kernelpro.problem import ProblemError, load_candidate, load_problem
    from kernelpro.executors.calls import make_profiler
    from kernelpro.profile.pipeline import no_gpu_notes
    from kernelpro.plugins import UnknownName
    from kernelpro.progress import Display

    from kernelpro.problem import CandidateError

    config = load_config_or_abort(config_path, {"device": device})
    plugins = load_plugins(config.plugins.block)
    check_names_or_abort(config, plugins)
    settings = _profiling_settings_or_abort(config, plugins)
    try:
        prob = load_problem(problem)
    except ProblemError as exc:
        raise Abort(str(exc)) from None
    dev = _device_or_abort(config.device)
    try:
        load_candidate(candidate, prob)
    except CandidateError as exc:
        click.echo(f"error: not profiled: the candidate is invalid: {exc}", err=True)
        sys.exit(EXIT_FAIL)
    except ProblemError as exc:
        raise Abort(str(exc)) from None
    keep = workdir is not None
    base = (_workdir_or_abort(workdir, ("eval", "profile")) if workdir is not None
            else Path(tempfile.mkdtemp(prefix="kernelpro-profile-")))
    display = Display(as_json, "profiling")  # the evaluation, then each profiling pass
    try:
        build = base / "build"
        with display:
            result = evaluate(Path(problem), Path(candidate), device=dev, config=config.evaluator,
                              workdir=base / "eval", seed=config.seed, build_dir=build)
        if result.verdict.value == "problem_error":
            raise Abort(result.reason)
        if not result.correct:
            click.echo(f"error: not profiled: the candidate is {result.verdict.value}: {result.reason}", err=True)
            sys.exit(EXIT_FAIL)
        try:
            profiler = make_profiler(config, plugins, settings)  # as the loop builds it
        except UnknownName as exc:
            raise Abort(str(exc)) from None
        gpu = gpu_spec(plugins, dev, config.gpu)
        target = ProfileTarget(problem_path=Path(problem).resolve(), candidate_path=Path(candidate).resolve(),
                               device=dev, workdir=base / "profile", build_dir=build, python=sys.executable,
                               env=profile_env(build, dev, Path(candidate)))
        target.workdir.mkdir(parents=True, exist_ok=True)
        try:
            with display:
                analysis, profiles = profiler.profile(target, ProfileContext(gpu=gpu, device=dev, result=result))
        except PluginFailed as exc:
            raise Abort(f"{exc}; fix, replace or block the plugin") from None
        if gpu is None:  # say so: the ceilings and the GPU's heuristics were not consulted
            analysis = attrs.evolve(analysis, notes=analysis.notes + tuple(no_gpu_notes(plugins, f"device {dev}")))
    finally:
        if not keep:
            import shutil

            shutil.rmtree(base, ignore_errors=True)
    collected = [{"level": p.level, "collector": p.collector, "kernels": len(p.kernels)} for p in profiles.values()]
    _print_analysis(analysis, as_json, collected)
    if analysis.bottleneck is None:
        ran = ", ".join(f"{c['collector']} ({c['level']} level, {c['kernels']} kernel(s))" for c in collected)
        line = (f"no bottleneck classification on device {dev}: no kernel-level profile (the notes say why); "
                f"{'what ran: ' + ran if ran else 'no collector could run'}")
        if not analysis.findings:  # nothing came out of it: say so and fail
            click.echo(f"error: {line}; nothing to report" + ("" if keep else " (--workdir keeps the raw profiles)"),
                       err=True)
            sys.exit(EXIT_MACHINE)
        click.echo(f"warning: {line}; the findings above come from those", err=True)


@cli.command()
@click.argument("report", type=click.Path(dir_okay=False))
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file.")
@click.option("--gpu", "gpu_name", help="GPU whose spec and heuristics apply (a spec name such as 'H200 SXM', or a "
                                         "device name); default: config gpu, else the device the file names.")
@click.option("--json", "as_json", is_flag=True, help="Print {bottleneck, findings} as JSON.")
def analyze(report: str, config_path: str | None, gpu_name: str | None, as_json: bool) -> None:
    """Analyze an existing file: an Nsight Compute report or CSV export, a cubin, shared
    object, object file or .cu source (SASS), or a timeline trace. Needs no GPU."""
    from kernelpro.api import CollectorError, ProfileContext
    from kernelpro.plugins import UnknownName
    from kernelpro.profile.pipeline import Profiler

    path = Path(report)
    if not path.is_file():
        raise Abort(f"{path}: no such file")
    config = load_config_or_abort(config_path)
    plugins = load_plugins(config.plugins.block)
    check_names_or_abort(config, plugins)
    settings = _profiling_settings_or_abort(config, plugins)
    try:
        spec = plugins.gpu_for(None, "", gpu_name or config.gpu)  # None: the file's device decides
        profiler = Profiler(plugins, config.profiling.classifier, None, config.profiling.block_micro_profilers,
                            settings["heuristics"], settings["classifier"], settings["micro_profilers"])
        analysis = profiler.analyze_file(path, ProfileContext(gpu=spec, device="cuda"))
    except (CollectorError, UnknownName) as exc:
        raise Abort(str(exc)) from None
    except PluginFailed as exc:
        raise Abort(f"{exc}; fix, replace or block the plugin") from None
    _print_analysis(analysis, as_json)
    bn = analysis.bottleneck
    if bn is not None and bn.evidence.get("gpu_mismatch"):
        click.echo(f"warning: the GPU spec used{' (--gpu ' + repr(gpu_name) + ')' if gpu_name else ''} is not "
                   "the GPU the file was taken on (the bottleneck line says why): the roofline numbers use "
                   "the wrong ceilings", err=True)
    if (bn is None or bn.kind == "unknown") and not analysis.findings:  # as profile does: nothing came of it
        what = "no bottleneck" if bn is None else "the bottleneck is unknown"
        click.echo(f"error: {path}: nothing could be derived from it: {what} and no finding (the notes and "
                   "the bottleneck's summary say what it lacks)", err=True)
        sys.exit(EXIT_USAGE)


def _profiling_settings_or_abort(config: cfg.Config, plugins: Plugins) -> dict[str, Any]:
    try:
        return cfg.profiling_settings(config, plugins)
    except cfg.ConfigError as exc:
        if len(exc.problems) == 1:
            raise Abort(exc.problems[0]) from None
        _err(exc.problems)
        raise Abort("invalid configuration") from None


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _print_analysis(analysis: Any, as_json: bool, collected: list[dict[str, Any]] | None = None) -> None:
    if as_json:
        out = analysis.to_dict()
        if collected is not None:
            out["collected"] = collected
        click.echo(json.dumps(_finite(out), indent=2, allow_nan=False))
        return
    for c in collected or []:
        click.echo(f"collected: {c['level']} level by {c['collector']}: {c['kernels']} kernel(s)")
    for note in analysis.notes:
        click.echo(f"note: {note}")
    bn = analysis.bottleneck
    if bn is not None:
        frac = f", {bn.roofline_fraction:.0%} of roofline" if bn.roofline_fraction is not None else ""
        if bn.roofline_fraction is not None and bn.roofline_fraction > 1:
            frac += " (above the GPU spec's ceilings)"
        click.echo(f"bottleneck: {bn.kind}{' (' + bn.pipe + ')' if bn.pipe else ''}{frac}: {bn.summary}")
    else:
        click.echo("bottleneck: not classified")
    if not analysis.findings:
        click.echo("no findings")
    for f in analysis.findings:
        gain = f" (est. gain {f.estimated_gain:.0%})" if f.estimated_gain else ""
        where = f" [{f.kernel}]" if f.kernel else ""
        click.echo(f"[{f.severity}] {f.tool}: {f.title}{where}{gain}\n    {f.message}\n    action: {f.action}")


# --- plugins / config ----------------------------------------------------------------------


@cli.command(name="plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins_cmd(as_json: bool) -> None:
    """List installed plugins: distribution, version and what each registers. Exit 2 when a
    name is registered twice (the listing shows both providers)."""
    plugins = load_plugins(check=False)  # the listing is how a user finds what clashes
    desc = plugins.describe()
    if as_json:
        click.echo(json.dumps(desc, indent=2))
    else:
        for p in desc:
            status = " (blocked)" if p["blocked"] else (f" FAILED: {p['error']}" if p["error"] else "")
            click.echo(f"{p['name']}  [{p['distribution'] or '-'} {p['version'] or ''}]{status}")
            for kind, names in p["registers"].items():
                click.echo(f"    {kind}: {', '.join(names)}")
            # what it adds besides named things: commands, report sections, observers, ...
            others = [h for h in p["hooks"] if h == "kernelpro_register_commands"
                      or not h.startswith("kernelpro_register_")]
            if others:
                click.echo(f"    hooks: {', '.join(others)}")
    conflicts = plugins.conflict_lines()
    if conflicts:
        _err(conflicts)
        sys.exit(EXIT_USAGE)


@cli.group(name="config")
def config_group() -> None:
    """Show or validate configuration."""


@config_group.command(name="show")
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file.")
def config_show(config_path: str | None) -> None:
    """Print the resolved configuration (defaults merged with FILE)."""
    config = load_config_or_abort(config_path)
    click.echo(cfg.to_yaml(config), nl=False)


@config_group.command(name="validate")
@click.argument("file", type=click.Path(dir_okay=False))
def config_validate(file: str) -> None:
    """Validate FILE, plugin parameters included. Exit 0, or 2 with one line per problem."""
    try:
        config = cfg.load_config(file)
    except cfg.ConfigError as exc:
        _err(exc.problems)
        sys.exit(EXIT_USAGE)
    plugins = load_plugins(config.plugins.block)
    try:
        cfg.validate(config, plugins)
    except cfg.ConfigError as exc:
        _err(exc.problems)
        sys.exit(EXIT_USAGE)
    click.echo(f"{file}: ok")


@cli.command(name="mcp")
@click.option("--root", required=True, type=click.Path(file_okay=False),
              help="Workspace directory: every path a tool reads or writes must lie in it.")
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False),
              help="YAML config file for every evaluation, profile and run.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), help="Where candidates run (default: auto).")
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP here instead of stdio.")
@click.option("--keep", is_flag=True, help="Keep each call's candidate and work files under ROOT/.kernelpro-mcp.")
def mcp_cmd(root: str, config_path: str | None, device: str | None, http: str | None, keep: bool) -> None:
    """Serve KernelPro's tools to coding agents over the Model Context Protocol (stdio by
    default): evaluate, profile, analyze, optimize, run_status, best, and every plugin's
    LLM tools. Needs the extra: pip install 'kernelpro-core[mcp]'."""
    try:
        import mcp.server  # noqa: F401
    except ImportError:
        raise Abort("kernelpro mcp needs the MCP library: pip install 'kernelpro-core[mcp]'") from None
    from kernelpro.mcp_server import parse_http, serve

    root_path = Path(root)
    if not root_path.is_dir():
        raise Abort(f"--root {root}: no such directory")
    if http is not None:
        try:
            parse_http(http)
        except ValueError as exc:
            raise Abort(str(exc)) from None
    config_file = Path(config_path).resolve() if config_path else None
    config = load_config_or_abort(str(config_file) if config_file else None, {"device": device})
    plugins = load_plugins(config.plugins.block)
    serve(root_path, config_file, device, http, plugins, warn=lambda text: click.echo(f"warning: {text}", err=True),
          keep=keep)


def _terminated(signum: int, frame: Any) -> None:
    # SIGTERM unwinds like Ctrl-C, so evaluation processes are killed by their finally blocks
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminated)
    try:
        # each command checks for names registered twice, and collects the registrations
        plugins = load_plugins(check=False, collect=False)
        plugins.register_commands(cli)
        show_hook_failures()
    except Abort as exc:
        exc.show()
        sys.exit(exc.exit_code)
    try:
        code = cli.main(args=argv, prog_name="kernelpro", standalone_mode=False)
    except _NO_ARGS as exc:  # a bare group (`kernelpro`): its help
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(0)
    except click.UsageError as exc:  # unknown option, missing argument, bad value: one line
        where = exc.ctx.command_path if exc.ctx is not None else "kernelpro"
        click.echo(f"error: {_first_line(exc.format_message()).rstrip('.')} (see {where} --help)", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:  # Abort and click's file errors
        if isinstance(exc, Abort):
            exc.show()
        else:
            click.echo(f"error: {_first_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):  # pragma: no cover
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # a bug in kernelpro or in a plugin's command: one line, no traceback
        if os.environ.get("KERNELPRO_DEBUG"):
            raise
        what = _first_line(str(exc))
        click.echo(f"error: internal error: {type(exc).__name__}{': ' + what if what else ''} (a bug in "
                   "kernelpro or a plugin; KERNELPRO_DEBUG=1 shows the traceback)", err=True)
        sys.exit(EXIT_FAIL)
    sys.exit(code if isinstance(code, int) else 0)


_NO_ARGS: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


def _first_line(text: str) -> str:
    lines = [ln for ln in str(text).splitlines() if ln.strip()]
    return lines[0].strip() if lines else ""


if __name__ == "__main__":  # pragma: no cover
    main()
