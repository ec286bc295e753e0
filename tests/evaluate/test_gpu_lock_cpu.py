"""A device shared by several jobs (kernelpro.gpulock) as the evaluator's processes see it:
the judge's lock follows its stages, a judge waits while another process measures, and a
profiled forward measures alone. On a CPU device with the variable set, exactly as on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

from evaluate_paths import honest
from kernelpro import gpulock
from kernelpro.evaluate import judge as judge_mod
from kernelpro.evaluate.runner import evaluate
from kernelpro.gpulock import EXCLUSIVE, SHARED, GpuLock
from kernelpro.records import Verdict


class _Recording:
    active = True
    waited_s = 0.0

    def __init__(self):
        self.modes: list = []

    def hold(self, mode):
        self.modes.append(mode)


def _modes(stages):
    fake = types.SimpleNamespace(gpu_lock=_Recording(), measuring=False, notes={})
    for stage in stages:
        judge_mod.Judge.lock_for(fake, stage)
    return dict(zip(stages, fake.gpu_lock.modes))


def test_the_judge_holds_the_device_as_each_stage_needs():
    cand = _modes(["start", "reference", "reference_outputs", "degenerate_check", "bounds", "compile", "build",
                   "correctness", "timing", "verify", "fresh_inputs", "reverify", "measure:energy"])
    assert cand["start"] is None and cand["compile"] is None and cand["build"] is None  # CPU only
    assert {cand[s] for s in ("reference", "reference_outputs", "degenerate_check", "bounds", "correctness")} \
        == {SHARED}
    # from the first timed call to the verdict every check compares times: alone
    assert {cand[s] for s in ("timing", "verify", "fresh_inputs", "reverify", "measure:energy")} == {EXCLUSIVE}
    base = _modes(["start", "reference", "reference_outputs", "bounds", "compile_reference",
                   "compile_reference_autotune", "timing"])
    assert base["compile_reference"] == base["compile_reference_autotune"] == EXCLUSIVE  # torch.compile measures
    assert base["bounds"] == SHARED and base["timing"] == EXCLUSIVE


def test_an_evaluation_waits_while_another_process_measures(tmp_path, gelu_problem, fast_config):
    path = str(tmp_path / "device.lock")
    other = GpuLock(path)
    other.hold(EXCLUSIVE)
    status = tmp_path / "ev" / "status.txt"

    def release_later():  # 2 s after the judge reached its first stage on the device
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                if status.read_text().strip() == "reference":
                    break
            except OSError:
                pass
            time.sleep(0.02)
        time.sleep(2.0)
        other.close()

    timer = threading.Thread(target=release_later)
    timer.start()
    t0 = time.monotonic()
    res = evaluate(gelu_problem, honest("same_ops"), device="cpu", config=fast_config, workdir=tmp_path / "ev",
                   seed=0, env={gpulock.ENV: path})
    timer.join()
    assert res.verdict is Verdict.CORRECT, res.reason
    waited = res.measurements["evaluator"]["gpu_lock_wait_s"]
    assert 1.8 <= waited <= time.monotonic() - t0
    # and it let go when it ended: the lock is free at once
    probe = GpuLock(path)
    t1 = time.monotonic()
    probe.hold(EXCLUSIVE)
    assert time.monotonic() - t1 < 1.0
    probe.close()


def test_without_a_shared_device_the_judge_notes_no_lock(tmp_path, gelu_problem, fast_config, monkeypatch):
    monkeypatch.delenv(gpulock.ENV, raising=False)
    res = evaluate(gelu_problem, honest("same_ops"), device="cpu", config=fast_config, workdir=tmp_path / "ev",
                   seed=0)
    assert res.verdict is Verdict.CORRECT, res.reason
    assert "gpu_lock_wait_s" not in res.measurements["evaluator"]


def test_a_profiled_forward_shares_while_it_warms_up_and_measures_alone(tmp_path, gelu_problem):
    path = str(tmp_path / "device.lock")
    other = GpuLock(path)
    other.hold(SHARED)  # a job computing: the forward prepares beside it, then waits to measure
    io = tmp_path / "io.json"
    env = {**os.environ, gpulock.ENV: path}
    proc = subprocess.Popen([sys.executable, "-m", "kernelpro.evaluate.forward", "--problem", str(gelu_problem),
                             "--device", "cpu", "--warmup", "1", "--io-json", str(io)], env=env,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(8.0)  # torch's import, the model, one warm-up call: then it waits
    assert proc.poll() is None and not io.exists()
    released = time.time()
    other.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    phases = json.loads(io.read_text())["phases"]
    assert phases["warmup"] < released <= phases["locked"] <= phases["profiled"]
