"""The expert generator: proposals, moves from findings, the roofline stop, no repeats."""

from __future__ import annotations

import ast
import json

import attrs
import pytest

from expert_problems import PROBLEMS
from kernelpro.api import GenerationRequest, ParentInfo
from kernelpro_plugins_expert import moves
from kernelpro_plugins_expert.generator import ExpertGenerator, ExpertSettings
from kernelpro.problem import check_candidate, parse_problem
from kernelpro.records import Analysis, Bottleneck, Finding


def request(name, device="cpu", parent=None, tried=(), n=3):
    return GenerationRequest(problem=parse_problem(PROBLEMS[name], name=name), n=n, device=device,
                             parent=parent, tried=tuple(tried))


def finding(tool, kernel=None):
    return Finding(tool=tool, severity="high", title=tool, message="m", action="a", kernel=kernel,
                   estimated_gain=0.3)


def test_root_drafts_are_valid_candidates():
    gen = ExpertGenerator()
    drafts = gen.generate(request("layernorm"))
    assert len(drafts) == 3
    assert drafts[0].params["lower"] == ["r0"] and drafts[0].params["graph"] is False
    for d in drafts:
        ast.parse(d.source)
        check_candidate(d.source, parse_problem(PROBLEMS["layernorm"]))
        assert d.language == "triton" and "@triton.jit" in d.source
    assert len({repr(d.params) for d in drafts}) == 3


def test_cuda_root_offers_graph_capture():
    drafts = ExpertGenerator().generate(request("softmax", device="cuda", n=3))
    assert [d.params["graph"] for d in drafts] == [False, True, True]
    assert drafts[2].params["lower"] == [] and drafts[2].language == "pytorch"
    assert "CUDAGraph" in drafts[1].source and "buf.copy_(a)" in drafts[1].source


def test_not_recognized_gives_nothing():
    assert ExpertGenerator().generate(request("data_dependent")) == []


def test_library_only_conv_has_nothing_on_cpu_but_graph_on_cuda():
    from kernelpro.problem import parse_problem as parse
    from expert_problems import problem

    # a convolution with reflect padding has no kernel of ours: only a graph of the reference
    source = problem("        self.conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode='reflect')\n",
                     "        return self.conv(x)\n",
                     "[torch.randn(1, 3, 8, 8)]")
    req = GenerationRequest(problem=parse(source, name="conv"), n=3, device="cpu", parent=None, tried=())
    assert ExpertGenerator().generate(req) == []
    (draft,) = ExpertGenerator().generate(attrs.evolve(req, device="cuda"))
    assert draft.params == {"graph": True, "lower": [], "tiles": {}}


def test_dense_conv_is_an_implicit_gemm_tf32x3_first():
    from kernelpro.problem import parse_problem as parse
    from expert_problems import problem

    source = problem("        self.conv = nn.Conv2d(3, 4, 3)\n", "        return self.conv(x)\n",
                     "[torch.randn(1, 3, 8, 8)]")
    req = GenerationRequest(problem=parse(source, name="conv"), n=3, device="cpu", parent=None, tried=())
    layout, first, second = ExpertGenerator().generate(req)
    # first the library's convolution channels-last (no kernel of ours), then the Triton ones
    assert layout.params["lower"] == [] and layout.params["layout"] == "channels_last"
    assert layout.language == "pytorch" and layout.description == "reference ops + channels-last convolutions"
    assert first.params["lower"] == ["r0"] and first.params["tiles"]["r0"]["precision"] == "tf32x3"
    assert second.params["tiles"]["r0"]["precision"] == "ieee"
    assert "input_precision=\"tf32x3\"" in first.source and first.description.startswith("Triton conv(conv2d)")
    assert "_KpChannelsLast" not in first.source


def test_library_convolutions_run_channels_last_second():
    """Where a 2-D or 3-D convolution of groups 1 stays in the library and only a pointwise
    kernel reads its output, the candidate after the default one runs it channels-last (and
    its children keep that); grouped and 1-D convolutions are left as they are, and so is a
    convolution a group norm reads. A pool reads it in place (its channels-last form)."""
    from kernelpro.problem import parse_problem as parse
    from expert_problems import problem

    # the convolution's output is read twice: its bias stays in it (no fold candidate)
    drafts = ExpertGenerator().generate(request("conv2d_bias_residual", n=2))
    base, layout = drafts
    assert base.params["lower"] == layout.params["lower"] != [] and "layout" not in base.params
    assert layout.params["layout"] == "channels_last" and layout.language == "triton"
    assert layout.description.endswith("+ channels-last convolutions")
    assert '_kp_channels_last(_kp_lower(self.ref), ["conv"])' in layout.source
    assert "return _kp_dense_output(self.lowered(*args))" in layout.source
    check_candidate(layout.source, parse_problem(PROBLEMS["conv2d_bias_residual"]))
    drafts = ExpertGenerator().generate(request("conv2d_bias_tanh_pool", n=8))
    assert drafts[0].params.get("layout") == "channels_last" and drafts[0].params.get("fold")
    assert "def _kp_r0_cl(" in drafts[0].source and "        return _kp_r0_cl(x, out, " in drafts[0].source
    check_candidate(drafts[0].source, parse_problem(PROBLEMS["conv2d_bias_tanh_pool"]))
    drafts = ExpertGenerator().generate(request("conv3d_group_norm_relu", n=8))
    assert drafts and not any(d.params.get("layout") for d in drafts)
    kids = moves.apply("smaller", None, layout.params)
    assert kids and all(k["layout"] == "channels_last" for k in kids)
    for init in ("        self.conv = nn.Conv2d(6, 9, 3, groups=3)\n", "        self.conv = nn.Conv1d(6, 9, 3)\n"):
        shape = "1, 6, 8, 8" if "2d" in init else "1, 6, 8"
        source = problem(init, "        return torch.relu(self.conv(x))\n", f"[torch.randn({shape})]")
        req = GenerationRequest(problem=parse(source, name="conv"), n=8, device="cpu", parent=None, tried=())
        assert not any(d.params.get("layout") for d in ExpertGenerator().generate(req))


