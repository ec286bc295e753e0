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


def _finished_run(tmp_path, budget="2"):
    run = tmp_path / "run"
    res = kernelpro("optimize", str(DATA / "tiny_problem.py"), "-c", str(FAST), "--device", "cpu",
                    "--budget", budget, "--generator", "testplugin_echo", "-o", str(run), "--quiet")
    assert res.returncode == 0, res.stderr
    return run


def _files(run):
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}


def _one_error(res):
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


def test_resume_refuses_damaged_files_and_changes_nothing(tmp_path):
    run = _finished_run(tmp_path)
    records = (run / "candidates.jsonl").read_bytes()
    resume = ("optimize", "--resume", str(run), "--device", "cpu", "--budget", "3", "--quiet")
    # a record cut short that is not a draft still pending: resuming would lose it, and reuse c0001
    (run / "candidates.jsonl").write_bytes(records[:300])
    before = _files(run)
    res = kernelpro(*resume)
    assert res.returncode == 2, res.stderr
    line = _one_error(res)
    assert f"{run / 'candidates.jsonl'}: line 1 is unreadable" in line and "c0001" in line
    assert _files(run) == before
    (run / "candidates.jsonl").write_bytes(records)
    for name in ("tree.json", "run.json", "baseline.json", "pending.json"):
        good = (run / name).read_bytes()
        for bad in (b'{"nodes": [', b"\xf3\x00\xff" * 50):
            (run / name).write_bytes(bad)
            before = _files(run)
            res = kernelpro(*resume)
            assert res.returncode == 2, (name, res.stderr)
            assert _one_error(res).startswith(f"error: {run / name}: not valid JSON ("), res.stderr
            assert _files(run) == before
        (run / name).write_bytes(good)
    # invalid YAML in the run's config.yaml: said once
    good = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text("a: [\n")
    res = kernelpro(*resume)
    assert res.returncode == 2 and "not valid YAML" in _one_error(res)
    (run / "config.yaml").write_text(good)


def test_a_record_cut_short_while_still_pending_is_evaluated_again_under_a_fresh_id_for_new_ones(tmp_path):
    run = _finished_run(tmp_path)
    lines = (run / "candidates.jsonl").read_text().splitlines(keepends=True)
    second = json.loads(lines[1])
    # the kill came while c0002's record was written: it is still pending, its line cut short
    (run / "candidates.jsonl").write_text(lines[0] + lines[1][:200])
    pending = {k: second[k] for k in ("id", "parent", "generator", "description", "params")}
    (run / "pending.json").write_text(json.dumps([pending]))
    (run / "tree.json").unlink()  # saved after the batch's records: the kill came before (rebuilt from the records)
    (run / "candidates" / "c0005.py").write_text((run / "candidates" / "c0001.py").read_text())  # files of a lost id
    res = kernelpro("optimize", "--resume", str(run), "--device", "cpu", "--budget", "3", "--quiet")
    assert res.returncode == 0, res.stderr
    assert "line 2 was cut short mid-write; dropped (c0002 is evaluated again)" in res.stderr
    from kernelpro.rundir import RunDir

    ids = [r["id"] for r in RunDir(run).records()]  # the line cut short stays, skipped by the readers
    assert ids[:2] == ["c0001", "c0002"] and len(ids) == 3 and ids[2] not in ("c0001", "c0002", "c0005"), ids
