"""The validation corpora v3 to v7 (benchmarks/ncu_corpus/validation_v3.md to _v7.md) before
their capture: each group's workloads are listed at both sizes, are families no earlier corpus has, build and run on the CPU at their small size, and are sized
past L2 (large) and far inside it (small); a capture that ran out of time continues with the
families it did not reach, under limits of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_ncu_corpus_v2_workloads import L2_BYTES, MAX_LARGE_BYTES, WORKLOADS, _bytes_created, _listed, _load

CAPTURE = Path(WORKLOADS).parent / "capture.py"
#: group -> (its table in workloads.py, the least number of families, the groups before it)
LATER = {
    "eager_v3": ("EAGER_V3", 12, ("eager", "compiled", "template", "eager_v2", "compiled_v2")),
    "eager_v4": ("EAGER_V4", 8, ("eager", "compiled", "template", "eager_v2", "compiled_v2", "eager_v3")),
    "eager_v5": ("EAGER_V5", 8, ("eager", "compiled", "template", "eager_v2", "compiled_v2", "eager_v3",
                                 "eager_v4")),
    "eager_v6": ("EAGER_V6", 8, ("eager", "compiled", "template", "eager_v2", "compiled_v2", "eager_v3",
                                 "eager_v4", "eager_v5")),
    "eager_v7": ("EAGER_V7", 8, ("eager", "compiled", "template", "eager_v2", "compiled_v2", "eager_v3",
                                 "eager_v4", "eager_v5", "eager_v6")),
}
#: families with no meta kernel whose large size fits the test machine: measured on the CPU
#: (real tensors, a second or so) instead of skipped (a CSR product has no SparseCsrMeta kernel)
MEASURED_ON_CPU = {"spmm_csr"}
_NAMES = _load(WORKLOADS, "ncu_corpus_workloads_later_names")
FAMILIES = [(group, name) for group, (table, _, _) in LATER.items() for name in getattr(_NAMES, table)]


@pytest.fixture(scope="module")
def wl():
    return _load(WORKLOADS, "ncu_corpus_workloads_later_test", {"KP_CORPUS_DEVICE": "cpu"})


@pytest.mark.parametrize("group", list(LATER))
def test_each_is_listed_at_both_sizes_and_shares_no_family_with_earlier_corpora(wl, group, tmp_path):
    table_name, least, earlier_groups = LATER[group]
    table = getattr(wl, table_name)
    listed = _listed()
    assert listed[group] == {f"{n}@{s}" for n in table for s in ("large", "small")}
    assert len(table) >= least
    earlier = {w.split("@")[0].removeprefix("tc2_").removeprefix("tc_").removeprefix("tpl_")
               for g in earlier_groups for w in listed[g]}
    assert not earlier & set(table)
    # the run script reads the group, after the earlier ones: by its list of groups, or (a group
    # it does not name yet) after every group it names
    run = _load(Path(WORKLOADS).parents[3] / "benchmarks" / "ncu_corpus" / "run.py", f"ncu_corpus_run_{group}_test")
    if group in run.GROUPS:
        assert run.GROUPS.index(group) > max(run.GROUPS.index(g) for g in earlier_groups if g in run.GROUPS)
    else:
        for g in (*earlier_groups, group):
            (tmp_path / f"{g}.raw.csv").write_text("")
        assert run.groups(tmp_path)[-1] == group


@pytest.mark.parametrize("group,name", FAMILIES)
def test_every_workload_builds_and_runs_on_the_cpu_at_its_small_size(wl, group, name):
    import torch

    with torch.no_grad():
        out = wl._build(group, name, "small", None)()
    first = out[0] if isinstance(out, tuple) else out
    assert isinstance(first, torch.Tensor) and first.device.type == "cpu" and first.numel() > 0
    assert torch.isfinite(first.abs() if first.is_complex() else first.float()).all()


@pytest.mark.parametrize("group,name", FAMILIES)
def test_large_is_past_l2_and_small_far_inside_it(wl, monkeypatch, group, name):
    if name == "sdpa_bf16":
        # on the meta device attention takes the math path, which materializes the scores
        # (12 GB at the large size); on the GPU the flash kernel keeps q, k, v and the output
        # (4 x 67 MB) and a row statistic
        pytest.skip("sdpa_bf16: the meta device does not run the kernel the GPU runs")
    monkeypatch.setattr(wl, "DEVICE", "meta")
    spec = getattr(wl, LATER[group][0])[name]
    try:
        large = _bytes_created(spec["make"], spec["sizes"]["large"])
        small = _bytes_created(spec["make"], spec["sizes"]["small"])
    except (NotImplementedError, RuntimeError) as exc:  # no meta kernel, or a data-dependent size
        if name not in MEASURED_ON_CPU:
            pytest.skip(f"{name}: not measurable on the meta device: {str(exc)[:200]}")
        monkeypatch.setattr(wl, "DEVICE", "cpu")
        large = _bytes_created(spec["make"], spec["sizes"]["large"])
        small = _bytes_created(spec["make"], spec["sizes"]["small"])
    print(f"{name}: large {large / 1e6:.0f} MB, small {small / 1e6:.2f} MB")
    assert 3 * L2_BYTES <= large <= MAX_LARGE_BYTES and small <= 4e6


def test_a_capture_can_continue_with_the_families_it_did_not_reach(wl):
    rest = "cdist_p1,rfft_rows,sdpa_bf16,mv_fp32,dropout_train,searchsorted,nonzero"
    picked = wl.selected("eager_v3", rest)
    assert [n for n, _ in picked][::2] == rest.split(",") and len(picked) == 14
    assert wl.selected("eager_v3", None) == wl.workloads("eager_v3")
    with pytest.raises(SystemExit, match="names no workload of eager_v3: rfft"):
        wl.selected("eager_v3", "rfft, roll_cols")


def _limits(value: str | None, group: str = "eager_v4") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KP_CORPUS_LIMIT_S"}
    if value is not None:
        env["KP_CORPUS_LIMIT_S"] = value
    probe = (f"import sys; sys.path.insert(0, {str(CAPTURE.parent)!r}); import capture; "
             f"print(capture.limits({group!r}))")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)


def test_a_continuation_can_set_its_own_limits_and_bad_limits_are_one_line():
    assert _limits(None).stdout.strip() == "(150.0, 200.0)"
    assert _limits("220,280").stdout.strip() == "(220.0, 280.0)"
    for bad in ("220", "280,220", "a,b"):
        res = _limits(bad)
        assert res.returncode != 0 and "Traceback" not in res.stderr
        assert res.stderr.strip().startswith("error: KP_CORPUS_LIMIT_S"), res.stderr


@pytest.mark.parametrize("group", list(LATER))
def test_every_group_has_limits_of_its_own(group):
    # the capture command a validation_v*.md gives needs no KP_CORPUS_LIMIT_S
    res = _limits(None, group)
    assert res.returncode == 0 and res.stdout.strip().startswith("("), res.stderr