def test_channels_last_is_left_out_where_the_reference_gains_nothing_from_tf32():
    """The run's baseline job times the eager reference under the default flags and in strict
    fp32. Where the two are alike its convolutions ran on FMA pipes, and cuDNN's channels-last
    kernels, which take TF32 under the same flags, would fail the check (L2 #82): no
    channels-last candidate then. Where TF32 made it faster, or the times are missing, they
    stay."""
    import attrs

    from kernelpro.records import EvalResult, TimingStats, Verdict
    from kernelpro_plugins_expert.generator import reference_gains_from_tf32

    def timed(ms):
        return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, cv=0.0, n=10,
                           method="cuda_event+l2_flush")

    def baseline(default_ms, strict_ms):
        return EvalResult(verdict=Verdict.CORRECT, reason="reference", baseline=timed(default_ms),
                          baseline_strict=None if strict_ms is None else timed(strict_ms))

    assert reference_gains_from_tf32(baseline(9.86, 9.83)) is False
    assert reference_gains_from_tf32(baseline(5.77, 13.94)) is True
    assert reference_gains_from_tf32(baseline(5.0, None)) is None and reference_gains_from_tf32(None) is None

    def layouts(base):
        req = attrs.evolve(request("conv2d_bias_tanh_pool", n=8), baseline=base)
        return [bool(d.params.get("layout")) for d in ExpertGenerator().generate(req)]

    assert layouts(baseline(5.77, 13.94))[0] and layouts(None)[0]
    idle = layouts(baseline(9.86, 9.83))
    assert idle and not any(idle)


def test_a_reduction_over_the_channels_reads_a_channels_last_convolution_in_place():
    """A reduction over the channels of a library convolution's output reads a
    channels-last tensor in place (its rows are contiguous there): the channels-last
    candidates are offered, fold first, and the reduction's kernel carries the strided
    form. A reduction over the positions is offered it only with enough outputs for the
    strided kernel's programs (a min over the depth of NDHWC, 131,072 outputs), not with few
    (an amax over H and W, 10 outputs)."""
    gen = ExpertGenerator()
    drafts = gen.generate(request("conv_transpose2d_min_tanh", n=8))
    layouts = [d for d in drafts if d.params.get("layout")]
    assert [d.params.get("fold", False) for d in layouts] == [True, False], [d.params for d in drafts]
    assert drafts[0] is layouts[0] and "def _kp_r0_cl(" in layouts[0].source
    for d in layouts:
        check_candidate(d.source, parse_problem(PROBLEMS["conv_transpose2d_min_tanh"]))
    assert not any(d.params.get("layout") for d in gen.generate(request("conv2d_amax_hw", n=8)))
    drafts = gen.generate(request("conv3d_min_depth", n=8))
    assert drafts[0].params.get("layout") == "channels_last" and drafts[0].params.get("fold")


def test_convolution_bias_is_added_by_the_next_kernel_first():
    """A library convolution whose output only a lowered kernel reads runs without its
    bias, that kernel adding it (``fold``): the first candidates, with the convolutions
    channels-last and in the default layout, before the default one and the channels-last
    one; the children of a fold candidate index the same regions and keep the fold. Where
    the add would stand alone (a norm after the convolution) or the output has two readers,
    no fold candidate is offered; a reduction takes the bias in its prologue."""
    gen = ExpertGenerator()
    fold_cl, fold, base, layout = gen.generate(request("conv_transpose3d_scale_clamp", n=4))
    assert fold.params["fold"] is True and "layout" not in fold.params and "fold" not in base.params
    assert layout.params["layout"] == "channels_last" and "fold" not in layout.params
    assert fold_cl.params == {**fold.params, "layout": "channels_last", "conv_paths": ["conv"]}
    assert "+ channels-last convolutions + convolution biases added by the next kernel" in fold_cl.description
    check_candidate(fold_cl.source, parse_problem(PROBLEMS["conv_transpose3d_scale_clamp"]))
    assert fold.description == "Triton pointwise(add+mul+clamp)[BLOCK=1024,num_warps=4,PER_SM=0]" \
        " + convolution biases added by the next kernel"
    assert base.description.startswith("Triton pointwise(mul+clamp)")
    assert "def _kp_split_conv_bias(gm" in fold.source and "    _kp_split_conv_bias(gm)\n" in fold.source
    assert "_kp_split_conv_bias" not in base.source + layout.source
    check_candidate(fold.source, parse_problem(PROBLEMS["conv_transpose3d_scale_clamp"]))
    parent = ParentInfo(id="c0001", source=fold.source, result=None, params=fold.params,
                        analysis=Analysis(bottleneck=None, findings=(finding("uncoalesced_global"),)))
    kids = gen.generate(request("conv_transpose3d_scale_clamp", parent=parent, tried=[fold.params], n=2))
    assert kids and all(k.params["fold"] is True and "_kp_split_conv_bias(gm)" in k.source for k in kids)
    assert all(k.params["lower"] == fold.params["lower"] for k in kids)
    for name in ("conv3d_group_norm_relu", "conv2d_bias_residual"):
        assert not any(d.params.get("fold") for d in ExpertGenerator().generate(request(name, n=8))), name
    (fold,) = ExpertGenerator().generate(request("conv_transpose2d_min_tanh", n=1))
    assert fold.params["fold"] is True and fold.description.startswith("Triton reduce(add+min+tanh)")


