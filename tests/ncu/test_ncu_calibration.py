"""The calibration pairs (tools/capture/ncu_calibration/) and their benchmark, on the CPU:
the CUDA file builds, every launcher the Python side calls exists with the arguments it is
given, and the rank correlation is right."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CAL = REPO / "tools" / "capture" / "ncu_calibration"
BENCH = REPO / "benchmarks" / "ncu_calibration" / "run.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def pairs():
    return _load("kpc_pairs_test", CAL / "pairs.py")


@pytest.fixture(scope="module")
def bench():
    return _load("kpc_bench_test", BENCH)


def c_launchers() -> dict[str, int]:
    """Launcher name -> its number of parameters, the stream included, from pairs.cu."""
    text = (CAL / "pairs.cu").read_text()
    return {m.group(1): len(m.group(2).split(",")) for m in re.finditer(r"KPC (\w+)\(([^)]*)\)", text)}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_pairs_cu_builds_and_exports_every_launcher(tmp_path, pairs):
    lib = tmp_path / "libkpc.so"
    proc = subprocess.run(["nvcc", "-O3", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v",
                           str(CAL / "pairs.cu"), "-o", str(lib)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    for name in c_launchers():
        assert re.search(rf"\bT {name}$", symbols, re.M), name
    # the flaws are where the pairs say: the indexed mix spills to local memory, its rewrite does not
    info = proc.stderr
    spills = dict(re.findall(r"Compiling entry function '(\w+)'.*?\n\s+(\d+) bytes stack frame", info, re.S))
    assert int(next(v for k, v in spills.items() if "mix_indexed" in k)) > 0
    assert int(next(v for k, v in spills.items() if "mix_unrolled" in k)) == 0


class FakeLib:
    """Records each launcher call; returns 0 (cudaSuccess)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str):
        def fn(*args):
            self.calls.append((name, args))
            return 0
        return fn


def test_every_cuda_pair_calls_its_launcher_with_the_c_signature(pairs, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(multi_processor_count=4))
    arity = c_launchers()
    small = {"transpose_uncoalesced": [torch.zeros(64, 64)], "transpose_bank_conflicts": [torch.zeros(64, 64)],
             "gemm_tensor_cores": [torch.zeros(64, 64), torch.zeros(64, 64)],
             "tail_wave": [torch.zeros((2 * 4 + 8) * 8 * 1024)]}
    seen = set()
    for name, pair in pairs.PAIRS.items():
        for side in (pair.before, pair.after):
            if getattr(side, "__name__", "") in ("_gemm_tf32", "_eager_softmax", "_layer_norm", "_broadcast_add",
                                                 "_template_softmax") or name.endswith("_eager"):
                continue  # PyTorch, torch.compile or the expert's kernel: no launcher
            lib = FakeLib()
            side(lib, torch, *small.get(name, [torch.zeros(4096)]))
            assert len(lib.calls) == 1, name
            fn, args = lib.calls[0]
            assert fn in arity, f"{name}: {fn} is not in pairs.cu"
            assert len(args) == arity[fn], f"{name}: {fn} takes {arity[fn]} arguments, given {len(args)}"
            assert all(isinstance(a, (ctypes.c_void_p, ctypes.c_int, ctypes.c_long)) for a in args), name
            seen.add(fn)
    assert seen == set(arity) - set(), sorted(set(arity) - seen)


def test_pairs_name_micro_profilers_that_exist(pairs):
    from kernelpro.plugins import installed

    names = {m.name for m in installed().micro_profilers()}
    for pair in pairs.PAIRS.values():
        assert set(pair.acts_on) <= names, pair.name
    assert len(pairs.PAIRS) >= 10


