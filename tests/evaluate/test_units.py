"""Unit tests of the evaluator's pieces that need no worker process."""

from __future__ import annotations

import hashlib
import hmac

import pytest
import torch

from kernelpro.evaluate import bounds, channel, compare, guard, policy, timing, toolchain
from kernelpro.gpus import SPECS

TOL = {"float32": (1e-4, 1e-4)}


def test_compare_rejects_nan_inf_shape_dtype_device():
    ref = torch.ones(4)
    assert compare.compare(ref.clone(), ref, TOL).ok
    bad = ref.clone()
    bad[1] = float("nan")
    assert "NaN/Inf" in compare.compare(bad, ref, TOL).message
    bad[1] = float("inf")
    assert not compare.compare(bad, ref, TOL).ok
    assert "shape" in compare.compare(torch.ones(5), ref, TOL).message
    assert "dtype" in compare.compare(torch.ones(4, dtype=torch.float64), ref, TOL).message
    c = compare.compare(torch.ones(4, device="meta"), ref, TOL)
    assert not c.ok and c.integrity
    c = compare.compare(ref.clone(), ref, TOL, device_type="cuda")
    assert not c.ok and c.integrity and "device" in c.message


def test_compare_non_tensor_outputs_need_the_same_type():
    class Liar:
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

    c = compare.compare((torch.ones(2), Liar()), (torch.ones(2), 3), TOL)
    assert not c.ok and c.integrity


def test_source_scan():
    assert guard.scan_source("import sys\nf = sys._getframe(1)\n")
    assert guard.scan_source("import gc\nobjs = gc.get_objects()\n")
    assert guard.scan_source("from kernelpro.evaluate import timing\n")
    assert guard.scan_source("open('/proc/self/fd/5')\n")
    assert guard.scan_source("from kernelpro.evaluate.nvcc import load_cu\n") is None
    assert guard.scan_source("import kernelpro\n")
    assert guard.scan_source("from kernelpro import evaluate\n")
    assert guard.scan_source("import kernelpro.evaluate.timing as t\n")
    assert guard.scan_source("p = sys.modules['kernelpro_problem']\n")
    # other distributions named kernelpro_* are not the evaluator (a CuTe candidate imports
    # kernelpro_cute for its build flags; rejecting it was a false positive seen on the H200)
    assert guard.scan_source("        import kernelpro_cute\n") is None
    assert guard.scan_source("from kernelpro_cute.flags import build_flags\n") is None
    assert guard.scan_source("import torch\nx = torch.ones(3)\n") is None


def test_backend_flags_restore():
    guard.set_reference_precision()
    ref = guard.backend_flags()
    torch.backends.cudnn.benchmark = not ref["cudnn.benchmark"]
    torch.set_float32_matmul_precision("medium")
    assert guard.backend_flags() != ref
    guard.restore_backend_flags(ref)
    assert guard.backend_flags() == ref


def test_channel_accepts_only_the_signed_message():
    end = channel.ParentEnd()
    body = b'{"verdict": "correct"}'
    mac = hmac.new(end.token, body, hashlib.sha256).hexdigest().encode()
    msg = b"KPR1 " + mac + b" " + str(len(body)).encode() + b"\n" + body
    assert end.verify(msg) == body.decode()
    assert end.verify(b"") is None
    with pytest.raises(channel.ChannelError, match="forged"):
        end.verify(b"KPR1 " + b"0" * 64 + b" " + str(len(body)).encode() + b"\n" + body)
    with pytest.raises(channel.ChannelError, match="more than one"):
        end.verify(msg + msg)
    with pytest.raises(channel.ChannelError, match="malformed"):
        end.verify(b'{"verdict": "correct"}')


def test_own_kernel_names():
    src = '''
__global__ void __launch_bounds__(256) fused_gelu(float* x) {}
__global__ void plain_kernel(float* x) {}
@triton.jit
def add_kernel(x_ptr, BLOCK: tl.constexpr):
    pass
'''
    assert policy.own_kernel_names(src) == {"fused_gelu", "plain_kernel", "add_kernel"}
    assert policy.uses_own_kernel(["fused_gelu(float*)", "void at::native::elementwise_kernel<...>"],
                                  {"fused_gelu"})
    assert not policy.uses_own_kernel(["void at::native::vectorized_elementwise_kernel<4, ...>"], {"fused_gelu"})


def test_compute_recorder():
    rec = policy.ComputeRecorder()
    x = torch.ones(4)
    with rec:
        y = torch.empty_like(x)
        y.copy_(x)
    assert rec.compute_ops == set()
    with rec:
        torch.nn.functional.gelu(x)
    assert "gelu" in rec.compute_ops


def test_lower_bound_h200():
    h200 = next(s for s in SPECS if "h200" in s.match)
    model = torch.nn.Linear(4096, 4096, bias=False)
    x = torch.rand(4096, 4096)
    with torch.no_grad():
        out = model(x)
    work = bounds.estimate(model, [x], out, h200.l2_bytes)
    assert work.flops == 2 * 4096 ** 3
    b = bounds.lower_bound(work, h200)
    # 137 GFLOP at the TF32 peak (495 TFLOP/s) vs 2 x 64 MiB from DRAM at 4.8 TB/s
    assert b.compute_ms == pytest.approx(2 * 4096 ** 3 / 495e12 * 1e3)
    assert b.memory_ms == pytest.approx((2 * 4096 * 4096 * 4 + max(0, 4096 * 4096 * 4 - h200.l2_bytes))
                                        / 4800e9 * 1e3)
    assert b.lower_ms == max(b.compute_ms, b.memory_ms)


def test_lower_bound_takes_flops_counted_by_the_baseline_job():
    class NoCall(torch.nn.Module):
        def forward(self, x):
            raise AssertionError("the FLOPs were given: the model must not run again")

    x = torch.rand(64, 64)
    work = bounds.estimate(NoCall(), [x], x, 1 << 20, flops=1234.0)
    assert work.flops == 1234.0 and work.bytes_min == 64 * 64 * 4  # the input; the output fits in the L2
    assert work.dtype == "float32"


def test_arch_for_sm90a_sources(monkeypatch):
    monkeypatch.setattr(toolchain, "gpu_capability", lambda: "9.0")
    assert toolchain.arch_for("__global__ void k() {}") == "9.0"
    assert toolchain.arch_for('asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 ...");') == "9.0a"
    assert toolchain.arch_for("using Atom = SM90_TMA_LOAD;") == "9.0a"
    assert toolchain.arch_for("anything", "8.0") == "8.0"
    assert toolchain.gencode("9.0a") == "-gencode=arch=compute_90a,code=sm_90a"


def test_suspicious_speed_flags():
    from kernelpro.evaluate.judge import suspicious_speed

    h200 = next(s for s in SPECS if "h200" in s.match)
    # a 4096^3 fp32 GEMM cannot take less than 2*4096^3 / 495e12 s = 0.278 ms on an H200
    work = bounds.Work(flops=2 * 4096 ** 3, bytes_min=2 * 4096 * 4096 * 4, dtype="float32")
    bound = bounds.lower_bound(work, h200)
    ev = {"max_speedup": 100.0, "impossible_margin": 0.9}
    assert suspicious_speed(2.5, 0.5, bound, ev) == []
    flags = suspicious_speed(2.5, 0.1, bound, ev)  # above the bytes' 0.028 ms: fewer FLOPs, not impossible
    assert len(flags) == 1 and flags[0].startswith("fewer_flops_than_reference") and "H200" in flags[0]
    flags = suspicious_speed(1.0, 0.02, bound, ev)  # below the time its bytes need (50x: under max_speedup)
    assert len(flags) == 1 and flags[0].startswith("physically_impossible") and "H200" in flags[0]
    flags = suspicious_speed(300.0, 2.0, None, ev)
    assert len(flags) == 1 and flags[0].startswith("suspicious_speedup: 150.0x")


def test_reference_precision_is_full_fp32():
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")
    guard.set_reference_precision()
    flags = guard.backend_flags()
    assert flags["matmul.allow_tf32"] is False and flags["cudnn.allow_tf32"] is False
    assert flags["float32_matmul_precision"] == "highest"


