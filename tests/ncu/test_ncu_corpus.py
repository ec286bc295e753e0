"""The micro-profilers over the committed corpus of real H200 kernels (PyTorch, torch.compile
and template kernels under ncu's full set): coverage and agreement with ncu's rules must not
drop below what docs/validation/ncu_corpus.md records, on the whole corpus and on the
held-out half (benchmarks/ncu_corpus/split.json) that no threshold was tuned on."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "ncu" / "corpus" / "h200"
BENCH = REPO / "benchmarks" / "ncu_corpus"

# recorded in docs/validation/ncu_corpus.md: raise these as the micro-profilers improve.
# 2026-12-02 the held-out half was measured once (60.5 %); since the calibration pairs
# (2026-12-03) both halves are tuning data and corpus v2 is the validation set.
MIN_KERNELS = 80
MIN_COVERAGE = 1.0  # 53 of 53
MIN_RECALL = 0.75  # 304 of 405 (session 14; 291 in session 13)
MIN_COVERAGE_HELD_OUT = 1.0  # 25 of 25
MIN_RECALL_HELD_OUT = 0.71  # 140 of 195 (session 14; 129 before)
# kernels at their roofline get at_roofline's finding only
MAX_AT_ROOFLINE_WITH_OTHERS = 0


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"ncu_corpus_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def corpus_run():
    mod = _load("run")
    rows = mod.analyze(CORPUS, 10.0)
    return rows, mod.summarize(rows), mod.summarize([r for r in rows if r["half"] == "held_out"])


def test_every_corpus_kernel_is_read_named_and_in_one_half(corpus_run):
    rows, summary, held_out = corpus_run
    assert summary["kernels"] >= MIN_KERNELS
    assert all(r["workload"] != "?" for r in rows)
    assert {r["group"] for r in rows} == {"eager", "compiled", "template"}
    assert all(r["bottleneck"] is not None for r in rows)
    assert {r["half"] for r in rows} == {"tuning", "held_out"}
    assert 0.4 <= held_out["kernels"] / summary["kernels"] <= 0.6


def test_split_is_the_one_drawn():
    split = _load("split")
    rec = split.load()
    again = split.deal({f: v["stratum"] for f, v in rec["families"].items()},
                       {f: v["kernels"] for f, v in rec["families"].items()})
    assert again == {f: v["half"] for f, v in rec["families"].items()}
    # an operation's variants share a side
    assert split.family("tc_cross_entropy@large") == split.family("softmax_rows@small") == "softmax_rows"


def test_kernels_below_their_roofline_get_advice(corpus_run):
    _rows, summary, held_out = corpus_run
    assert summary["coverage"] >= MIN_COVERAGE, summary["uncovered"]
    assert held_out["coverage"] >= MIN_COVERAGE_HELD_OUT, held_out["uncovered"]


def test_agreement_with_nsight_compute_rules_does_not_drop(corpus_run):
    _rows, summary, held_out = corpus_run
    assert summary["ncu_results"] > 100 and held_out["ncu_results"] > 50
    assert summary["recall"] >= MIN_RECALL, summary["recall_by_rule"]
    assert held_out["recall"] >= MIN_RECALL_HELD_OUT, held_out["recall_by_rule"]


def test_kernels_at_their_roofline_get_little_else(corpus_run):
    _rows, summary, _held_out = corpus_run
    assert summary["at_roofline"] > 0
    assert len(summary["at_roofline_with_other_findings"]) <= MAX_AT_ROOFLINE_WITH_OTHERS, \
        summary["at_roofline_with_other_findings"]


# the second corpus (other operator families, fixed before its capture), measured once at
# a69fff1 (docs/validation/ncu_corpus.md, "Validation corpus v2")
CORPUS_V2 = REPO / "tests" / "ncu" / "corpus" / "h200_v2"
MIN_KERNELS_V2 = 78
MIN_COVERAGE_V2 = 1.0  # 61 of 61
MIN_RECALL_V2 = 0.79  # 301 of 378 (session 14; 287 in session 13)


def test_second_corpus_coverage_and_agreement_do_not_drop():
    mod = _load("run")
    rows = mod.analyze(CORPUS_V2, 10.0)
    s = mod.summarize(rows)
    assert s["kernels"] >= MIN_KERNELS_V2
    assert {r["group"] for r in rows} == {"eager_v2", "compiled_v2"}
    assert {r["half"] for r in rows} == {"validation"}
    assert s["coverage"] >= MIN_COVERAGE_V2, s["uncovered"]
    assert s["recall"] >= MIN_RECALL_V2, s["recall_by_rule"]
    assert not s["at_roofline_with_other_findings"], s["at_roofline_with_other_findings"]


# the third corpus (validation_v3.md, fixed before its capture), measured once at de561b2:
# coverage 30 of 30, recall 57 of 105; then occupancy_limiter was made to speak at 50 %
# theoretical occupancy too (73 of 105), so v3 is tuning data from that change on
CORPUS_V3 = REPO / "tests" / "ncu" / "corpus" / "h200_v3"
MIN_RECALL_V3 = 0.77  # 81 of 105 (session 14; 78 in session 13)


def test_third_corpus_coverage_and_agreement_do_not_drop():
    mod = _load("run")
    rows = mod.analyze(CORPUS_V3, 10.0)
    s = mod.summarize(rows)
    assert s["kernels"] == 30 and {r["group"] for r in rows} == {"eager_v3"}
    assert s["coverage"] == 1.0, s["uncovered"]
    assert s["recall"] >= MIN_RECALL_V3, s["recall_by_rule"]
    assert not s["at_roofline_with_other_findings"], s["at_roofline_with_other_findings"]


# v3's seven families its first capture did not reach (v3b) and corpus v4 (validation_v4.md,
# fixed before session 13 changed any micro-profiler), captured once on the H200 and scored
# once at 77b34a0 (docs/validation/ncu_corpus.md, "Corpora v3b and v4"): out of sample there.
CORPUS_V3B = REPO / "tests" / "ncu" / "corpus" / "h200_v3b"
CORPUS_V4 = REPO / "tests" / "ncu" / "corpus" / "h200_v4"
# v4's two families that capture did not reach (conv3d, max_pool3d: v4b), captured in call BI
# and scored once at 12e084c (micro-profilers as at ee08511)
CORPUS_V4B = REPO / "tests" / "ncu" / "corpus" / "h200_v4b"
# corpus v5 (validation_v5.md, fixed in session 14 before any change), captured once in
# session 16 and scored once at 5594804 (ncu_corpus.md, "Validation corpus v5")
CORPUS_V5 = REPO / "tests" / "ncu" / "corpus" / "h200_v5"
# corpus v6 (validation_v6.md, fixed in session 17 before any capture), captured once in
# session 18 (call BR) and scored once at 775cfb0 (ncu_corpus.md, "Validation corpus v6")
CORPUS_V6 = REPO / "tests" / "ncu" / "corpus" / "h200_v6"
# corpus v7 (validation_v7.md, fixed in session 28 before any capture; no micro-profiler or
# classifier change since session 18), captured once in session 30 on an H100 and scored once
# at ea7de56 (ncu_corpus.md, "Session 30")
CORPUS_V7 = REPO / "tests" / "ncu" / "corpus" / "h100_v7"


@pytest.mark.parametrize("corpus,kernels,min_covered,below,min_recall", [
    # tuning data since session 14 (the floors follow its changes; the first scores in comments)
    (CORPUS_V3B, 22, 18, 18, 0.84),  # scored once: 18 of 18, 89 of 113; 96 of 113 in session 14
    (CORPUS_V4, 91, 84, 84, 0.79),  # scored once: 83 of 84, 328 of 466; 84 since pipe_bound; 371 in session 14
    (CORPUS_V4B, 10, 9, 9, 0.88),  # scored once: 9 of 9, 39 of 45; 40 in session 14
    (CORPUS_V5, 22, 18, 18, 0.77),  # scored once: 18 of 18, 92 of 119
    (CORPUS_V6, 24, 21, 21, 0.81),  # scored once: 21 of 21, 88 of 108
    (CORPUS_V7, 18, 15, 15, 0.86),  # scored once: 15 of 15, 72 of 83
], ids=["v3b", "v4", "v4b", "v5", "v6", "v7"])
def test_out_of_sample_corpora_coverage_and_agreement_do_not_drop(corpus, kernels, min_covered, below, min_recall):
    mod = _load("run")
    rows = mod.analyze(corpus, 10.0)
    s = mod.summarize(rows)
    assert s["kernels"] == kernels and {r["half"] for r in rows} == {"validation"}
    assert s["below_60pct"] == below and s["covered"] >= min_covered, s["uncovered"]
    assert s["recall"] >= min_recall, s["recall_by_rule"]
    # v4 found two kernels (PyTorch's reduction inside index_put, memory-bound at 77 % of the
    # DRAM roofline, partial stores using 4 of 32 bytes) where uncoalesced_global speaks beside
    # at_roofline: a memory-bound kernel keeps that finding by design (its wasted sectors count
    # in the DRAM fraction). Open (ncu_corpus.md, "Corpora v3b and v4"); no new such kernel
    others = [x.rsplit(": ", 1)[0] for x in s["at_roofline_with_other_findings"]]
    assert all(x.startswith("index_put_acc@large void native::reduce_kernel") for x in others), others


def test_a_miss_is_called_a_disagreement_only_where_the_kernels_numbers_show_the_advice_cannot_pay():
    from kernelpro_plugins_ncu import metrics as M
    from ncu_helpers import kernel

    run = _load("run")
    occ = {"rule": "TheoreticalOccupancy", "matched": False}
    # one block per SM allowed by registers; a grid of 132 blocks on 132 SMs never needs two
    grid_bound = kernel("k", **{M.LIMIT_REGISTERS: 1, M.LIMIT_WARPS: 2, M.GRID_SIZE: 132, M.SM_COUNT: 132})
    assert run.disagreement(occ, grid_bound, {"small_grid"}, 132.0) == "grid-bound"
    # 264 blocks: two per SM wanted, one allowed: the limiter binds, the miss is ours
    binding = kernel("k", **{M.LIMIT_REGISTERS: 1, M.LIMIT_WARPS: 2, M.GRID_SIZE: 264, M.SM_COUNT: 132})
    assert run.disagreement(occ, binding, {"warp_stalls"}, 132.0) is None
    # without the SM count in the report, the GPU's
    no_sms = kernel("k", **{M.LIMIT_REGISTERS: 1, M.GRID_SIZE: 100})
    assert run.disagreement(occ, no_sms, set(), 132.0) == "grid-bound"
    assert run.disagreement(occ, no_sms, set(), None) is None
    # at the roofline any miss is the issue's rule; a matched result is no disagreement
    stall = {"rule": "CPIStall", "matched": False}
    assert run.disagreement(stall, binding, {"at_roofline"}, 132.0) == "at roofline"
    assert run.disagreement(stall, binding, {"warp_stalls"}, 132.0) is None
    assert run.disagreement({**stall, "matched": True}, binding, {"at_roofline"}, 132.0) is None
    # ncu's partial-wave estimate is 1 / (full waves + 1) however full the last wave is: with
    # 1.94 waves the last one holds 94 % of a wave, 3 % of the SM time idles in it
    wave = {"rule": "LaunchConfiguration", "matched": False,
            "message": "A wave of thread blocks is defined as the maximum number of blocks ..."}
    assert run.disagreement(wave, kernel("k", **{M.WAVES_PER_SM: 1.94}), {"warp_stalls"}, 132.0) == "tail nearly full"
    # a last wave of 29 %: 36 % idle, tail_effect's to name (its miss is ours)
    assert run.disagreement(wave, kernel("k", **{M.WAVES_PER_SM: 1.29}), {"warp_stalls"}, 132.0) is None
    # an FFMA needs a multiply and an add: a kernel of adds alone (an L1 distance) has none to fuse
    fp = {"rule": "FPInstructions", "matched": False}
    adds = kernel("k", **{M.FADD: 1.05e11, M.FMUL: 0.0, M.FFMA: 0.0})
    assert run.disagreement(fp, adds, {"issue_bound"}, 132.0) == "nothing to fuse"
    pairs = kernel("k", **{M.FADD: 8.5e8, M.FMUL: 3.4e8, M.FFMA: 1.2e9})
    assert run.disagreement(fp, pairs, {"issue_bound"}, 132.0) is None
    # the grid-too-small form of the same rule is never this disagreement
    few = {**wave, "message": "The grid for this launch is configured to execute only 4 blocks ..."}
    assert run.disagreement(few, kernel("k", **{M.WAVES_PER_SM: 1.94}), set(), 132.0) is None


def test_the_summary_reports_recall_with_and_without_disagreements_side_by_side():
    run = _load("run")
    s = run.summarize(run.analyze(CORPUS_V4B, 10.0))
    assert s["recall"] == pytest.approx(40 / 45)
    assert s["disagreements"] == {"grid-bound": 2}
    assert s["recall_without_disagreements"] == pytest.approx(40 / 43)
    # v4b: of 45 results 40 are named; the other 5 are 3 of the disputed L2-compression rule
    # and 2 grid-bound ones, so every result that is neither is named
    assert s["recall_without_disputes_and_disagreements"] == pytest.approx(1.0)


def test_recall_ceiling_and_plain_misses_are_counted_from_the_results():
    run = _load("run")

    def result(rule, matched, disagreement=None):
        return {"rule": rule, "matched": matched, "disagreement": disagreement}
    disputed = next(iter(run.DISPUTED))
    rows = [{"roofline_fraction": 0.3, "findings": [], "workload": "w", "kernel": "k", "ncu_rules": [
        result("CPIStall", True), result("CPIStall", False, "at roofline"), result(disputed, False),
        result("TheoreticalOccupancy", False, "grid-bound"), result("WorkloadImbalance", False),
        result(disputed, False, "at roofline")]}]
    s = run.summarize(rows)
    # at the roofline (2, one of them also disputed) and disputed (1 more): 3 of 6 cannot be named
    assert s["recall_ceiling"] == pytest.approx(0.5)
    assert s["plain_misses"] == 1  # the grid-bound one has its reason; WorkloadImbalance has none


def test_every_corpus_scored_together():
    """``--all`` scores the union of the committed corpora (session 30: 375 kernels, 1,822 ncu
    results >= 10 %, 1,445 named, 29 plain misses; recall's ceiling under the at-roofline rule
    87.6 %): the plain misses, the ones with no argued reason, must not grow."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(BENCH / "run.py"), "--all"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    dirs = [d for d in (REPO / "tests" / "ncu" / "corpus").iterdir() if d.is_dir()]
    run = _load("run")
    assert s["kernels"] == sum(len(run.analyze(d, 10.0)) for d in dirs) >= 375
    assert s["plain_misses"] <= 29 and s["matched"] >= 1445
    both = subprocess.run([sys.executable, str(BENCH / "run.py"), "--all", "--corpus", str(CORPUS)],
                          capture_output=True, text=True, timeout=60)
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "--all" in both.stderr
