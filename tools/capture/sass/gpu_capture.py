"""Capture real candidate build layouts on the GPU machine for the SASS collector's tests.

    python tools/capture/sass/gpu_capture.py        (from the repository root; $OUT set)

Builds, under one build directory laid out as the evaluator does
(TORCH_EXTENSIONS_DIR=<build>/torch_extensions, TRITON_CACHE_DIR=<build>/triton):

* a torch ``load_inline`` extension with two kernels (an FFMA shared-memory GEMM and a
  float4 scale), built with ``-Xptxas -v`` and ``verbose=True`` while fd 1/2 go to
  ``<build>/build.log`` (what an evaluator that keeps the compile log would save);
* a second ``load_inline`` extension built the default way (no log kept);
* a Triton ``tl.dot`` matmul (fp16, should use HGMMA on sm_90a) and a Triton elementwise add.

Runs each kernel once against torch for correctness, runs the SASS collector on the build
directory, and writes ``$OUT/sass.tar.gz`` with the binaries, Triton's metadata/PTX, the
ninja files, the log, a file listing and the collector's summary (JSON). Prints a table.
Never touches clocks or GPU modes.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

OUT = Path(os.environ.get("OUT", "/tmp/sass_out"))
WORK = Path(tempfile.mkdtemp(prefix="sass_capture_"))
BUILD = WORK / "build"
os.environ["TORCH_EXTENSIONS_DIR"] = str(BUILD / "torch_extensions")
os.environ["TRITON_CACHE_DIR"] = str(BUILD / "triton")
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

rows: list[tuple[str, str, str]] = []


def record(step: str, ok: bool, detail: str) -> None:
    rows.append((step, "ok" if ok else "FAIL", detail[:160]))
    print(f"[{step}] {'ok' if ok else 'FAIL'}: {detail}", flush=True)


@contextlib.contextmanager
def fds_to(path: Path):
    """Send fd 1 and 2 (what ninja/nvcc write to under verbose=True) to ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with path.open("ab") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


CUDA_SRC = r"""
#include <torch/extension.h>
#define TILE 16
__global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < K; t += TILE) {
        As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (col < N && t + threadIdx.y < K) ? B[(t + threadIdx.y) * N + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
__global__ void scale_float4(const float4* __restrict__ x, float4* __restrict__ y, float a, int n4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = x[i]; v.x *= a; v.y *= a; v.z *= a; v.w *= a; y[i] = v;
    }
}
torch::Tensor mm(torch::Tensor a, torch::Tensor b) {
    int M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = torch::empty({M, N}, a.options());
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    sgemm_tiled<<<grid, block>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
torch::Tensor scale(torch::Tensor x, double a) {
    auto y = torch::empty_like(x);
    int n4 = x.numel() / 4;
    scale_float4<<<264, 256>>>((const float4*)x.data_ptr<float>(), (float4*)y.data_ptr<float>(), (float)a, n4);
    return y;
}
"""
CPP_SRC = "torch::Tensor mm(torch::Tensor a, torch::Tensor b);\ntorch::Tensor scale(torch::Tensor x, double a);"

