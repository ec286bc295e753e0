"""The validation corpus v2 (benchmarks/ncu_corpus/validation_v2.md) before its capture: the
``eager_v2`` and ``compiled_v2`` workloads of tools/capture/ncu_corpus/workloads.py are
listed, build and run on the CPU at their small size, stay within the memory they were
sized for at their large size, compile without graph breaks, and
benchmarks/ncu_corpus/run.py scores a corpus directory holding groups it finds by file."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "tools" / "capture" / "ncu_corpus" / "workloads.py"
RUN = REPO / "benchmarks" / "ncu_corpus" / "run.py"
CORPUS = REPO / "tests" / "ncu" / "corpus" / "h200"
V2_GROUPS = ("eager_v2", "compiled_v2")
OLD_GROUPS = ("eager", "compiled", "template")
L2_BYTES = 50e6  # the H200's L2
MAX_LARGE_BYTES = 1.5e9


def _load(path: Path, name: str, env: dict[str, str] | None = None) -> Any:
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return mod


@pytest.fixture(scope="module")
def wl():
    mod = _load(WORKLOADS, "ncu_corpus_workloads_v2_test", {"KP_CORPUS_DEVICE": "cpu"})
    assert mod.DEVICE == "cpu"  # read from KP_CORPUS_DEVICE
    return mod


def _listed() -> dict[str, set[str]]:
    """``workloads.py list``: group -> its ``<name>@<size>`` lines."""
    out = subprocess.run([sys.executable, str(WORKLOADS), "list"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    listed: dict[str, set[str]] = {}
    for line in out.splitlines():
        group, workload = line.split()
        listed.setdefault(group, set()).add(workload)
    return listed


def test_list_names_every_v2_workload_at_both_sizes_and_none_collides_with_the_first_corpus(wl):
    listed = _listed()
    assert set(OLD_GROUPS + V2_GROUPS) <= set(listed)  # and later corpora (v3)
    assert len(wl.EAGER_V2) >= 20 and len(wl.COMPILED_V2) >= 6
    assert set(wl.COMPILED_V2) <= set(wl.EAGER_V2)
    expected = {"eager_v2": {f"{n}@{s}" for n in wl.EAGER_V2 for s in ("large", "small")},
                "compiled_v2": {f"tc2_{n}@{s}" for n in wl.COMPILED_V2 for s in ("large", "small")}}
    for group in V2_GROUPS:
        assert listed[group] == expected[group]
        assert all(set(spec["sizes"]) == {"large", "small"} for spec in wl.TABLES[group][0].values())
    old = {w.split("@")[0] for g in OLD_GROUPS for w in listed[g]}
    new = {w.split("@")[0] for g in V2_GROUPS for w in listed[g]}
    assert not old & new
    assert len(new) == len(wl.EAGER_V2) + len(wl.COMPILED_V2)  # eager_v2 and tc2_ names differ too
    # no v2 family is an old family under another prefix (tc_, tpl_)
    bare_old = {n.removeprefix("tc_").removeprefix("tpl_") for n in old}
    assert not bare_old & set(wl.EAGER_V2)


def test_the_first_corpus_groups_are_unchanged(wl):
    assert [n for n, _ in wl.workloads("eager")][:2] == ["softmax_rows", "softmax_rows"]
    assert len(wl.workloads("eager")) == 38 and len(wl.workloads("compiled")) == 16
    assert len(wl.workloads("template")) == 12
    assert all(n.startswith("tc_") for n, _ in wl.workloads("compiled"))


@pytest.mark.parametrize("name", list(_load(WORKLOADS, "ncu_corpus_workloads_v2_names").EAGER_V2))
def test_every_eager_v2_workload_builds_and_runs_on_the_cpu_at_its_small_size(wl, name):
    import torch

    try:
        call = wl._build("eager_v2", name, "small", None)
        with torch.no_grad():
            out = call()
    except (RuntimeError, NotImplementedError) as exc:
        if "not implemented for" in str(exc):
            pytest.skip(f"{name}: torch {torch.__version__} has no CPU kernel for it: {str(exc)[:200]}")
        raise
    first = out[0] if isinstance(out, tuple) else out
    assert isinstance(first, torch.Tensor) and first.device.type == "cpu"
    assert torch.isfinite(first.float()).all()


def _bytes_created(make: Any, sizes: tuple[Any, ...]) -> float:
    """Bytes of every tensor storage the builder and one call create, on the meta device (no
    memory; on the CPU for a family without meta kernels): inputs, intermediates, output, a
    sparse CSR tensor (which has no storage of its own) by its row offsets, column indices
    and values. An op's own scratch inside one ATen call is not seen (CUDA's mse_loss writes
    its elementwise loss before reducing it)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Storages(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.nbytes: dict[int, int] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if not isinstance(t, torch.Tensor):
                    continue
                parts = (t.crow_indices(), t.col_indices(), t.values()) if t.layout == torch.sparse_csr else (t,)
                for part in parts:
                    st = part.untyped_storage()
                    self.nbytes[st._cdata] = st.nbytes()
            return out

    mode = Storages()
    with mode, torch.no_grad():
        make(torch, *sizes)()
    return float(sum(mode.nbytes.values()))


def test_large_sizes_are_past_l2_and_within_the_memory_they_were_sized_for(wl, monkeypatch):
    monkeypatch.setattr(wl, "DEVICE", "meta")
    sizes = {}
    for name, spec in wl.EAGER_V2.items():
        try:
            large = _bytes_created(spec["make"], spec["sizes"]["large"])
            small = _bytes_created(spec["make"], spec["sizes"]["small"])
        except NotImplementedError as exc:  # an op without a meta kernel in this torch
            pytest.skip(f"{name}: no meta kernel: {str(exc)[:200]}")
        sizes[name] = (large, small)
    print("\n" + "\n".join(f"{n:22s} large {l / 1e6:7.0f} MB  small {s / 1e6:6.2f} MB"
                           for n, (l, s) in sizes.items()))
    too_big = {n: l for n, (l, _) in sizes.items() if l > MAX_LARGE_BYTES}
    in_l2 = {n: l for n, (l, _) in sizes.items() if l < 3 * L2_BYTES}
    not_small = {n: s for n, (_, s) in sizes.items() if s > 4e6}  # far inside L2
    assert not too_big and not in_l2 and not not_small, (too_big, in_l2, not_small)


def test_compiled_v2_workloads_compile_to_one_graph(wl):
    """Dynamo only (no Inductor code generation on the CPU): a graph break would split the
    Triton kernels of the GPU capture into several graphs with eager ops between them."""
    import torch

    for name, spec in wl.COMPILED_V2.items():
        torch._dynamo.reset()
        explained = torch._dynamo.explain(spec["make"](torch, *spec["sizes"]["small"]))()
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), (name, explained.break_reasons)
    torch._dynamo.reset()


