"""A device shared by several jobs (kernelpro.gpulock) as the evaluator's processes see it:
the judge holds it alone from its first stage on the device, waits while another process
works there, and so does a profiled forward. On a CPU device with the variable set, exactly as on a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import types

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
    fake = types.SimpleNamespace(gpu_lock=_Recording(), notes={})
    for stage in stages:
        judge_mod.Judge.lock_for(fake, stage)
    return dict(zip(stages, fake.gpu_lock.modes))


def test_the_judge_holds_the_device_alone_from_its_first_stage_on_it():
    """Nothing while it starts; then exclusive to the verdict, the stages that only compute
    included (what they keep on the device changes what another job's calls measure)."""
    stages = ["start", "reference", "reference_outputs", "degenerate_check", "bounds", "compile_reference",
              "compile", "build", "correctness", "timing", "verify", "fresh_inputs", "reverify", "measure:energy"]
    modes = _modes(stages)
    assert modes.pop("start") is None
    assert set(modes.values()) == {EXCLUSIVE}


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
    # the candidate's process is not told where the lock is: it is the judge's to hold
    cand = tmp_path / "cand.py"
    cand.write_text(honest("same_ops").read_text().replace(
        "import torch.nn as nn\n",
        "import torch.nn as nn\nimport os\nassert 'KERNELPRO_GPU_LOCK' not in os.environ, 'lock path leaked'\n", 1))
    res = evaluate(gelu_problem, cand, device="cpu", config=fast_config, workdir=tmp_path / "ev",
                   seed=0, env={gpulock.ENV: path})
    timer.join()
    assert res.verdict is Verdict.CORRECT, res.reason
    waited = res.measurements["evaluator"]["gpu_lock_wait_s"]
    assert 1.8 <= waited <= time.monotonic() - t0
    notes = res.measurements["evaluator"]
    # held alone from its first stage on the device to its last; its first trial noted
    assert 0.0 < notes["gpu_lock_held_s"] <= res.wall_s - waited
    assert 0.0 < notes["first_trial_s"] <= notes["stage_correctness_s"]
    # and it let go when its processes ended (behind the verdict)
    from kernelpro.evaluate import runner

    runner.settle()
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
    assert "gpu_lock_held_s" not in res.measurements["evaluator"]


def test_a_profiled_forward_waits_for_the_device_before_it_builds_the_model(tmp_path, gelu_problem):
    path = str(tmp_path / "device.lock")
    other = GpuLock(path)
    other.hold(SHARED)  # another process works on the device (a judge opening its contexts)
    io = tmp_path / "io.json"
    env = {**os.environ, gpulock.ENV: path}
    proc = subprocess.Popen([sys.executable, "-m", "kernelpro.evaluate.forward", "--problem", str(gelu_problem),
                             "--device", "cpu", "--warmup", "1", "--io-json", str(io)], env=env,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(6.0)  # torch's import: then it waits
    assert proc.poll() is None and not io.exists()
    released = time.time()
    other.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    phases = json.loads(io.read_text())["phases"]
    assert phases["torch"] < released <= phases["locked"] <= phases["prepared"] <= phases["profiled"]
