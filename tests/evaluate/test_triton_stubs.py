"""Triton's cuda_utils module built once per host and copied into each candidate's cache
(kernelpro.evaluate.triton_stubs): the store is built by a process of KernelPro's own, once;
copies (never links) land in a candidate's cache by their key, without replacing what is
there; a build that fails leaves nothing to copy and is not tried again by the process."""

from __future__ import annotations

import os

import pytest

from kernelpro.evaluate import triton_stubs

SO = "cuda_utils.cpython-311-x86_64-linux-gnu.so"


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(triton_stubs, "_FAILED", {})
    monkeypatch.setattr(triton_stubs, "triton_version", lambda: "9.9.9")


def _fake_build(monkeypatch, body: str, calls: list[int]):
    real_run = triton_stubs.subprocess.run

    def run(argv, **kw):
        calls.append(1)
        return real_run([argv[0], "-c", body], **kw)

    monkeypatch.setattr(triton_stubs.subprocess, "run", run)


def test_built_once_then_copied_by_key(tmp_path, monkeypatch, fresh):
    calls: list[int] = []
    _fake_build(monkeypatch, "import os, pathlib\n"
                f"d = pathlib.Path(os.environ['TRITON_CACHE_DIR']) / 'KEY1'\nd.mkdir(parents=True)\n"
                f"(d / '{SO}').write_bytes(b'module')\n"
                "assert os.environ['CUDA_VISIBLE_DEVICES'] == ''\n", calls)
    store = triton_stubs.ensure(tmp_path / "cache")
    assert store == tmp_path / "cache" / "triton_stubs" / "9.9.9"
    assert [d.name for d in triton_stubs.built(store)] == ["KEY1"] and not (store / "tmp_cache").exists()
    assert triton_stubs.ensure(tmp_path / "cache") == store and calls == [1]  # not built again

    cand = tmp_path / "entry" / "triton"
    assert triton_stubs.seed(store, cand) == 1
    copied = cand / "KEY1" / SO
    assert copied.read_bytes() == b"module"
    assert os.stat(copied).st_ino != os.stat(store / "KEY1" / SO).st_ino  # a copy: the candidate writes only its own
    copied.write_bytes(b"changed by the candidate")
    assert (store / "KEY1" / SO).read_bytes() == b"module"
    assert triton_stubs.seed(store, cand) == 0  # what is there stays
    assert copied.read_bytes() == b"changed by the candidate"
    assert sorted(p.name for p in cand.iterdir()) == ["KEY1"]  # no temporary left


def test_a_failed_build_leaves_nothing_and_is_not_retried(tmp_path, monkeypatch, fresh):
    calls: list[int] = []
    _fake_build(monkeypatch, "import sys\nsys.exit('no libcuda found')\n", calls)
    assert triton_stubs.ensure(tmp_path / "cache") is None
    assert "no libcuda found" in triton_stubs.failed(tmp_path / "cache")
    assert triton_stubs.ensure(tmp_path / "cache") is None and calls == [1]
    assert triton_stubs.seed(None, tmp_path / "entry" / "triton") == 0
    assert not (tmp_path / "entry").exists()


def test_a_build_that_makes_no_module_counts_as_failed(tmp_path, monkeypatch, fresh):
    calls: list[int] = []
    _fake_build(monkeypatch, "pass\n", calls)
    assert triton_stubs.ensure(tmp_path / "cache") is None
    assert triton_stubs.failed(tmp_path / "cache") == "no module was built"


def test_a_cache_that_cannot_be_written_is_a_failed_build(tmp_path, monkeypatch, fresh):
    calls: list[int] = []
    _fake_build(monkeypatch, "pass\n", calls)
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert triton_stubs.ensure(blocked) is None and calls == []
    assert "Error" in triton_stubs.failed(blocked)


def test_without_triton_there_is_no_store(tmp_path, monkeypatch):
    monkeypatch.setattr(triton_stubs, "triton_version", lambda: None)
    assert triton_stubs.ensure(tmp_path) is None and triton_stubs.store_dir(tmp_path) is None


def test_which_sources_use_triton():
    assert triton_stubs.uses_triton("import triton\n@triton.jit\ndef k(x):\n    pass\n")
    assert triton_stubs.uses_triton("import torch\nimport triton\n\n@triton.autotune(configs=[], key=[])\n"
                                    "@triton.jit\ndef k(x):\n    pass\n")
    assert triton_stubs.uses_triton("import triton\n# load_inline beside it\n")  # CUDA first, Triton too
    assert not triton_stubs.uses_triton("import torch\n# triton is not used here\n")


