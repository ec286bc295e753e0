// Deliberately flawed and deliberately good CUDA kernels for validating the ncu
// micro-profilers. Each kernel's name starts with kp_<case>; each host wrapper launches
// it on the current PyTorch stream. Built once with torch.utils.cpp_extension.load_inline
// (-O3 -lineinfo) by kp_ncu_ext.py.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

#define KP_STREAM at::cuda::getCurrentCUDAStream()

static inline int cdiv(long a, long b) { return (int)((a + b - 1) / b); }

// ---- good: vectorised grid-stride copy (memory roofline) ------------------------------------
__global__ void kp_copy_vec4(const float4* __restrict__ in, float4* __restrict__ out, long n4) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += stride) out[i] = in[i];
}
torch::Tensor copy_vec4(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n4 = x.numel() / 4;
  kp_copy_vec4<<<132 * 8, 256, 0, KP_STREAM>>>((const float4*)x.data_ptr<float>(),
                                               (float4*)y.data_ptr<float>(), n4);
  return y;
}

// ---- flawed: transpose whose loads walk down a column (uncoalesced) ---------------------------
__global__ void kp_transpose_naive(const float* __restrict__ in, float* __restrict__ out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;  // input row: consecutive threads, stride n
  int j = blockIdx.y * blockDim.y + threadIdx.y;  // input column
  if (i < n && j < n) out[(long)j * n + i] = in[(long)i * n + j];
}
torch::Tensor transpose_naive(torch::Tensor x) {
  int n = x.size(0);
  auto y = torch::empty_like(x);
  dim3 block(32, 8), grid(cdiv(n, 32), cdiv(n, 8));
  kp_transpose_naive<<<grid, block, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

// ---- tiled transpose: PAD=0 has 32-way shared-memory bank conflicts, PAD=1 is the good one ----
template <int PAD>
__global__ void kp_transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[32][32 + PAD];
  int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
  for (int k = 0; k < 32; k += 8) tile[threadIdx.y + k][threadIdx.x] = in[(long)(y + k) * n + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int k = 0; k < 32; k += 8) out[(long)(y + k) * n + x] = tile[threadIdx.x][threadIdx.y + k];
}
torch::Tensor transpose_conflict(torch::Tensor x) {
  int n = x.size(0);
  auto y = torch::empty_like(x);
  kp_transpose_tiled<0><<<dim3(n / 32, n / 32), dim3(32, 8), 0, KP_STREAM>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
torch::Tensor transpose_padded(torch::Tensor x) {
  int n = x.size(0);
  auto y = torch::empty_like(x);
  kp_transpose_tiled<1><<<dim3(n / 32, n / 32), dim3(32, 8), 0, KP_STREAM>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

// ---- flawed: a per-thread array indexed at run time lives in local memory; the register cap
// of __launch_bounds__ adds spills ------------------------------------------------------------
__global__ void __launch_bounds__(256, 8) kp_spill(const float* __restrict__ in, float* __restrict__ out, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[48];
  float v = in[i];
#pragma unroll
  for (int k = 0; k < 48; k++) acc[k] = v * (float)(k + 1);
  int shift = threadIdx.x & 7;  // run-time index: the array cannot stay in registers
  for (int r = 0; r < 8; r++) {
#pragma unroll
    for (int k = 0; k < 48; k++) acc[k] = fmaf(acc[k], acc[(k + shift + r) % 48], 0.5f);
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 48; k++) s += acc[k];
  out[i] = s;
}
torch::Tensor spill(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  kp_spill<<<cdiv(n, 256), 256, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

// ---- flawed: 4 blocks of 128 threads grid-stride over a large vector (tiny grid) -----------------
__global__ void kp_tiny_grid(const float* __restrict__ x, float* __restrict__ y, long n) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride) y[i] = 2.f * x[i] + 1.f;
}
torch::Tensor tiny_grid(torch::Tensor x) {
  auto y = torch::empty_like(x);
  kp_tiny_grid<<<4, 128, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

// ---- flawed: one full wave plus a few blocks of long-running work (tail effect) -------------------
__global__ void __launch_bounds__(1024, 2) kp_tail_grid(const float* __restrict__ x, float* __restrict__ y, int iters) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  float a = x[i], b = a + 1.f, c = a + 2.f, d = a + 3.f;
  for (int k = 0; k < iters; k++) {
    a = fmaf(a, 0.9999f, 0.0001f); b = fmaf(b, 0.9999f, 0.0001f);
    c = fmaf(c, 0.9999f, 0.0001f); d = fmaf(d, 0.9999f, 0.0001f);
  }
  y[i] = a + b + c + d;
}
torch::Tensor tail_grid(torch::Tensor x, int64_t blocks, int64_t iters) {
  auto y = torch::empty_like(x);
  kp_tail_grid<<<(int)blocks, 1024, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), (int)iters);
  return y;
}

