"""kernelpro bench: suites, sampling, metrics, and a CPU run of the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import kernelpro.bench as bench
from kernelpro.plugins import Plugins

FAST = Path(__file__).resolve().parents[1] / "core" / "data" / "fast_config.yaml"

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}

def get_inputs():
    return [torch.randn(8, 16)]

def get_init_inputs():
    return []
"""


def write_suite(root: Path) -> Path:
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_relu.py").write_text(PROBLEM.format(expr="torch.relu(x)"))
    (root / "level1" / "2_softmax.py").write_text(PROBLEM.format(expr="torch.softmax(x, dim=1)"))
    return root


def test_read_suite_dir_and_jsonl(tmp_path):
    probs = bench.read_suite(write_suite(tmp_path / "suite"))
    assert [(p.level, p.problem_id, p.name) for p in probs] == [(1, 1, "1_relu"), (1, 2, "2_softmax")]
    jl = tmp_path / "s.jsonl"
    jl.write_text("\n".join(json.dumps({"level": lv, "problem_id": i, "name": f"p{i}", "code": "x"})
                            for lv, i in [(1, 1), (1, 2), (2, 3), (2, 4), (2, 5)]))
    probs = bench.read_suite(jl)
    assert [p.key for p in probs] == ["L1_p1", "L1_p2", "L2_p3", "L2_p4", "L2_p5"]
    a = bench.select(probs, levels=[2], sample=2, seed=7)
    assert a == bench.select(probs, levels=[2], sample=2, seed=7) and len(a) == 2
    assert all(p.level == 2 for p in a)
    assert len(bench.select(probs, sample=1, seed=0)) == 2
    assert len(bench.select(probs, limit=3)) == 3


def test_bad_suites_give_one_line(tmp_path):
    with pytest.raises(bench.SuiteError, match="no such suite"):
        bench.read_suite(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"level": 1}\n')
    with pytest.raises(bench.SuiteError, match="bad.jsonl:1"):
        bench.read_suite(bad)


def test_level_summary_math():
    rows = [
        {"correct": True, "speedup_eager": 4.0, "speedup_compiled": 2.0, "roofline_fraction": 0.9},
        {"correct": True, "speedup_eager": 0.25, "speedup_compiled": None, "roofline_fraction": None},
        {"correct": False, "speedup_eager": None, "speedup_compiled": None, "roofline_fraction": None},
    ]
    s = bench.level_summary(rows)
    assert s["correct_rate"] == pytest.approx(2 / 3)
    assert s["geomean_speedup_eager"] == pytest.approx(1.0)  # (4 * 0.25 * 1) ** (1/3)
    assert s["geomean_speedup_compiled"] == pytest.approx(2.0) and s["compiled_timed"] == 1
    assert s["fast_1"] == pytest.approx(1 / 3)
    assert s["mean_roofline_fraction"] == pytest.approx(0.9)


def test_ascii_roofline_marks_each_winner():
    text = bench.ascii_roofline([{"name": "a", "roofline_fraction": 0.5, "bottleneck": "memory"}])
    assert "50.0%" in text and "memory" in text


def run_cli(args):
    from kernelpro import cli as climod
    from kernelpro.cli import cli

    plugins = Plugins()  # the expert generator and bench come through their entry points
    climod._PLUGINS[()] = plugins
    if "bench" not in cli.commands:
        plugins.register_commands(cli)
    return CliRunner().invoke(cli, args)


