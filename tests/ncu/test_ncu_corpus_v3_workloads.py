"""The validation corpus v3 (benchmarks/ncu_corpus/validation_v3.md) before its capture: the
``eager_v3`` workloads are listed at both sizes, are families neither earlier corpus has,
build and run on the CPU at their small size, and are sized past L2 (large) and far inside
it (small)."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_ncu_corpus_v2_workloads import L2_BYTES, MAX_LARGE_BYTES, WORKLOADS, _bytes_created, _listed, _load

EARLIER = ("eager", "compiled", "template", "eager_v2", "compiled_v2")


@pytest.fixture(scope="module")
def wl():
    return _load(WORKLOADS, "ncu_corpus_workloads_v3_test", {"KP_CORPUS_DEVICE": "cpu"})


def test_v3_is_listed_at_both_sizes_and_shares_no_family_with_earlier_corpora(wl):
    listed = _listed()
    assert listed["eager_v3"] == {f"{n}@{s}" for n in wl.EAGER_V3 for s in ("large", "small")}
    assert len(wl.EAGER_V3) >= 12
    earlier = {w.split("@")[0].removeprefix("tc2_").removeprefix("tc_").removeprefix("tpl_")
               for g in EARLIER for w in listed[g]}
    assert not earlier & set(wl.EAGER_V3)
    # the run script reads the group (and orders it after the earlier ones)
    run = _load(Path(WORKLOADS).parents[3] / "benchmarks" / "ncu_corpus" / "run.py", "ncu_corpus_run_v3_test")
    assert "eager_v3" in run.GROUPS


@pytest.mark.parametrize("name", list(_load(WORKLOADS, "ncu_corpus_workloads_v3_names").EAGER_V3))
def test_every_eager_v3_workload_builds_and_runs_on_the_cpu_at_its_small_size(wl, name):
    import torch

    with torch.no_grad():
        out = wl._build("eager_v3", name, "small", None)()
    first = out[0] if isinstance(out, tuple) else out
    assert isinstance(first, torch.Tensor) and first.device.type == "cpu" and first.numel() > 0
    assert torch.isfinite(first.abs() if first.is_complex() else first.float()).all()


@pytest.mark.parametrize("name", list(_load(WORKLOADS, "ncu_corpus_workloads_v3_sizes").EAGER_V3))
def test_large_is_past_l2_and_small_far_inside_it(wl, monkeypatch, name):
    if name == "sdpa_bf16":
        # on the meta device attention takes the math path, which materializes the scores
        # (12 GB at the large size); on the GPU the flash kernel keeps q, k, v and the output
        # (4 x 67 MB) and a row statistic
        pytest.skip("sdpa_bf16: the meta device does not run the kernel the GPU runs")
    monkeypatch.setattr(wl, "DEVICE", "meta")
    spec = wl.EAGER_V3[name]
    try:
        large = _bytes_created(spec["make"], spec["sizes"]["large"])
        small = _bytes_created(spec["make"], spec["sizes"]["small"])
    except (NotImplementedError, RuntimeError) as exc:  # no meta kernel, or a data-dependent size
        pytest.skip(f"{name}: not measurable on the meta device: {str(exc)[:200]}")
    print(f"{name}: large {large / 1e6:.0f} MB, small {small / 1e6:.2f} MB")
    assert 3 * L2_BYTES <= large <= MAX_LARGE_BYTES and small <= 4e6


def test_a_capture_can_continue_with_the_families_it_did_not_reach(wl):
    rest = "cdist_p1,rfft_rows,sdpa_bf16,mv_fp32,dropout_train,searchsorted,nonzero"
    picked = wl.selected("eager_v3", rest)
    assert [n for n, _ in picked][::2] == rest.split(",") and len(picked) == 14
    assert wl.selected("eager_v3", None) == wl.workloads("eager_v3")
    with pytest.raises(SystemExit, match="names no workload of eager_v3: rfft"):
        wl.selected("eager_v3", "rfft, roll_cols")
