"""The rewrites of corpus kernels (``tools/capture/ncu_calibration/corpus_rewrites``) before
any GPU time: each names a corpus kernel below 60 % of its roofline and micro-profilers that
gave a finding on it, runs the corpus workload's own size, computes what the PyTorch
operation computes (Triton's interpreter, small size) and compiles for sm_90."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools" / "capture" / "ncu_calibration"))
import corpus_rewrites  # noqa: E402

from test_ncu_corpus_v2_workloads import WORKLOADS, _load  # noqa: E402

CHECK = Path(__file__).with_name("corpus_rewrite_check.py")
NAMES = corpus_rewrites.names()
FIELDS = ("CORPUS", "WORKLOAD", "KERNEL", "ACTS_ON", "ACTION", "SIZES", "RTOL", "ATOL", "inputs", "before", "after")


@pytest.fixture(scope="module")
def scored():
    """Every corpus the rewrites name, scored by the corpus benchmark (our findings per kernel)."""
    run = _load(REPO / "benchmarks" / "ncu_corpus" / "run.py", "ncu_corpus_run_rewrites")
    rows = {}
    for corpus in sorted({corpus_rewrites.load(n).CORPUS for n in NAMES}):
        rows[corpus] = run.analyze(REPO / "tests" / "ncu" / "corpus" / corpus, 10.0)
    return rows


@pytest.fixture(scope="module")
def workloads_module():
    return _load(WORKLOADS, "ncu_corpus_workloads_rewrites", {"KP_CORPUS_DEVICE": "cpu"})


def test_there_are_rewrites_to_calibrate_with():
    assert len(NAMES) >= 1


@pytest.mark.parametrize("name", NAMES)
def test_a_rewrite_names_a_corpus_kernel_below_its_roofline_and_findings_on_it(name, scored, workloads_module):
    mod = corpus_rewrites.load(name)
    missing = [f for f in FIELDS if not hasattr(mod, f)]
    assert not missing, f"{name}: missing {missing}"
    assert mod.WORKLOAD.endswith("@large") and set(mod.SIZES) == {"large", "small"}
    kernels = [r for r in scored[mod.CORPUS] if r["workload"] == mod.WORKLOAD and mod.KERNEL in r["kernel"]]
    assert len(kernels) == 1, (mod.WORKLOAD, mod.KERNEL, [r["kernel"] for r in scored[mod.CORPUS]
                                                          if r["workload"] == mod.WORKLOAD])
    k = kernels[0]
    assert k["roofline_fraction"] is not None and k["roofline_fraction"] < 0.6, k["roofline_fraction"]
    tools = {f["tool"] for f in k["findings"] if f["action"]}
    assert mod.ACTS_ON and set(mod.ACTS_ON) <= tools, (mod.ACTS_ON, tools)
    # the corpus workload's own size
    family = mod.WORKLOAD.split("@")[0]
    tables = [t for t, prefix in workloads_module.TABLES.values() if not prefix and family in t]
    assert len(tables) == 1 and tuple(tables[0][family]["sizes"]["large"]) == tuple(mod.SIZES["large"])


def _run(args: list[str], interpret: bool) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, str(CHECK), *args], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("name", NAMES)
def test_a_rewrite_computes_what_the_operation_computes(name):
    (row,) = _run(["check", name], interpret=True)
    assert row["agree"], row
    # a rewrite that also writes the kernel's second output (a max pool's indices) writes PyTorch's
    assert row.get("indices_agree", True), row


@pytest.mark.parametrize("name", NAMES)
def test_a_rewrite_compiles_for_sm90(name):
    rows = _run(["compile", name], interpret=False)
    assert rows and all(r["cubin_bytes"] > 0 for r in rows), rows


def test_the_calibration_tools_take_the_rewrites_as_a_set_of_pairs():
    pairs = _load(REPO / "tools" / "capture" / "ncu_calibration" / "pairs.py", "kpc_pairs_rewrites_test")
    # rounds 1 to 4 (``--set corpus``, ``corpus2``, ``corpus3``, ``corpus4``) together are every
    # rewrite, each once
    rounds = [pairs.SETS[s]() for s in ("corpus", "corpus2", "corpus3", "corpus4")]
    corpus = {k: v for r in rounds for k, v in r.items()}
    assert sum(len(r) for r in rounds) == len(corpus)
    assert sorted(corpus) == NAMES and set(pairs.SETS["calibration"]()) == set(pairs.PAIRS)
    for name, pair in corpus.items():
        mod = corpus_rewrites.load(name)
        io = pairs.io_bytes(pair, 132)  # the forward's bytes, worked out on the meta device
        xs = mod.inputs(__import__("torch"), "meta", *mod.SIZES["large"])
        assert io["input_bytes"] == sum(x.numel() * x.element_size() for x in xs) > 0
        assert io["output_bytes"] > 0 and pair.acts_on == tuple(mod.ACTS_ON)


@pytest.mark.parametrize("name", NAMES)
def test_the_timing_harness_compares_what_the_operation_returns(name):
    # ``pairs.py time`` compares before and after on the GPU before timing them; an operation
    # with several outputs (``cummax``: values and indices) is compared output by output, and a
    # changed output or a missing one is a disagreement
    import torch

    pairs = _load(REPO / "tools" / "capture" / "ncu_calibration" / "pairs.py", "kpc_pairs_compare_test")
    mod = corpus_rewrites.load(name)
    torch.manual_seed(0)
    ref = mod.before(torch, *mod.inputs(torch, "cpu", *mod.SIZES["small"]))
    same = tuple(r.clone() for r in ref) if isinstance(ref, tuple) else ref.clone()
    assert pairs._compare(torch, ref, same, 0.0, 0.0) == (0.0, True)
    first = ref[0] if isinstance(ref, tuple) else ref
    changed = first.clone()
    changed[(0,) * changed.dim()] += 1
    other = (changed, *ref[1:]) if isinstance(ref, tuple) else changed
    err, agree = pairs._compare(torch, ref, other, 0.0, 0.0)
    assert not agree and err >= 0.5
    if isinstance(ref, tuple):
        assert pairs._compare(torch, ref, ref[:-1], 0.0, 0.0)[1] is False
