"""The ray executor on a local Ray cluster with two declared (fake) GPUs, candidates on the
CPU: one actor per GPU, jobs spread over them, an actor killed in the middle of a job (the
job runs again on another and the rest go on), and a bench resumed after an interruption.
One Ray per module: Ray takes seconds to start on a small machine."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

# Ray takes ~25 s to start on a 2-core machine, a killed actor ~15 s to be replaced
pytestmark = pytest.mark.slow

from kernelpro.api import Job  # noqa: E402
from kernelpro.executors.ray_executor import RayExecutor, RaySettings  # noqa: E402

# the jobs below are functions of this module: sent to the actors by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture
def executor(cluster):
    exe = RayExecutor(RaySettings())
    exe.start("cpu")
    yield exe
    exe.shutdown()


def where(seconds):
    def fn(slot):
        t0 = time.time()
        time.sleep(seconds)
        return {"pid": os.getpid(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "slot": slot.name,
                "t0": t0, "t1": time.time()}
    return fn


def test_one_actor_per_gpu_and_jobs_run_on_both_at_once(executor):
    assert len(executor.slots()) == 2
    outcomes = {o.id: o for o in executor.run([Job("a", where(1.5)), Job("b", where(1.5)), Job("c", where(0.1))])}
    assert all(o.error is None for o in outcomes.values())
    a, b = outcomes["a"].value, outcomes["b"].value
    assert a["pid"] != b["pid"] and {a["gpus"], b["gpus"]} == {"0", "1"}  # each actor holds one GPU
    assert a["t0"] < b["t1"] and b["t0"] < a["t1"]  # at the same time
    assert outcomes["c"].value["pid"] in {a["pid"], b["pid"]}


def test_a_killed_actor_loses_only_its_job_which_runs_again_elsewhere(executor):
    def kill_when_running():
        for _ in range(600):
            actor = executor.in_flight.get("victim")
            if actor is not None:
                time.sleep(1.0)  # let it start
                ray.kill(actor)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    outcomes = {o.id: o for o in executor.run([Job("victim", where(4)), Job("other", where(0.5)),
                                               Job("third", where(0.5))])}
    killer.join()
    assert all(o.error is None for o in outcomes.values()), outcomes
    assert outcomes["victim"].attempts == 2 and outcomes["other"].attempts == 1
    assert len(executor.lost) == 1 and executor.lost[0].startswith("victim: worker lost (")
    assert len(executor.slots()) == 2  # the dead actor was replaced


def die(slot):
    os._exit(1)  # the worker process ends in the middle of the job (a crash, the OOM killer)


def test_a_job_whose_worker_is_lost_twice_fails_with_a_reason_and_the_rest_go_on(executor):
    outcomes = {o.id: o for o in executor.run([Job("doomed", die), Job("fine", where(0.1))])}
    assert outcomes["fine"].error is None
    assert outcomes["doomed"].attempts == 2
    assert outcomes["doomed"].error.startswith("its worker was lost 2 times (")


@pytest.mark.slow
def test_optimize_on_ray_evaluates_a_round_on_both_actors(cluster, tmp_path):
    """The loop's evaluation jobs travel to the actors (pickled) and come back to the loop,
    which writes every record."""
    from kernelpro import config as cfg
    from kernelpro.loop import optimize
    from kernelpro.plugins import Plugins
    from kernelpro.problem import load_problem

    data = Path(__file__).resolve().parents[1] / "core" / "data"
    config = cfg.load_config(str(data / "fast_config.yaml"), {
        "device": "cpu", "budget": 2, "parallel": 2, "generator": {"name": "torch_compile", "params": {}},
        "evaluator": {"timeout_s": 400}, "executor": {"name": "ray", "params": {}}})
    run = tmp_path / "run"
    summary = optimize(load_problem(data / "tiny_problem.py"), config, Plugins(), run, "cpu")
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert summary["evaluated"] == 2 and all(r["verdict"] == "correct" for r in records), records
    assert len({r["worker"] for r in records}) == 2 and all(r["worker"].startswith("ray") for r in records)
    assert ray.is_initialized()  # the run used the Ray it found and left it running


def test_bench_on_ray_resumes_after_an_interruption(cluster, tmp_path):
    """Two problems over the two actors; then one problem's run is cut back to an
    interrupted state (no summary): a second bench reads the finished one back and
    continues the other, and writes one report."""
    from kernelpro import config as cfg
    from kernelpro.bench import read_suite, run_bench
    from kernelpro.plugins import Plugins

    data = Path(__file__).resolve().parents[1] / "core" / "data"
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    tiny = (data / "tiny_problem.py").read_text()
    (suite / "1_a.py").write_text(tiny)
    (suite / "2_b.py").write_text(tiny)
    problems = read_suite(tmp_path / "suite")
    config = cfg.load_config(str(data / "fast_config.yaml"), {
        "device": "cpu", "budget": 1, "generator": {"name": "torch_compile", "params": {}},
        "evaluator": {"timeout_s": 400}, "executor": {"name": "ray", "params": {}}})
    out = tmp_path / "out"
    exe = RayExecutor(RaySettings())
    exe.start("cpu")
    try:
        rows = run_bench(problems, config, Plugins(), out, "cpu", say=lambda s: None, executor=exe)
        assert [r["error"] for r in rows] == [None, None] and all(r["evaluated"] == 1 for r in rows)
        workers = {json.loads((out / "runs" / p.key / "bench.json").read_text())["worker"] for p in problems}
        assert len(workers) == 2  # one problem on each actor
        cut = out / "runs" / problems[1].key
        (cut / "summary.json").unlink()
        first = (out / "runs" / problems[0].key / "bench.json").read_text()
        said: list[str] = []
        rows = run_bench(problems, config, Plugins(), out, "cpu", say=said.append, executor=exe)
    finally:
        exe.shutdown()
    assert any("already run" in s and problems[0].key in s for s in said)
    assert (out / "runs" / problems[0].key / "bench.json").read_text() == first  # not run again
    meta = json.loads((cut / "bench.json").read_text())
    assert meta["resumed"] is True and (cut / "summary.json").exists()
    assert all(r["error"] is None and r["evaluated"] == 1 for r in rows)
