"""Recognition: operator graphs and fusible regions of small problems and of KernelBench ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from expert_problems import PROBLEMS
from kernelpro_plugins_expert.ops import Param
from kernelpro_plugins_expert.recognize import recognize

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
    assert [(r.kind, r.op, r.epilogue_of) for r in rec.regions] == [("pointwise", "add+gelu", "linear"),
                                                                     ("gemm", "linear", None)]
    assert "gemm" in rec.kinds
    # the Triton GEMM: the linear's bias, then the pointwise region, in registers
    gemm = rec.regions[1]
    assert gemm.nodes == ("linear", "add", "gelu") and gemm.output == "gelu"
    assert [e[0] for e in gemm.epilogue] == ["add", "add", "gelu"]
    assert gemm.epilogue[1][1] == (("v", 0), ("in", 2))  # product + bias, then + the extra parameter
    assert rec.alternatives() == ([0], [1])


@pytest.mark.parametrize("name, expected", [
    ("softmax", [("softmax", "softmax")]),
    ("log_softmax", [("softmax", "log_softmax")]),
    ("logsumexp", [("softmax", "logsumexp")]),
    ("layernorm", [("layernorm", "layer_norm")]),
    ("rmsnorm", [("rmsnorm", "rms_norm")]),
    ("rmsnorm_module", [("rmsnorm", "rms_norm")]),
    ("reduction_sum", [("reduce", "sum")]),
    ("reduction_max", [("reduce", "max")]),
    ("pooling", [("pool", "max_pool")]),
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
    assert [(r.op, r.epilogue_of) for r in rec.regions] == [("add+relu", "matmul"), ("matmul", None)]
    rec = recognize(PROBLEMS["conv_relu"])
    # the dense convolution is also an implicit-GEMM region (its own, the relu stays apart)
    assert [(r.kind, r.op, r.epilogue_of) for r in rec.regions] == [("conv", "conv2d", None),
                                                                    ("pointwise", "relu", "conv")]
    assert "conv" in rec.kinds
    conv = rec.regions[0]
    assert conv.attrs["has_bias"] and conv.attrs["k"] == 3 * 3 * 3 and conv.inputs[1:] == (
        Param("conv.weight"), Param("conv.bias"))
    assert rec.alternatives() == ([1], [0, 1])


def test_dense_1d_2d_convolutions_take_the_dense_kernel_and_others_the_general_one():
    # a depthwise convolution is a windowed (pool-kind) region, not a GEMM
    assert not any(r.kind == "conv" for r in recognize(PROBLEMS["dwconv3d"]).regions)
    # a grouped one with a channel multiplier is a general conv region (a GEMM per group)
    (region,) = recognize(PROBLEMS["grouped_conv_multiplier2"]).regions
    assert (region.kind, region.attrs["general"], region.attrs["groups"]) == ("conv", True, 4)
    region = next(r for r in recognize(PROBLEMS["conv1d_dilated_strided"]).regions if r.kind == "conv")
    assert (region.attrs["rank"], region.attrs["stride"], region.attrs["dilation"], region.attrs["padding"]) == \
        (1, (3,), (4,), (2,))


def test_pooling_regions_carry_the_window():
    (region,) = recognize(PROBLEMS["pooling"]).regions
    assert region.attrs["kernel"] == (2, 2) and region.attrs["stride"] == (2, 2) and region.shape == (2, 3, 8, 8)
    (region,) = recognize(PROBLEMS["max_pool2d_ceil"]).regions  # the functional form, stride and ceil_mode
    assert (region.attrs["kernel"], region.attrs["stride"], region.attrs["padding"], region.attrs["ceil_mode"]) == \
        ((3, 3), (2, 2), (1, 1), True)
    (region,) = recognize(PROBLEMS["avg_pool2d_nopad_count"]).regions
    assert region.attrs["count_include_pad"] is False and region.attrs["out_shape"] == (2, 3, 5, 5)


def test_pool_fuses_multi_input_prologue_and_epilogue():
    (region,) = recognize(PROBLEMS["tanh_bias_max_pool"]).regions
    assert [p[0] for p in region.prologue] == ["tanh", "mul", "add"] and region.epilogue == ()
    assert region.inputs == ("x", "bias") and region.attrs["n_pro"] == 1
    (region,) = recognize(PROBLEMS["scale_avg_pool3d_bias"]).regions
    assert [p[0] for p in region.prologue] == ["mul"] and [e[0] for e in region.epilogue] == ["add", "mul"]
    assert region.inputs == ("x", "s1", "bias", "s2") and (region.attrs["n_pro"], region.attrs["n_epi"]) == (1, 2)


def test_adaptive_pool_and_pool_with_indices_stay_in_the_library():
    from expert_problems import problem

    for forward in ("        return F.adaptive_avg_pool2d(x, 1)\n",
                    "        return F.max_pool2d(x, 2, return_indices=True)[0]\n"):
        rec = recognize(problem("", forward, "[torch.randn(2, 3, 8, 8)]"))
        assert rec.ok and rec.regions == (), rec.summary()


@pytest.mark.parametrize("name, op, batch, trans_b, n_extra", [
    ("linear_relu_odd", "linear", 1, True, 1),
    ("linear3d_sigmoid", "linear", 1, True, 2),
    ("addmm_scale", "addmm", 1, False, 1),
    ("bmm_add", "bmm", 3, False, 1),
    ("matmul_transposed_both", "matmul", 1, False, 0),
    ("gemm_fp16_tanh", "matmul", 1, False, 0),
])
def test_gemm_regions(name, op, batch, trans_b, n_extra):
    (gemm,) = [r for r in recognize(PROBLEMS[name]).regions if r.kind == "gemm"]
    assert (gemm.op, gemm.attrs["batch"], gemm.attrs["trans_b"], gemm.attrs["n_extra"]) == (op, batch, trans_b, n_extra)


def test_clone_detach_residual_is_one_epilogue():
    (gemm,) = [r for r in recognize(PROBLEMS["linear_residual_clone"]).regions if r.kind == "gemm"]
    assert gemm.inputs[2:] == (Param("fc.bias"),) and gemm.attrs["n_extra"] == 1  # the residual is the product
    assert [e[0] for e in gemm.epilogue] == ["add", "identity", "identity", "mul", "add"]


def test_an_epilogue_belongs_to_one_gemm():
    rec = recognize(PROBLEMS["two_gemms_relu"])
    gemms = [r for r in rec.regions if r.kind == "gemm"]
    assert [(g.output, len(g.epilogue)) for g in gemms] == [("matmul_1", 0), ("relu", 2)]
    assert gemms[1].inputs[2:] == ("matmul_1",)  # the second product is an input of the first one's epilogue
    _, triton_ = rec.alternatives()
    assert [rec.regions[i].kind for i in triton_] == ["gemm", "gemm"]


def test_gemm_with_broadcast_batch_stays_in_the_library():
    from expert_problems import HEAD

    source = HEAD + ("class Model(nn.Module):\n    def forward(self, a, b):\n        return torch.matmul(a, b)\n"
                     "def get_inputs():\n    return [torch.randn(2, 3, 4, 5), torch.randn(3, 5, 6)]\n"
                     "def get_init_inputs():\n    return []\n")
    rec = recognize(source)
    assert rec.ok and "gemm" in rec.kinds and rec.regions == ()


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
    (region,) = [r for r in rec.regions if r.kind not in ("pointwise", "gemm", "gemm_reduce")]
    assert [p[0] for p in region.prologue] == prologue
    assert [e[0] for e in region.epilogue] == epilogue
    assert not [r for r in rec.regions if r.kind == "pointwise"]


def test_a_reduction_input_read_twice_is_not_fused():
    rec = recognize(PROBLEMS["rmsnorm"])  # x feeds both the square and the division
    assert rec.regions[0].prologue == ()


def test_benchmark_sample_never_crashes_the_generator():
    from sample_report import SAMPLE, report

    if not SAMPLE.exists():
        pytest.skip(f"{SAMPLE} is absent (written by benchmarks/expert_h200.py prepare)")
    rows = report(SAMPLE, 4)
    assert rows and all(isinstance(r["root"], list) for r in rows)
    # a problem with a GEMM region gets the Triton GEMM among its first four root candidates
    # (fp32: after the library GEMM and the two graph captures)
    # and a GEMM whose output is only summed over N gets the rewrite first
    for r in rows:
        if "gemm_reduce:" in r["recognition"]:
            assert " of a GEMM as a matrix-vector product" in r["root"][0], r
        elif "gemm:" in r["recognition"]:
            assert any(d.startswith("Triton gemm(") for d in r["root"][:4]), r


def test_sum_over_a_gemms_columns_is_recognized_as_a_rewrite():
    """sum_n (x W^T / 2)[.., n] * 1.5 = (x (sum_n W[n, :]) / 2) * 1.5: a gemm_reduce region
    covering the GEMM, the scaling and the sum, next to the GEMM and reduce regions."""
    rec = recognize(PROBLEMS["gemm_div_sum_scale"])
    (rw,) = [r for r in rec.regions if r.kind == "gemm_reduce"]
    assert rw.op == "sum" and rw.attrs["keepdim"] and not rw.attrs["has_bias"]
    assert [p[0] for p in rw.prologue] == ["div"] and [e[0] for e in rw.epilogue] == ["mul"]
    ids = [f"r{i}" for i in range(len(rec.regions))]
    assert [ids[i] for i in rec.rewrites()] == [ids[rec.regions.index(rw)]]
    # the library and Triton-GEMM alternatives never lower the rewrite
    library, triton = rec.alternatives()
    assert rec.regions.index(rw) not in library + triton


@pytest.mark.parametrize("forward", [
    "        return torch.sum(torch.relu(x @ self.w.T), dim=1)\n",  # not linear: no rewrite
    "        return torch.sum(x @ self.w.T + 1.0, dim=1)\n",  # an added constant does not commute
    "        return torch.sum(x @ self.w.T, dim=0)\n",  # summed over M, not N
    "        y = x @ self.w.T\n        return torch.sum(y, dim=1) + y[:, :1].squeeze(1)\n",  # product read twice
])
def test_no_rewrite_when_the_sum_does_not_commute_with_the_gemm(forward):
    from expert_problems import problem

    rec = recognize(problem("        self.w = nn.Parameter(torch.randn(24, 10))\n", forward, "[torch.randn(6, 10)]"))
    assert rec.ok and not rec.rewrites(), rec.summary()


def test_kl_div_is_one_full_reduction_with_its_log_folded_in():
    rec = recognize(PROBLEMS["kl_div_log"])
    assert rec.ok, rec.reason
    (region,) = rec.regions
    assert region.kind == "reduce_all" and region.op == "kl_div" and len(region.inputs) == 2
    assert region.attrs["reduction"] == "batchmean" and region.shape == (37, 300)
    assert [step[0] for step in region.program] == ["log", "xlogy", "mul", "sub"]
    assert len(region.nodes) == 2  # the log and the loss: one pass over both inputs


def test_kl_div_with_log_target_and_without_reduction():
    rec = recognize(PROBLEMS["kl_div_log_target_sum"])
    (region,) = rec.regions
    assert region.attrs["reduction"] == "sum" and [s[0] for s in region.program] == ["exp", "sub", "mul"]
    assert not [r for r in recognize(PROBLEMS["kl_div_none"]).regions if r.kind == "reduce_all"]


def test_depthwise_convolutions_are_windowed_kernels_and_other_convolutions_stay_in_the_library():
    region = next(r for r in recognize(PROBLEMS["dwconv2d_bias_relu"]).regions if r.kind == "pool")
    assert region.op == "depthwise_conv" and region.attrs["has_bias"] and region.attrs["n_par"] == 2
    assert region.attrs["stride"] == (2, 2) and region.attrs["dilation"] == (2, 2)
    assert [step[0] for step in region.epilogue] == ["relu"]  # fused after the window sum
    assert [str(i) for i in region.inputs[1:3]] == ["Param(path='conv.weight')", "Param(path='conv.bias')"]
    rec = recognize(PROBLEMS["grouped_conv_multiplier2"])
    assert not any(r.kind == "pool" for r in rec.regions) and "conv" in rec.kinds


def test_an_explicit_out_of_place_flag_is_still_a_pointwise_op():
    from expert_problems import problem

    out_of_place = problem("", "        return F.hardsigmoid(x, inplace=False)\n", "[torch.randn(4, 8)]")
    rec = recognize(out_of_place)
    assert rec.ok and [r.kind for r in rec.regions] == ["pointwise"], rec.summary()
    in_place = problem("", "        return F.hardsigmoid(x, inplace=True)\n", "[torch.randn(4, 8)]")
    assert not recognize(in_place).regions  # writing into the input stays with PyTorch


@pytest.mark.parametrize("name, op, reduction", [
    ("mse_loss_scaled", "mse_loss", "mean"), ("l1_loss_sum", "l1_loss", "sum"),
    ("smooth_l1_beta", "smooth_l1_loss", "mean"), ("huber_delta", "huber_loss", "mean"),
])
def test_elementwise_losses_are_one_full_reduction(name, op, reduction):
    rec = recognize(PROBLEMS[name])
    (region,) = rec.regions
    assert (region.kind, region.op, region.attrs["reduction"]) == ("reduce_all", op, reduction)
    if name == "mse_loss_scaled":  # the x * 2.0 that only feeds the loss is folded into its pass
        assert [s[0] for s in region.program] == ["mul", "sub", "mul"]


def test_a_loss_without_reduction_is_left_to_the_pointwise_path():
    assert all(r.kind != "reduce_all" for r in recognize(PROBLEMS["mse_loss_none"]).regions)


def test_instance_norm_without_affine_is_a_layer_norm_over_the_spatial_dims():
    (region,) = recognize(PROBLEMS["instance_norm2d"]).regions
    assert (region.kind, region.op, region.attrs["normalized_ndim"]) == ("layernorm", "layer_norm", 2)
    (region,) = recognize(PROBLEMS["instance_norm1d_relu"]).regions
    assert region.attrs["normalized_ndim"] == 1 and region.attrs["eps"] == 1e-3
    assert [e[0] for e in region.epilogue] == ["relu"]
    # per-channel weights are not a layer norm's (per-element) weights: a group norm with
    # one group per channel instead
    (region,) = recognize(PROBLEMS["instance_norm2d_affine"]).regions
    assert (region.kind, region.op, region.attrs["groups"]) == ("chnorm", "group_norm", 6)


def test_batch_and_group_norms_are_channel_norm_regions():
    (region,) = recognize(PROBLEMS["batch_norm2d"]).regions
    # the batch norm's module is its second input: its mode is read when the kernel runs
    assert (region.kind, region.op, region.inputs) == ("chnorm", "batch_norm", ("x", Param("bn")))
    (region,) = recognize(PROBLEMS["group_norm3d"]).regions
    assert region.inputs == ("x", Param("gn.weight"), Param("gn.bias")) and region.attrs == {"groups": 4, "eps": 1e-3}
    (region,) = recognize(PROBLEMS["group_norm_func_no_affine"]).regions
    assert region.inputs == ("x", None, None) and [e[0] for e in region.epilogue] == ["mul"]


def test_argmax_argmin_are_index_reductions_over_one_dim():
    rec = recognize(PROBLEMS["argmin_ties_keepdim"])
    (region,) = rec.regions
    assert (region.kind, region.op, region.attrs["dim"], region.attrs["keepdim"]) == ("reduce", "argmin", 1, True)
    assert regions("argmax_mid") == [("reduce", "argmax")]
    # the flat index (no dim) stays in PyTorch
    from expert_problems import problem
    assert recognize(problem("", "        return torch.argmax(x)\n", "[torch.randn(4, 5)]")).regions == ()


@pytest.mark.parametrize("name, op, dim, reverse, exclusive, n_in", [
    ("cumsum_rows", "cumsum", 1, False, False, 1), ("cumprod_dim0", "cumprod", 0, False, False, 1),
    ("cumsum_reverse", "cumsum", 1, True, False, 1), ("cumprod_reverse_mid", "cumprod", 1, True, False, 1),
    ("cumsum_exclusive", "cumsum", 1, False, True, 1), ("cumprod_exclusive_mid", "cumprod", 1, False, True, 1),
    ("cumsum_masked", "cumsum", 1, False, False, 2)])
def test_scans_reversed_exclusive_and_masked_are_one_region(name, op, dim, reverse, exclusive, n_in):
    rec = recognize(PROBLEMS[name])
    (region,) = rec.regions
    assert (region.kind, region.op, region.attrs["dim"]) == ("scan", op, dim)
    assert (region.attrs["reverse"], region.attrs["exclusive"], len(region.inputs)) == (reverse, exclusive, n_in)
    # the region ends at the value the forward returns (the flip back, the cat)
    assert rec.nodes[-1].op == "output" and region.output == rec.nodes[-2].name


def test_a_model_that_does_not_trace_gets_the_regions_of_its_submodules():
    rec = recognize(PROBLEMS["untraceable_loop"])
    assert rec.ok and rec.scoped
    assert [(r.scope, r.kind) for r in rec.regions] == [("cell", "pointwise"), ("cell", "gemm"),
                                                         ("norm", "layernorm"), ("head", "gemm")]
    # same node names in two submodules do not overlap: each GEMM replaces only its own epilogue
    library, triton = rec.alternatives()
    assert library == [0, 2] and triton == [1, 2, 3]
    # a forward with data-dependent control flow and no submodules stays unrecognized
    assert not recognize(PROBLEMS["data_dependent"]).ok


def test_a_whole_tensor_mean_folds_the_pointwise_region_before_it():
    rec = recognize(PROBLEMS["hinge_mean_int_targets"])
    (region,) = rec.regions
    assert (region.kind, region.op, region.attrs["reduction"]) == ("reduce_all", "mean", "mean")
    assert region.inputs == ("x", "t") and [p[0] for p in region.program] == ["mul", "sub", "clamp_min"]
    assert regions("mean_all") == [("reduce_all", "mean")]


def test_python_number_arguments_are_inputs_of_a_standalone_pointwise_kernel():
    rec = recognize(PROBLEMS["scalar_affine_int"])
    (region,) = rec.regions
    assert region.inputs == ("x", "a", "b") and region.attrs["scalars"] == 2
    # such a region is not fused into a GEMM's epilogue (the GEMM kernel reads tensors only)
    from expert_problems import HEAD
    source = HEAD + ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                     "        self.fc = nn.Linear(8, 4)\n"
                     "    def forward(self, x, s):\n        return self.fc(x) * s\n"
                     "def get_inputs():\n    return [torch.randn(3, 8), 2.0]\n"
                     "def get_init_inputs():\n    return []\n")
    rec = recognize(source)
    gemm = next(r for r in rec.regions if r.kind == "gemm")
    assert gemm.nodes == ("fc",) and any(r.kind == "pointwise" and "s" in r.inputs for r in rec.regions)


@pytest.mark.parametrize("name, op, groups, transposed", [
    ("conv3d_strided_pad", "conv3d", 1, False), ("conv2d_grouped_dilated", "conv2d", 3, False),
    ("conv_transpose1d_outpad", "conv_transpose1d", 1, True), ("conv_transpose2d_grouped", "conv_transpose2d", 2, True),
    ("conv_transpose3d_bias", "conv_transpose3d", 1, True)])
def test_3d_grouped_and_transposed_convolutions_are_general_conv_regions(name, op, groups, transposed):
    (region,) = recognize(PROBLEMS[name]).regions
    assert (region.kind, region.op, region.attrs["groups"], region.attrs["transposed"]) == ("conv", op, groups, transposed)
    assert region.attrs["general"]


def test_cross_entropy_against_class_indices_is_one_region():
    (region,) = recognize(PROBLEMS["cross_entropy_ignore"]).regions
    assert (region.kind, region.inputs, region.attrs["reduction"], region.attrs["ignore_index"]) == \
        ("xent", ("x", "t"), "mean", 2)
    (region,) = recognize(PROBLEMS["cross_entropy_module_sum"]).regions
    assert region.attrs["reduction"] == "sum"
    # label smoothing stays in PyTorch
    from expert_problems import HEAD
    source = HEAD + ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                     "    def forward(self, x, t):\n        return F.cross_entropy(x, t, label_smoothing=0.1)\n"
                     "def get_inputs():\n    return [torch.randn(4, 5), torch.randint(0, 5, (4,))]\n"
                     "def get_init_inputs():\n    return []\n")
    assert not recognize(source).regions


@pytest.mark.parametrize("name, trans_b, batch", [("einsum_4d_matrix", False, 1), ("einsum_transposed_b", True, 1),
                                                  ("einsum_batched", False, 6)])
def test_einsum_matrix_products_are_gemm_regions(name, trans_b, batch):
    gemm = next(r for r in recognize(PROBLEMS[name]).regions if r.kind == "gemm")
    assert (gemm.op, gemm.attrs["trans_b"], gemm.attrs["batch"]) == ("einsum", trans_b, batch)


def test_other_einsum_contractions_stay_in_pytorch():
    from expert_problems import HEAD
    for eq in ("ij,jk,kl->il", "ii->i", "bij,bkj->bik", "ij,kl->ijkl"):
        n = eq.count(",") + 1
        shapes = {"ij,jk,kl->il": "[torch.randn(3, 4), torch.randn(4, 5), torch.randn(5, 2)]",
                  "ii->i": "[torch.randn(4, 4)]", "bij,bkj->bik": "[torch.randn(2, 3, 4), torch.randn(2, 5, 4)]",
                  "ij,kl->ijkl": "[torch.randn(2, 3), torch.randn(4, 5)]"}[eq]
        args = ", ".join(f"a{i}" for i in range(n))
        source = HEAD + ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                         f"    def forward(self, {args}):\n        return torch.einsum('{eq}', {args})\n"
                         f"def get_inputs():\n    return {shapes}\n"
                         "def get_init_inputs():\n    return []\n")
        rec = recognize(source)
        assert rec.ok and not rec.regions, eq


def test_cosine_similarity_and_triplet_margin_are_row_pair_regions():
    rec = recognize(PROBLEMS["cosine_similarity_loss"])
    assert [(r.kind, r.op) for r in rec.regions] == [("rowpair", "cosine_similarity"), ("reduce_all", "mean")]
    (region,) = recognize(PROBLEMS["triplet_margin_module"]).regions
    assert (region.op, region.inputs, region.attrs["margin"], region.attrs["reduction"]) == \
        ("triplet_margin", ("a", "p", "n"), 0.5, "mean")
    (region,) = recognize(PROBLEMS["triplet_margin_func_sum"]).regions
    assert (region.attrs["margin"], region.attrs["reduction"]) == (2.0, "sum")


def test_scaled_dot_product_attention_is_one_region():
    (region,) = recognize(PROBLEMS["sdpa_causal_scaled"]).regions
    assert (region.kind, region.inputs, region.attrs["causal"], region.attrs["scale"], region.attrs["s"]) == \
        ("attention", ("q", "k", "v"), True, 0.3, 150)
    # a mask tensor stays in PyTorch
    from expert_problems import HEAD
    source = HEAD + ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                     "    def forward(self, q, k, v, m):\n"
                     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)\n"
                     "def get_inputs():\n    return [torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8),"
                     " torch.rand(5, 6) > 0.5]\n"
                     "def get_init_inputs():\n    return []\n")
    assert not any(r.kind == "attention" for r in recognize(source).regions)