// ---- flawed where tensor cores apply: scalar FP32 GEMM, 64x64 tiles, 4x4 outputs per thread ------
__global__ void __launch_bounds__(256) kp_sgemm_fp32(const float* __restrict__ A, const float* __restrict__ B,
                                                     float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[16][64 + 4];
  __shared__ float Bs[16][64];
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int l = 0; l < 4; l++) {
      int idx = threadIdx.x + l * 256;
      int m = idx / 16, k = idx % 16;
      As[k][m] = A[(long)(row0 + m) * K + k0 + k];
      int kb = idx / 64, nb = idx % 64;
      Bs[kb][nb] = B[(long)(k0 + kb) * N + col0 + nb];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; k++) {
      float a[4], b[4];
#pragma unroll
      for (int t = 0; t < 4; t++) { a[t] = As[k][ty * 4 + t]; b[t] = Bs[k][tx * 4 + t]; }
#pragma unroll
      for (int p = 0; p < 4; p++)
#pragma unroll
        for (int q = 0; q < 4; q++) acc[p][q] = fmaf(a[p], b[q], acc[p][q]);
    }
    __syncthreads();
  }
  for (int p = 0; p < 4; p++)
    for (int q = 0; q < 4; q++) C[(long)(row0 + ty * 4 + p) * N + col0 + tx * 4 + q] = acc[p][q];
}
torch::Tensor sgemm_fp32(torch::Tensor a, torch::Tensor b) {
  int M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::empty({M, N}, a.options());
  kp_sgemm_fp32<<<dim3(N / 64, M / 64), 256, 0, KP_STREAM>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                                            c.data_ptr<float>(), M, N, K);
  return c;
}

// ---- FP32 arithmetic: separate multiply and add (unfused) versus fused multiply-add ---------------
__global__ void kp_unfused_fp32(const float* __restrict__ x, float* __restrict__ y, long n, int iters) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = a + 1.f, c = a + 2.f, d = a + 3.f;
  for (int k = 0; k < iters; k++) {  // __fmul_rn/__fadd_rn are never contracted into FFMA
    a = __fadd_rn(__fmul_rn(a, 0.9999f), 0.0001f); b = __fadd_rn(__fmul_rn(b, 0.9999f), 0.0001f);
    c = __fadd_rn(__fmul_rn(c, 0.9999f), 0.0001f); d = __fadd_rn(__fmul_rn(d, 0.9999f), 0.0001f);
  }
  y[i] = a + b + c + d;
}
__global__ void kp_fused_fp32(const float* __restrict__ x, float* __restrict__ y, long n, int iters) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = a + 1.f, c = a + 2.f, d = a + 3.f;
  for (int k = 0; k < iters; k++) {
    a = fmaf(a, 0.9999f, 0.0001f); b = fmaf(b, 0.9999f, 0.0001f);
    c = fmaf(c, 0.9999f, 0.0001f); d = fmaf(d, 0.9999f, 0.0001f);
  }
  y[i] = a + b + c + d;
}
torch::Tensor unfused_fp32(torch::Tensor x, int64_t iters) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  kp_unfused_fp32<<<cdiv(n, 256), 256, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (int)iters);
  return y;
}
torch::Tensor fused_fp32(torch::Tensor x, int64_t iters) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  kp_fused_fp32<<<cdiv(n, 256), 256, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (int)iters);
  return y;
}

