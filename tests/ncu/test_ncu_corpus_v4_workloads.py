"""The validation corpus v4 (benchmarks/ncu_corpus/validation_v4.md) before its capture: the
``eager_v4`` workloads are listed at both sizes, are families none of the earlier corpora
has, build and run on the CPU at their small size, and are sized past L2 (large) and far
inside it (small)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_ncu_corpus_v2_workloads import L2_BYTES, MAX_LARGE_BYTES, WORKLOADS, _bytes_created, _listed, _load

EARLIER = ("eager", "compiled", "template", "eager_v2", "compiled_v2", "eager_v3")
CAPTURE = Path(WORKLOADS).parent / "capture.py"


@pytest.fixture(scope="module")
def wl():
    return _load(WORKLOADS, "ncu_corpus_workloads_v4_test", {"KP_CORPUS_DEVICE": "cpu"})


def test_v4_is_listed_at_both_sizes_and_shares_no_family_with_earlier_corpora(wl):
    listed = _listed()
    assert listed["eager_v4"] == {f"{n}@{s}" for n in wl.EAGER_V4 for s in ("large", "small")}
    assert len(wl.EAGER_V4) >= 8
    earlier = {w.split("@")[0].removeprefix("tc2_").removeprefix("tc_").removeprefix("tpl_")
               for g in EARLIER for w in listed[g]}
    assert not earlier & set(wl.EAGER_V4)
    run = _load(Path(WORKLOADS).parents[3] / "benchmarks" / "ncu_corpus" / "run.py", "ncu_corpus_run_v4_test")
    assert run.GROUPS[-1] == "eager_v4"


@pytest.mark.parametrize("name", list(_load(WORKLOADS, "ncu_corpus_workloads_v4_names").EAGER_V4))
def test_every_eager_v4_workload_builds_and_runs_on_the_cpu_at_its_small_size(wl, name):
    import torch

    with torch.no_grad():
        out = wl._build("eager_v4", name, "small", None)()
    first = out[0] if isinstance(out, tuple) else out
    assert isinstance(first, torch.Tensor) and first.device.type == "cpu" and first.numel() > 0
    assert torch.isfinite(first.float()).all()


@pytest.mark.parametrize("name", list(_load(WORKLOADS, "ncu_corpus_workloads_v4_sizes").EAGER_V4))
def test_large_is_past_l2_and_small_far_inside_it(wl, monkeypatch, name):
    monkeypatch.setattr(wl, "DEVICE", "meta")
    spec = wl.EAGER_V4[name]
    try:
        large = _bytes_created(spec["make"], spec["sizes"]["large"])
        small = _bytes_created(spec["make"], spec["sizes"]["small"])
    except (NotImplementedError, RuntimeError) as exc:  # no meta kernel, or a data-dependent size
        pytest.skip(f"{name}: not measurable on the meta device: {str(exc)[:200]}")
    print(f"{name}: large {large / 1e6:.0f} MB, small {small / 1e6:.2f} MB")
    assert 3 * L2_BYTES <= large <= MAX_LARGE_BYTES and small <= 4e6


def _limits(value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KP_CORPUS_LIMIT_S"}
    if value is not None:
        env["KP_CORPUS_LIMIT_S"] = value
    probe = (f"import sys; sys.path.insert(0, {str(CAPTURE.parent)!r}); import capture; "
             "print(capture.limits('eager_v4'))")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)


def test_a_continuation_can_set_its_own_limits_and_bad_limits_are_one_line():
    assert _limits(None).stdout.strip() == "(150.0, 200.0)"
    assert _limits("220,280").stdout.strip() == "(220.0, 280.0)"
    for bad in ("220", "280,220", "a,b"):
        res = _limits(bad)
        assert res.returncode != 0 and "Traceback" not in res.stderr
        assert res.stderr.strip().startswith("error: KP_CORPUS_LIMIT_S"), res.stderr
