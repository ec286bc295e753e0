"""The compile stage: separate process, content-addressed cache, trimmed errors, pool."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from evaluate_paths import honest
from kernelpro.evaluate import compile as build
from kernelpro.records import Verdict

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)


def test_raw_cu_builds_once_then_hits_the_cache(run_eval, gelu_problem):
    first = run_eval(honest("nvcc_build"), gelu_problem)
    assert first.verdict is Verdict.CORRECT, first.reason
    second = run_eval(honest("nvcc_build"), gelu_problem)
    assert second.verdict is Verdict.CORRECT
    assert second.compile.cached is True


def test_compile_error_is_trimmed_and_cached(run_eval, gelu_problem, fast_config):
    result = run_eval(honest("nvcc_broken"), gelu_problem)
    assert result.verdict is Verdict.COMPILE_ERROR
    assert 'identifier "undeclared_value" is undefined' in result.compile.log
    assert "Traceback" not in result.compile.log and len(result.compile.log.splitlines()) <= 6
    again = build.compile_candidate(honest("nvcc_broken"), config=fast_config)
    assert again.status == "compile_error" and again.cached


def test_compile_timeout(tmp_path, fast_config):
    cand = tmp_path / "slow_build.py"
    cand.write_text("import time\n# load_inline\ntime.sleep(60)\n")
    cfg = attrs.evolve(fast_config, build_cache_dir=str(tmp_path / "cache"))
    out = build.compile_candidate(cand, config=cfg, timeout_s=3)
    assert out.status == "compile_timeout"


def test_key_depends_on_source_flags_and_arch(fast_config):
    a = build.build_key("src", [], [], "9.0")
    assert a == build.build_key("src", [], [], "9.0")
    assert len({a, build.build_key("src2", [], [], "9.0"), build.build_key("src", [], ["-O1"], "9.0"),
                build.build_key("src", ["/inc"], [], "9.0"), build.build_key("src", [], [], "9.0a")}) == 5


def test_pool_keeps_order_and_skips_plain_pytorch(tmp_path, fast_config):
    cfg = attrs.evolve(fast_config, build_cache_dir=str(tmp_path / "cache"))
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    outs = build.compile_many([plain, honest("nvcc_broken"), plain], config=cfg, workers=2)
    assert [o.status for o in outs] == ["skipped", "compile_error", "skipped"]


def test_trim_gcc_and_nvcc_logs():
    log = "\n".join([
        "Error building extension 'ext': [1/2] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=ext ...",
        "FAILED: main.o",
        "c++ -MMD ... -c main.cpp -o main.o",
        "main.cpp: In function 'at::Tensor f(at::Tensor)':",
        "main.cpp:7:12: error: 'y' was not declared in this scope",
        "    7 |     return y;",
        "      |            ^",
        "ninja: build stopped: subcommand failed.",
        "kernel.cu(12): error: expected a \";\"",
        "      int x = 1",
        "              ^",
    ])
    trimmed = build.trim_compiler_log(log)
    assert "main.cpp:7:12: error: 'y' was not declared" in trimmed
    assert "return y;" in trimmed and 'kernel.cu(12): error: expected a ";"' in trimmed
    assert "ninja" not in trimmed and "FAILED" not in trimmed and "-MMD" not in trimmed


def test_build_env_points_every_cache_into_the_entry(tmp_path):
    env = build.build_env(tmp_path, arch="9.0a", include_paths=["/inc"], cuda_flags=["-lineinfo"], base={})
    assert env["TORCH_EXTENSIONS_DIR"] == str(Path(tmp_path).resolve() / "torch_extensions")
    assert env["TRITON_CACHE_DIR"].endswith("triton") and env["KERNELPRO_BUILD_DIR"].endswith("nvcc")
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0a"


def test_compile_pool_runs_in_the_background(tmp_path, fast_config):
    cfg = attrs.evolve(fast_config, build_cache_dir=str(tmp_path / "cache"))
    pool = build.CompilePool(cfg, workers=2)
    try:
        fut = pool.submit(honest("nvcc_broken"))
        assert fut.result(timeout=120).status == "compile_error"
    finally:
        pool.shutdown()


def test_callers_build_dir_points_at_the_cache_entry(tmp_path, gelu_problem, fast_config):
    # the loop passes builds/<cid>; profilers later run with build_env(builds/<cid>)
    from kernelpro.evaluate.runner import build_env, evaluate

    build_dir = tmp_path / "builds" / "c0001"
    result = evaluate(gelu_problem, honest("nvcc_build"), device="cpu", config=fast_config,
                      workdir=tmp_path / "eval", build_dir=build_dir)
    assert result.verdict is Verdict.CORRECT, result.reason
    assert build_dir.is_symlink()
    entry = build_dir.resolve()
    assert entry.parent == Path(fast_config.build_cache_dir).resolve()
    env = build_env(build_dir)
    assert env["KERNELPRO_BUILD_DIR"] == str(entry / "nvcc")
    assert any((entry / "nvcc").iterdir())


def test_compile_timeout_through_evaluate(tmp_path, gelu_problem, fast_config):
    from kernelpro.evaluate.runner import evaluate

    cand = tmp_path / "slow_build.py"
    cand.write_text("import time\n# load_inline\ntime.sleep(60)\n")
    cfg = attrs.evolve(fast_config, build_cache_dir=str(tmp_path / "cache"), compile_timeout_s=3)
    result = evaluate(gelu_problem, cand, device="cpu", config=cfg, workdir=tmp_path / "eval")
    assert result.verdict is Verdict.COMPILE_TIMEOUT
    assert result.wall_s < 20


def test_build_env_keys_cover_what_a_profiler_needs(tmp_path):
    from kernelpro.evaluate.runner import BUILD_ENV_KEYS

    env = build.build_env(tmp_path, arch="9.0", include_paths=[], cuda_flags=[], base={})
    assert set(env) - {"PYTHONUNBUFFERED"} == set(BUILD_ENV_KEYS)


def test_a_killed_build_s_lock_does_not_stall_later_builds(tmp_path, gelu_problem, fast_config):
    """torch's build lock (a ``lock`` file in the extension's build directory) left by a
    build that was killed made every later evaluation of the same source wait on it, idle,
    until its time limit: a compile error became a compile timeout. With the entry's own
    lock held, any such file is stale and is removed, in the compile stage and in the
    harness's own build alike."""
    cand = tmp_path / "bad_cpp_baton.py"
    cand.write_text(
        "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "ext = load_inline(name='kp_test_baton', cpp_sources='torch::Tensor f(torch::Tensor x) { return x + ; }',"
        " functions=['f'])\n"
        "class ModelNew(nn.Module):\n    def forward(self, x, *a):\n        return ext.f(x)\n")
    cfg = attrs.evolve(fast_config, build_cache_dir=str(tmp_path / "cache"))
    entry, _, _ = build.entry_for(cand.read_text(), include_paths=list(cfg.include_paths),
                                  cuda_flags=list(cfg.cuda_flags), cuda_arch=cfg.cuda_arch,
                                  build_cache_dir=cfg.build_cache_dir)
    baton = entry / "torch_extensions" / "kp_test_baton" / "lock"
    baton.parent.mkdir(parents=True)
    baton.write_text("")
    out = build.compile_candidate(cand, config=cfg, timeout_s=240)
    assert out.status == "compile_error", (out.status, out.reason)
    assert not baton.exists()
    # the harness's own build (no compile stage: the build directory is the caller's): the same
    from kernelpro.evaluate.runner import evaluate

    bdir = tmp_path / "bdir"
    baton = bdir / "torch_extensions" / "kp_test_baton" / "lock"
    baton.parent.mkdir(parents=True)
    baton.write_text("")
    res = evaluate(gelu_problem, cand, device="cpu", config=attrs.evolve(cfg, compile_stage=False, timeout_s=240),
                   workdir=tmp_path / "w", build_dir=bdir)
    assert res.verdict is Verdict.COMPILE_ERROR, res.reason
    assert not baton.exists()


def test_a_process_the_build_leaves_behind_does_not_outlive_it(tmp_path, fast_config):
    """The compile stage imports the candidate's module; a process started there that leaves
    the session (double fork, setsid) would otherwise run on, beside the timed calls and
    outside every check of the harness (it could slow the reference while it is timed)."""
    import os
    import signal
    import time

    cand = tmp_path / "leaves_a_daemon.py"
    cand.write_text(
        "import os, time\n"
        "# load_inline (a build marker: the compile stage imports this module)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        open('daemon.pid', 'w').write(str(os.getpid()))  # in the build's own directory\n"
        "        time.sleep(120)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n")
    cfg = attrs.evolve(fast_config, build_cache_dir=str(tmp_path / "cache"))
    out = build.compile_candidate(cand, config=cfg, timeout_s=60)
    pid = int((out.build_dir / "daemon.pid").read_text())
    deadline = time.monotonic() + 5
    alive = True
    while alive and time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                alive = fh.read().split(")")[-1].split()[0] != "Z"
        except OSError:
            alive = False
        if alive:
            time.sleep(0.1)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the daemon the candidate started at import outlived the compile stage"