def test_a_fold_candidate_s_triton_gemm_child_keeps_the_fold():
    """The precision move of a compute-bound fold candidate proposes the Triton GEMM of the
    folded regions: the child keeps the fold, so it is rendered against the same regions."""
    gen = ExpertGenerator()
    fold = gen.generate(request("conv_relu_linear", n=1))[0]
    assert fold.params["fold"] is True
    parent = ParentInfo(id="c0001", source=fold.source, result=None, params=fold.params,
                        analysis=Analysis(bottleneck=Bottleneck(kind="compute", summary="s"), findings=()))
    kids = gen.generate(request("conv_relu_linear", parent=parent, tried=[fold.params], n=3))
    gemm = [k for k in kids if "gemm(" in k.description]
    assert gemm and all(k.params.get("fold") is True for k in kids), [k.params for k in kids]
    for kid in gemm:
        assert "_kp_split_conv_bias(gm)" in kid.source
        check_candidate(kid.source, parse_problem(PROBLEMS["conv_relu_linear"]))


def test_fp32_gemm_root_offers_library_then_graphs_then_triton_gemm_in_both_precisions():
    drafts = ExpertGenerator().generate(request("bias_gelu", device="cuda", n=5))
    assert [(d.params["lower"], d.params["graph"]) for d in drafts[:3]] == [(["r0"], False), (["r0"], True),
                                                                           ([], True)]
    assert [d.params["lower"] for d in drafts[3:5]] == [["r1"], ["r1"]]
    assert drafts[3].params["tiles"]["r1"]["precision"] == "tf32x3"
    assert drafts[4].params["tiles"]["r1"]["precision"] == "ieee"
    assert 'input_precision="tf32x3"' in drafts[3].source and 'input_precision="ieee"' in drafts[4].source
    # fp16 operands: the Triton GEMM right after the library one, tensor-core products
    # without an input_precision
    drafts = ExpertGenerator().generate(request("gemm_fp16_tanh", n=3))
    assert [d.params["lower"] for d in drafts[:2]] == [["r0"], ["r1"]] and "input_precision" not in drafts[1].source
    assert drafts[2].params["lower"] == ["r0"]  # then the moves


def test_large_memory_bound_forward_gets_no_graph_at_the_root():
    from kernelpro.problem import parse_problem as parse
    from expert_problems import problem

    # 16 MiB in, 16 MiB out: over the default 16 MiB, no GEMM
    source = problem("", "        return torch.relu(x) * 2.0\n", "[torch.randn(4096, 1024)]")
    req = GenerationRequest(problem=parse(source, name="big"), n=4, device="cuda", parent=None, tried=())
    drafts = ExpertGenerator().generate(req)
    assert drafts and not any(d.params["graph"] for d in drafts)
    # the same forward under a higher limit: graphs come second and third
    gen = ExpertGenerator(ExpertGenerator.Settings(graph_root_max_bytes=64 * 2**20))
    assert [d.params["graph"] for d in gen.generate(req)[:3]] == [False, True, True]
    assert ExpertGenerator().recognition(source, "big").io_bytes == 2 * 4096 * 1024 * 4


def test_pool_root_offers_the_pool_kernel():
    drafts = ExpertGenerator().generate(request("pooling", n=2))
    assert drafts[0].params["lower"] == ["r0"] and "tl.static_range(KH)" in drafts[0].source


