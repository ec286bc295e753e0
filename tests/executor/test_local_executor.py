"""The local executor: one worker per device, each job pinned to its device, one job per
device at a time (so a profiling pass never overlaps a timing), and the loop handing it a
round of drafts. Two fake devices on a CPU: the pinning is the environment a job's
processes get (CUDA_VISIBLE_DEVICES), which is all a GPU run adds."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from kernelpro import config as cfg
from kernelpro.api import Job
from kernelpro.executors.local import LocalExecutor, LocalSettings
from kernelpro.plugins import Plugins

DATA = Path(__file__).resolve().parents[1] / "core" / "data"


def started(devices, device="cpu"):
    exe = LocalExecutor(LocalSettings(devices=devices))
    exe.start(device)
    return exe


def timed(log, seconds=0.4, kind="evaluate"):
    def fn(slot):
        t0 = time.monotonic()
        time.sleep(seconds)
        log.append((kind, slot.name, slot.env.get("CUDA_VISIBLE_DEVICES"), t0, time.monotonic()))
        return slot.name
    return fn


def overlaps(a, b):
    return a[3] < b[4] and b[3] < a[4]


def test_two_candidates_run_at_once_on_different_devices():
    log: list = []
    exe = started(["0", "1"])
    t0 = time.monotonic()
    outcomes = list(exe.run([Job("c1", timed(log)), Job("c2", timed(log))]))
    assert time.monotonic() - t0 < 0.75  # both slept 0.4 s, together
    assert {o.id for o in outcomes} == {"c1", "c2"} and all(o.error is None for o in outcomes)
    assert {o.worker for o in outcomes} == {"gpu0", "gpu1"}
    assert sorted(entry[2] for entry in log) == ["0", "1"]  # each pinned to its own device
    assert overlaps(log[0], log[1])


def test_profiling_never_overlaps_a_timing_on_one_device():
    """Evaluations and profiles of several candidates on two devices: on each device one at
    a time; and two executors that name the same device (a bench's problems, say) take turns."""
    log: list = []
    exe = started(["0", "1"])
    jobs = [Job(f"c{i}", timed(log, 0.15, kind), kind=kind) for i, kind in
            enumerate(["evaluate", "profile", "evaluate", "profile", "profile", "evaluate"])]
    other = started(["1"])
    side = threading.Thread(target=lambda: list(other.run([Job("x", timed(log, 0.3, "profile"), kind="profile")])))
    side.start()
    assert all(o.error is None for o in exe.run(jobs))
    side.join()
    assert len(log) == 7
    for dev in ("0", "1"):
        on = [e for e in log if e[2] == dev]
        assert len(on) >= 2
        for i, a in enumerate(on):
            for b in on[i + 1:]:
                assert not overlaps(a, b), (a, b)
    # across devices they did run at once
    assert any(overlaps(a, b) for a in log for b in log if a[2] != b[2])


def test_a_job_that_raises_is_its_outcome_and_the_others_go_on():
    def broken(slot):
        raise OSError("disk full\nmore")

    exe = started(["0", "1"])
    outcomes = {o.id: o for o in exe.run([Job("bad", broken), Job("good", lambda slot: 42)])}
    assert outcomes["bad"].error == "OSError: disk full" and outcomes["good"].value == 42


def test_one_gpu_or_a_cpu_run_keeps_one_unpinned_worker(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    exe = LocalExecutor()
    exe.start("cuda")
    assert [s.env for s in exe.slots()] == [{}]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    exe.start("cuda")
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in exe.slots()] == ["2", "5"]
    exe.start("cpu")
    assert [s.env for s in exe.slots()] == [{}]


def test_executor_config_is_validated_like_the_other_plugin_kinds():
    plugins = Plugins()
    config = cfg.load_config(None, {"executor": {"name": "lokal", "params": {}}})
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(config, plugins)
    assert err.value.problems[0].startswith("executor.name: unknown executor 'lokal' (did you mean 'local'?)")
    config = cfg.load_config(None, {"executor": {"name": "local", "params": {"devices": []}}})
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(config, plugins)
    assert err.value.problems == ["executor.params.devices: expected at least one GPU, or null for every visible one"]
    config = cfg.load_config(None, {"executor": {"name": "ray", "params": {"adress": "auto"}}})
    with pytest.raises(cfg.ConfigError) as err:
        cfg.validate(config, plugins)
    assert err.value.problems == ["executor.params.adress: unknown key (did you mean 'address'?)"]


def test_ray_missing_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    import importlib.util

    from kernelpro.executors import ray_executor
    from kernelpro.loop import SetupError, optimize
    from kernelpro.problem import load_problem

    real = importlib.util.find_spec
    monkeypatch.setattr(ray_executor.importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    config = cfg.load_config(str(DATA / "fast_config.yaml"),
                             {"device": "cpu", "executor": {"name": "ray", "params": {"address": "auto"}}})
    with pytest.raises(SetupError) as err:
        optimize(load_problem(DATA / "tiny_problem.py"), config, Plugins(), tmp_path / "run", "cpu")
    assert str(err.value) == "executor 'ray' needs Ray, which is not installed: pip install 'kernelpro-core[ray]'"
    assert not (tmp_path / "run").exists()  # refused before the run directory was touched


@pytest.mark.slow
def test_a_round_of_two_drafts_is_evaluated_on_both_devices(tmp_path):
    """optimize with parallel: 2 on two (fake) devices: the round's drafts go to different
    workers; the records, written by the loop alone, are whole and name their worker."""
    from kernelpro.loop import optimize
    from kernelpro.problem import load_problem

    config = cfg.load_config(str(DATA / "fast_config.yaml"), {
        "device": "cpu", "budget": 2, "parallel": 2, "generator": {"name": "torch_compile", "params": {}},
        "evaluator": {"timeout_s": 400},  # two evaluations at once on a 2-core CPU
        "executor": {"name": "local", "params": {"devices": ["0", "1"]}}})
    run = tmp_path / "run"
    summary = optimize(load_problem(DATA / "tiny_problem.py"), config, Plugins(), run, "cpu")
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert summary["evaluated"] == 2 and len(records) == 2
    assert sorted(r["worker"] for r in records) == ["gpu0", "gpu1"]
    assert json.loads((run / "pending.json").read_text()) == []
    # neither saw the other's records being written as a change around it (integrity)
    assert all(r["verdict"] == "correct" for r in records), [r["reason"] for r in records]


class _LosesCandidates(LocalExecutor):
    """Runs the reference's timing; reports every candidate's job as lost twice, as the ray
    executor does when a job's actor died on both attempts."""

    name = "loses_candidates"

    def run(self, jobs):
        from kernelpro.api import JobOutcome

        for job in jobs:
            if job.id == "baseline":
                yield from super().run([job])
            else:
                yield JobOutcome(id=job.id, error="its worker was lost 2 times (ActorDiedError: killed)", attempts=2)


@pytest.mark.slow
def test_a_candidate_lost_on_every_attempt_is_recorded_failed_and_the_run_goes_on(tmp_path):
    from kernelpro.loop import optimize
    from kernelpro.problem import load_problem

    config = cfg.load_config(str(DATA / "fast_config.yaml"), {
        "device": "cpu", "budget": 2, "parallel": 2, "generator": {"name": "torch_compile", "params": {}}})
    exe = _LosesCandidates()
    exe.start("cpu")
    run = tmp_path / "run"
    summary = optimize(load_problem(DATA / "tiny_problem.py"), config, Plugins(), run, "cpu", executor=exe)
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert summary["evaluated"] == 2 and summary["best_id"] is None
    assert all(r["verdict"] == "crash" and r["worker"] is None for r in records)
    assert all(r["reason"] == "not evaluated: its worker was lost 2 times (ActorDiedError: killed)" for r in records)
    assert json.loads((run / "pending.json").read_text()) == []


@pytest.mark.slow
def test_a_caller_that_stops_leaves_no_evaluation_running(tmp_path):
    """Ctrl-C (here an alarm raising in the waiting thread) while two workers evaluate
    candidates that hang: their evaluations end at once, not at their time limit."""
    import signal

    from kernelpro.executors.calls import EvaluateCall

    config = cfg.load_config(str(DATA / "fast_config.yaml"), {"evaluator": {"timeout_s": 300}})
    jobs = [Job(f"h{i}", EvaluateCall(DATA / "tiny_problem.py", DATA / "hangs.py", config.evaluator,
                                      tmp_path / f"h{i}", 0, [])) for i in range(2)]
    exe = started(["0", "1"])

    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop()

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(6)  # the judges may not have started yet: they are ended when they do
    try:
        with pytest.raises(Stop):
            list(exe.run(jobs))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    t0 = time.monotonic()
    while any(t.name.startswith("kernelpro-gpu") for t in threading.enumerate()) and time.monotonic() - t0 < 60:
        time.sleep(0.5)
    assert not any(t.name.startswith("kernelpro-gpu") for t in threading.enumerate())
    assert all((tmp_path / f"h{i}" / "judge_rc").exists() for i in range(2))  # each judge was ended


@pytest.mark.slow
def test_a_bench_that_stops_records_nothing_of_the_evaluations_it_ended(tmp_path, monkeypatch):
    """A bench stopped while two problems' candidates are evaluated, one per device: their
    runs keep no record of the ended evaluations (no false verdict); the drafts stay pending
    for the next bench, which continues them."""
    import signal

    import attrs

    import kernelpro.generate.torch_compile as tc
    from kernelpro.bench import SuiteProblem, run_bench

    hang = (DATA / "hangs.py").read_text()
    real = tc.TorchCompileGenerator.generate
    monkeypatch.setattr(tc.TorchCompileGenerator, "generate",
                        lambda self, request: [attrs.evolve(d, source=hang) for d in real(self, request)])
    tiny = (DATA / "tiny_problem.py").read_text()
    problems = [SuiteProblem(level=1, problem_id=i, name=f"p{i}", source=tiny) for i in (1, 2)]
    config = cfg.load_config(str(DATA / "fast_config.yaml"), {
        "device": "cpu", "budget": 1, "generator": {"name": "torch_compile", "params": {}},
        "evaluator": {"timeout_s": 300}})
    exe = started(["0", "1"])
    runs = [tmp_path / "runs" / p.key for p in problems]

    class Stop(Exception):
        pass

    def stop(*_):
        raise Stop()

    def stop_when_both_candidates_run():  # Ctrl-C, once each candidate's judge is running
        t0 = time.monotonic()
        while time.monotonic() - t0 < 250:
            if all((run / "evals" / "c0001" / "judge.log").exists() for run in runs):
                time.sleep(2)
                signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)
                return
            time.sleep(0.2)

    old = signal.signal(signal.SIGALRM, stop)
    watcher = threading.Thread(target=stop_when_both_candidates_run)
    watcher.start()
    try:
        with pytest.raises(Stop):
            run_bench(problems, config, Plugins(), tmp_path, "cpu", say=lambda s: None, executor=exe)
    finally:
        watcher.join()
        signal.signal(signal.SIGALRM, old)
    t0 = time.monotonic()
    while any(t.name.startswith("kernelpro-gpu") for t in threading.enumerate()) and time.monotonic() - t0 < 60:
        time.sleep(0.5)
    assert not any(t.name.startswith("kernelpro-gpu") for t in threading.enumerate())
    for run in runs:
        assert (run / "baseline.json").exists() and not (run / "summary.json").exists()
        assert not (run / "candidates.jsonl").exists() or (run / "candidates.jsonl").read_text() == ""
        assert [p["id"] for p in json.loads((run / "pending.json").read_text())] == ["c0001"]


def test_jobs_per_gpu_gives_each_gpu_that_many_workers_sharing_its_lock():
    from kernelpro import gpulock

    exe = LocalExecutor(LocalSettings(devices=["0", "1"], jobs_per_gpu=2))
    exe.start("cuda")
    slots = exe.slots()
    assert [s.name for s in slots] == ["gpu0.0", "gpu1.0", "gpu0.1", "gpu1.1"]  # every GPU's first job first
    lock = {s.name: s.env[gpulock.ENV] for s in slots}
    assert lock["gpu0.0"] == lock["gpu0.1"] != lock["gpu1.0"] == lock["gpu1.1"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "1", "0", "1"]
    one = LocalExecutor(LocalSettings(jobs_per_gpu=3))
    one.start("cpu")
    assert [s.name for s in one.slots()] == ["local.0", "local.1", "local.2"]
    assert len({s.env[gpulock.ENV] for s in one.slots()}) == 1
    plain = LocalExecutor()
    plain.start("cpu")
    assert gpulock.ENV not in plain.slots()[0].env  # one job per GPU: no lock file


def test_jobs_sharing_a_gpu_leave_the_turns_to_its_lock_file():
    """Workers that share a GPU do not take the whole-job lock: their processes take the
    GPU's lock file stage by stage (tests/evaluate/test_gpu_lock_cpu.py), so two of their
    evaluations run at once."""
    log: list = []
    exe = LocalExecutor(LocalSettings(devices=["0"], jobs_per_gpu=2))
    exe.start("cuda")
    outcomes = list(exe.run([Job("c1", timed(log)), Job("c2", timed(log))]))
    assert {o.worker for o in outcomes} == {"gpu0.0", "gpu0.1"}
    assert overlaps(log[0], log[1])


def test_jobs_per_gpu_is_checked_in_the_config():
    plugins = Plugins()
    for bad in (0, -1, 1.5, True, "2"):
        config = cfg.load_config(None, {"executor": {"name": "local", "params": {"jobs_per_gpu": bad}}})
        with pytest.raises(cfg.ConfigError) as err:
            cfg.validate(config, plugins)
        assert len(err.value.problems) == 1 and err.value.problems[0].startswith("executor.params.jobs_per_gpu")
