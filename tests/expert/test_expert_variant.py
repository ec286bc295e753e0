"""benchmarks/expert_variant.py: one candidate written past the generator's gates, for an A/B."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from expert_problems import PROBLEMS
from kernelpro.problem import check_candidate, parse_problem

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "expert_variant.py"


def script():
    spec = importlib.util.spec_from_file_location("expert_variant", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_gated_variant_is_written_and_bad_requests_exit_2(tmp_path, capsys):
    # an amax over H and W of a convolution: too few outputs for the generator to offer the
    # channels-last candidate, which the script writes all the same
    suite = tmp_path / "suite.jsonl"
    rows = [{"level": 2, "problem_id": 7, "name": "7_conv_amax", "code": PROBLEMS["conv2d_amax_hw"]},
            {"level": 1, "problem_id": 3, "name": "3_layernorm", "code": PROBLEMS["layernorm"]},
            {"level": 1, "problem_id": 5, "name": "5_broken", "code": "def f(:\n"}]
    suite.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = script().main
    out = tmp_path / "ab"
    assert run([str(suite), "7", "--fold", "--channels-last", "-o", str(out)]) == 0
    cand = (out / "L2_7_fold_cl.py").read_text()
    assert (out / "L2_7.py").read_text() == PROBLEMS["conv2d_amax_hw"]
    assert "_kp_channels_last(" in cand and "def _kp_r0_cl(" in cand
    check_candidate(cand, parse_problem(PROBLEMS["conv2d_amax_hw"]))
    assert "channels-last convolutions" in capsys.readouterr().out
    assert run([str(suite), "7", "-o", str(out)]) == 0 and (out / "L2_7_default.py").exists()
    assert run([str(suite), "99", "-o", str(out)]) == 2
    assert run([str(suite), "3", "--fold", "-o", str(out)]) == 2  # no convolution: nothing to fold
    assert run([str(suite), "3", "--channels-last", "-o", str(out)]) == 2
    assert "error:" in capsys.readouterr().err
    assert run([str(tmp_path / "missing.jsonl"), "7", "-o", str(out)]) == 2
    assert run([str(suite), "5", "-o", str(out)]) == 2  # code that does not parse: one line, no traceback
    assert "not a problem" in capsys.readouterr().err
