"""A run killed with SIGKILL at any moment resumes without losing or repeating work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import DATA, FAST, kernelpro

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)


def _records(run):
    path = run / "candidates.jsonl"
    if not path.exists():
        return []
    # up to the last newline: the run may be writing its next line as the test reads
    text = path.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]


@pytest.mark.parametrize("search", ["greedy", "mcts"])
def test_kill_then_resume(tmp_path, search):
    run = tmp_path / "run"
    args = [sys.executable, "-m", "kernelpro.cli", "optimize", str(DATA / "tiny_problem.py"), "-c", str(FAST),
            "--device", "cpu", "--budget", "4", "--generator", "testplugin_echo", "--search", search,
            "-o", str(run), "--quiet"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(_records(run)) < 2:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _records(run)
    assert 2 <= len(before) < 4
    res = kernelpro("optimize", str(DATA / "tiny_problem.py"), "--resume", str(run), "--device", "cpu",
                    "--quiet")
    assert res.returncode == 0, res.stderr
    after = _records(run)
    ids = [r["id"] for r in after]
    assert len(ids) == 4 and len(set(ids)) == 4
    assert after[: len(before)] == before  # nothing evaluated before was redone or lost
    tree = json.loads((run / "tree.json").read_text())
    assert {n["id"] for n in tree["nodes"]} == {"root", *ids}


def test_resume_refuses_other_problem(tmp_path):
    run = tmp_path / "run"
    res = kernelpro("optimize", str(DATA / "tiny_problem.py"), "-c", str(FAST), "--device", "cpu",
                    "--budget", "1", "--generator", "testplugin_echo", "-o", str(run), "--quiet")
    assert res.returncode == 0, res.stderr
    other = tmp_path / "other.py"
    other.write_text((DATA / "tiny_problem.py").read_text().replace("1.7", "2.0"))
    res = kernelpro("optimize", str(other), "--resume", str(run), "--device", "cpu", "--quiet")
    assert res.returncode == 2
    assert "holds a run of another problem" in res.stderr