CUDA_SRC2 = r"""
#include <torch/extension.h>
__global__ void fp64_literal(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = 0.5 * x[i] + 1.0;
}
torch::Tensor affine(torch::Tensor x) {
    auto y = torch::empty_like(x);
    fp64_literal<<<264, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""


def build_load_inline() -> None:
    import torch
    from torch.utils.cpp_extension import load_inline

    t0 = time.time()
    log = BUILD / "build.log"
    BUILD.mkdir(parents=True, exist_ok=True)
    with fds_to(log):
        ext = load_inline(name="sass_capture_ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                          functions=["mm", "scale"], extra_cuda_cflags=["-Xptxas", "-v", "-O3"],
                          verbose=True)
    a = torch.randn(256, 128, device="cuda")
    b = torch.randn(128, 192, device="cuda")
    err = (ext.mm(a, b) - a @ b).abs().max().item()
    x = torch.randn(1 << 16, device="cuda")
    err2 = (ext.scale(x, 3.0) - 3.0 * x).abs().max().item()
    record("load_inline verbose", err < 1e-2 and err2 < 1e-5,
           f"{time.time() - t0:.0f} s, mm max err {err:.2e}, scale max err {err2:.2e}, log {log.stat().st_size} B")

    t0 = time.time()
    ext2 = load_inline(name="sass_capture_quiet", cpp_sources="torch::Tensor affine(torch::Tensor x);",
                       cuda_sources=CUDA_SRC2, functions=["affine"])
    err3 = (ext2.affine(x) - (0.5 * x + 1.0)).abs().max().item()
    record("load_inline quiet", err3 < 1e-5, f"{time.time() - t0:.0f} s, max err {err3:.2e}")


def build_triton() -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
            b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.float16))

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    t0 = time.time()
    M = N = K = 512
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    matmul_kernel[(M // 128, N // 128)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                        b.stride(1), c.stride(0), c.stride(1), BM=128, BN=128, BK=64,
                                        num_warps=8, num_stages=3)
    err = (c.float() - (a.float() @ b.float())).abs().max().item()
    x = torch.randn(100000, device="cuda")
    y = torch.randn(100000, device="cuda")
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(100000, 1024),)](x, y, out, 100000, BLOCK=1024)
    err2 = (out - (x + y)).abs().max().item()
    record("triton", err < 1.0 and err2 < 1e-6, f"{time.time() - t0:.0f} s, matmul max err {err:.2e}, add max err {err2:.2e}")


def run_collector() -> dict:
    from kernelpro.api import ProfileContext, ProfileTarget
    from kernelpro_plugins_sass.collector import SassCollector
    from kernelpro_plugins_sass.profilers import ALL
    from kernelpro_plugins_sass.toolchain import find_tool

    tools = {t: str(find_tool(t)) for t in ("cuobjdump", "nvdisasm", "nvcc", "ptxas")}
    t0 = time.time()
    target = ProfileTarget(problem_path=Path("p.py"), candidate_path=Path("c.py"), device="cuda",
                           workdir=WORK, build_dir=BUILD)
    profile = SassCollector().collect(target, stage=1)
    context = ProfileContext(gpu=None, device="cuda")
    findings = []
    for cls in ALL:
        findings += cls().analyze(profile, None, context)
    payload = profile.payload
    summary = {
        "tools": tools,
        "seconds": round(time.time() - t0, 2),
        "files": list(payload.files) if payload else [],
        "notes": list(profile.notes),
        "kernels": [{"name": e.kernel.name, "mangled": e.kernel.mangled, "arch": e.kernel.arch,
                     "origin": e.origin, "instructions": e.features.instructions,
                     "resources": e.kernel.resources.summary() if e.kernel.resources else None,
                     "warnings": list(e.kernel.warnings)}
                    for e in (payload.entries if payload else ())],
        "findings": [{"tool": f.tool, "kernel": f.kernel, "severity": f.severity, "title": f.title}
                     for f in findings if f.severity != "info"],
    }
    record("collector", bool(payload and payload.entries),
           f"{len(summary['kernels'])} kernels, {len(summary['findings'])} findings in {summary['seconds']} s")
    for k in summary["kernels"]:
        print(f"  kernel {k['origin']:16s} {k['arch']}  {k['name'][:60]}  {k['resources']}")
    for f in summary["findings"]:
        print(f"  finding {f['tool']:28s} {f['severity']:7s} {str(f['kernel'])[:50]}")
    return summary


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    summary: dict = {}
    for step in (build_load_inline, build_triton):
        try:
            step()
        except Exception as exc:  # keep going: the tarball still carries what was built
            record(step.__name__, False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            traceback.print_exc()
    try:
        summary = run_collector()
    except Exception as exc:
        record("collector", False, f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
    listing = subprocess.run(["find", str(BUILD), "-type", "f", "-printf", "%s %P\n"],
                             capture_output=True, text=True).stdout
    (WORK / "listing.txt").write_text(listing)
    (WORK / "summary.json").write_text(json.dumps({"rows": rows, **summary}, indent=1))
    keep = (".so", ".o", ".cubin", ".json", ".ptx", ".log", ".ninja", ".cu", ".cpp", ".ttgir")
    tar_path = OUT / "sass.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(WORK / "listing.txt", "listing.txt")
        tar.add(WORK / "summary.json", "summary.json")
        for p in sorted(BUILD.rglob("*")):
            if p.is_file() and (p.suffix in keep or p.name == "build.ninja") and p.stat().st_size < 4_000_000:
                tar.add(p, "build/" + str(p.relative_to(BUILD)))
    print(f"\nwrote {tar_path} ({tar_path.stat().st_size / 1e6:.2f} MB)")
    print("\n| step | status | detail |\n|---|---|---|")
    for step, status, detail in rows:
        print(f"| {step} | {status} | {detail} |")
    return 0 if all(r[1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
