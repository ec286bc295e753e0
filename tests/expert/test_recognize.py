"""Recognition: operator graphs and fusible regions of small problems and of KernelBench ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from expert_problems import PROBLEMS
from kernelpro.generate.expert.recognize import recognize

SHARED = Path(__file__).resolve().parents[3] / "shared" / "kernelbench"


def regions(name: str) -> list[tuple[str, str]]:
    rec = recognize(PROBLEMS[name])
    assert rec.ok, rec.reason
    return [(r.kind, r.op) for r in rec.regions]


def test_elementwise_chain_is_one_region_with_broadcast_param():
    rec = recognize(PROBLEMS["elementwise_chain"])
    assert [(r.kind, r.op) for r in rec.regions] == [("pointwise", "sigmoid+mul+sub+tanh+leaky_relu")]
    region = rec.regions[0]
    assert region.inputs == ("x", "scale") and region.shape == (2, 6, 5, 7)
    assert region.program[4][2] == {"negative_slope": 0.1}


def test_bias_gelu_is_an_epilogue_of_the_linear():
    rec = recognize(PROBLEMS["bias_gelu"])
    assert [(r.kind, r.op, r.epilogue_of) for r in rec.regions] == [("pointwise", "add+gelu", "linear")]
    assert "gemm" in rec.kinds


@pytest.mark.parametrize("name, expected", [
    ("softmax", [("softmax", "softmax")]),
    ("log_softmax", [("softmax", "log_softmax")]),
    ("logsumexp", [("softmax", "logsumexp")]),
    ("layernorm", [("layernorm", "layer_norm")]),
    ("rmsnorm", [("rmsnorm", "rms_norm")]),
    ("rmsnorm_module", [("rmsnorm", "rms_norm")]),
    ("reduction_sum", [("reduce", "sum")]),
    ("reduction_max", [("reduce", "max")]),
    ("pooling", []),
    ("global_avg_pool", [("reduce", "mean")]),
    ("amax_last_two", [("reduce", "max")]),
])
def test_single_op_regions(name, expected):
    assert regions(name) == expected


def test_rmsnorm_pattern_covers_all_its_nodes():
    rec = recognize(PROBLEMS["rmsnorm"])
    (region,) = rec.regions
    assert len(region.nodes) == 5 and region.attrs["dim"] == 1 and region.attrs["eps"] == 1e-5


def test_gemm_and_conv_epilogues():
    rec = recognize(PROBLEMS["gemm_bias_relu"])
    assert [(r.op, r.epilogue_of) for r in rec.regions] == [("add+relu", "matmul")]
    rec = recognize(PROBLEMS["conv_relu"])
    assert [(r.op, r.epilogue_of) for r in rec.regions] == [("relu", "conv")]
    assert "conv" in rec.kinds


def test_pooling_is_recognized_and_left_to_the_library():
    rec = recognize(PROBLEMS["pooling"])
    assert "pool" in rec.kinds and rec.regions == ()


def test_data_dependent_forward_is_not_recognized():
    rec = recognize(PROBLEMS["data_dependent"])
    assert not rec.ok and "cannot trace" in rec.reason


def _kernelbench(level: int) -> dict[str, str]:
    path = SHARED / f"level{level}_dev.jsonl"
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared KernelBench subset is read at test time, never copied)")
    return {json.loads(line)["name"]: json.loads(line)["code"] for line in path.read_text().splitlines() if line}


@pytest.mark.parametrize("fragment, kind", [
    ("Softmax", "softmax"), ("LayerNorm", "layernorm"), ("RMSNorm", "rmsnorm"), ("ReLU", "pointwise"),
    ("Mean_reduction", "reduce"), ("LogSoftmax", "softmax"),
])
def test_kernelbench_level1(fragment, kind):
    problems = {n: c for n, c in _kernelbench(1).items() if fragment.lower() in n.lower()}
    if not problems:
        pytest.skip(f"no level-1 problem named like {fragment} in this subset")
    name, code = sorted(problems.items())[0]
    rec = recognize(code)
    assert rec.ok, f"{name}: {rec.reason}"
    assert kind in [r.kind for r in rec.regions], f"{name}: {rec.summary()}"


def test_kernelbench_level2_finds_epilogues():
    problems = _kernelbench(2)
    found = 0
    for name, code in sorted(problems.items())[:15]:
        rec = recognize(code)
        found += any(r.epilogue_of for r in rec.regions)
    assert found >= 3, "level-2 problems are GEMM/conv followed by pointwise chains"


@pytest.mark.parametrize("name, prologue, epilogue", [
    ("gemm_div_sum_scale", ["div"], ["mul"]),
    ("relu_max_col", ["sub", "relu"], ["mul"]),
    ("scale_softmax_tanh", ["mul"], ["tanh"]),
    ("split_scale_layernorm", ["mul", "add"], ["sigmoid"]),
])
def test_pointwise_fused_into_reductions(name, prologue, epilogue):
    rec = recognize(PROBLEMS[name])
    (region,) = [r for r in rec.regions if r.kind != "pointwise"]
    assert [p[0] for p in region.prologue] == prologue
    assert [e[0] for e in region.epilogue] == epilogue
    assert not [r for r in rec.regions if r.kind == "pointwise"]


def test_a_reduction_input_read_twice_is_not_fused():
    rec = recognize(PROBLEMS["rmsnorm"])  # x feeds both the square and the division
    assert rec.regions[0].prologue == ()
