"""How a run directory may be used: one process at a time, a new run only in a new
directory, --resume with the run directory alone; observers cannot change a run's data."""

from __future__ import annotations

import json

import pytest

from helpers import DATA, FAST, kernelpro
from kernelpro.rundir import RunDir

PROBLEM = str(DATA / "tiny_problem.py")


def _optimize(run, *extra, env=None, budget="1"):
    return kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", budget,
                     "--generator", "testplugin_echo", "-o", str(run), "--quiet", *extra, env=env)


@pytest.mark.slow
def test_a_run_directory_in_use_is_refused_at_once(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    held = RunDir(run).lock()  # another process's run, as far as the second one can tell
    assert held is not None
    res = _optimize(run)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "is in use by another kernelpro process" in lines[0], res.stderr
    assert not (run / "candidates.jsonl").exists()  # nothing was evaluated into it
    held.close()
    assert _optimize(run).returncode == 0


@pytest.mark.slow
def test_reusing_a_run_directory_needs_resume_and_resume_needs_no_problem(tmp_path):
    run = tmp_path / "run"
    assert _optimize(run).returncode == 0
    again = _optimize(run)
    assert again.returncode == 2
    assert "already holds a run; use --resume" in again.stderr and "Traceback" not in again.stderr
    # the run directory has the problem: --resume alone continues it
    res = kernelpro("optimize", "--resume", str(run), "--device", "cpu", "--budget", "2", "--quiet")
    assert res.returncode == 0, res.stderr
    assert len((run / "candidates.jsonl").read_text().splitlines()) == 2
    missing = kernelpro("optimize", "--device", "cpu")
    assert missing.returncode == 2 and "missing PROBLEM" in missing.stderr
    not_a_run = kernelpro("optimize", "--resume", str(tmp_path), "--device", "cpu")
    assert not_a_run.returncode == 2 and "not a run directory" in not_a_run.stderr


@pytest.mark.slow
def test_an_observer_cannot_change_the_run(tmp_path):
    run = tmp_path / "run"
    cfg = tmp_path / "c.yaml"  # no re-timing of noisy timings: the best's numbers stay those of its record
    cfg.write_text(FAST.read_text().replace("evaluator:\n", "evaluator:\n  noisy_cv: 100.0\n"))
    res = kernelpro("optimize", PROBLEM, "-c", str(cfg), "--device", "cpu", "--budget", "2",
                    "--generator", "testplugin_echo", "-o", str(run), "--quiet", env={"KERNELPRO_TESTPLUGIN_MUTATE": "1"})
    assert res.returncode == 0, res.stderr
    assert "plugin 'testplugin' from kernelpro-testplugin failed in kernelpro_candidate_evaluated: TypeError" in res.stderr
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    summary = json.loads((run / "summary.json").read_text())
    best = next(r for r in records if r["id"] == summary["best_id"])
    assert summary["best_speedup"] == best["speedup"] != 999.0


@pytest.mark.slow
def test_a_noisy_best_is_timed_again_before_it_wins(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(FAST.read_text().replace("evaluator:\n", "evaluator:\n  noisy_cv: 0.0\n"))  # every timing noisy
    run = tmp_path / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(cfg), "--device", "cpu", "--budget", "2",
                    "--generator", "testplugin_echo", "-o", str(run), "--quiet")
    assert res.returncode == 0, res.stderr
    summary = json.loads((run / "summary.json").read_text())
    retimes = [json.loads(line) for line in (run / "retimes.jsonl").read_text().splitlines()]
    # the top one is timed again until the top one has been (a re-timed one may drop below another)
    assert 1 <= len(retimes) <= 3 and summary["best_id"] in [r["id"] for r in retimes]
    last = [r for r in retimes if r["id"] == summary["best_id"]][-1]["result"]
    assert summary["best_speedup"] == last["baseline"]["median_ms"] / last["timing"]["median_ms"]
    report = (run / "report.md").read_text()
    assert "This one was timed again: its numbers are the second timing's." in report
    best_row = next(ln for ln in report.splitlines() if ln.startswith(f"| {summary['best_id']} |"))
    assert "★ best" in best_row and "timed again" in best_row
    # the search tree's section names the same best, at the re-timed speedup
    assert f"best {summary['best_id']} at {summary['best_speedup']:.2f}x" in report
    # and so does tree.json, which a policy's --resume and outside tools read
    tree = json.loads((run / "tree.json").read_text())
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert nodes[summary["best_id"]]["speedup"] == summary["best_speedup"]


@pytest.mark.slow
def test_a_run_whose_candidates_are_all_slower_advises_keeping_the_reference(tmp_path):
    cfg = tmp_path / "c.yaml"  # each candidate computes the forward 200 times: correct, and much slower
    cfg.write_text(FAST.read_text() + "generator:\n  name: testplugin_echo\n  params: {repeat: 200}\n")
    run = tmp_path / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(cfg), "--device", "cpu", "--budget", "1", "-o", str(run))
    assert res.returncode == 0, res.stderr  # a correct candidate: the run itself succeeded
    summary = json.loads((run / "summary.json").read_text())
    assert summary["best_id"] and summary["best_speedup"] < 1.0
    assert summary["faster_than_reference"] is False
    assert "no candidate was faster than the reference: keep the reference" in res.stdout
    assert "**No candidate was faster than the reference: keep the reference.**" in (run / "report.md").read_text()
    # --json says it too (here for the finished run, continued with nothing left to do)
    as_json = kernelpro("optimize", "--resume", str(run), "--device", "cpu", "--budget", "1", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["faster_than_reference"] is False


def test_a_record_goes_out_in_one_write_however_long(tmp_path, monkeypatch):
    # a buffered file wrote a record past 4 KiB in pieces: a reader between them (a test
    # watching the run, once) found half a line
    import kernelpro.rundir as rundir

    writes: list[int] = []
    real_write = rundir.os.write
    monkeypatch.setattr(rundir.os, "write", lambda fd, data: writes.append(len(data)) or real_write(fd, data))
    run = RunDir(tmp_path)
    record = {"id": "c0001", "source": "x" * 20_000}
    run.append_record(record)
    assert writes == [len(json.dumps(record)) + 1]
    assert run.records() == [record]


def test_a_line_a_kill_cut_short_loses_only_itself(tmp_path):
    from kernelpro.report import read_records

    run = RunDir(tmp_path)
    run.append_record({"id": "c0001", "verdict": "correct"})
    with open(run.records_path, "a") as fh:
        fh.write('{"id": "c0002", "verd')  # the kill came mid-write
    run.append_record({"id": "c0003", "verdict": "correct"})  # the resumed run's next record
    assert [r["id"] for r in run.records()] == ["c0001", "c0003"]
    assert [r["id"] for r in read_records(tmp_path)] == ["c0001", "c0003"]