def test_gemm_tile_moves():
    tile = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
            "precision": "ieee"}
    assert moves.apply_tile_move("smaller", tile)["BLOCK_M"] == 64
    assert moves.apply_tile_move("more_programs", tile)["BLOCK_M"] == 64
    assert moves.apply_tile_move("larger_tile", tile)["BLOCK_N"] == 128
    assert moves.apply_tile_move("deeper_k", tile)["BLOCK_K"] == 64
    assert moves.apply_tile_move("more_stages", tile)["num_stages"] == 4
    assert moves.apply_tile_move("fewer_stages", tile)["num_stages"] == 2
    assert moves.apply_tile_move("precision", tile)["precision"] == "tf32x3"
    assert moves.apply_tile_move("precision", {**tile, "precision": "tf32x3"}) is None
    assert moves.apply_tile_move("more_warps", tile) is None  # 16 warps: out of the GEMM space
    # 4 stages of (256 + 256) x 64 fp32 = 512 KiB of shared memory: refused
    assert moves.apply_tile_move("more_stages", {**tile, "BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64}) is None
    # GEMM-only moves leave other tiles alone
    assert moves.apply_tile_move("deeper_k", {"BLOCK": 1024, "num_warps": 4}) is None


def test_compute_bound_gemm_tries_precision_then_larger_tiles():
    gen = ExpertGenerator()
    root = gen.generate(request("linear_relu_odd", n=3))[2]  # the Triton GEMM with ieee products (CPU: no graphs)
    assert root.params["lower"] == ["r1"] and root.params["tiles"]["r1"]["precision"] == "ieee"
    parent = ParentInfo(id="c0002", source=root.source, result=None, params=root.params,
                        analysis=Analysis(bottleneck=Bottleneck(kind="compute", summary="s"), findings=()))
    d1, d2 = gen.generate(request("linear_relu_odd", parent=parent, tried=[parent.params], n=2))
    assert d1.params["tiles"]["r1"]["precision"] == "tf32x3"
    t = parent.params["tiles"]["r1"]
    assert d2.params["tiles"]["r1"]["BLOCK_M"] * d2.params["tiles"]["r1"]["BLOCK_N"] == 2 * t["BLOCK_M"] * t["BLOCK_N"]


def parent_with(analysis, name="elementwise_chain"):
    gen = ExpertGenerator()
    root = gen.generate(request(name, n=1))[0]
    return gen, ParentInfo(id="c0001", source=root.source, result=None, analysis=analysis, params=root.params)


def test_uncoalesced_finding_widens_the_named_kernel():
    gen, parent = parent_with(Analysis(bottleneck=None, findings=(finding("uncoalesced_global", "_kp_r0_kernel"),)))
    (d,) = gen.generate(request("elementwise_chain", parent=parent, tried=[parent.params], n=1))
    assert d.params["tiles"]["r0"]["BLOCK"] == 2 * parent.params["tiles"]["r0"]["BLOCK"]


def test_occupancy_finding_shrinks_tiles_then_warps():
    gen, parent = parent_with(Analysis(bottleneck=None, findings=(finding("occupancy_limiter"),)),
                              name="reduction_sum")
    d1, d2 = gen.generate(request("reduction_sum", parent=parent, tried=[parent.params], n=2))
    t = parent.params["tiles"]["r0"]
    assert d1.params["tiles"]["r0"]["BLOCK_R"] == t["BLOCK_R"] // 2
    assert d2.params["tiles"]["r0"]["num_warps"] == t["num_warps"] // 2


def test_launch_bound_captures_a_graph_on_cuda():
    gen, parent = parent_with(Analysis(bottleneck=Bottleneck(kind="too_little_work", summary="s"),
                                       findings=(finding("launch_bound"),)))
    (d,) = gen.generate(request("elementwise_chain", device="cuda", parent=parent, tried=[parent.params], n=1))
    assert d.params["graph"] is True and d.params["tiles"] == parent.params["tiles"]


def test_a_gpu_idle_most_of_the_call_gets_a_captured_graph_first():
    """The parent's timed call against its profiled kernels' durations: where the GPU idles
    for most of the call (its launches set the time), the captured graph is the first child,
    before the findings' tile moves and whatever the forward's size; not where the kernels
    fill the call, where the profile may be cut short (256 kernels), or off a GPU."""
    import attrs

    from kernelpro.records import EvalResult, TimingStats, Verdict
    from kernelpro_plugins_expert.generator import gpu_idle_ms

    def parent(call_ms, busy_us, kernels=40):
        timed = TimingStats(median_ms=call_ms, iqr_ms=0.0, mean_ms=call_ms, min_ms=call_ms, max_ms=call_ms, cv=0.0,
                            n=20, method="cuda_event+l2_flush")
        analysis = Analysis(bottleneck=Bottleneck(kind="latency", summary="s",
                                                  evidence={"duration_us": busy_us, "kernels": kernels}),
                            findings=(finding("occupancy_limiter"),))
        gen, p = parent_with(analysis)
        return gen, attrs.evolve(p, result=EvalResult(verdict=Verdict.CORRECT, timing=timed))

    def first(call_ms, busy_us, kernels=40, device="cuda", big=False):
        gen, p = parent(call_ms, busy_us, kernels)
        if big:  # a forward moving more than graph_root_max_bytes: no graph otherwise
            gen = ExpertGenerator(settings=attrs.evolve(gen.settings, graph_root_max_bytes=0))
        (d,) = gen.generate(request("elementwise_chain", device=device, parent=p, tried=[p.params], n=1))
        return d.params

    assert first(4.0, 1000.0)["graph"] is True
    assert first(4.0, 1000.0, big=True)["graph"] is True
    assert not first(4.0, 3500.0).get("graph")  # the kernels fill the call: the findings' moves first
    assert not first(4.0, 1000.0, kernels=256).get("graph")
    assert not first(4.0, 1000.0, device="cpu").get("graph")
    _, p = parent(4.0, 1000.0)
    assert gpu_idle_ms(p, io_bytes=0, bandwidth_gbs=None) == pytest.approx(3.0)
    # a capture's copies of 8 GB of inputs and outputs (8 ms at 2,000 GB/s) cost more than it saves
    assert gpu_idle_ms(p, io_bytes=4_000_000_000, bandwidth_gbs=None) is None


@pytest.mark.parametrize("analysis", [
    Analysis(bottleneck=None, findings=(finding("at_roofline"),)),
    Analysis(bottleneck=Bottleneck(kind="memory", summary="s", roofline_fraction=0.9)),
])
def test_at_the_roofline_the_node_gets_no_children(analysis):
    gen, parent = parent_with(analysis)
    assert gen.generate(request("elementwise_chain", parent=parent, tried=[parent.params])) == []


def test_never_repeats_tried_params():
    gen = ExpertGenerator()
    seen = []
    for _ in range(6):
        drafts = gen.generate(request("softmax", tried=seen, n=2))
        for d in drafts:
            assert d.params not in seen
            seen.append(d.params)
    assert len(seen) >= 4


def test_tile_moves_stay_in_the_space():
    assert moves.apply_tile_move("wider", {"BLOCK": 16384, "num_warps": 4, "PER_SM": 0}) is None
    assert moves.apply_tile_move("fewer_warps", {"BLOCK_R": 64, "num_warps": 1}) is None
    assert moves.apply_tile_move("more_programs", {"BLOCK_R": 64, "num_warps": 4}) == \
        {"BLOCK_R": 64, "CHUNK": 256, "num_warps": 4}
    assert moves.apply_tile_move("wider", {"BLOCK_R": 256, "CHUNK": 256, "num_warps": 4}) is None
    assert moves.apply_tile_move("more_programs", {"BLOCK_R": 8, "BLOCK_I": 64, "num_warps": 4}) == \
        {"BLOCK_R": 8, "BLOCK_I": 32, "num_warps": 4}


def test_a_grid_under_one_wave_gets_more_programs_not_a_smaller_tile():
    from kernelpro.records import Analysis

    def gap(waves):
        return Finding(tool="occupancy_gap", severity="high", title="t", message="m", action="a",
                       kernel="_kp_r0_kernel", estimated_gain=0.26,
                       evidence={"achieved_occupancy_pct": 23.8, "waves_per_sm": waves})

    grid_limited = [m for m, _ in moves.plan(Analysis(bottleneck=None, findings=(gap(0.5),)), ["r0"])]
    assert grid_limited[:2] == ["more_programs", "more_warps"], grid_limited
    tile_limited = [m for m, _ in moves.plan(Analysis(bottleneck=None, findings=(gap(12.0),)), ["r0"])]
    assert tile_limited[:3] == ["smaller", "fewer_warps", "fewer_stages"], tile_limited
    # a persistent grid gets twice the programs per SM; a plain one smaller blocks
    assert moves.apply_tile_move("more_programs", {"BLOCK": 2048, "num_warps": 4, "PER_SM": 4}) == \
        {"BLOCK": 2048, "num_warps": 4, "PER_SM": 8}
    assert moves.apply_tile_move("more_programs", {"BLOCK": 2048, "num_warps": 4, "PER_SM": 0}) == \
        {"BLOCK": 1024, "num_warps": 4, "PER_SM": 0}
    assert moves.apply_tile_move("more_programs", {"BLOCK": 2048, "num_warps": 4, "PER_SM": 32}) is None


def test_settings_are_checked():
    with pytest.raises(ValueError):
        ExpertSettings(stop_at_roofline_fraction=0.0)


@pytest.mark.parametrize("name", ["layernorm", "split_softmax", "gemm_div_sum_scale", "conv_relu", "bias_gelu",
                                  "scale_avg_pool3d_bias"])
def test_drafts_pass_the_evaluators_source_scan(name):
    from kernelpro.evaluate.guard import scan_source

    drafts = ExpertGenerator().generate(request(name, device="cuda", n=3))
    assert drafts
    for d in drafts:
        assert scan_source(d.source) is None


def test_compute_bound_library_gemm_moves_to_tensor_cores():
    gen = ExpertGenerator()
    root = gen.generate(request("bias_gelu", n=1))[0]
    assert root.params["lower"] == ["r0"]  # cuBLAS GEMM + the Triton epilogue kernel
    parent = ParentInfo(id="c0001", source=root.source, result=None, params=root.params,
                        analysis=Analysis(bottleneck=Bottleneck(kind="compute", summary="s"), findings=()))
    d1 = gen.generate(request("bias_gelu", parent=parent, tried=[parent.params], n=1))[0]
    assert d1.params["lower"] == ["r1"] and d1.params["tiles"]["r1"]["precision"] == "tf32x3"
    # fp16 operands have no precision move: the library parent gets ordinary tile moves
    root = gen.generate(request("gemm_fp16_tanh", n=1))[0]
    parent = attrs.evolve(parent, source=root.source, params=root.params)
    drafts = gen.generate(request("gemm_fp16_tanh", parent=parent, tried=[parent.params], n=2))
    assert all(d.params["lower"] == ["r0"] for d in drafts)


def test_tail_effect_on_a_pointwise_kernel_tries_a_persistent_grid():
    gen, parent = parent_with(Analysis(bottleneck=None, findings=(finding("tail_effect", "_kp_r0_kernel"),)))
    drafts = gen.generate(request("elementwise_chain", parent=parent, tried=[parent.params], n=2))
    assert [d.params["tiles"]["r0"].get("PER_SM") for d in drafts] == [0, 4], [d.params for d in drafts]
    assert drafts[1].params["tiles"]["r0"]["BLOCK"] == parent.params["tiles"]["r0"]["BLOCK"]
    assert "tl.num_programs(0) * BLOCK" in drafts[1].source and "_kp_sm_count(xs[0].device)" in drafts[1].source
    # a persistent tile is not made persistent again, and pool tiles have no such parameter
    assert moves.apply_tile_move("persistent", drafts[1].params["tiles"]["r0"]) is None
    assert moves.apply_tile_move("persistent", {"BLOCK": 1024, "num_warps": 4}) is None



def test_precision_move_from_a_captured_library_parent_does_not_repeat_the_root_kernel():
    """On the H200 (level 1 #8) the tf32x3 GEMM failed the fp32 check at the root, and the
    precision move from the graph-captured library node proposed the same kernel under a
    graph. It now proposes the kernel itself, which the root already tried."""
    gen = ExpertGenerator()
    root = gen.generate(request("bias_gelu", device="cuda", n=5))
    graph_node, tf32 = root[1], root[3]
    assert graph_node.params["graph"] and tf32.params["tiles"]["r1"]["precision"] == "tf32x3"
    parent = ParentInfo(id="c0002", source=graph_node.source, result=None, params=graph_node.params,
                        analysis=Analysis(bottleneck=Bottleneck(kind="compute", summary="s"), findings=()))
    tried = [d.params for d in root]
    drafts = gen.generate(request("bias_gelu", device="cuda", parent=parent, tried=tried, n=3))
    assert not any(d.params["tiles"].get("r1", {}).get("precision") == "tf32x3" and d.params["lower"] == ["r1"]
                   for d in drafts), [d.description for d in drafts]


def test_gemm_summed_over_n_is_rewritten_first():
    drafts = ExpertGenerator().generate(request("gemm_div_sum_scale", device="cuda", n=3))
    first = drafts[0]
    assert first.description.startswith("sum of a GEMM as a matrix-vector product")
    assert first.language == "pytorch"  # library calls, no Triton kernel
    assert "w = b.sum(0)" in first.source or "w = b.sum(-1)" in first.source
    # the usual library + Triton-reduce candidate comes next
    assert drafts[1].description.startswith("Triton reduce(")


@pytest.mark.parametrize("kind", ["memory", "compute", "latency", "too_little_work"])
def test_refining_a_rewrite_node_moves_nothing_but_graph_capture(kind):
    """A rewrite is library calls (an empty tile): tile moves leave it alone, graph capture
    may still be proposed."""
    gen = ExpertGenerator()
    root = gen.generate(request("gemm_div_sum_scale", device="cuda", n=6))
    parent = ParentInfo(id="c0001", source=root[0].source, result=None, params=root[0].params,
                        analysis=Analysis(bottleneck=Bottleneck(kind=kind, summary="s"), findings=()))
    drafts = gen.generate(request("gemm_div_sum_scale", device="cuda", parent=parent,
                                  tried=[d.params for d in root], n=3))
    for d in drafts:
        assert d.params["lower"] != parent.params["lower"] or d.params["graph"], d.description


def test_uncoalesced_windowed_kernels_move_to_fewer_outputs_per_thread():
    """A pool/depthwise tile (no PER_SM): 'wider' halves BLOCK down to one output per thread;
    a pointwise tile widens as before."""
    assert moves.apply_tile_move("wider", {"BLOCK": 512, "num_warps": 4}) == {"BLOCK": 256, "num_warps": 4}
    assert moves.apply_tile_move("wider", {"BLOCK": 128, "num_warps": 4}) is None
    assert moves.apply_tile_move("wider", {"BLOCK": 1024, "num_warps": 4, "PER_SM": 0})["BLOCK"] == 2048


def test_windowed_regions_start_with_one_output_per_thread():
    from kernelpro_plugins_expert.recognize import recognize
    from kernelpro_plugins_expert.render import default_params

    for name in ("pooling", "dwconv2d_bias_relu"):
        params = default_params(recognize(PROBLEMS[name]))
        tiles = [params["tiles"][r] for r in params["lower"]]
        assert {"BLOCK": 128, "num_warps": 4} in tiles, (name, tiles)


def test_windowed_tiles_keep_an_output_per_thread_and_grow_when_compute_bound():
    # pass 4 on the H200: 8 warps on 128 outputs (half the threads without one) ran 2x slower
    assert moves.apply_tile_move("more_warps", {"BLOCK": 128, "num_warps": 4}) is None
    assert moves.apply_tile_move("more_warps", {"BLOCK": 512, "num_warps": 4}) == {"BLOCK": 512, "num_warps": 8}
    # compute bound (index arithmetic): twice the outputs per program
    assert moves.apply_tile_move("larger_tile", {"BLOCK": 128, "num_warps": 4}) == {"BLOCK": 256, "num_warps": 4}
    assert moves.apply_tile_move("larger_tile", {"BLOCK": 16384, "num_warps": 4}) is None
    assert moves.apply_tile_move("larger_tile", {"BLOCK": 1024, "num_warps": 4, "PER_SM": 0}) is None


def test_windowed_roots_grow_the_tile_before_halving_the_warps():
    # bench pass 5 on the H200: BLOCK 256 was 1.28 -> 0.83 ms on L1 #82; 2 warps never won
    from kernelpro.problem import parse_problem as parse
    from expert_problems import problem

    big = problem("        self.pool = nn.AvgPool1d(8, stride=1, padding=4)\n", "        return self.pool(x)\n",
                  "[torch.randn(64, 128, 1024)]")  # over the graph limit: no graphs at the root
    req = GenerationRequest(problem=parse(big, name="bigpool"), n=4, device="cuda", parent=None, tried=())
    tiles = [d.params["tiles"]["r0"] for d in ExpertGenerator().generate(req)]
    # the per-tap kernel, the vector form (stride 1 along W), then the per-tap kernel's children
    assert tiles == [{"BLOCK": 128, "num_warps": 4}, {"BLOCK": 512, "num_warps": 4, "VEC": 1},
                     {"BLOCK": 256, "num_warps": 4}, {"BLOCK": 128, "num_warps": 2}], tiles
    # other tiles keep the default order (a pointwise root halves its block first)
    assert moves.root_first({"r0": {"BLOCK": 1024, "num_warps": 4, "PER_SM": 0}}) == ()


def test_vector_window_tiles_keep_a_group_of_four_per_thread():
    vec = {"BLOCK": 512, "num_warps": 4, "VEC": 1}
    assert moves.apply_tile_move("larger_tile", vec) == {**vec, "BLOCK": 1024}
    assert moves.apply_tile_move("smaller", vec) is None  # 256 outputs on 128 threads: under 4 each
    assert moves.apply_tile_move("fewer_warps", vec) == {**vec, "num_warps": 2}
    assert moves.apply_tile_move("more_warps", vec) is None
    assert moves.apply_tile_move("more_warps", {**vec, "BLOCK": 1024}) == {**vec, "BLOCK": 1024, "num_warps": 8}
    assert moves.apply_tile_move("wider", vec) is None and moves.apply_tile_move("persistent", vec) is None
    assert moves.apply_tile_move("larger_tile", {**vec, "BLOCK": 4096}) is None


def test_large_forwards_get_no_graph_when_refined():
    from kernelpro.problem import parse_problem as parse
    from expert_problems import problem

    big = problem("        self.pool = nn.AvgPool1d(8, stride=1, padding=4)\n", "        return self.pool(x)\n",
                  "[torch.randn(64, 128, 1024)]")  # 32 MiB in: over the 16 MiB limit
    gen = ExpertGenerator()
    req = GenerationRequest(problem=parse(big, name="bigpool"), n=4, device="cuda", parent=None, tried=())
    root = gen.generate(req)[0]
    launch = Analysis(bottleneck=Bottleneck(kind="compute", summary="s"), findings=(finding("launch_bound"),))
    parent = ParentInfo(id="c0001", source=root.source, result=None, analysis=launch, params=root.params)
    kids = gen.generate(GenerationRequest(problem=parse(big, name="bigpool"), n=8, device="cuda", parent=parent,
                                          tried=(root.params,)))
    assert kids and not any(d.params["graph"] for d in kids)
    assert kids[0].params["tiles"]["r0"]["BLOCK"] == 256  # compute bound: larger_tile first


def test_logs_get_a_fast_form_second_at_the_root_and_when_compute_bound():
    # bench pass 6 on the H200: L1 #98's KL divergence (two logs an element) at 75 % of the
    # bandwidth with 74 % of its loop fp32 (libdevice's logf)
    gen = ExpertGenerator()
    root, second = gen.generate(request("kl_div_log", n=2))
    assert root.params["tiles"]["r0"] == {"BLOCK": 2048, "num_warps": 4, "PER_SM": 4, "FASTLOG": 0}
    assert second.params["tiles"]["r0"] == {**root.params["tiles"]["r0"], "FASTLOG": 1}
    assert "_kp_fast_log(" not in root.source and "tl.log(" in root.source
    assert "_kp_fast_log(" in second.source and "lg2.approx.f32" in second.source
    from kernelpro.evaluate.guard import scan_source

    assert scan_source(second.source) is None  # the evaluator's source scan lets it through
    # refining the exact root when compute bound: the fast log is the precision move
    parent = ParentInfo(id="c0001", source=root.source, result=None, params=root.params,
                        analysis=Analysis(bottleneck=Bottleneck(kind="compute", summary="s"), findings=()))
    (kid,) = gen.generate(request("kl_div_log", parent=parent, tried=[root.params], n=1))
    assert kid.params["tiles"]["r0"]["FASTLOG"] == 1
    # once fast, or without logs, precision moves nothing
    assert moves.apply_tile_move("precision", second.params["tiles"]["r0"]) is None
    assert moves.apply_tile_move("precision", {"BLOCK": 1024, "num_warps": 4, "PER_SM": 0}) is None
    # a pointwise chain with a log has the parameter; one without has not
    assert gen.generate(request("log_softplus_chain", n=1))[0].params["tiles"]["r0"]["FASTLOG"] == 0
    assert "FASTLOG" not in gen.generate(request("elementwise_chain", n=1))[0].params["tiles"]["r0"]


def _analyses():
    """Analyses a parent's profile could give: each bottleneck kind, each finding the moves
    know (an occupancy gap under one wave too), a GPU idle most of the call, the roofline."""
    from kernelpro.records import EvalResult, TimingStats, Verdict

    out = [None] + [Analysis(bottleneck=Bottleneck(kind=k, summary="s"), findings=()) for k in
                    ("memory", "compute", "latency", "too_little_work", "unknown")]
    out += [Analysis(bottleneck=None, findings=(finding(tool, "_kp_r0_kernel"),)) for tool in moves.FINDING_MOVES]
    gap = Finding(tool="occupancy_gap", severity="high", title="t", message="m", action="a", estimated_gain=0.3,
                  evidence={"waves_per_sm": 0.5})
    idle = Analysis(bottleneck=Bottleneck(kind="latency", summary="s", evidence={"duration_us": 100.0, "kernels": 4}),
                    findings=(gap,))
    timed = TimingStats(median_ms=4.0, iqr_ms=0.0, mean_ms=4.0, min_ms=4.0, max_ms=4.0, cv=0.0, n=20,
                        method="cuda_event+l2_flush")
    return out + [idle], EvalResult(verdict=Verdict.CORRECT, timing=timed)


@pytest.mark.parametrize("name", ["elementwise_chain", "softmax", "layernorm", "reduction_sum", "pooling",
                                  "linear_relu_odd", "gemm_fp16_tanh", "split_softmax", "bmm_add", "scale_softmax_tanh"])
def test_expandable_is_false_only_where_no_analysis_gives_a_child(name):
    """``expandable`` (asked before a parent is profiled) is a promise: where it says False,
    no analysis of the parent makes ``generate`` propose anything, so skipping the profile
    loses no child. Checked over every analysis the moves react to, on the root's children as
    parents, with only the parent tried, then with every neighbour ``expandable`` can see tried."""
    analyses, result = _analyses()
    gen = ExpertGenerator()
    for device in ("cpu", "cuda"):
        roots = gen.generate(request(name, device=device, n=4))
        assert roots
        for root in roots:
            bare = ParentInfo(id="c0001", source=root.source, result=result, analysis=None, params=root.params)
            rec = gen.recognition_for(request(name), root.params)
            every = [p for p, _k, _o in gen._untried(request(name, device=device, parent=bare, tried=[root.params]),
                                                     gen.proposals(request(name, device=device, parent=bare), rec,
                                                                   every=True))]
            for tried in ([root.params], [root.params] + every):
                open_ = gen.expandable(request(name, device=device, parent=bare, tried=tried))
                assert open_ is bool(every and tried == [root.params]), (device, root.description)
                for analysis in analyses:
                    parent = attrs.evolve(bare, analysis=analysis)
                    drafts = gen.generate(request(name, device=device, parent=parent, tried=tried, n=1))
                    assert open_ or not drafts, (device, root.description, analysis, drafts[0].description)


@pytest.mark.parametrize("name", ["elementwise_chain", "softmax", "reduction_sum", "pooling", "gemm_fp16_tanh"])
def test_a_parent_whose_time_alone_reaches_its_roofline_is_closed_before_its_profile(name):
    """The evaluator's least time for the problem (its minimum bytes and FLOPs at the GPU's
    ceilings) over the parent's call: at the generator's stop fraction or above, no analysis
    gives a child and ``expandable`` says so before any profile; below it, the parent is
    refined as before. A call faster than the FLOPs' part counts against the bytes' part."""
    from kernelpro.records import EvalResult, TimingStats, Verdict

    def result(call_ms, memory_ms, compute_ms):
        timed = TimingStats(median_ms=call_ms, iqr_ms=0.0, mean_ms=call_ms, min_ms=call_ms, max_ms=call_ms, cv=0.0,
                            n=20, method="cuda_event+l2_flush")
        notes = {"min_traffic_bound_ms": max(memory_ms, compute_ms), "min_traffic_memory_ms": memory_ms,
                 "min_traffic_compute_ms": compute_ms, "min_traffic_bound_calibrated": 0.0}
        return EvalResult(verdict=Verdict.CORRECT, timing=timed, measurements={"evaluator": notes})

    analyses, _ = _analyses()
    gen = ExpertGenerator()  # stop_at_roofline_fraction 0.85
    cases = [(result(4.0, 3.6, 0.0), True), (result(4.0, 1.0, 3.5), True),  # 0.90, 0.875 of the least time
             (result(4.0, 3.2, 0.0), False),  # 0.80
             (result(4.0, 1.0, 5.0), False)]  # faster than its FLOPs' part: 1.0 / 4.0 of the bytes' part
    for device in ("cpu", "cuda"):
        root = gen.generate(request(name, device=device, n=1))[0]
        for res, closed in cases:
            parent = ParentInfo(id="c0001", source=root.source, result=res, analysis=None, params=root.params)
            ask = request(name, device=device, parent=parent, tried=[root.params], n=1)
            assert gen.expandable(ask) is not closed, (device, res.measurements)
            assert bool(gen.generate(ask)) is not closed
            if closed:
                for analysis in analyses:
                    assert not gen.generate(request(name, device=device, parent=attrs.evolve(parent, analysis=analysis),
                                                    tried=[root.params], n=1))



ENERGY_GOAL = "Least GPU energy per call at matched speed."


def _same(params):
    return json.dumps(params, sort_keys=True)


@pytest.mark.parametrize("name", ["elementwise_chain", "softmax", "reduction_sum", "pooling", "gemm_fp16_tanh"])
def test_at_its_roofline_a_parent_still_gets_the_energy_levers_when_the_reward_ranks_energy(name):
    """At the roofline (by its time alone, or by its profile) a parent is closed for speed;
    when the request carries a reward's goal (energy), it is refined with the energy levers
    only: an energy finding's moves first, then larger_tile, wider, fewer_warps, persistent;
    never a captured graph or more programs. ``expandable`` keeps its promise there too."""
    from kernelpro.records import EvalResult, TimingStats, Verdict

    timed = TimingStats(median_ms=4.0, iqr_ms=0.0, mean_ms=4.0, min_ms=4.0, max_ms=4.0, cv=0.0, n=20,
                        method="cuda_event+l2_flush")
    at_time = EvalResult(verdict=Verdict.CORRECT, timing=timed, measurements={"evaluator": {
        "min_traffic_bound_ms": 3.6, "min_traffic_memory_ms": 3.6, "min_traffic_compute_ms": 0.0,
        "min_traffic_bound_calibrated": 0.0}})  # 0.90 of the least time
    plain = EvalResult(verdict=Verdict.CORRECT, timing=timed)
    roof_b = Bottleneck(kind="memory", summary="s", roofline_fraction=0.9)
    roof = Analysis(bottleneck=roof_b, findings=(finding("at_roofline"),))
    analyses, _ = _analyses()
    gen = ExpertGenerator()
    for device in ("cpu", "cuda"):
        root = gen.generate(request(name, device=device, n=1))[0]
        rec = gen.recognition_for(request(name), root.params)
        levers = {_same(p) for m in moves.ENERGY_MOVES for p in moves.apply(m, None, root.params)}
        for res, analysis in ((at_time, None), (plain, roof)):
            parent = ParentInfo(id="c0001", source=root.source, result=res, analysis=analysis, params=root.params)
            speed = request(name, device=device, parent=parent, tried=[root.params], n=8)
            assert not gen.generate(speed)
            energy = attrs.evolve(speed, goal=ENERGY_GOAL)
            drafts = gen.generate(energy)
            assert drafts and gen.expandable(energy), (device, root.description)
            # each child is one energy lever away from the parent
            assert all(_same(d.params) in levers for d in drafts), (device, [d.description for d in drafts])
        # an energy finding's own move leads
        for tool in moves.ENERGY_TOOLS:
            firsts = moves.apply(moves.FINDING_MOVES[tool][0], "r0", root.params)
            if not firsts:  # the move leaves this tile's space
                continue
            told = Analysis(bottleneck=roof_b, findings=(finding("at_roofline"), finding(tool, "_kp_r0_kernel")))
            parent = ParentInfo(id="c0001", source=root.source, result=plain, analysis=told, params=root.params)
            ask = attrs.evolve(request(name, device=device, parent=parent, tried=[root.params], n=1), goal=ENERGY_GOAL)
            got = gen.generate(ask)
            assert got and _same(got[0].params) == _same(firsts[0]), (device, tool)
        # the promise: where expandable says no, no analysis gives a child
        bare = ParentInfo(id="c0001", source=root.source, result=at_time, analysis=None, params=root.params)
        ask = attrs.evolve(request(name, device=device, parent=bare, tried=[root.params]), goal=ENERGY_GOAL)
        every = [p for p, _k, _o in gen._untried(ask, gen.proposals(ask, rec, every=True))]
        closed = attrs.evolve(ask, tried=tuple([root.params] + every))
        assert not gen.expandable(closed)
        for analysis in analyses + [roof]:
            assert not gen.generate(attrs.evolve(closed, parent=attrs.evolve(bare, analysis=analysis), n=1))