// ---- flawed: lane 0 of every warp runs a long loop, the other lanes a short one (divergence) ------
__global__ void kp_divergent(const float* __restrict__ x, float* __restrict__ y, long n, int iters) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  int reps = (threadIdx.x & 31) == 0 ? iters : iters / 32;
  for (int k = 0; k < reps; k++) v = fmaf(v, 0.9999f, 0.0001f);
  y[i] = v;
}
torch::Tensor divergent(torch::Tensor x, int64_t iters) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  kp_divergent<<<cdiv(n, 256), 256, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (int)iters);
  return y;
}

// ---- flawed: 200 KiB of dynamic shared memory per 128-thread block (occupancy limited by smem) -----
__global__ void kp_smem_hog(const float* __restrict__ x, float* __restrict__ y, long n) {
  extern __shared__ float stage[];
  long chunk = blockDim.x;
  for (long base = blockIdx.x * chunk; base < n; base += (long)gridDim.x * chunk) {
    long i = base + threadIdx.x;
    stage[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) y[i] = stage[threadIdx.x] * 2.f;
    __syncthreads();
  }
}
torch::Tensor smem_hog(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int smem = 200 * 1024;
  cudaFuncSetAttribute(kp_smem_hog, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kp_smem_hog<<<132 * 4, 128, smem, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}

// ---- flawed: only the first warp of each 256-thread block works (achieved << theoretical) ----------
__global__ void kp_occupancy_gap(const float* __restrict__ x, float* __restrict__ y, long n, int iters) {
  if (threadIdx.x >= 32) return;
  long i = blockIdx.x * 32L + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int k = 0; k < iters; k++) v = fmaf(v, 0.9999f, 0.0001f);
  y[i] = v;
}
torch::Tensor occupancy_gap(torch::Tensor x, int64_t iters) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  kp_occupancy_gap<<<cdiv(n, 32), 256, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (int)iters);
  return y;
}

// ---- element-wise chain: three kernels (intermediates through DRAM) versus one fused kernel -------
__global__ void kp_chain_scale(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 1.5f;
}
__global__ void kp_chain_add(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 0.25f;
}
__global__ void kp_chain_relu(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}
__global__ void kp_chain_fused(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i] * 1.5f + 0.25f, 0.f);
}
torch::Tensor chain_unfused(torch::Tensor x) {
  long n = x.numel();
  auto t1 = torch::empty_like(x), t2 = torch::empty_like(x), y = torch::empty_like(x);
  int g = cdiv(n, 256);
  kp_chain_scale<<<g, 256, 0, KP_STREAM>>>(x.data_ptr<float>(), t1.data_ptr<float>(), n);
  kp_chain_add<<<g, 256, 0, KP_STREAM>>>(t1.data_ptr<float>(), t2.data_ptr<float>(), n);
  kp_chain_relu<<<g, 256, 0, KP_STREAM>>>(t2.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
torch::Tensor chain_fused(torch::Tensor x) {
  long n = x.numel();
  auto y = torch::empty_like(x);
  kp_chain_fused<<<cdiv(n, 256), 256, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

// ---- flawed: each element is read 8 times, the re-reads far apart in time (L2 misses) --------------
__global__ void kp_strided_reuse(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  long s = n / 8;
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < 8; k++) acc += x[(i + k * s) % n];
  y[i] = acc;
}
torch::Tensor strided_reuse(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  kp_strided_reuse<<<cdiv(n, 256), 256, 0, KP_STREAM>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

// ---- latency-bound: dependent loads through a random permutation (pointer chasing) -----------------
__global__ void kp_pointer_chase(const int* __restrict__ next, int* __restrict__ out, int threads, int steps) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  int p = t;
  for (int s = 0; s < steps; s++) p = next[p];
  out[t] = p;
}
torch::Tensor pointer_chase(torch::Tensor next, int64_t threads, int64_t steps) {
  auto out = torch::empty({threads}, next.options());
  kp_pointer_chase<<<cdiv(threads, 128), 128, 0, KP_STREAM>>>(next.data_ptr<int>(), out.data_ptr<int>(),
                                                             (int)threads, (int)steps);
  return out;
}