class _FakeCudart:
    """Stands in for libcudart: a persisting-L2 limit and one stream window, as a candidate
    would leave them."""

    def __init__(self, limit: int, window: tuple[int, int]):
        self.limit, self.window, self.resets, self.cleared = limit, window, 0, []

    def cudaDeviceGetLimit(self, ref, which):
        assert which == 0x06
        ref._obj.value = self.limit
        return 0

    def cudaDeviceSetLimit(self, which, value):
        self.limit = value.value
        return 0

    def cudaStreamGetAttribute(self, stream, attr, buf):
        import struct

        assert attr == 1
        struct.pack_into("QQfii", buf, 0, self.window[0], self.window[1] if stream.value is None else 0, 1.0, 2, 1)
        return 0

    def cudaStreamSetAttribute(self, stream, attr, buf):
        self.cleared.append(stream.value)
        self.window = (0, 0)
        return 0

    def cudaCtxResetPersistingL2Cache(self):
        self.resets += 1
        return 0

    def cudaGetLastError(self):
        return 0


def test_l2_state_resets_and_reports():
    from kernelpro.evaluate.gpu_state import L2State

    state = L2State.__new__(L2State)
    state.lib, state.reason, state.found = _FakeCudart(4 << 20, (0x7000, 1 << 20)), "", []
    found = state.reset([0])  # stream 0: the default stream (c_void_p(0).value is None)
    assert any("set-aside of 4194304 bytes" in f for f in found)
    assert any("window of 1048576 bytes" in f for f in found)
    assert state.lib.limit == 0 and state.lib.resets == 1 and state.lib.window == (0, 0)
    assert state.reset([0]) == []  # nothing left to undo
    assert len(state.found) == 2


def test_escaped_work_charges_only_gaps_above_the_sync_latency():
    from kernelpro.evaluate.timing import escaped_work
    ev = [1.0, 1.01, 0.99, 1.0, 1.02]
    # honest: every gap is the synchronization latency (0.01 ms) plus jitter
    assert escaped_work(ev, [e + 0.01 + 0.002 * (k % 2) for k, e in enumerate(ev)], 0.01) == 0.0
    # 10 ms left on a side stream after each call
    assert abs(escaped_work(ev, [e + 10.01 for e in ev], 0.01) - 10.0) < 1e-9
    # small escapes: below max(0.015 ms, 3 % of the stream time) they are not charged
    assert escaped_work(ev, [e + 0.01 + 0.02 for e in ev], 0.01) == 0.0
    assert escaped_work(ev, [e + 0.01 + 0.05 for e in ev], 0.01) > 0.04
    tiny = [0.004] * 5
    assert escaped_work(tiny, [e + 0.01 + 0.012 for e in tiny], 0.01) == 0.0
    assert escaped_work(tiny, [e + 0.01 + 0.02 for e in tiny], 0.01) > 0.0
    assert escaped_work([], [], 0.01) == 0.0


def test_a_long_one_stream_call_is_judged_against_a_control_of_its_length():
    """The synchronization's latency after a long wait is not side-stream work: a callable
    whose gap passes the empty-call threshold is compared with a same-length control."""
    from kernelpro.evaluate import timing

    # 3 ms on the stream; then the host took 0.11 ms longer to wake than after an empty call
    samples = [timing.Sample(3.0, 3.0 + 0.014 + 0.11, 3.5) for _ in range(20)]
    # the control waking as late: nothing escaped, the stream time stands
    s = timing.summarize(samples, cuda=True, gap0_ms=0.014, control=lambda ms: 0.014 + 0.105)
    assert s.escaped_ms == 0.0 and s.stats.method == "cuda_event+l2_flush"
    assert s.stats.median_ms == 3.0 and abs(s.gap_matched_ms - 0.119) < 1e-9
    # a control that wakes promptly: the 0.11 ms are charged
    s = timing.summarize(samples, cuda=True, gap0_ms=0.014, control=lambda ms: 0.015)
    assert abs(s.escaped_ms - 0.109) < 1e-9 and s.stats.method == "cuda_event+device_sync+l2_flush"
    assert abs(s.stats.median_ms - (3.0 + 0.124 - 0.015)) < 1e-9
    assert timing.reported(samples, s) == [s.stats.median_ms] * 20
    # no spin kernel in this torch: the empty-call latency decides
    s = timing.summarize(samples, cuda=True, gap0_ms=0.014, control=lambda ms: None)
    assert abs(s.escaped_ms - 0.11) < 1e-9 and s.gap_matched_ms is None


def test_side_stream_work_below_the_judge_s_minimum_is_not_charged():
    """The judge charges side-stream work above the envelope's slack (0.05 ms by default):
    the 0.02 ms an honest 50 us call's gap varied by on the H200 is not charged, a 2 ms
    side-stream spin is, in full."""
    from kernelpro.evaluate import timing

    honest = [timing.Sample(0.05, 0.05 + 0.014 + 0.023, 0.8) for _ in range(30)]
    s = timing.summarize(honest, cuda=True, gap0_ms=0.014, control=lambda ms: 0.014, min_escape_ms=0.05)
    assert s.escaped_ms == 0.0 and s.stats.method == "cuda_event+l2_flush" and s.stats.median_ms == 0.05
    # the default minimum (ESCAPE_ABS_MS) would have charged it
    assert timing.summarize(honest, cuda=True, gap0_ms=0.014, control=lambda ms: 0.014).escaped_ms > 0.02
    spin = [timing.Sample(0.05, 0.05 + 0.014 + 2.0, 2.9) for _ in range(30)]
    s = timing.summarize(spin, cuda=True, gap0_ms=0.014, control=lambda ms: 0.014, min_escape_ms=0.05)
    assert abs(s.escaped_ms - 2.0) < 1e-9 and s.stats.method == "cuda_event+device_sync+l2_flush"
    assert abs(s.stats.median_ms - 2.05) < 1e-9