def test_the_evaluator_seeds_a_triton_candidate_on_a_gpu_only(tmp_path, monkeypatch, fresh):
    from kernelpro.config import EvaluatorConfig
    from kernelpro.evaluate import runner

    calls: list[int] = []
    _fake_build(monkeypatch, "import os, pathlib\n"
                "d = pathlib.Path(os.environ['TRITON_CACHE_DIR']) / 'KEY1'\nd.mkdir(parents=True)\n"
                f"(d / '{SO}').write_bytes(b'module')\n", calls)
    monkeypatch.setattr(runner.sandbox, "landlock_abi", lambda: 7)
    cfg = EvaluatorConfig(build_cache_dir=str(tmp_path / "cache"))
    triton_cand = tmp_path / "t.py"
    triton_cand.write_text("import triton\n\n@triton.jit\ndef k(x):\n    pass\n")
    plain = tmp_path / "p.py"
    plain.write_text("import torch\n")
    entry = tmp_path / "entry"
    assert runner.seed_triton_stubs(triton_cand, entry, "cpu", cfg) == 0  # the interpreter builds nothing
    assert runner.seed_triton_stubs(plain, entry, "cuda", cfg) == 0 and calls == []
    assert runner.seed_triton_stubs(triton_cand, entry, "cuda", cfg) == 1
    assert (entry / "triton" / "KEY1" / SO).read_bytes() == b"module" and calls == [1]


@pytest.mark.parametrize("unconfined", ["detect", "no_landlock"])
def test_no_shared_store_where_candidates_are_not_confined(tmp_path, monkeypatch, fresh, unconfined):
    """Without Landlock (or with write_guard: detect) a candidate could write the store, and
    later candidates would load what it left: each builds its own module, as Triton does."""
    from kernelpro.config import EvaluatorConfig
    from kernelpro.evaluate import runner

    calls: list[int] = []
    _fake_build(monkeypatch, "raise SystemExit(0)\n", calls)
    monkeypatch.setattr(runner.sandbox, "landlock_abi", lambda: 0 if unconfined == "no_landlock" else 7)
    cfg = EvaluatorConfig(build_cache_dir=str(tmp_path / "cache"),
                          write_guard="detect" if unconfined == "detect" else "auto")
    cand = tmp_path / "t.py"
    cand.write_text("import triton\n\n@triton.jit\ndef k(x):\n    pass\n")
    assert runner.seed_triton_stubs(cand, tmp_path / "entry", "cuda", cfg) == 0
    assert calls == [] and not (tmp_path / "cache" / "triton_stubs").exists()


def test_triton_cache_key_is_computed_ahead_on_a_gpu_host_only(monkeypatch):
    """A harness or profiled forward started ahead computes Triton's cache key (hashing its
    sources and library: 0.37 s of a first call on the H100 machine) before its job; on a
    host without a GPU it imports nothing."""
    import sys
    import types

    calls: list[int] = []
    fake_cache = types.ModuleType("triton.runtime.cache")
    fake_cache.triton_key = lambda: calls.append(1) or "key"  # type: ignore[attr-defined]
    fake_runtime = types.ModuleType("triton.runtime")
    fake_runtime.cache = fake_cache  # type: ignore[attr-defined]
    fake_triton = types.ModuleType("triton")
    fake_triton.runtime = fake_runtime  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton", fake_triton)
    monkeypatch.setitem(sys.modules, "triton.runtime", fake_runtime)
    monkeypatch.setitem(sys.modules, "triton.runtime.cache", fake_cache)
    monkeypatch.setattr(triton_stubs, "gpu_host", lambda: False)
    assert triton_stubs.warm_cache_key() is None and calls == []
    monkeypatch.setattr(triton_stubs, "gpu_host", lambda: True)
    seconds = triton_stubs.warm_cache_key()
    assert seconds is not None and seconds >= 0 and calls == [1]
    del fake_cache.triton_key  # a Triton without it: nothing to do, no error
    assert triton_stubs.warm_cache_key() is None


def test_a_cpu_build_of_torch_is_not_a_gpu_host():
    import torch

    if torch.version.cuda:
        pytest.skip("a CUDA build of torch")
    assert triton_stubs.gpu_host() is False
