"""A measurement's earlier readings of the reference reach the judge of later evaluations
on the same worker (``Measurement.measure_reference``), also after ``--resume``."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from helpers import DATA, FAST, kernelpro


def _measured(run):
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines() if line.strip()]
    return [r["measurements"]["testplugin_wall"] for r in records]


@pytest.mark.slow  # optimize runs on a 2-core CPU (tests/README.md)
def test_each_evaluation_is_handed_the_earlier_reference_measurements_of_its_worker(tmp_path):
    config = yaml.safe_load(FAST.read_text())
    config["measurements"] = ["testplugin_wall"]
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    args = ("optimize", str(DATA / "tiny_problem.py"), "-c", str(cfg), "--device", "cpu",
            "--generator", "testplugin_echo", "-o", str(run), "--quiet")
    res = kernelpro(*args, "--budget", "3")
    assert res.returncode == 0, res.stderr
    measured = _measured(run)
    assert [m["reference_earlier"] for m in measured] == [0.0, 1.0, 2.0]
    # and the run directory holds them per worker for judges already started
    (worker,) = json.loads((run / "reference_history.json").read_text())
    assert len(json.loads((run / "reference_history.json").read_text())[worker]["testplugin_wall"]) == 3
    for before, m in zip(measured, measured[1:]):
        # the youngest earlier one is the previous evaluation's: its age is the time since then
        assert 0 < m["reference_earlier_age_s"] <= m["reference_measured_at_unix_s"] - before["reference_measured_at_unix_s"]
        assert m["reference_earlier_ages_sorted"] == 1.0
        assert "earlier" not in m  # the candidate's measurement is not handed any
    # a resumed run finds them in its records
    res = kernelpro("optimize", str(DATA / "tiny_problem.py"), "--resume", str(run), "--device", "cpu",
                    "--budget", "4", "--quiet")
    assert res.returncode == 0, res.stderr
    assert _measured(run)[-1]["reference_earlier"] == 3.0


def test_a_judge_reads_the_measurements_recorded_after_its_job_was_written(tmp_path):
    # BS and BT on the H200 (docs/validation/energy.md, session 18): the second candidate of a
    # batch had its job written before the first's record, so its reference was measured in
    # full; the judge now also reads the run's reference_history.json when it measures
    from kernelpro.evaluate.judge import Judge

    now = time.time()
    old = {"energy_j_per_call": 2.0, "measured_at_unix_s": now - 50}
    path = tmp_path / "reference_history.json"
    path.write_text(json.dumps({
        "gpu0": {"energy": [{"energy_j_per_call": 1.0, "measured_at_unix_s": now - 5}, old]},
        "gpu1": {"energy": [{"energy_j_per_call": 9.0, "measured_at_unix_s": now - 1}]},
    }))
    job = {"evaluator": {}, "device": "cpu", "seed": 0, "workdir": str(tmp_path),
           "reference_history": {"energy": [old]}, "reference_history_file": str(path), "worker": "gpu0"}

    def earlier(landlock: float = 1.0):
        judge = Judge(job, None, None)
        judge.notes["sandbox_landlock"] = landlock
        return [e.values["energy_j_per_call"] for e in judge.earlier("energy")]

    # the file's newer one first, the one both hold once, another worker's none
    assert earlier() == [1.0, 2.0]
    # a candidate's process without Landlock could have written the file: the job's alone
    assert earlier(landlock=0.0) == [2.0]
    path.write_text("{")  # a file that does not parse: the job's alone
    assert earlier() == [2.0]
    path.unlink()  # not written yet, or on another host
    assert earlier() == [2.0]
