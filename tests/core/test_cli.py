"""Every CLI exit code, through the real command line in a subprocess."""

from __future__ import annotations

import json

import pytest

from helpers import DATA, FAST, kernelpro

PROBLEM = str(DATA / "tiny_problem.py")


@pytest.mark.slow
def test_help_on_every_command():
    for cmd in ([], ["optimize"], ["eval"], ["profile"], ["analyze"], ["plugins"], ["config"],
                ["config", "show"], ["config", "validate"], ["bench"], ["cute"], ["calibrate"]):
        res = kernelpro(*cmd, "--help")
        assert res.returncode == 0, (cmd, res.stderr)
        assert "Usage:" in res.stdout


def test_eval_correct_exits_0_with_json():
    res = kernelpro("eval", PROBLEM, str(DATA / "good.py"), "--device", "cpu", "-c", str(FAST), "--json")
    assert res.returncode == 0, (res.stdout[-1500:], res.stderr)
    out = json.loads(res.stdout)
    assert out["correct"] is True and out["verdict"] == "correct"
    for key in ("reason", "runtime_ms", "baseline_ms", "speedup"):
        assert key in out
    assert out["runtime_ms"] > 0 and out["baseline_ms"] > 0
    assert out["speedup"] == pytest.approx(out["baseline_ms"] / out["runtime_ms"])


@pytest.mark.slow
def test_eval_incorrect_exits_1():
    res = kernelpro("eval", PROBLEM, str(DATA / "wrong.py"), "--device", "cpu", "-c", str(FAST), "--json")
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert out["correct"] is False and out["verdict"] == "incorrect"
    assert "outside atol" in out["reason"]
    assert out["speedup"] is None


@pytest.mark.parametrize("args", [
    ["eval", "missing.py", str(DATA / "good.py")],
    ["eval", PROBLEM, "missing.py"],
    ["eval", str(DATA / "good.py"), str(DATA / "good.py")],  # not a problem: no Model
    ["eval", PROBLEM, str(DATA / "good.py"), "-c", "missing.yaml"],
    ["eval", PROBLEM, str(DATA / "good.py"), "--device", "tpu"],
    ["optimize", PROBLEM, "--generator", "no_such_generator", "--device", "cpu"],
    ["config", "validate", "missing.yaml"],
    ["analyze", "missing.ncu-rep"],
    ["no-such-command"],
])
def test_bad_input_exits_2_with_one_line(args):
    res = kernelpro(*args)
    assert res.returncode == 2, (args, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert errors, res.stderr


@pytest.mark.parametrize("name, reason", [("no_modelnew.py", "no class ModelNew"),
                                          ("syntax_error.py", "syntax error at line")])
@pytest.mark.slow
def test_broken_candidate_is_its_verdict_exit_1_with_json(name, reason):
    res = kernelpro("eval", PROBLEM, str(DATA / name), "--device", "cpu", "-c", str(FAST), "--json")
    assert res.returncode == 1, (res.stdout, res.stderr)
    out = json.loads(res.stdout)
    assert out["verdict"] == "invalid" and reason in out["reason"] and out["correct"] is False


@pytest.mark.slow
def test_problem_whose_inputs_fail_is_the_problem_s_fault_exit_2(tmp_path):
    prob = tmp_path / "bad_inputs.py"
    prob.write_text((DATA / "tiny_problem.py").read_text().replace(
        "    return [torch.rand(64, 128)]", "    raise ValueError('no data today')"))
    res = kernelpro("eval", str(prob), str(DATA / "good.py"), "--device", "cpu", "-c", str(FAST), "--json")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert json.loads(res.stdout)["verdict"] == "problem_error"
    assert "get_inputs() failed: ValueError: no data today" in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_problem_names_what_is_missing():
    res = kernelpro("eval", str(DATA / "good.py"), str(DATA / "good.py"))
    assert "missing class Model, get_inputs(), get_init_inputs()" in res.stderr


def test_unknown_generator_lists_available():
    res = kernelpro("optimize", PROBLEM, "--generator", "no_such_generator", "--device", "cpu")
    assert "unknown code generator 'no_such_generator'" in res.stderr
    assert "torch_compile" in res.stderr


def test_optimize_success_exits_0_and_writes_run_dir(tmp_path):
    run = tmp_path / "run"
    log = tmp_path / "events.jsonl"
    res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "2",
                    "--generator", "testplugin_echo", "-o", str(run), "--quiet",
                    env={"KERNELPRO_TESTPLUGIN_LOG": str(log)})
    assert res.returncode == 0, res.stderr
    for name in ("config.yaml", "candidates.jsonl", "best.py", "report.md", "tree.json"):
        assert (run / name).exists(), name
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for rec in records:
        for key in ("id", "parent", "generator", "source", "verdict", "correct", "runtime_ms", "speedup",
                    "reward"):
            assert key in rec
        assert (run / rec["source"]).exists()
        assert rec["correct"] and rec["generator"] == "testplugin_echo"
        # the evaluation's wall time covers the worker's own
        assert rec["seconds"]["evaluate"] >= rec["result"]["wall_s"] > 0 and rec["seconds"]["profile"] >= 0
    report = (run / "report.md").read_text()
    assert "## Baseline" in report and "## Best result" in report and "## Candidates" in report
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events == ["run_started", "candidate_evaluated", "candidate_evaluated", "run_finished"]


@pytest.mark.slow
def test_optimize_without_correct_candidate_exits_1(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(FAST.read_text() + "generator:\n  name: testplugin_echo\n  params: {broken: true}\n")
    res = kernelpro("optimize", PROBLEM, "-c", str(cfg), "--device", "cpu", "--budget", "1",
                    "-o", str(tmp_path / "run"), "--quiet")
    assert res.returncode == 1, res.stderr
    assert "no correct candidate" in res.stdout
    assert not (tmp_path / "run" / "best.py").exists()


def test_missing_api_key_is_one_line_and_exit_2(tmp_path):
    res = kernelpro("optimize", PROBLEM, "--generator", "anthropic", "--device", "cpu", "-o", str(tmp_path / "r"),
                    env={"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""})
    assert res.returncode == 2, res.stderr
    assert "ANTHROPIC_API_KEY is not set" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


def test_one_config_problem_is_one_error_line(tmp_path):
    # a plugin's unknown parameter was followed by a second line, "error: invalid configuration"
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("search: {name: greedy, params: {no_such_key: 1}}\n")
    res = kernelpro("optimize", PROBLEM, "-c", str(cfg), "-o", str(tmp_path / "run"), "--device", "cpu")
    assert res.returncode == 2, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert errors == ["error: search.params.no_such_key: unknown key"], res.stderr
    assert not (tmp_path / "run").exists()
