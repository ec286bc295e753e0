"""Correctness of the rendered Triton kernels, run by Triton's interpreter on the CPU.

The interpreter needs TRITON_INTERPRET=1 before triton is first imported, so the checks
run in a subprocess (check_candidates.py) with that variable set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

pytest.importorskip("triton", reason="triton is not installed: kernels are only rendered and parsed")

CASES = ["elementwise_chain", "bias_gelu", "softmax", "softmax_dim0", "log_softmax", "logsumexp", "layernorm",
         "rmsnorm", "rmsnorm_module", "gemm_bias_relu", "conv_relu", "reduction_sum", "reduction_mean_row",
         "reduction_max", "global_avg_pool", "amax_last_two", "split_softmax", "split_log_softmax",
         "split_logsumexp", "split_layernorm", "split_rmsnorm", "split_sum", "split_max", "gemm_div_sum_scale",
         "relu_max_col", "scale_softmax_tanh", "split_scale_layernorm", "linear_mean_half",
         # Triton GEMM with fused epilogue (fp32 ieee and tf32x3, fp16, batched, strided operands)
         "linear_relu_odd", "linear3d_sigmoid", "addmm_scale", "linear_residual_clone", "gemm_fp16_tanh",
         "bmm_add", "matmul_transposed_both", "two_gemms_relu",
         # pooling
         "pooling", "max_pool1d_dilated", "max_pool2d_ceil", "max_pool3d", "avg_pool1d_pad",
         "avg_pool2d_nopad_count", "avg_pool2d_divisor", "avg_pool3d", "tanh_bias_max_pool", "scale_avg_pool3d_bias",
         "param_add_max_pool1d",
         "dwconv2d_bias_relu", "dwconv1d_nobias", "dwconv3d",
         "avg_pool1d_long_rows", "dwconv2d_wide_rows", "max_pool1d_long_rows", "tanh_max_pool1d_long_rows",
         "dwconv2d_valid_wide_rows", "avg_pool2d_long_rows_nopad_count",
         # dense convolutions as implicit GEMMs (fp32 ieee and tf32x3, moved tiles)
         "conv1d_dilated_strided", "conv2d_stride_pad_min", "conv2d_valid_dilated",
         # full reductions (losses)
         "kl_div_log", "kl_div_log_target_sum", "log_softplus_chain",
         "mse_loss_scaled", "l1_loss_sum", "smooth_l1_beta", "huber_delta",
         # instance norm (no affine) as a layer norm over the spatial dims
         "instance_norm2d", "instance_norm1d_relu",
         # argmax / argmin over one dim (int64 indices: exact)
         "argmax_mid", "argmin_ties_keepdim", "argmax_long_rows", "argmin_dim0",
         # scans: inclusive, reversed, exclusive, masked; rows and inner dims
         "cumsum_rows", "cumsum_long_rows", "cumprod_dim0", "cumsum_reverse", "cumprod_reverse_mid",
         "cumsum_exclusive", "cumprod_exclusive_mid", "cumsum_masked",
         # a model that does not trace as a whole: its traceable submodules lowered in place
         "untraceable_loop",
         # every element to one value (broadcast int / float targets); Python-number and
         # integer-tensor operands of pointwise kernels
         "hinge_mean_int_targets", "hinge_mean_col_targets", "sum_of_squares", "mean_all",
         "scalar_times_matrix", "scalar_affine_int", "int_tensor_half",
         # batch norm (training mode here), group norm, affine instance norm
         "batch_norm2d", "batch_norm1d_relu", "group_norm3d", "group_norm_func_no_affine",
         "instance_norm2d_affine_gelu", "instance_norm2d_affine",
         # 3-D, grouped and transposed convolutions (implicit GEMMs per group)
         "conv3d_strided_pad", "conv2d_grouped_dilated", "conv_transpose1d_outpad", "conv_transpose2d_grouped",
         "conv_transpose3d_bias", "grouped_conv_multiplier2",
         # convolutions run channels-last, with the kernels after them
         "conv2d_bias_tanh_pool", "conv2d_bias_residual", "conv_transpose3d_scale_clamp", "conv3d_group_norm_relu",
         "untraceable_conv_loop",
         # convolutions whose bias the kernel after them adds: a reduction over channels, a pool,
         # a reduction over positions, a softmax over channels; a per-row parameter before a sum
         "conv_transpose2d_min_tanh", "conv_transpose3d_avg_pool", "conv2d_amax_hw", "conv3d_softmax_channels",
         "param_bias_sum_rows", "param_bias_sum_dim0", "conv_relu_linear", "conv2d_avg_pool_ceil",
         "conv3d_max_pool_dilated", "conv3d_min_depth", "conv2d_sum_chw",
         # cross-entropy against class indices
         "cross_entropy_ignore", "cross_entropy_module_sum",
         # einsum contractions that are matrix products (Triton GEMM)
         "einsum_4d_matrix", "einsum_transposed_b", "einsum_batched",
         # row statistics of two or three inputs (cosine similarity, triplet margin loss)
         "cosine_similarity_loss", "triplet_margin_module", "triplet_margin_func_sum",
         # scaled dot-product attention (online softmax; causal, L != S, scale)
         "sdpa_plain", "sdpa_causal_scaled", "sdpa_causal_square"]
# the evaluator's tolerances per output dtype (relative to the output's magnitude here)
GEMM_CASES = ("linear_relu_odd", "linear3d_sigmoid", "addmm_scale", "linear_residual_clone", "bmm_add",
              "matmul_transposed_both", "bias_gelu", "gemm_bias_relu", "gemm_div_sum_scale", "two_gemms_relu",
              "conv_relu", "conv1d_dilated_strided", "conv2d_stride_pad_min", "conv2d_valid_dilated",
              "untraceable_loop", "conv3d_strided_pad", "conv2d_grouped_dilated", "conv_transpose1d_outpad",
              "conv_transpose2d_grouped", "conv_transpose3d_bias", "grouped_conv_multiplier2", "einsum_4d_matrix",
              "einsum_transposed_b")
CHANNELS_LAST_CASES = ("conv_relu", "conv2d_stride_pad_min", "conv2d_valid_dilated", "conv3d_strided_pad",
                       "conv_transpose3d_bias", "conv2d_bias_tanh_pool", "conv2d_bias_residual",
                       "conv_transpose3d_scale_clamp", "conv3d_group_norm_relu", "untraceable_conv_loop",
                       "conv_transpose2d_min_tanh", "conv_transpose3d_avg_pool", "conv2d_amax_hw",
                       "conv3d_softmax_channels", "conv_relu_linear", "conv2d_avg_pool_ceil", "conv3d_max_pool_dilated",
                       "conv3d_min_depth", "conv2d_sum_chw")
# a convolution with a bias whose output only a lowered kernel reads: that kernel adds the bias (fold);
# not offered where the add would be a kernel of its own (conv3d_group_norm_relu: a norm after the
# convolution)
FOLD_CASES = ("conv_relu", "conv2d_bias_tanh_pool", "conv_transpose3d_scale_clamp", "conv_transpose3d_avg_pool",
              "conv_transpose2d_min_tanh", "conv2d_amax_hw", "conv3d_softmax_channels", "conv_relu_linear",
              "conv2d_avg_pool_ceil", "conv3d_max_pool_dilated", "conv3d_min_depth",
              "conv2d_sum_chw")
# a reduction or softmax whose prologue reads a tensor that varies along one dim (the fold's bias, a parameter)
# (the value per program, by the reduced index, or by each element's flat index)
CHANNEL_PROLOGUE_CASES = {"conv_transpose2d_min_tanh": "reduced", "conv2d_amax_hw": "outer",
                          "conv3d_softmax_channels": "reduced", "param_bias_sum_rows": "outer",
                          "param_bias_sum_dim0": "flat"}
# a reduction, softmax or pool reading a channels-last convolution's output: read in place (its strided or
# channels-last form), never copied back to the default layout first
STRIDED_CASES = ("conv2d_stride_pad_min", "conv_transpose2d_min_tanh", "conv2d_amax_hw", "conv3d_softmax_channels",
                 "conv2d_bias_tanh_pool", "conv_transpose3d_avg_pool", "conv2d_avg_pool_ceil", "conv3d_max_pool_dilated",
                 "conv3d_min_depth", "conv2d_sum_chw")
# a pointwise region right after the convolution: written in the default layout by the tiled kernel
TILED_CASES = ("conv_relu", "conv2d_bias_residual", "conv_transpose3d_scale_clamp", "untraceable_conv_loop",
               "conv_relu_linear")
CASES_PER_RUN = 24
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2, "int64": 0.0}


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ, TRITON_INTERPRET="1")
    rows = []
    for start in range(0, len(CASES), CASES_PER_RUN):  # several runs: each within its time limit
        proc = subprocess.run([sys.executable, str(Path(__file__).parent / "check_candidates.py"),
                               *CASES[start:start + CASES_PER_RUN]],
                              capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows += [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {(r["name"], r["variant"]): r for r in rows}


@pytest.mark.parametrize("name", CASES)
def test_candidate_matches_reference(results, name):
    rows = [r for (n, _), r in results.items() if n == name]
    assert rows, f"no result for {name}"
    for r in rows:
        # a channels-last candidate of a lone convolution lowers no region
        assert r["lowered"] == r["regions"] >= (0 if r["layout"] else 1), r
        assert r["shape_ok"] and r["layout_ok"], r
        # fp32 accumulation: relative to the output's magnitude (sums of 20000 values reach ~500)
        assert r["max_abs_err"] <= TOLERANCE[r["dtype"]] * max(1.0, r["max_abs_ref"]), r
        if r["strided_err"] is not None:  # a second call, other strides
            assert r["strided_err"] <= TOLERANCE[r["dtype"]] * max(1.0, 2 * r["max_abs_ref"]), r
    if name in GEMM_CASES:  # the library GEMM + epilogue, the Triton GEMM in both precisions, moved tiles
        gemm_rows = [r for r in rows if any("BLOCK_M" in t for rid, t in r["tiles"].items())]
        assert len(gemm_rows) >= 4, rows
    if name in ("elementwise_chain", "bias_gelu"):  # a persistent grid-stride variant ran too
        assert any(t.get("PER_SM") for r in rows for t in r["tiles"].values()), rows
    if name in ("gemm_div_sum_scale", "linear_mean_half"):  # the GEMM-sum rewrite ran and matched
        assert [r for r in rows if r["rewrite"]], rows
    if name == "elementwise_chain":  # one launch plan per input layout: two calls, two layouts
        assert rows[0]["plans"] == 2, rows[0]
    if name.startswith("split_"):
        assert "CHUNK" in rows[0]["tiles"]["r0"], rows[0]
    # every 2-D or 3-D convolution of groups 1 that stays in the library also ran channels-last
    layout_rows = [r for r in rows if r["layout"]]
    if name in CHANNELS_LAST_CASES:
        assert layout_rows and all(r["channels_last_convs"] == 1 for r in layout_rows), rows
        assert all(bool(r["tiled_plans"]) == (name in TILED_CASES) for r in layout_rows), rows
        assert all((r["strided_reads"] > 0) == (name in STRIDED_CASES) and not r["strided_fallbacks"]
                   for r in layout_rows), rows
        if name in FOLD_CASES:  # the fold with the convolutions channels-last too
            assert any(r["fold"] for r in layout_rows), rows
    else:
        assert not layout_rows, rows
    if name in CHANNEL_PROLOGUE_CASES:  # the per-channel tensor loaded in the kernel, no split-row form
        assert any(r["channel_prologue"] == CHANNEL_PROLOGUE_CASES[name] for r in rows), rows
    fold_rows = [r for r in rows if r["fold"]]
    if name in FOLD_CASES:
        assert fold_rows and all(r["unbiased_convs"] >= 1 for r in fold_rows), rows
    else:
        assert not fold_rows, rows


def test_batch_norm_candidate_follows_the_module_mode():
    """Training calls (batch statistics, the running-statistics update with a momentum and
    cumulative), then eval mode (running statistics), against PyTorch's module; eval mode
    alone on both forms of its affine kernel (by planes, flattened), prologue and epilogue
    fused."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, str(Path(__file__).parent / "check_batch_norm_modes.py")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert errs["lowered"] == 5, errs  # one region each: the prologue and epilogue fused into it
    assert errs["train_out"] <= 1e-5 and errs["running"] <= 1e-5 and errs["eval_out"] <= 1e-5, errs
    assert set(errs["eval_paths"]) == {"planes", "flat", "flat_3d"}, errs
    assert all(e <= 1e-5 for e in errs["eval_paths"].values()), errs