# ---- run.py on a corpus of other groups


def _copy_group(src_group: str, dst: Path, dst_group: str, rename: str = "") -> None:
    """``<src_group>.{raw,ranges,rules}.csv`` of the H200 corpus as ``<dst_group>.*`` in dst;
    ``rename`` prefixes every workload name in the NVTX-renamed export."""
    dst.mkdir(parents=True, exist_ok=True)
    for part in ("raw", "rules"):
        shutil.copy(CORPUS / f"{src_group}.{part}.csv", dst / f"{dst_group}.{part}.csv")
    ranges = (CORPUS / f"{src_group}.ranges.csv").read_text()
    if rename:
        rows = list(csv.reader(ranges.splitlines()))
        i_name = rows[0].index("Kernel Name")
        for r in rows[1:]:
            if len(r) > i_name and "/" in r[i_name]:
                r[i_name] = rename + r[i_name]
        with (dst / f"{dst_group}.ranges.csv").open("w", newline="") as f:
            csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    else:
        (dst / f"{dst_group}.ranges.csv").write_text(ranges)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUN), *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def run_mod():
    return _load(RUN, "ncu_corpus_run_v2_test")


def test_run_finds_groups_by_their_files_in_the_old_order_first(run_mod, tmp_path):
    assert run_mod.groups(CORPUS) == ["eager", "compiled", "template"]
    for g in ("zeta", "compiled_v2", "eager_v2", "template", "eager"):
        (tmp_path / f"{g}.raw.csv").write_text("")
    assert run_mod.groups(tmp_path) == ["eager", "template", "eager_v2", "compiled_v2", "zeta"]
    assert run_mod.groups(tmp_path / "none") == []


def test_run_scores_a_corpus_of_an_eager_v2_group(run_mod, tmp_path):
    _copy_group("eager", tmp_path, "eager_v2")
    rows = run_mod.analyze(tmp_path, 10.0)
    whole = run_mod.analyze(CORPUS, 10.0)
    eager = [r for r in whole if r["group"] == "eager"]
    assert len(rows) == len(eager) > 0
    assert {r["group"] for r in rows} == {"eager_v2"}
    strip = ("group",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in rows] == \
        [{k: v for k, v in r.items() if k not in strip} for r in eager]
    proc = _run("--corpus", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["kernels"] == len(rows) and "tuning_half" in printed  # these workloads are in split.json


def test_a_corpus_not_in_the_split_is_all_validation_and_has_no_halves(run_mod, tmp_path):
    _copy_group("eager", tmp_path, "eager_v2", rename="v2probe_")
    _copy_group("compiled", tmp_path, "compiled_v2", rename="v2probe_")
    rows = run_mod.analyze(tmp_path, 10.0)
    assert [r["group"] for r in rows][0] == "eager_v2" and {r["group"] for r in rows} == set(V2_GROUPS)
    assert all(r["workload"].startswith("v2probe_") for r in rows)
    assert {r["half"] for r in rows} == {"validation"}

    proc = _run("--corpus", str(tmp_path), "--markdown", str(tmp_path / "out.md"))
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["half"] == "validation" and printed["kernels"] == len(rows)
    assert not any(k.endswith("_half") for k in printed)
    table = [ln for ln in (tmp_path / "out.md").read_text().splitlines() if "v2probe_" in ln]
    assert len(table) == len(rows) and all(ln.startswith("| V |") for ln in table)

    for half in ("tuning", "held_out"):
        proc = _run("--corpus", str(tmp_path), "--half", half)
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1 and "not in split.json" in proc.stderr


def test_run_says_in_one_line_when_a_directory_holds_no_corpus(tmp_path):
    proc = _run("--corpus", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: no corpus at {tmp_path} (expected <group>.raw.csv files)"]