def test_envelope_excess_is_what_the_reports_leave_out():
    """A candidate whose process reports a fifth of its time leaves 4/5 of it unaccounted for
    against the judge's clock; an honest one leaves the protocol's overhead, as the reference."""
    from kernelpro.evaluate import timing

    jitter = [0.01 * ((k * 7) % 5) for k in range(40)]
    ref = [timing.Sample(2.0, 2.0, 2.0 + 0.3 + j) for j in jitter]
    honest = [timing.Sample(1.0, 1.0, 1.0 + 0.3 + j) for j in reversed(jitter)]
    cheat = [timing.Sample(0.2, 0.2, 1.0 + 0.3 + j) for j in jitter]
    summ = lambda xs: timing.summarize(xs, cuda=False, gap0_ms=0.0)  # noqa: E731
    excess, se = timing.envelope_excess(honest, summ(honest), ref, summ(ref))
    assert abs(excess) < 1e-9 and se < 0.01
    excess, se = timing.envelope_excess(cheat, summ(cheat), ref, summ(ref))
    assert abs(excess - 0.8) < 1e-9 and se < 0.01
    assert timing.median_se([1.0]) == float("inf")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _reaper_under_a_killed_parent(tmp_path, from_thread: bool) -> None:
    """A parent process starts a reaper (from its main thread, or from a thread that ends once
    the worker runs), then is killed outright: the worker must not outlive it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pidfile = tmp_path / "worker.pid"
    worker = f"import os,time; open({str(pidfile)!r},'w').write(str(os.getpid())); time.sleep(600)"
    start = (f"subprocess.Popen([sys.executable,'-m','kernelpro.evaluate.reaper',{str(tmp_path / 'rc')!r},'--',"
             f"sys.executable,'-c',{worker!r}], start_new_session=True)\n")
    if from_thread:
        start = ("def start():\n    " + start + "    for _ in range(600):\n"
                 f"        if os.path.exists({str(pidfile)!r}):\n            return\n        time.sleep(0.05)\n"
                 "t = threading.Thread(target=start); t.start(); t.join()\n")
    parent = subprocess.Popen([sys.executable, "-c", "import os,subprocess,sys,threading,time\n" + start
                               + "time.sleep(600)\n"])
    try:
        for _ in range(600):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        wpid = int(pidfile.read_text())
        if from_thread:
            time.sleep(0.5)  # the starting thread has ended: the worker lives on
            assert _alive(wpid), "the worker ended with the thread that started its reaper"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        for _ in range(200):
            if not _alive(wpid):
                break
            time.sleep(0.05)
        assert not _alive(wpid), "the worker outlived its killed parent"
    finally:
        parent.kill()


def test_reaper_kills_the_worker_when_its_parent_is_killed(tmp_path):
    """An evaluating process killed outright (SIGKILL) must not leave its worker running."""
    _reaper_under_a_killed_parent(tmp_path, from_thread=False)


def test_a_reaper_outlives_the_thread_that_started_it(tmp_path):
    """The kernel's parent-death signal also comes when the *thread* that started the reaper
    ends: a judge started ahead by an executor's worker thread was killed (SIGKILL, read as
    out of memory) when that thread finished, in the middle of its evaluation. The worker
    must run on while the process that started it lives."""
    import subprocess
    import sys
    import threading
    import time

    rc, up = tmp_path / "rc", tmp_path / "up"
    started: dict[str, subprocess.Popen[bytes]] = {}

    def start() -> None:
        started["reaper"] = subprocess.Popen([sys.executable, "-m", "kernelpro.evaluate.reaper", str(rc), "--",
                                              sys.executable, "-c",
                                              f"import time; open({str(up)!r}, 'w').close(); time.sleep(4)"])
        for _ in range(600):  # the thread lives until the worker runs (the reaper's request is made)
            if up.exists():
                return
            time.sleep(0.05)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()  # the thread that started the reaper has ended
    assert up.exists()
    time.sleep(1.0)
    assert started["reaper"].poll() is None, "the reaper ended with the thread that started it"
    assert started["reaper"].wait(timeout=60) == 0
    assert rc.read_text() == "0", f"the worker ended with status {rc.read_text()} (-9: killed)"


def test_a_reaper_started_by_an_ended_thread_still_ends_with_its_parent(tmp_path):
    """After the thread that started it has ended, the reaper belongs to another thread of
    the same process; when that process is killed outright, its worker must end too."""
    _reaper_under_a_killed_parent(tmp_path, from_thread=True)


def test_stage_seconds_sums_repeated_stages_and_ends_at_the_given_time():
    from kernelpro.evaluate.judge import stage_seconds

    got = stage_seconds([("reference", 0.0), ("timing", 1.5), ("verify", 4.0), ("timing", 4.5)], 6.0)
    assert got == {"reference": 1.5, "timing": 4.0, "verify": 0.5}
    assert stage_seconds([], 3.0) == {}


def test_compare_to_exact_allows_the_reference_s_own_error_and_no_more():
    exact = torch.tensor([1000.0, 0.0, -3.0], dtype=torch.float64)
    ref = torch.tensor([1000.0, 0.004, -3.0])  # the fp32 reference is 0.004 off at one element
    tol = {"float32": (1e-4, 1e-4)}
    close = torch.tensor([1000.0, -0.003, -3.0])  # 0.003 off, at another sign: fails the plain check
    assert not compare.compare(close, ref, tol).ok
    assert compare.compare_to_exact(close, ref, exact, tol, factor=2.0).ok
    far = torch.tensor([1000.0, 0.02, -3.0])  # 0.02 > 1e-4 + 2 x 0.004
    res = compare.compare_to_exact(far, ref, exact, tol, factor=2.0)
    assert not res.ok and "farther from the fp64 reference" in res.message
    assert not compare.compare_to_exact(torch.tensor([1000.0, float("nan"), -3.0]), ref, exact, tol, 2.0).ok
    # the same verdicts piece by piece (the reference's error lies in another piece than
    # the candidate's)
    import kernelpro.evaluate.compare as cmp_module

    chunk = cmp_module.CHUNK
    cmp_module.CHUNK = 1
    try:
        assert compare.compare_to_exact(close, ref, exact, tol, factor=2.0).ok
        assert not compare.compare_to_exact(far, ref, exact, tol, factor=2.0).ok
    finally:
        cmp_module.CHUNK = chunk
    # non-float32 outputs are judged by the plain check only
    ints = torch.tensor([1, 2, 3])
    assert not compare.compare_to_exact(torch.tensor([1, 2, 4]), ints, ints, tol, 2.0).ok


def test_compare_to_exact_takes_the_reference_s_error_line_by_line():
    # a product whose first feature is 1e5 times the others: the fp32 reference's error there
    # (about 1e-2) lent to every feature let a candidate return zeros in the other 1023
    # (docs/validation/evaluator_boundary.md, "A red-team pass on the CPU, session 17")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 128, generator=gen, dtype=torch.float64)
    w = torch.randn(128, 32, generator=gen, dtype=torch.float64)
    scale = torch.ones(32, dtype=torch.float64)
    scale[0] = 1e7
    exact = (x @ w) * scale
    ref = ((x.float() @ w.float()) * scale.float())
    tol = {"float32": (1e-4, 1e-4)}
    assert (ref.double() - exact).abs()[:, 0].max() > 1.0  # the big feature's own rounding
    zeros_but_big = ref.clone()
    zeros_but_big[:, 1:] = 0
    res = compare.compare_to_exact(zeros_but_big, ref, exact, tol, factor=2.0)
    assert not res.ok and "along dimension 0" in res.message, res.message
    low = (x.to(torch.bfloat16) @ w.to(torch.bfloat16)).float() * scale.float()
    assert not compare.compare_to_exact(low, ref, exact, tol, factor=2.0).ok
    # another order of summation, at the reference's own error on every line: passes
    other = ((x.float().flip(1) @ w.float().flip(0)) * scale.float())
    assert compare.compare_to_exact(other, ref, exact, tol, factor=2.0).ok
    # the second red-team pass: eight rows (a column of eight is a line too), and an honest
    # product summed in two halves, whose large feature's errors a row's largest error (its
    # own) did not cover
    few_rows = x[:8]
    exact8 = (few_rows @ w) * 1e15 ** (torch.arange(32) == 0).double()
    ref8 = (few_rows.float() @ w.float()) * (1e15 ** (torch.arange(32) == 0).double()).float()
    zeros8 = ref8.clone()
    zeros8[:, 1:] = 0
    assert not compare.compare_to_exact(zeros8, ref8, exact8, tol, factor=2.0).ok
    halves = ((x[:, :64].float() @ w[:64].float()) + (x[:, 64:].float() @ w[64:].float())) * scale.float()
    assert compare.compare_to_exact(halves, ref, exact, tol, factor=2.0).ok
    # errors that follow each element's size along every line (a softmax of logits that lost
    # digits to a common offset): an honest sum in two halves passes on the relative share,
    # the product in bfloat16 does not
    wk = torch.randn(512, 256, generator=gen, dtype=torch.float64) * (3 / 512 ** 0.5)
    wk = wk - wk.mean(0)
    xo = torch.randn(128, 512, generator=gen, dtype=torch.float64) + 3000
    exact_p = torch.softmax(xo @ wk, -1)
    ref_p = torch.softmax(xo.float() @ wk.float(), -1)
    split = torch.softmax(xo[:, :256].float() @ wk[:256].float() + xo[:, 256:].float() @ wk[256:].float(), -1)
    assert not compare.compare(split, ref_p, tol).ok
    assert compare.compare_to_exact(split, ref_p, exact_p, tol, factor=2.0).ok
    half = torch.softmax((xo.to(torch.bfloat16) @ wk.to(torch.bfloat16)).float(), -1)
    assert not compare.compare_to_exact(half, ref_p, exact_p, tol, factor=2.0).ok
    # the same in pieces
    import kernelpro.evaluate.compare as cmp_module

    chunk = cmp_module.CHUNK
    cmp_module.CHUNK = 100
    try:
        assert not compare.compare_to_exact(zeros_but_big, ref, exact, tol, factor=2.0).ok
        assert compare.compare_to_exact(other, ref, exact, tol, factor=2.0).ok
    finally:
        cmp_module.CHUNK = chunk


def test_boolean_outputs_get_a_second_opinion_and_python_floats_a_tolerance():
    exact = torch.tensor([True, False, True, False] * 50_000)  # 200,000 positions
    ref = exact.clone()
    ref[5] = True  # the fp32 reference decided one position otherwise
    tol = {"float32": (1e-4, 1e-4)}
    assert compare.compare_to_exact(exact.clone(), ref, exact, tol, factor=2.0).ok  # as exact as fp64
    assert compare.compare_to_exact(ref.clone(), ref, exact, tol, factor=2.0).ok  # as the fp32 reference
    few = exact.clone()
    few[:2] = ~few[:2]  # neither's at 2 positions: one in 100,000 of them
    assert compare.compare_to_exact(few, ref, exact, tol, factor=2.0).ok
    more = exact.clone()
    more[:3] = ~more[:3]
    res = compare.compare_to_exact(more, ref, exact, tol, factor=2.0)
    assert not res.ok and "3 of 200000 values are neither" in res.message, res.message
    # an argmax whose fp32 reference is off in most rows lends no slack elsewhere: the
    # candidate must take the fp64 reference's value or the fp32 reference's at each row
    exact_i = torch.arange(4096) % 7
    ref_i = (exact_i + 1) % 7
    ref_i[::4] = exact_i[::4]
    garbage = (exact_i + 3) % 7
    res = compare.compare_to_exact(garbage, ref_i, exact_i, tol, factor=2.0)
    assert not res.ok and "4096 of 4096 values are neither" in res.message, res.message
    one_tie = exact_i.clone()
    one_tie[0] = 6  # one position in outputs of 1,000 or more
    assert compare.compare_to_exact(one_tie, ref_i, exact_i, tol, factor=2.0).ok
    small = torch.tensor([1, 2, 3])
    assert not compare.compare_to_exact(torch.tensor([1, 2, 4]), small, small, tol, 2.0).ok
    # a Python float within float32's relative tolerance passes; ints and bools stay exact
    assert compare.compare((1.0, 486.86187744140625), (1.0, 486.8618469238281), tol).ok
    assert not compare.compare(487.5, 486.8618469238281, tol).ok
    assert not compare.compare(2.0e-7, 1.7e-7, tol).ok  # no absolute tolerance for a tiny loss
    assert not compare.compare(3, 4, tol).ok and not compare.compare(True, False, tol).ok
    assert compare.compare(float("nan"), float("nan"), tol).ok


def test_compare_in_chunks_counts_and_points_at_the_worst_element(monkeypatch):
    """Outputs are compared piece by piece (compare.CHUNK elements at a time): counts, the
    largest error and the example element come out as for one piece."""
    ref = torch.linspace(-5, 5, 1000)
    cand = ref.clone()
    cand[[10, 500, 990]] += torch.tensor([1e-3, 5e-2, 2e-3])
    tol = {"float32": (1e-4, 1e-4)}
    whole = compare.compare(cand, ref, tol)
    monkeypatch.setattr(compare, "CHUNK", 64)
    pieces = compare.compare(cand, ref, tol)
    assert not whole.ok and not pieces.ok
    assert "3 of 1000 values outside" in pieces.message and "e.g. index 500" in pieces.message
    assert pieces.message == whole.message and pieces.max_abs_err == whole.max_abs_err
    nan = cand.clone()
    nan[999] = float("nan")
    assert "1 NaN/Inf values" in compare.compare(nan, ref, tol).message
    ints = torch.arange(300)
    assert compare.compare(ints, ints.clone(), tol).ok
    off = ints.clone()
    off[[3, 299]] = 0
    assert "2 of 300 integer values differ" in compare.compare(off, ints, tol).message


def test_compare_stop_early_gives_the_same_verdict(monkeypatch):
    monkeypatch.setattr(compare, "CHUNK", 64)
    ref = torch.linspace(-5, 5, 1000)
    tol = {"float32": (1e-4, 1e-4)}
    assert not compare.compare(torch.zeros_like(ref), ref, tol, stop_early=True).ok
    assert compare.compare(ref.clone(), ref, tol, stop_early=True).ok
    late = ref.clone()
    late[-1] += 1.0  # only the last piece fails
    assert not compare.compare(late, ref, tol, stop_early=True).ok


def test_same_values_on_large_tensors_checks_a_prefix_then_everything():
    big = torch.arange(5 * (1 << 20), dtype=torch.float32)
    assert compare.same_values(big, big.clone())
    tail = big.clone()
    tail[-1] = -1.0
    head = big.clone()
    head[0] = -1.0
    assert not compare.same_values(big, tail) and not compare.same_values(big, head)


def test_compare_computes_where_asked():
    ref = torch.linspace(-1, 1, 100)
    tol = {"float32": (1e-4, 1e-4)}
    assert compare.compare(ref.clone(), ref, tol, "cpu", compute_device="cpu").ok
    assert not compare.compare(ref + 1.0, ref, tol, "cpu", compute_device="cpu").ok


def test_timed_calls_get_distinct_fp32_scale_factors():
    """Every warm-up and timed call's inputs are scaled by a factor no other call shares
    in fp32 (uniform draws could land within an ulp of each other: a content memo hit)."""
    import random

    from kernelpro.evaluate import inputs

    warm, timed = inputs.scale_draws(random.Random(7))
    factors = torch.tensor([1.0 + u * 1e-3 for u in warm + timed], dtype=torch.float32)
    assert len(warm) == len(timed) == 4096
    assert torch.unique(factors).numel() == len(factors)


def test_fill_scales_in_one_pass_to_the_same_bits_as_copy_then_scale():
    """A timed call's inputs are written by one multiplication into the buffer; the values
    are bit for bit those of a copy scaled in place (the two-pass form it replaced), on every
    floating dtype, into a strided buffer, and a set of another dtype or on the host still
    takes the copy; integers are copied unscaled."""
    from kernelpro.evaluate import inputs

    gen = torch.Generator().manual_seed(5)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        src = [(torch.rand(33, 17, generator=gen) * 8 - 4).to(dtype), torch.arange(6)]
        for u in (-1.75, 1.0 + 123 / 4096, 0.0):
            view = torch.empty(17, 33, dtype=dtype).t()  # a buffer of the example's strides
            ints = torch.empty(6, dtype=torch.int64)
            inputs.fill([view, ints], src, u)
            want = src[0].clone()
            if u:
                want.mul_(1.0 + u * max(1e-3, 4 * torch.finfo(dtype).eps))
            assert torch.equal(view, want) and view.stride() == (1, 33), (dtype, u)
            assert torch.equal(ints, src[1])
    other = torch.empty(4, dtype=torch.float16)  # the set in float32: copied, then scaled
    inputs.fill([other], [torch.full((4,), 3.0)], 1.5)
    assert torch.equal(other, torch.full((4,), 3.0, dtype=torch.float16).mul_(1.0 + 1.5 * 4 * torch.finfo(
        torch.float16).eps))


def test_sample_keeps_values_at_drawn_positions_of_any_layout():
    from kernelpro.evaluate import compare as cmp

    gen = torch.Generator().manual_seed(3)
    base = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    t = base.transpose(0, 2)  # not contiguous: sampled without a contiguous copy
    (s, label) = cmp.sample((t, "label"), 7, gen)
    assert label == "label" and s.shape == (5, 4, 3) and s.values.shape == (7,)
    assert torch.equal(s.values, t[s.coords])
    picked, why = cmp.values_at((t.clone(), "label"), (s, "label"))
    assert why is None and torch.equal(picked[0], s.values) and picked[1] == "label"
    small = cmp.sample(torch.tensor([1.0, 2.0]), 7, gen)  # at most k elements: kept whole
    assert torch.equal(small.values, torch.tensor([1.0, 2.0]))
    scalar = cmp.sample(torch.tensor(5.0), 7, gen)
    assert scalar.shape == () and cmp.values_at(torch.tensor(5.0), scalar)[0][0].item() == 5.0


def test_sample_mismatches_are_named():
    from kernelpro.evaluate import compare as cmp

    gen = torch.Generator().manual_seed(0)
    s = cmp.sample(torch.zeros(4, 6), 5, gen)
    assert "shape (4, 6) != reference (6, 4)" in cmp.values_at(torch.zeros(6, 4), s)[1]
    assert "dtype" in cmp.values_at(torch.zeros(4, 6, dtype=torch.float64), s)[1]
    assert "output(s)" in cmp.values_at((torch.zeros(4, 6), torch.zeros(1)), s)[1]
    # the second opinion's float64 reference is read at the same positions
    gold = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    picked, why = cmp.values_at(gold, s, same_dtype=False)
    assert why is None and picked[0].dtype == torch.float64 and torch.equal(picked[0], gold[s.coords])

    class Sub(torch.Tensor):
        pass

    odd = cmp.sample(torch.zeros(4, 6).as_subclass(Sub), 5, gen)
    assert "plain dense torch.Tensor" in cmp.values_at(torch.zeros(4, 6), odd)[1]


def test_recheck_copies_setting_is_checked():
    from kernelpro.config import EvaluatorConfig

    with pytest.raises(ValueError, match="recheck_copies"):
        EvaluatorConfig(recheck_copies="some")
    with pytest.raises(ValueError, match="recheck_sample_elements"):
        EvaluatorConfig(recheck_sample_elements=0)
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="device_copy_share"):
            EvaluatorConfig(device_copy_share=bad)


def test_same_values_compares_pieces_and_prefixes():
    from kernelpro.evaluate import compare as cmp

    n = 5 * (1 << 20)  # past the prefix check
    a = torch.arange(n, dtype=torch.float32)
    b = a.clone()
    assert cmp.same_values(a, b)
    b[-1] += 1  # differs only at the end: the whole is compared
    assert not cmp.same_values(a, b)
    c = a.clone()
    c[0] = -1  # differs in the prefix
    assert not cmp.same_values(a, c)
    assert not cmp.same_values(a, a[:-1]) and not cmp.same_values(a, a.double())


def _recording_calls(ms: dict[str, float]):
    log: list[tuple[str, int]] = []

    def make(name):
        def call(i):
            log.append((name, i))
            return timing.Sample(ms[name], ms[name], ms[name])
        return call

    return {name: make(name) for name in ms}, log


def test_interleave_alternates_calls_one_by_one_spread_over_the_whole_timing():
    calls, log = _recording_calls({"reference": 1.0, "compiled": 2.0, "candidate": 0.5})
    samples = timing.interleave(calls, warmup_ms=3, rep_ms=40, min_reps=5, max_reps=1000)
    timed = [(n, i) for n, i in log if i >= 0]
    assert {n: len(xs) for n, xs in samples.items()} == {"reference": 40, "compiled": 20, "candidate": 80}
    # no callable's calls bunch up: in every tenth of the timing each has its share, +-1
    for part in range(10):
        window = timed[part * len(timed) // 10:(part + 1) * len(timed) // 10]
        counts = {n: sum(1 for m, _ in window if m == n) for n in calls}
        assert abs(counts["reference"] - 4) <= 1 and abs(counts["compiled"] - 2) <= 1 \
            and abs(counts["candidate"] - 8) <= 1, counts
    assert [i for n, i in timed if n == "compiled"] == list(range(20))


def test_interleave_in_rounds_times_blocks():
    calls, log = _recording_calls({"reference": 1.0, "candidate": 1.0})
    timing.interleave(calls, warmup_ms=3, rep_ms=20, min_reps=5, max_reps=1000, rounds=2)
    names = [n for n, i in log if i >= 0]
    assert names == ["reference"] * 10 + ["candidate"] * 10 + ["reference"] * 10 + ["candidate"] * 10


def test_fingerprints_tell_outputs_apart_as_exact_equality_does():
    from kernelpro.evaluate.judge import fingerprint

    x = torch.randn(1000, 37)
    assert fingerprint(x) == fingerprint(x.clone())
    assert fingerprint([x, 3, "a"]) == fingerprint([x.clone(), 3, "a"])
    assert fingerprint([x, 3]) != fingerprint([x, 4])
    swapped = x.clone().reshape(-1)
    swapped[[10, 11]] = swapped[[11, 10]]  # same words, other positions
    assert fingerprint(x) != fingerprint(swapped.reshape(x.shape))
    bit = x.clone()
    bit.view(torch.int32)[5, 5] ^= 1  # one bit
    assert fingerprint(x) != fingerprint(bit)
    assert fingerprint(x) != fingerprint(x.reshape(37, 1000)) and fingerprint(x) != fingerprint(x.double())
    # layouts and sizes that are not whole 32-bit words, and a view into a larger storage
    odd = torch.arange(7, dtype=torch.uint8)
    assert fingerprint(odd) == fingerprint(odd.clone()) and fingerprint(odd) != fingerprint(odd.flip(0))
    half = torch.randn(9, dtype=torch.float16)
    assert fingerprint(half[1:]) == fingerprint(half[1:].clone())
    assert fingerprint(x.t()) == fingerprint(x.t().contiguous())
    assert fingerprint(torch.tensor([True, False, True])) != fingerprint(torch.tensor([True, True, False]))
    # more than one piece of 2**24 words
    big = torch.randn((1 << 24) + 5)
    moved = big.clone()
    moved[-1] += 1.0
    assert fingerprint(big) == fingerprint(big.clone()) and fingerprint(big) != fingerprint(moved)


def _watched(outs, kept=True, trials=2):
    from kernelpro.evaluate.judge import ReferenceWatch

    watch = ReferenceWatch({"float32": (1e-4, 1e-4)}, None, trials)
    for out in outs:
        watch.add(out, out.clone() if kept else None)
    return watch


@pytest.mark.parametrize("kept", [True, False])
def test_degenerate_flags_from_outputs_seen_one_at_a_time(kept):
    varied = _watched([torch.randn(64) + t for t in range(3)], kept)
    assert varied.flags() == [] and not varied.equal
    same = _watched([torch.ones(64) for _ in range(3)], kept)
    assert same.equal and any("does not depend on the inputs" in f for f in same.flags())
    assert any("constant output" in f for f in same.flags())
    tiny = _watched([torch.randn(64) * 1e-7 for _ in range(3)], kept)
    assert any("all-zeros output passes" in f for f in tiny.flags())
    ints = _watched([torch.arange(8) + t for t in range(3)], kept)
    assert ints.flags() == [] and ints.zeros is None
    # equal over the trials, different on the N(0, 1) one: flagged, but not constant over all
    late = _watched([torch.full((64,), 2.0), torch.full((64,), 2.0), torch.randn(64)], kept)
    assert late.equal_trials and not late.equal
    assert any("does not depend" in f for f in late.flags())
    # one value per output (a loss, a 0-dim sum) is its own mean: not flagged as constant
    scalar = _watched([torch.randn(()) + 3.0 + t for t in range(3)], kept)
    assert scalar.flags() == [], scalar.flags()


def test_compare_to_exact_keeps_the_reference_s_nan_and_inf_exact():
    # log(x) of a negative x: NaN in the fp32 and the fp64 reference alike. Those positions
    # are left out of the distances, so a candidate with finite values there (log|x|, or
    # nan_to_num) used to pass the second opinion although compare() had rejected it
    tol = {"float32": (1e-4, 1e-4)}
    nan, inf = float("nan"), float("inf")
    ref = torch.tensor([0.5, nan, -inf, 2.0])
    exact = torch.tensor([0.5, nan, -inf, 2.0], dtype=torch.float64)
    for wrong in ([0.5, 0.0, -inf, 2.0], [0.5, nan, 0.0, 2.0], [0.5, nan, inf, 2.0]):
        assert not compare.compare(torch.tensor(wrong), ref, tol).ok
        res = compare.compare_to_exact(torch.tensor(wrong), ref, exact, tol, factor=2.0)
        assert not res.ok and "not matched" in res.message, (wrong, res.message)
    # matching them exactly still passes, with an fp32 error of the reference's size elsewhere
    close = torch.tensor([0.5 + 1e-3, nan, -inf, 2.0])
    ref_off = torch.tensor([0.5 + 1e-3, nan, -inf, 2.0])
    assert compare.compare_to_exact(close, ref_off, exact, tol, factor=2.0).ok


def test_build_model_seeds_get_init_inputs_and_names_a_dict():
    import types as _types

    from kernelpro.evaluate.loader import build_model

    class Holder(torch.nn.Module):
        def __init__(self, w):
            super().__init__()
            self.w = w

    prob = _types.SimpleNamespace(get_init_inputs=lambda: [torch.randn(4)])
    a = build_model(Holder, prob, 0, "cpu")
    torch.randn(100)  # another process's generator state: the candidate's module drew at import
    b = build_model(Holder, prob, 0, "cpu")
    assert torch.equal(a.w, b.w)
    with pytest.raises(TypeError, match="get_init_inputs\\(\\) returned a dict"):
        build_model(Holder, _types.SimpleNamespace(get_init_inputs=lambda: {"w": 1}), 0, "cpu")


def test_constant_and_zero_stand_ins_take_no_memory(monkeypatch):
    # the degenerate-output checks compare each reference output with its mean and with zeros:
    # on a 7.5-GB output a float64 copy and a full-size constant ran an 80-GB GPU out of memory
    from kernelpro.evaluate import judge

    monkeypatch.setattr(compare, "CHUNK", 1000)  # the mean summed in pieces, as on a large output
    x = torch.randn(37, 301, dtype=torch.float32) + 2.5
    m = judge._mean_of(x)
    assert m.shape == x.shape and all(s == 0 for s in m.stride())
    assert float(m[0, 0]) == pytest.approx(float(x.double().mean()), rel=1e-6)
    z = judge._zeros_of(x)
    assert z.shape == x.shape and all(s == 0 for s in z.stride()) and float(z.abs().max()) == 0.0
    flat = compare._flat(m)
    assert flat.shape == (x.numel(),) and flat.stride() == (0,) and flat.untyped_storage().nbytes() <= 8
    # compared piece by piece like any output
    assert compare.compare(m, torch.full_like(x, float(m[0, 0])), TOL).ok
    c = compare.compare(z, x, TOL)
    assert not c.ok and c.n_over == x.numel()
    assert judge._mean_of(torch.arange(4)).equal(torch.arange(4))  # integers: no mean taken


def test_input_sets_past_the_device_budget_wait_on_the_host(monkeypatch):
    from types import SimpleNamespace

    from kernelpro.evaluate import inputs, judge

    moved = []
    monkeypatch.setattr(inputs, "to_host", lambda v: moved.append(v) or ["host"])
    fake = SimpleNamespace(input_sets=[], notes={}, cuda=True)
    fake.set_aside = lambda v, r: judge.Judge.set_aside(fake, v, r)  # no recipe: to the host
    one_set = [torch.empty(1000, device="meta"), 3, [torch.empty(500, dtype=torch.float64, device="meta")]]
    nbytes = 1000 * 4 + 500 * 8
    budget = [1.5 * nbytes]
    for _ in range(4):
        fake.input_sets.append(judge.Judge.place_inputs(fake, one_set, budget))
    # the first set always stays (the budget is what is left beside it); then while it lasts
    assert fake.input_sets[:2] == [one_set, one_set] and fake.input_sets[2:] == [["host"], ["host"]]
    assert fake.notes["input_sets_on_host"] == 2.0 and budget[0] == pytest.approx(0.5 * nbytes)
    small = [torch.empty(0, device="meta")]
    fake.input_sets.append(judge.Judge.place_inputs(fake, small, budget))
    assert fake.input_sets[-1] is small
    fake.input_sets = [one_set]
    assert judge.Judge.place_inputs(fake, one_set, [0.0]) == ["host"]
    # timed calls take their values from the sets on the device only (the first always is)
    fake.input_sets = [one_set, one_set, [torch.ones(2)], [torch.ones(2)]]
    assert judge.Judge.on_device_sets(fake) == [0, 1]
    fake.input_sets = [one_set, [torch.ones(2)], [torch.ones(2)]]
    assert judge.Judge.on_device_sets(fake) == [0]
    fake.cuda = False
    fake.input_sets = [[torch.ones(2)], [torch.ones(2)]]
    assert judge.Judge.on_device_sets(fake) == [0, 1]


def test_sets_beyond_the_budget_are_drawn_again_where_their_seed_gives_the_same_bits():
    from types import SimpleNamespace

    from kernelpro.evaluate import judge

    def fake_judge(draw):
        fake = SimpleNamespace(cuda=True, notes={}, _redraw=None, sync=lambda: None, input_sets=[])
        fake.draw_set = draw
        fake.redraw_allowed = lambda v, r: judge.Judge.redraw_allowed(fake, v, r)
        return fake

    def seeded(recipe):
        g = torch.Generator().manual_seed(recipe.seed)
        return [torch.rand(64, generator=g), 3]

    fake = fake_judge(seeded)
    recipe = judge.Redraw(7, False)
    first = seeded(recipe)
    assert judge.Judge.set_aside(fake, first, recipe) is recipe
    assert fake.notes["input_sets_redrawn"] == 1.0 and "input_sets_on_host" not in fake.notes
    fake.input_sets = [[torch.empty(64, device="meta")], recipe]
    # a set drawn again is not on the device: timed calls do not take it
    assert judge.Judge.on_device_sets(fake) == [0]
    again = judge.Judge.values_of(fake, 1)
    assert again[0].equal(first[0]) and again[1] == 3
    # a get_inputs that draws from a generator the seed does not reach keeps its sets on the host
    unseeded = fake_judge(lambda r: [torch.rand(64), 3])
    host = judge.Judge.set_aside(unseeded, unseeded.draw_set(recipe), recipe)
    assert isinstance(host, list) and unseeded.notes["input_sets_not_reproducible"] == 1.0
    assert unseeded.notes["input_sets_on_host"] == 1.0 and unseeded._redraw is False
    # on a CPU the sets are kept as they are drawn
    cpu = fake_judge(seeded)
    cpu.cuda = False
    assert isinstance(judge.Judge.set_aside(cpu, first, recipe), list)


def test_shedding_moves_later_input_sets_to_the_host_and_drops_kept_outputs(monkeypatch):
    from types import SimpleNamespace

    from kernelpro.evaluate import inputs, judge

    monkeypatch.setattr(inputs, "to_host", lambda v: ["host"])
    trims = []
    one_set = [torch.empty(1000, device="meta"), 3]
    out = torch.empty(250, dtype=torch.float64, device="meta")
    fake = SimpleNamespace(input_sets=[one_set, one_set, ["host"], one_set], ref_outs=[out, None, [out, 7]],
                           notes={}, trim=lambda: trims.append(1), recipes=[None] * 4, cuda=False)
    fake.set_aside = lambda v, r: judge.Judge.set_aside(fake, v, r)
    freed = judge.Judge.shed_copies(fake)
    # the first set stays (every call's buffers are filled from it); the set already on the host is not counted
    assert fake.input_sets == [one_set, ["host"], ["host"], ["host"]]
    assert fake.ref_outs == [None, None, None] and trims == [1]
    assert freed == 2 * 4000 + 2 * 2000 == fake.notes["copies_shed_bytes"]
    assert fake.notes["input_sets_on_host"] == 2.0 and fake.notes["reference_outputs_on_device"] == 0.0


def test_the_candidate_gets_room_before_it_allocates(monkeypatch):
    from types import SimpleNamespace

    from kernelpro.evaluate import judge

    gib = float(1 << 30)
    shed = []
    for free, expect_shed in ((60 * gib, False), (30 * gib, True)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda f=free: (int(f), int(80 * gib)))
        fake = SimpleNamespace(cuda=True, in_bytes=6 * gib, ref_out_bytes=6 * gib, notes={}, trim=lambda: None,
                               shed_copies=lambda: shed.append(1))
        shed.clear()
        judge.Judge.make_room(fake)
        # still to come: 6 GB of candidate inputs, 4 outputs of 6 GB, a twentieth of 80 GB: 34 GB
        assert bool(shed) is expect_shed, free
        assert fake.notes["free_before_candidate_bytes"] == free


def test_the_judge_s_copies_leave_room_for_what_the_evaluation_allocates_later(monkeypatch):
    # a 7.5-GB input on an 80-GB GPU: the harnesses' buffers, the models' outputs and a fresh
    # set still to come take most of it, so few copies may stay
    from types import SimpleNamespace

    from kernelpro.evaluate import judge

    gib = float(1 << 30)
    monkeypatch.setattr(judge, "_available_bytes", lambda cuda: 69.5 * gib)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: SimpleNamespace(total_memory=80 * gib))
    fake = SimpleNamespace(share=0.25, device="cuda")
    b = 7.5 * gib
    room = judge.Judge.copies_budget(fake, later=7 * b)
    assert room == pytest.approx(69.5 * gib - 7 * b - 4 * gib)  # one more set fits, not two
    assert b <= room < 2 * b
    assert judge.Judge.copies_budget(fake, later=100 * gib) == 0.0
    assert judge.Judge.copies_budget(fake, later=0.0) == pytest.approx(0.25 * 69.5 * gib)  # the share caps it


def test_inputs_unchanged_and_host_copies():
    from kernelpro.evaluate import inputs

    before = [torch.tensor([1.0, float("nan")]), 2, torch.arange(3)]
    after = [torch.tensor([1.0, float("nan")]), torch.arange(3)]
    assert inputs.unchanged(before, after)
    after[1][0] = 7
    assert not inputs.unchanged(before, after)
    nested = (torch.ones(2), [torch.zeros(1), "x"])
    assert inputs.to_host(nested)[0] is nested[0]  # already on the host: the same tensors


def test_the_judge_s_own_out_of_memory_is_its_own_verdict():
    from kernelpro.evaluate import judge_main
    from kernelpro.evaluate.transport import TransportError

    assert judge_main._out_of_memory(TransportError("cuMemAlloc(6442450944 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY"))
    assert judge_main._out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 14.00 GiB"))
    assert not judge_main._out_of_memory(TransportError("a CUDA IPC handle has 64 bytes, got 3"))
    assert not judge_main._out_of_memory(RuntimeError("CUDA_ERROR_OUT_OF_MEMORY"))


def test_the_idle_meter_names_the_threads_that_worked_between_calls():
    import ctypes
    import os
    import threading
    import time
    from types import SimpleNamespace

    from kernelpro.evaluate import procwatch
    from kernelpro.evaluate.judge import IdleMeter

    remote = SimpleNamespace(pid=os.getpid(), cpu_ns=procwatch.tree_cpu_ns)
    meter = IdleMeter(remote)
    meter.answered()
    meter.calling()
    assert meter.busiest() == ""  # not asked for: nothing per thread

    def spin(stop, seconds=None):
        ctypes.CDLL(None).prctl(15, b"kp-spinner")  # PR_SET_NAME, as native threads name themselves
        end = time.perf_counter() + (seconds or 1e9)
        while not stop.is_set() and time.perf_counter() < end:
            pass

    meter.by_thread = {}
    meter.answered()
    worker = threading.Thread(target=spin, args=(threading.Event(), 0.15))
    worker.start()
    worker.join()
    # the thread has ended: its CPU is in the process's clock, not in a live thread's account
    meter.calling()
    assert meter.cpu_ns >= 30e6  # (wall-clock spins: less CPU on a loaded machine)
    stop = threading.Event()
    meter.answered()
    worker = threading.Thread(target=spin, args=(stop,))
    worker.start()
    time.sleep(0.1)
    meter.calling()  # still running: named
    stop.set()
    worker.join()
    assert meter.by_thread.get("kp-spinner", 0) >= 20e6, meter.by_thread
    assert "kp-spinner " in meter.busiest()
    meter.restart()
    assert meter.by_thread == {}


def test_a_host_set_is_compared_one_piece_at_a_time(monkeypatch):
    # a set kept in host memory against a buffer on another device: its pieces are moved one
    # at a time as the comparison asks, never the whole set at once (7.5 GB on an 80-GB GPU);
    # the meta device stands in for the GPU
    import types

    from kernelpro.evaluate import inputs

    monkeypatch.setattr(inputs, "PIECE", 4)
    host, buf = torch.arange(10.0), torch.empty(10, device="meta")
    moved = []
    real_to = torch.Tensor.to
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: moved.append(self.numel()) or real_to(self, *a, **k))
    pieces = inputs._pieces(host, buf)
    assert isinstance(pieces, types.GeneratorType) and moved == []
    first = next(pieces)
    assert moved == [4] and first[0].device.type == "meta" and first[1].shape == (4,)
    assert [p[0].numel() for p in pieces] == [4, 2] and moved == [4, 4, 2]
    moved.clear()
    # on one device too: whole-tensor comparisons allocate a byte per element per temporary
    # (a 2-GiB boolean failed on an 80-GB H100 holding an 8-GiB L1-norm problem's buffers)
    same = list(inputs._pieces(host, host.clone()))
    assert [p[0].numel() for p in same] == [4, 4, 2] and moved == []
    assert all(p[0].data_ptr() == host.data_ptr() + 4 * 4 * i for i, p in enumerate(same))  # views


def test_unchanged_compares_in_pieces_without_copying_strided_buffers(monkeypatch):
    from kernelpro.evaluate import inputs

    monkeypatch.setattr(inputs, "PIECE", 6)
    base = torch.randn(5, 4)
    strided = torch.empty(4, 5).t()  # a buffer lent with the example's transposed strides
    strided.copy_(base)
    assert not strided.is_contiguous()
    pieces = list(inputs._pieces(base, strided))
    assert [p[1].shape for p in pieces] == [(1, 4)] * 5  # rows of the strided one: views, no copy
    assert all(p[1].data_ptr() == strided[i].data_ptr() for i, p in enumerate(pieces))
    assert inputs.unchanged([base], [strided])
    strided[4, 3] = 7.0  # a change in the last piece only
    assert not inputs.unchanged([base], [strided])
    nan = torch.full((3, 5), float("nan"))
    assert inputs.unchanged([nan], [nan.clone()])  # NaN equals NaN
    big = torch.arange(20.0)
    other = big.clone()
    other[19] = -1.0
    assert inputs.unchanged([big], [big.clone()]) and not inputs.unchanged([big], [other])


def test_the_reference_out_of_memory_beside_a_candidate_is_that_job_s_oom():
    # its baseline job ran alone, so running out beside the candidate is no problem error; in
    # the baseline job it is
    from types import SimpleNamespace

    from kernelpro.evaluate import judge
    from kernelpro.records import Verdict

    remote = SimpleNamespace(request=lambda *a, **k: {"ok": False, "verdict": "oom",
                                                      "reason": "OutOfMemoryError: CUDA out of memory"})
    for candidate, verdict in (("c.py", Verdict.OOM), (None, Verdict.PROBLEM_ERROR)):
        fake = SimpleNamespace(ref=remote, job={"candidate": candidate}, compile_res=None)
        fake.fail = lambda v, r, **e: judge.Judge.fail(fake, v, r, **e)
        with pytest.raises(judge.Fail) as caught:
            judge.Judge.ask(fake, remote, {"op": "call"}, 1.0, "the reference's timed call")
        assert caught.value.verdict is verdict, caught.value.reason
        assert "CUDA out of memory" in caught.value.reason


@pytest.mark.parametrize("answers, shed, gold", [
    # out of memory once: the judge's copies shed, the call tried again and answered
    ([{"ok": False, "verdict": "oom", "reason": "OutOfMemoryError: CUDA out of memory"}, {"ok": True}], 1, True),
    # twice: no second opinion (flagged), one shed only
    ([{"ok": False, "verdict": "oom", "reason": "OutOfMemoryError: CUDA out of memory"}] * 3, 1, False),
    # not memory (an op without float64): no retry
    ([{"ok": False, "verdict": "runtime_error", "reason": "not implemented for 'Double'"}, {"ok": True}], 0, False),
])
def test_the_float64_reference_out_of_memory_sheds_and_tries_once_more(answers, shed, gold):
    # L1 92 (an exclusive cumsum of 4 GiB) on an 80-GB H100: the reference's float64 call ran
    # out of memory beside the judge's 56.6 GiB and an honest candidate's summation order was
    # judged against the fp32 reference's tolerance alone
    import types
    from types import SimpleNamespace

    from kernelpro.evaluate import judge

    asked = []
    remote = SimpleNamespace(request=lambda msg, *a: asked.append(msg) or answers[len(asked) - 1])
    example = torch.zeros(3)
    fake = SimpleNamespace(exact_unavailable=None, cuda=True, ref=remote, ref_example=example,
                           fp64_views=[torch.ones(3, dtype=torch.float64)], ref_in=[torch.zeros(3)], flags=[],
                           notes={}, sync=lambda: None, call_limit=lambda: 1.0, shed=[])
    fake.shed_copies = lambda: fake.shed.append(1) or 0.0
    fake.shed_for_retry = types.MethodType(judge.Judge.shed_for_retry, fake)
    fake.reference_fp64 = types.MethodType(judge.Judge.reference_fp64, fake)
    out = fake.reference_fp64([torch.ones(3)])
    assert len(fake.shed) == shed and len(asked) == min(len(answers), 1 + shed)
    assert (out is not None) == gold
    if gold:
        assert out.dtype == torch.float64 and fake.notes == {"fp64_retried_after_oom": 1.0} and not fake.flags
    else:
        assert fake.exact_unavailable and fake.flags[0].startswith("fp64_second_opinion_unavailable")
        assert fake.reference_fp64([torch.ones(3)]) is None and len(asked) == 1 + shed  # not asked again


def test_a_judge_out_of_memory_says_what_the_judge_holds(monkeypatch):
    # the L1-norm problem's judge ran out with 27.6 GiB of tensors beside 32 GiB of lent
    # buffers: the reason now says which of its copies were on the device
    from types import SimpleNamespace

    from kernelpro.evaluate import judge

    gib = 1 << 30
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 27 * gib)
    on_dev = torch.empty(gib // 4, device="meta")  # 1 GiB of float32
    fake = SimpleNamespace(input_sets=[[on_dev], judge.Redraw(1, False), [torch.zeros(2)]],
                           ref_outs=[None, (on_dev, 3)],
                           buffers=[SimpleNamespace(kind="device", nbytes=8 * gib),
                                    SimpleNamespace(kind="host", nbytes=8 * gib)])
    assert judge.Judge.held(fake) == ("judge holds 27.00 GiB of tensors (1 input sets 1.00, 1 kept outputs 1.00) "
                                      "and 8.00 GiB lent to the harnesses")


def test_a_trial_is_retried_after_its_failed_attempt_is_released():
    # L1 38 on an 80-GB H100: the trial retried after running out of memory failed again with
    # the same 27.62 GiB of the judge's tensors. The retry ran inside the except clause, where
    # the handled exception's traceback keeps the failed attempt's frames (its input set drawn
    # again, its comparison's pieces) alive: nothing is shed until they are gone
    import types
    import weakref
    from types import SimpleNamespace

    from kernelpro.evaluate import compare as cmp
    from kernelpro.evaluate import judge

    class Held:  # stands for the failed attempt's input set
        pass

    refs: list[weakref.ref] = []
    alive_at_shed: list[bool] = []

    def trial(t, label, policy, *limits):
        values = Held()
        if not refs:
            refs.append(weakref.ref(values))
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB")
        return torch.zeros(2), cmp.Comparison(True)

    fake = SimpleNamespace(status=lambda s: None, ev={"trials": 1, "first_call_timeout_s": 9.0}, call_limit=lambda: 1.0,
                           input_sets=[[torch.zeros(2)]], notes={},
                           cand=SimpleNamespace(alive=lambda: True), correctness_trial=trial,
                           shed_copies=lambda: alive_at_shed.append(refs[0]() is not None) or 0.0,
                           ref_watch=SimpleNamespace(equal=True), check_processes=lambda where: None,
                           compare_backend_flags=lambda: None)
    fake.shed_for_retry = types.MethodType(judge.Judge.shed_for_retry, fake)
    judge.Judge.correctness(fake)
    assert alive_at_shed == [False], "the failed attempt's locals were still alive when the judge shed its copies"
    assert fake.notes["trial_retried_after_oom"] == 0.0 and fake.correct.passed


def test_get_inputs_out_of_device_memory_is_not_drawn_again_on_the_cpu(monkeypatch):
    # the CPU fallback (for a get_inputs that calls .numpy()) spent 8-12 s per candidate drawing
    # 6.4 GB on the host before failing to copy it to the device again
    import types as _types

    from kernelpro.evaluate import loader

    calls = []

    def get_inputs():
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        return [torch.zeros(2)]

    problem = _types.SimpleNamespace(get_inputs=get_inputs)
    monkeypatch.setattr(loader, "seed_everything", lambda seed: None)
    with pytest.raises(torch.OutOfMemoryError):
        loader.make_inputs(problem, 1, "cuda")
    assert calls == [1]  # not run again on the CPU


@pytest.mark.parametrize("candidate, verdict", [("c.py", "oom"), (None, "problem_error")])
def test_get_inputs_out_of_memory_is_the_candidate_job_s_oom(candidate, verdict, monkeypatch):
    from types import SimpleNamespace

    from kernelpro.evaluate import judge

    def oom(*a):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")

    monkeypatch.setattr(judge, "make_inputs", oom)
    fake = SimpleNamespace(problem=None, device="cuda", job={"candidate": candidate})
    with pytest.raises(judge.Fail) as caught:
        judge.Judge.draw_inputs(fake, 1)
    assert caught.value.verdict.value == verdict and "ran out of device memory" in caught.value.reason


@pytest.mark.parametrize("fails, cuda, shed, drawn", [(1, True, 1, True), (2, True, 1, False), (1, False, 0, False)])
def test_the_fresh_input_look_makes_room_once_for_its_set(fails, cuda, shed, drawn):
    # every candidate of L1 20, 24, 28 and 32 (6.4-GB inputs) on an 80-GB H100 skipped the
    # fresh-input look for want of room for one more set
    import types
    from types import SimpleNamespace

    from kernelpro.evaluate import judge
    from kernelpro.records import Verdict

    tries = []

    def draw(seed):
        tries.append(seed)
        if len(tries) <= fails:
            raise judge.Fail(Verdict.OOM, "the problem's get_inputs() ran out of device memory")
        return [torch.ones(2)]

    fake = SimpleNamespace(cuda=cuda, notes={}, draw_inputs=draw, shed=[])
    fake.shed_copies = lambda: fake.shed.append(1) or 0.0
    fake.shed_for_retry = types.MethodType(judge.Judge.shed_for_retry, fake)
    fake.draw_fresh = types.MethodType(judge.Judge.draw_fresh, fake)
    if drawn:
        assert fake.draw_fresh(7)[0].sum() == 2 and tries == [7, 7]
        assert fake.notes == {"fresh_input_room_made": 1.0}
    else:
        with pytest.raises(judge._NoFreshSet, match="ran out of device memory"):
            fake.draw_fresh(7)
    assert len(fake.shed) == shed
    if drawn:  # a later set that does not fit: no second shedding
        tries.clear()
        fails = 5
        with pytest.raises(judge._NoFreshSet):
            fake.draw_fresh(8)
        assert len(fake.shed) == 1


def test_a_set_shed_after_timing_began_gives_its_calls_the_first_set():
    from types import SimpleNamespace

    from kernelpro.evaluate import judge

    fake = SimpleNamespace(input_sets=[[torch.zeros(2)], judge.Redraw(2, False), [torch.ones(2)]])
    assert [judge.Judge.timed_set(fake, j) for j in range(3)] == [0, 0, 2]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_compare_s_all_finite_path_gives_the_general_path_s_numbers_bit_for_bit(monkeypatch, device):
    """The pieces where every value is finite take a shorter path (fewer kernels, one read-back):
    every verdict, count, largest error, message and example must be those of the general path,
    across dtypes, pieces, non-finite values, values at the tolerance's edge and stop_early (on
    a GPU too: the shorter path reads a NaN or Inf from the largest distance, which its
    reductions must propagate as the CPU's do)."""
    monkeypatch.setattr(compare, "CHUNK", 257)
    tols = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
            "float64": (1e-6, 1e-5)}
    g = torch.Generator().manual_seed(7)
    cases = 0
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        atol, rtol = tols[str(dtype).replace("torch.", "")]
        for trial in range(40):
            n = [1, 100, 257, 1000, 1500][trial % 5]
            ref = (torch.randn(n, generator=g, dtype=torch.float64) * 10 ** (trial % 4 - 1)).to(dtype)
            cand = ref.clone()
            k = trial % 8
            if k >= 1:  # a few values off by about the tolerance, either side of it
                idx = torch.randint(0, n, (max(1, n // 50),), generator=g)
                r64 = ref[idx].to(torch.float64)
                edge = atol + rtol * r64.abs()
                scale = torch.rand(idx.numel(), generator=g, dtype=torch.float64) * 2
                cand[idx] = (r64 + edge * (scale if k != 2 else 1.0)).to(dtype)
            if k in (3, 4):  # non-finite values on one side or both
                cand[n // 2] = float("nan") if k == 3 else float("inf")
            if k == 4:
                ref[n // 3] = float("-inf")
                cand[n // 3] = float("-inf")
            if k == 5:
                ref[0] = float("nan")
            if dtype == torch.float64 and k == 6:  # a float64 difference that overflows
                ref[-1], cand[-1] = 1.7e308, -1.7e308
            cand, ref = cand.to(device), ref.to(device)
            for early in (False, True):
                fast = compare.compare(cand, ref, tols, stop_early=early)
                with monkeypatch.context() as m:
                    m.setattr(compare, "_piece", lambda c, r, a, t, f: compare._piece_general(c, r, a, t, f))
                    general = compare.compare(cand, ref, tols, stop_early=early)
                assert fast == general, (dtype, trial, early, fast, general)
                cases += not fast.ok
    assert cases > 100  # most cases fail somewhere: the example and counts are compared too