def test_cli_list_and_unknown_pair():
    run = [sys.executable, str(CAL / "pairs.py")]
    out = subprocess.run(run + ["list"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "tail_wave: acts on tail_effect" in out.stdout
    bad = subprocess.run(run + ["time", "--lib", "x.so", "--out", "t.json", "--only", "nope"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: unknown pair(s): nope"


def test_spearman(bench):
    assert bench.ranks([3.0, 1.0, 2.0]) == [3.0, 1.0, 2.0]
    assert bench.ranks([0.0, 0.0, 1.0, 0.0]) == [2.0, 2.0, 4.0, 2.0]
    assert bench.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert bench.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert bench.spearman([0, 0, 0], [1, 2, 3]) is None
    # ties: x = (0, 0, 1, 2) ranks (1.5, 1.5, 3, 4); y = (1, 2, 3, 4)
    rx, ry = [1.5, 1.5, 3, 4], [1, 2, 3, 4]
    mx, my = sum(rx) / 4, sum(ry) / 4
    expect = sum((a - mx) * (b - my) for a, b in zip(rx, ry)) / (
        sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    assert bench.spearman([0, 0, 1, 2], [1, 2, 3, 4]) == pytest.approx(expect)


def test_benchmark_refuses_a_folder_that_is_not_a_capture(tmp_path):
    out = subprocess.run([sys.executable, str(BENCH), "--capture", str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().startswith(f"error: {tmp_path} is not a calibration capture (missing timings.json")
    assert "Traceback" not in out.stderr


def test_benchmark_joins_findings_and_times(tmp_path, bench):
    """A capture made of two corpus kernels renamed as the before sides of two pairs: the
    benchmark takes each before kernel's findings, the realized gain from the times, and
    reports the pairs it has no record of as errors."""
    import json

    corpus = REPO / "tests" / "ncu" / "corpus" / "h200"
    for kind in ("raw", "rules"):
        (tmp_path / f"pairs.{kind}.csv").write_text((corpus / f"eager.{kind}.csv").read_text())
    ranges = (corpus / "eager.ranges.csv").read_text()
    ranges = ranges.replace('"softmax_rows@large/', '"softmax_eager:before/').replace(
        '"layer_norm@large/', '"layer_norm_eager:before/').replace('"softmax_rows@small/', '"softmax_eager:after/')
    (tmp_path / "pairs.ranges.csv").write_text(ranges)
    timings = {"softmax_eager": {"before_ms": 2.0, "after_ms": 1.5, "realized_gain": 0.25, "agree": True},
               "layer_norm_eager": {"before_ms": 1.0, "after_ms": 0.9, "realized_gain": 0.1, "agree": True},
               "fma": {"before_ms": 1.0, "after_ms": 0.5, "realized_gain": 0.5, "agree": False, "max_abs_err": 3.0}}
    (tmp_path / "timings.json").write_text(json.dumps({"pairs": timings}))
    rows = {r["pair"]: r for r in bench.analyze(tmp_path)}
    soft, norm = rows["softmax_eager"], rows["layer_norm_eager"]
    assert soft["realized"] == 0.25 and norm["realized"] == 0.1
    assert "cunn_SoftMaxForward" in soft["kernel"]
    for r in (soft, norm):  # the estimate is the largest gain among the findings the rewrite acts on
        acting = [g for t, g in r["findings"].items() if t in r["acts_on"]]
        assert r["estimated"] == pytest.approx(max(acting, default=0.0), abs=1e-3)
        assert r["fired"] == bool(acting)
    assert soft["after_findings"] is not None  # the small softmax stands in for the after side
    assert rows["fma"]["error"].startswith("before and after disagree")
    assert rows["tail_wave"]["error"] == "not timed"
    s = bench.summarize(list(rows.values()))
    assert s["measured"] == 2 and s["pairs"] == len(rows)
    assert s["spearman_estimated"] is None  # two pairs are too few for a rank correlation


def test_estimated_gains_rank_like_the_realized_ones_on_the_h200_capture(bench):
    """The committed H200 capture of the 14 pairs (docs/validation/ncu_corpus.md, "Calibrated
    gains"): every pair measured and agreeing, the finding each rewrite acts on fires on each
    before kernel, and the estimates rank like the realized gains (in-sample: the estimators
    were adjusted on these pairs; 0.64 before, 0.97 now)."""
    capture = REPO / "tests" / "ncu" / "calibration" / "h200"
    rows = bench.analyze(capture)
    s = bench.summarize(rows)
    assert s["measured"] == 14 and not s["errors"]
    assert s["fired"] == 14
    assert s["spearman_estimated"] >= 0.95
    assert s["spearman_estimated_vs_ncu_times"] >= 0.95
    assert s["mean_abs_error"] <= 0.08


def test_estimated_gains_on_the_rewrites_of_corpus_kernels(bench):
    """The rewrites of corpus kernels (round 1), captured once on an H100 in session 30
    (docs/validation/ncu_corpus.md, "Session 30"): all 13 measured, outputs agreeing, the finding
    each acts on fires on each before kernel. Scored out of sample at ea7de56: Spearman 0.54
    (Nsight Compute's rules 0.33); the estimators' ``bound_share`` was then set from these pairs
    and the 14 above (in-sample from there: 0.74). Session 31 (after round 2's capture) gave
    issue_bound its memory-traffic form: in sample 0.85, mean absolute error 0.165 (0.136 before:
    the form's bound is the headroom to 80 % of the roofline, and these Triton rewrites reached
    52-61 % of the H100's)."""
    rows = bench.analyze(REPO / "tests" / "ncu" / "calibration" / "h100_corpus", pair_set="corpus")
    s = bench.summarize(rows)
    assert s["measured"] == 13 and not s["errors"]
    assert s["fired"] == 13
    assert s["spearman_estimated"] >= 0.8
    assert s["mean_abs_error"] <= 0.17
    # ncu's rules on the same before kernels rank them worse than ours
    assert s["spearman_ncu"] < s["spearman_estimated"]


def test_each_rewrite_of_a_corpus_kernel_is_in_the_set_of_its_round(pairs):
    """``--set corpus`` is round 1 (the 13 scored in session 30), ``--set corpus2`` the modules
    with ``ROUND = 2``, ``--set corpus3`` those with ``ROUND = 3``, ``--set corpus4`` those with
    ``ROUND = 4``; every rewrite is in exactly one."""
    sys.path.insert(0, str(CAL))
    import corpus_rewrites

    rounds = [set(pairs.SETS[s]()) for s in ("corpus", "corpus2", "corpus3", "corpus4")]
    one, two, three, four = rounds
    assert all(not a & b for i, a in enumerate(rounds) for b in rounds[i + 1:])
    assert one | two | three | four == set(corpus_rewrites.names())
    assert len(one) == 13 and len(two) == 6 and len(three) == 6 and len(four) >= 5
    for round_, names in ((2, two), (3, three), (4, four)):
        assert names == {n for n in corpus_rewrites.names() if getattr(corpus_rewrites.load(n), "ROUND", 1) == round_}


def test_a_bound_share_of_one_half_gives_the_estimates_scored_out_of_sample(bench, tmp_path):
    """The settings reproduce the estimators as they were when the rewrites were first scored
    (``bound_share`` 0.5, and issue_bound without its memory-traffic form of session 31)."""
    import yaml

    names = ("warp_stalls", "issue_slots", "issue_bound", "pipe_bound", "occupancy_gap")
    params: dict = {n: {"bound_share": 0.5} for n in names}
    cfg = tmp_path / "half.yaml"
    cfg.write_text(yaml.safe_dump({"profiling": {"micro_profiler_params": params}}))
    rows = bench.analyze(REPO / "tests" / "ncu" / "calibration" / "h100_corpus", cfg, pair_set="corpus")
    # the form alone moves it (the three pairs acting on issue_bound are memory-natured)
    assert bench.summarize(rows)["spearman_estimated"] == pytest.approx(0.511, abs=1e-3)
    params["issue_bound"]["memory_natured_sm_pct"] = 0.0
    cfg.write_text(yaml.safe_dump({"profiling": {"micro_profiler_params": params}}))
    rows = bench.analyze(REPO / "tests" / "ncu" / "calibration" / "h100_corpus", cfg, pair_set="corpus")
    assert bench.summarize(rows)["spearman_estimated"] == pytest.approx(0.544, abs=1e-3)


def test_the_second_round_of_rewrites_scored_out_of_sample(bench):
    """Round 2 (six rewrites written after ``bound_share`` changed, predictions recorded before
    the capture), captured on an H100 in session 31: five timed at first (``cummax``'s two outputs
    broke the timing harness), all six in a second call with the harness fixed; every acted-on
    finding fired. Out of sample, over the six, ours ranked them at 0.26 and ncu's rules at -0.09
    (over the first five: -0.1 and -0.6; docs/validation/ncu_corpus.md, "Session 31");
    the memory-traffic form of issue_bound came after and is not acted on by these rewrites."""
    rows = bench.analyze(REPO / "tests" / "ncu" / "calibration" / "h100_corpus2", pair_set="corpus2")
    s = bench.summarize(rows)
    ok = {r["pair"]: r for r in rows if "error" not in r}
    assert s["fired"] == s["measured"] >= 5
    assert all(r["after_ms"] < r["before_ms"] for r in ok.values())
    # the realized gains, 18-99 %, are the record's; they do not depend on the estimators
    assert ok["cdist_p1"]["realized"] > 0.95 and 0.1 < ok["max_pool3d"]["realized"] < 0.3
    # the memory-traffic form names the four data-movement kernels the SM keeps busy
    for name in ("depthwise_conv2d", "roll_cols", "max_pool3d", "adaptive_avg_pool2d"):
        assert "issue_bound" in ok[name]["findings"], name


def _split_capture(src: Path, dst: Path, first: set[str]) -> None:
    """``src``'s one ncu group written as two, ``pairs_1`` holding the kernels of the pairs in
    ``first`` and ``pairs_2`` the rest, each numbered from 0 as a separate ncu run numbers them."""
    import csv
    import io
    import json

    ranges = list(csv.reader(io.StringIO((src / "pairs.ranges.csv").read_text())))
    i_id, i_name = ranges[0].index("ID"), ranges[0].index("Kernel Name")
    group_of = {r[i_id]: ("pairs_1" if r[i_name].split(":", 1)[0] in first else "pairs_2")
                for r in ranges[1:] if r[i_id].strip().isdigit()}
    new_id: dict[str, str] = {}
    for group in ("pairs_1", "pairs_2"):
        for n, old in enumerate(sorted((k for k, g in group_of.items() if g == group), key=int)):
            new_id[old] = str(n)
    for part in ("raw", "ranges", "rules"):
        rows = list(csv.reader(io.StringIO((src / f"pairs.{part}.csv").read_text())))
        for group in ("pairs_1", "pairs_2"):
            buf = io.StringIO()
            w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
            for r in rows:
                if not (r and r[0].strip().isdigit()):
                    w.writerow(r)  # the header and units rows
                elif group_of[r[0]] == group:
                    w.writerow([new_id[r[0]]] + r[1:])
            (dst / f"{group}.{part}.csv").write_text(buf.getvalue())
    (dst / "timings.json").write_text(json.dumps(json.loads((src / "timings.json").read_text())))


def test_a_capture_profiled_in_chunks_scores_as_one_profiled_at_once(tmp_path, bench, pairs):
    """The capture profiles the pairs in chunks, one ncu run each (so that a run stopped at its
    limit keeps the chunks it finished): the H200 capture split that way scores as before, a
    missing chunk's pairs are reported as not profiled, and the benchmark's command line takes
    the split folder."""
    import json

    capture = REPO / "tests" / "ncu" / "calibration" / "h200"
    names = list(pairs.SETS["calibration"]())
    _split_capture(capture, tmp_path, set(names[:6]))
    assert not (tmp_path / "pairs.raw.csv").exists()
    whole, split = bench.analyze(capture), bench.analyze(tmp_path)
    assert split == whole
    out = subprocess.run([sys.executable, str(BENCH), "--capture", str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["measured"] == 14
    for part in ("raw", "ranges", "rules"):  # the second ncu run cut off at the limit: no report
        (tmp_path / f"pairs_2.{part}.csv").unlink()
    rows = {r["pair"]: r for r in bench.analyze(tmp_path)}
    assert [n for n in names if "error" not in rows[n]] == names[:6]
    assert {rows[n]["error"] for n in names[6:]} == {"before kernel not profiled"}
    # a group whose rules export is missing is not a capture: one line, no traceback
    (tmp_path / "pairs_1.rules.csv").unlink()
    bad = subprocess.run([sys.executable, str(BENCH), "--capture", str(tmp_path)], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "missing pairs_1.rules.csv" in bad.stderr and "Traceback" not in bad.stderr


def test_profile_groups_cover_every_pair_once(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setenv("OUT", str(tmp_path))  # the module reads $OUT and makes its stage when loaded
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spec = importlib.util.spec_from_file_location("kpc_capture_test", CAL / "capture.py")
    assert spec is not None and spec.loader is not None
    cap = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cap)
    names = [f"p{i}" for i in range(13)]
    assert cap.profile_groups(names, 0) == [("pairs", names)]
    assert cap.profile_groups(names, 13) == [("pairs", names)]
    groups = cap.profile_groups(names, 5)
    assert [g for g, _ in groups] == ["pairs_1", "pairs_2", "pairs_3"]
    assert [n for _, chunk in groups for n in chunk] == names and [len(c) for _, c in groups] == [5, 5, 3]


_FAKE_NCU = r'''#!/usr/bin/env python3
import os, sys, time
argv = sys.argv[1:]
if "--version" in argv:
    print("Version 2025.3.1.0 (fake)"); sys.exit(0)
if "--query-metrics" in argv:
    sys.exit(0)  # no list: the capture asks for every metric
if "--import" in argv:
    page = argv[argv.index("--page") + 1]
    print(open(os.path.join(os.environ["FAKE_CSV_DIR"], "pairs." + ("rules" if page == "details" else
          ("ranges" if "--print-nvtx-rename" in argv else "raw")) + ".csv")).read())
    sys.exit(0)
only = argv[argv.index("--only") + 1].split(",")
if os.environ["FAKE_SLOW_PAIR"] in only:
    time.sleep(120)
open(argv[argv.index("-o") + 1] + ".ncu-rep", "w").write("fake report")
'''


@pytest.mark.slow
def test_a_capture_cut_at_its_profiling_limit_keeps_the_groups_it_finished(tmp_path):
    """The capture's control flow on the CPU, with a stand-in ncu: three groups of five pairs;
    the second one's ncu run outlasts the limit, so it writes no report and the third is not
    started; the archive holds the first group's exports and says what became of each."""
    import json
    import os
    import tarfile

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text(_FAKE_NCU)
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'Fake GPU, 0.0, 1980 MHz, 2619 MHz, 700.00 W'\n")
    for tool in ("ncu", "nvidia-smi"):
        (bin_dir / tool).chmod(0o755)
    details = tmp_path / "csv"
    details.mkdir()
    capture = REPO / "tests" / "ncu" / "calibration" / "h200"
    for part in ("raw", "ranges"):
        (details / f"pairs.{part}.csv").write_text((capture / f"pairs.{part}.csv").read_text())
    # the details page as ncu prints it: the rule rows are what the capture keeps from it
    (details / "pairs.rules.csv").write_text((capture / "pairs.rules.csv").read_text())
    names = subprocess.run([sys.executable, str(CAL / "pairs.py"), "list", "--set", "corpus"], capture_output=True,
                           text=True, timeout=300).stdout.splitlines()
    names = [n.split(":", 1)[0] for n in names]
    assert len(names) > 10
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OUT": str(out),
           "KPC_SET": "corpus", "KPC_TIME_LIMIT_S": "120", "KPC_PROFILE_LIMIT_S": "20", "KPC_CHUNK": "5",
           "FAKE_CSV_DIR": str(details), "FAKE_SLOW_PAIR": names[6], "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(CAL / "capture.py")], capture_output=True, text=True, timeout=600,
                          env=env)
    # exit 1: on the CPU the timing fails at once (no CUDA device), so there are no timings
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    with tarfile.open(out / "ncu_calibration_corpus.tar.gz") as t:
        t.extractall(tmp_path / "x", filter="data")
    got = tmp_path / "x" / "ncu_calibration_corpus"
    groups = json.loads((got / "env.json").read_text())["profile_groups"]
    assert groups == {"pairs_1": {"pairs": names[:5], "profiled": True},
                      "pairs_2": {"pairs": names[5:10], "profiled": False},
                      "pairs_3": {"pairs": names[10:], "profiled": False}}
    assert sorted(p.name for p in got.glob("*.csv")) == ["pairs_1.ranges.csv", "pairs_1.raw.csv",
                                                          "pairs_1.rules.csv"]
    assert "<stopped at the limit of 20 s>" in (got / "pairs_2.log").read_text()
    assert not (got / "timings.json").exists() and "CUDA" in (got / "time.log").read_text()


def test_timings_are_on_disk_after_each_pair(tmp_path, pairs, monkeypatch):
    """``pairs.py time`` writes its file after each pair: a timing stopped after the first
    pair leaves that pair's result, marked incomplete; one that ends marks it complete."""
    import json

    out = tmp_path / "timings.json"
    names = list(pairs.SETS["corpus"]())[:2]

    def stopped(lib, names, reps, set_pairs=None, on_pair=None):
        on_pair({names[0]: {"before_ms": 2.0, "after_ms": 1.0}})
        raise KeyboardInterrupt  # as a limit's kill would stop it, after the first pair

    monkeypatch.setattr(pairs, "time_pairs", stopped)
    monkeypatch.setattr(sys, "argv", ["pairs.py", "time", "--set", "corpus", "--only", ",".join(names),
                                      "--out", str(out)])
    with pytest.raises(KeyboardInterrupt):
        pairs.main()
    got = json.loads(out.read_text())
    assert got["complete"] is False and list(got["pairs"]) == [names[0]]

    def ended(lib, names, reps, set_pairs=None, on_pair=None):
        done = {}
        for n in names:
            done[n] = {"before_ms": 2.0, "after_ms": 1.0}
            on_pair(done)
        return done

    monkeypatch.setattr(pairs, "time_pairs", ended)
    assert pairs.main() == 0
    got = json.loads(out.read_text())
    assert got["complete"] is True and list(got["pairs"]) == names
    assert not list(tmp_path.glob("*.tmp"))


def test_the_third_round_of_rewrites_and_the_l2_cap(bench):
    """Round 3 (six rewrites listing every finding whose action they carry out, predictions
    recorded before the capture), captured on an H100 in session 31: all six timed and agreeing;
    out of sample ours ranked them at -0.43 and ncu's rules at 0.20. Two gathers whose L2 was at
    91-98 % ran slower; the L2 cap came from them (in sample from there: 0.94)."""
    rows = bench.analyze(REPO / "tests" / "ncu" / "calibration" / "h100_corpus3", pair_set="corpus3")
    s = bench.summarize(rows)
    assert s["measured"] == s["fired"] == 6 and not s["errors"]
    ok = {r["pair"]: r for r in rows}
    assert ok["searchsorted"]["realized"] < -0.2 and ok["grid_sample_bilinear"]["realized"] < -0.1
    assert s["spearman_estimated"] >= 0.9
    for name in ("searchsorted", "grid_sample_bilinear"):
        assert ok[name]["estimated"] <= 0.1, ok[name]
    assert s["spearman_ncu"] < s["spearman_estimated"]


def test_every_measured_pair_together(bench):
    """The 39 pairs of the four captures (session 11's on the H200, the three rounds of corpus
    rewrites on an H100), scored together: Spearman 0.77 after round 3's change, 0.54 before it.
    Round 4 (``corpus4``) is not among them: these are the captures of rounds 1 to 3."""
    sets = [("calibration", REPO / "tests" / "ncu" / "calibration" / "h200")] + [
        (name, bench.CAPTURE_CORPUS[name]) for name in ("corpus", "corpus2", "corpus3")]
    rows = [r for name, path in sets for r in bench.analyze(path, pair_set=name) if "error" not in r]
    assert len(rows) == 39
    rho = bench.spearman([r["estimated"] for r in rows], [r["realized"] for r in rows])
    assert rho is not None and rho >= 0.75
    ncu = bench.spearman([r["ncu"] for r in rows], [r["realized"] for r in rows])
    assert ncu is not None and ncu < 0.3


def test_the_fourth_round_of_rewrites_scored_out_of_sample(bench):
    """Round 4 (five rewrites written after the L2 cap, predictions recorded before the capture),
    captured on an H200 in session 31: all five timed and agreeing, every listed finding fired;
    out of sample ours -0.60, ncu's rules 0.10 (docs/validation/ncu_corpus.md, "Round 4"). Nothing
    was changed after it; this holds the record's numbers."""
    rows = bench.analyze(bench.CAPTURE_CORPUS["corpus4"], pair_set="corpus4")
    s = bench.summarize(rows)
    assert s["measured"] == s["fired"] == 5 and not s["errors"]
    ok = {r["pair"]: r for r in rows}
    assert ok["kthvalue_rows"]["realized"] < 0.05 and ok["pdist"]["realized"] > 0.9
    assert s["spearman_estimated"] == pytest.approx(-0.6, abs=1e-6)