@pytest.mark.slow
def test_bench_command_on_cpu(tmp_path):
    suite = write_suite(tmp_path / "suite")
    out = tmp_path / "out"
    res = run_cli(["bench", str(suite), "-c", str(FAST), "--device", "cpu", "--budget", "1",
                   "--generator", "torch_compile", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert data["levels"]["1"]["problems"] == 2
    assert data["levels"]["1"]["correct_rate"] == 1.0
    assert data["levels"]["1"]["geomean_speedup_compiled"] is None  # not timed on CPU
    assert all(r["evaluated"] == 1 and r["speedup_eager"] > 0 for r in data["problems"])
    # each problem records the code that ran it and its wall time
    from kernelpro.bench import code_digest

    assert all(r["code"] == code_digest() and r["wall_s"] > 0 for r in data["problems"])
    report = (out / "report.md").read_text()
    assert "| 1 | 2 |" in report and "2_softmax" in report and "Roofline" in report
    assert (out / "runs" / "L1_1_relu" / "summary.json").exists()
    # a second bench over the same directory reads the runs back instead of running again
    res2 = run_cli(["bench", str(suite), "-c", str(FAST), "--device", "cpu", "--budget", "1",
                    "--generator", "torch_compile", "-o", str(out)])
    assert res2.exit_code == 0 and "already run" in res2.output


def test_a_deadline_starts_no_problem_after_it_and_a_later_call_continues(tmp_path):
    suite = write_suite(tmp_path / "suite")
    out = tmp_path / "out"
    args = ["bench", str(suite), "-c", str(FAST), "--device", "cpu", "--budget", "1", "--generator",
            "torch_compile", "-o", str(out)]
    res = run_cli([*args, "--deadline-s", "0", "--json"])
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert [r["error"] for r in data["problems"]] == ["not run", "not run"], data["problems"]
    assert not (out / "runs" / "L1_1_relu" / "summary.json").exists()
    res = run_cli([*args, "--limit", "1"])  # continues: runs what the first call did not
    assert (out / "runs" / "L1_1_relu" / "summary.json").exists()
    assert run_cli([*args, "--deadline-s", "-1"]).exit_code == 2


def test_bench_rejects_bad_levels(tmp_path):
    res = run_cli(["bench", str(write_suite(tmp_path / "s")), "--levels", "one"])
    assert res.exit_code == 2 and "--levels" in res.output


def test_a_problem_without_a_correct_candidate_scores_the_reference_against_torch_compile(tmp_path):
    """The reference is kept: over torch.compile it scores eager / compiled from its baseline job."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"best_id": None, "evaluated": 0}))
    (run / "baseline.json").write_text(json.dumps({"baseline": {"median_ms": 2.0},
                                                   "baseline_compiled": {"median_ms": 1.0}}))
    row = bench.problem_row(bench.SuiteProblem(level=1, problem_id=7, name="conv", source=""), run)
    assert not row["correct"] and row["speedup_compiled"] == pytest.approx(0.5)
    assert row["best_ms"] == row["eager_ms"] == 2.0  # the kept reference's time, in both columns
    (run / "baseline.json").write_text(json.dumps({"baseline": {"median_ms": 2.0}, "baseline_compiled": None}))
    assert bench.problem_row(bench.SuiteProblem(level=1, problem_id=7, name="conv", source=""),
                             run)["speedup_compiled"] is None


def test_first_orders_the_named_problems_first_and_keeps_the_set():
    """benchmarks/expert_h200.py --first: a short call reaches the named problems first."""
    import importlib.util
    from types import SimpleNamespace

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "expert_h200.py"
    spec = importlib.util.spec_from_file_location("expert_h200_bench", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    keys = ["L1_8_Matmul", "L1_12_Diag", "L1_82_conv", "L1_98_KL", "L2_8_x"]
    problems = [SimpleNamespace(key=k) for k in keys]
    ordered = [p.key for p in script.order_first(problems, "L1_98, L1_8")]
    # a prefix names one problem (L1_8 is not L1_82), the rest keep their order
    assert ordered == ["L1_98_KL", "L1_8_Matmul", "L1_12_Diag", "L1_82_conv", "L2_8_x"]


def test_code_digest_covers_the_loaded_plugins(tmp_path, monkeypatch):
    """The micro-profilers steer the search: a change in a loaded plugin package is a
    change in the code that optimized a problem."""
    import importlib.util

    from kernelpro import bench

    pkg = tmp_path / "kernelpro_plugins_ncu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("THRESHOLD = 0.02\n")
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name == "kernelpro_plugins_ncu":
            return importlib.util.spec_from_file_location(name, pkg / "__init__.py")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    before = bench.code_digest()
    assert bench.code_digest() == before  # deterministic
    (pkg / "__init__.py").write_text("THRESHOLD = 0.05\n")
    assert bench.code_digest() != before


def test_bench_sections_of_plugins_and_one_that_fails():
    import types

    from kernelpro.hookspecs import hookimpl

    def good(config, problems):
        return [f"## Good\n\n{len(problems)} problems\n"]

    def bad(config, problems):
        raise RuntimeError("no numbers\nsecond line")

    plugins = Plugins(extra=[("good_sections", types.SimpleNamespace(kernelpro_bench_sections=hookimpl(good))),
                             ("bad_sections", types.SimpleNamespace(kernelpro_bench_sections=hookimpl(bad)))])
    warnings: list[str] = []
    sections = bench.plugin_sections(plugins, None, [{"name": "p"}], warn=warnings.append)
    assert "## Good\n\n1 problems\n" in sections
    assert any(s.startswith("## bad_sections") and "RuntimeError: no numbers" in s for s in sections)
    assert len(warnings) == 1 and "bad_sections" in warnings[0] and "\n" not in warnings[0]


def test_a_bench_starts_the_next_problems_baseline_judge_ahead(tmp_path, monkeypatch):
    """In a bench the last evaluation of a problem starts the judge of the next problem's
    baseline job (``baseline``: its reference's harness imports torch.compile's stack once
    warm), and so does the end of the problem; other evaluations start a candidate's."""
    from kernelpro.evaluate import runner

    calls = []
    real = runner.prestart_judge

    def spy(device, env, warm=True, baseline=False):
        calls.append(baseline)
        return real(device, env, warm=warm, baseline=baseline)

    monkeypatch.setattr(runner, "prestart_judge", spy)
    suite = write_suite(tmp_path / "suite")
    res = run_cli(["bench", str(suite), "-c", str(FAST), "--device", "cpu", "--budget", "2", "--limit", "1",
                   "--generator", "torch_compile", "-o", str(tmp_path / "out")])
    runner.settle()
    assert res.exit_code == 0, res.output
    # baseline job -> first candidate (a candidate's judge), first candidate -> second, the
    # second (last) -> the next problem's baseline job, and the problem's end for it again
    assert calls == [False, False, True, True], calls


def test_means_with_the_reference_kept_where_no_candidate_beat_eager():
    rows = [
        # beats eager and torch.compile: counted as measured
        {"correct": True, "speedup_eager": 4.0, "speedup_compiled": 2.0, "eager_ms": 4.0, "compiled_ms": 2.0,
         "roofline_fraction": None},
        # correct but 4x slower than eager: the run advises keeping the reference, whose own
        # time against torch.compile's is 3 ms / 2 ms
        {"correct": True, "speedup_eager": 0.25, "speedup_compiled": 0.125, "eager_ms": 3.0, "compiled_ms": 2.0,
         "roofline_fraction": None},
        # no correct candidate: already the reference's times (problem_row)
        {"correct": False, "speedup_eager": None, "speedup_compiled": 0.5, "eager_ms": None, "compiled_ms": None,
         "roofline_fraction": None},
    ]
    s = bench.level_summary(rows)
    # the headline means count the slower candidate as measured
    assert s["geomean_speedup_eager"] == pytest.approx((4.0 * 0.25 * 1.0) ** (1 / 3))
    assert s["geomean_speedup_compiled"] == pytest.approx((2.0 * 0.125 * 0.5) ** (1 / 3))
    # the second reading keeps the reference on the second problem
    assert s["kept_reference"] == 1
    assert s["geomean_delivered_eager"] == pytest.approx((4.0 * 1.0 * 1.0) ** (1 / 3))
    assert s["geomean_delivered_compiled"] == pytest.approx((2.0 * (2.0 / 3.0) * 0.5) ** (1 / 3))
    table = bench.kept_table({"1": s})
    assert "| 1 | 1 | 1.59x | 0.87x |" in table


def test_a_binary_problem_file_in_a_suite_is_one_line(tmp_path):
    suite = write_suite(tmp_path / "suite")
    (suite / "level1" / "3_bad.py").write_bytes(b"\xf3\x00\xff" * 100)
    with pytest.raises(bench.SuiteError, match=r"3_bad.py: not a text file \(byte 0 is not UTF-8\)"):
        bench.read_suite(suite)


def test_bench_refuses_an_output_directory_of_the_user_s_files(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("mine")
    res = run_cli(["bench", str(write_suite(tmp_path / "suite")), "-c", str(FAST), "--device", "cpu",
                   "--budget", "1", "--generator", "torch_compile", "-o", str(mine)])
    assert res.exit_code == 2 and "is not empty and is not a bench directory" in res.output, res.output
    assert [p.name for p in mine.iterdir()] == ["report.md"] and (mine / "report.md").read_text() == "mine"


def test_unreadable_run_files_of_a_bench_are_not_an_internal_error(tmp_path):
    run = tmp_path / "runs" / "L1_1_relu"
    run.mkdir(parents=True)
    (run / "summary.json").write_text('{"evaluated": ')
    (run / bench.BENCH_META).write_bytes(b"\xf3\x00")
    problem = bench.read_suite(write_suite(tmp_path / "suite"))[0]
    row = bench.problem_row(problem, run)
    assert row["error"] == f"{run / 'summary.json'}: not a JSON object" and row["code"] is None


def test_a_bench_where_every_problem_fails_exits_non_zero_and_keeps_its_report(tmp_path):
    suite = tmp_path / "suite"
    (suite / "level1").mkdir(parents=True)
    (suite / "level1" / "1_broken.py").write_text(PROBLEM.format(expr="x.no_such_method()"))
    out = tmp_path / "out"
    args = ["bench", str(suite), "-c", str(FAST), "--device", "cpu", "--budget", "1", "--generator",
            "torch_compile", "-o", str(out)]
    res = run_cli(args)
    assert res.exit_code == 1, res.output
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: every problem that started failed (1 of 1); the first, L1 1_broken: "), last
    assert "no_such_method" in last and "Traceback" not in res.output + res.stderr
    assert (out / "report.md").exists() and (out / "results.json").exists()
    # with a problem that runs, the bench is a result: exit 0, the failure named on stderr
    (suite / "level1" / "2_relu.py").write_text(PROBLEM.format(expr="torch.relu(x)"))
    res = run_cli(args)
    assert res.exit_code == 0, res.output
    assert "warning: 1 of 2 problems failed" in res.stderr
    # problems the deadline kept back are not failures
    res = run_cli(["bench", str(write_suite(tmp_path / "s2")), "-c", str(FAST), "--device", "cpu", "--budget",
                   "1", "--generator", "torch_compile", "-o", str(tmp_path / "o2"), "--deadline-s", "0"])
    assert res.exit_code == 0 and "warning" not in res.stderr, res.output


@pytest.mark.slow
def test_a_bench_runs_two_problems_at_once_on_one_device_sharing_its_lock(tmp_path):
    """``executor.params.jobs_per_gpu: 2``: both problems run at once on the one device,
    each on its own worker, correct, and every evaluation went through the device's lock
    (its wait is in the evaluator's notes)."""
    suite = write_suite(tmp_path / "suite")
    config = tmp_path / "shared.yaml"
    config.write_text(FAST.read_text() + "executor:\n  name: local\n  params: {jobs_per_gpu: 2}\n")
    out = tmp_path / "out"
    res = run_cli(["bench", str(suite), "-c", str(config), "--device", "cpu", "--budget", "1",
                   "--generator", "torch_compile", "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert "2 problem(s) to run on 2 worker(s) (local)" in res.output
    data = json.loads(res.stdout.strip().splitlines()[-1])
    assert data["levels"]["1"]["correct_rate"] == 1.0
    workers = {json.loads((out / "runs" / key / bench.BENCH_META).read_text())["worker"]
               for key in ("L1_1_relu", "L1_2_softmax")}
    assert workers == {"local.0", "local.1"}
    waits = [line for key in ("L1_1_relu", "L1_2_softmax")
             for line in (out / "runs" / key / "candidates.jsonl").read_text().splitlines()
             if '"gpu_lock_wait_s"' in line]
    assert len(waits) == 2  # each problem's candidate
