"""A measurement's earlier readings of the reference reach the judge of later evaluations
on the same worker (``Measurement.measure_reference``), also after ``--resume``."""

from __future__ import annotations

import json

import pytest
import yaml

from helpers import DATA, FAST, kernelpro

pytestmark = pytest.mark.slow  # optimize runs on a 2-core CPU (tests/README.md)


def _measured(run):
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines() if line.strip()]
    return [r["measurements"]["testplugin_wall"] for r in records]


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
