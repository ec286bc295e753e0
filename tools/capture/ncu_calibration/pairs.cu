// Kernel pairs for calibrating the micro-profilers' estimated gains. In each pair the
// "before" kernel has one flaw that a finding names, and the "after" kernel applies that
// finding's action while computing the same result. Plain CUDA: every launcher is a C
// function taking device pointers, sizes and the stream, returning the launch's error code;
// pairs.py loads the shared library with ctypes and passes PyTorch tensors' pointers.
#include <cuda_runtime.h>

#define KPC extern "C" int
static inline int blocks_for(long n, int per_block) { return (int)((n + per_block - 1) / per_block); }
static inline int launched() { return (int)cudaGetLastError(); }

// ---- transpose: column-walking loads -> a shared tile; a tile without padding -> padded ------
__global__ void kpc_transpose_walk(const float* __restrict__ src, float* __restrict__ dst, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;  // neighbouring threads: rows n floats apart
  int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < n && col < n) dst[(long)col * n + row] = src[(long)row * n + col];
}
template <int PAD>
__global__ void kpc_transpose_tile(const float* __restrict__ src, float* __restrict__ dst, int n) {
  __shared__ float tile[32][32 + PAD];
  int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  for (int k = threadIdx.y; k < 32; k += 8) tile[k][threadIdx.x] = src[(long)(r0 + k) * n + c0 + threadIdx.x];
  __syncthreads();
  // dst row c0 + k holds source column c0 + k; its columns r0 .. r0 + 31 are tile[.][k]
  for (int k = threadIdx.y; k < 32; k += 8) dst[(long)(c0 + k) * n + r0 + threadIdx.x] = tile[threadIdx.x][k];
}
KPC kpc_transpose_walk_run(const float* src, float* dst, int n, cudaStream_t s) {
  kpc_transpose_walk<<<dim3(blocks_for(n, 32), blocks_for(n, 8)), dim3(32, 8), 0, s>>>(src, dst, n);
  return launched();
}
KPC kpc_transpose_tile_run(const float* src, float* dst, int n, int padded, cudaStream_t s) {
  dim3 grid(n / 32, n / 32), block(32, 8);
  if (padded) kpc_transpose_tile<1><<<grid, block, 0, s>>>(src, dst, n);
  else kpc_transpose_tile<0><<<grid, block, 0, s>>>(src, dst, n);
  return launched();
}

// ---- FP32 arithmetic: separate rounded multiply and add -> fused multiply-add ------------------
template <bool FUSED>
__global__ void kpc_decay(const float* __restrict__ x, float* __restrict__ y, long n, int steps) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v[4] = {x[i], 0.5f * x[i], 0.25f * x[i], 0.125f * x[i]};
  for (int k = 0; k < steps; k++) {
#pragma unroll
    for (int j = 0; j < 4; j++)
      v[j] = FUSED ? fmaf(v[j], 0.9999f, 1e-4f) : __fadd_rn(__fmul_rn(v[j], 0.9999f), 1e-4f);
  }
  y[i] = (v[0] + v[1]) + (v[2] + v[3]);
}
KPC kpc_decay_run(const float* x, float* y, long n, int steps, int fused, cudaStream_t s) {
  if (fused) kpc_decay<true><<<blocks_for(n, 256), 256, 0, s>>>(x, y, n, steps);
  else kpc_decay<false><<<blocks_for(n, 256), 256, 0, s>>>(x, y, n, steps);
  return launched();
}

// ---- scalar FP32 GEMM (no tensor cores; its "after" is cuBLAS in TF32, called from Python) ----
// 64 x 64 output tile per 256-thread block, 4 x 4 outputs per thread, K in steps of 16.
__global__ void __launch_bounds__(256) kpc_gemm_ffma(const float* __restrict__ a, const float* __restrict__ b,
                                                     float* __restrict__ c, int m, int n, int kdim) {
  __shared__ float sa[16][64 + 4];  // sa[k][row]
  __shared__ float sb[16][64];      // sb[k][col]
  int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
  float acc[4][4];
#pragma unroll
  for (int p = 0; p < 4; p++)
#pragma unroll
    for (int q = 0; q < 4; q++) acc[p][q] = 0.f;
  for (int k0 = 0; k0 < kdim; k0 += 16) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      int e = threadIdx.x + 256 * l;  // 1024 elements of each 64 x 16 / 16 x 64 slice
      sa[e % 16][e / 16] = a[(long)(row0 + e / 16) * kdim + k0 + e % 16];
      sb[e / 64][e % 64] = b[(long)(k0 + e / 64) * n + col0 + e % 64];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; k++) {
      float ra[4], rb[4];
#pragma unroll
      for (int t = 0; t < 4; t++) { ra[t] = sa[k][tr * 4 + t]; rb[t] = sb[k][tc * 4 + t]; }
#pragma unroll
      for (int p = 0; p < 4; p++)
#pragma unroll
        for (int q = 0; q < 4; q++) acc[p][q] = fmaf(ra[p], rb[q], acc[p][q]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int p = 0; p < 4; p++)
#pragma unroll
    for (int q = 0; q < 4; q++) c[(long)(row0 + tr * 4 + p) * n + col0 + tc * 4 + q] = acc[p][q];
}
KPC kpc_gemm_ffma_run(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
  kpc_gemm_ffma<<<dim3(n / 64, m / 64), 256, 0, s>>>(a, b, c, m, n, k);
  return launched();
}

// ---- grid-stride y = 2x + 1: a grid of a few blocks -> a grid that fills the GPU ---------------
__global__ void kpc_affine(const float* __restrict__ x, float* __restrict__ y, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    y[i] = fmaf(2.f, x[i], 1.f);
}
KPC kpc_affine_run(const float* x, float* y, long n, int blocks, int threads, cudaStream_t s) {
  kpc_affine<<<blocks, threads, 0, s>>>(x, y, n);
  return launched();
}

// ---- long-running units of 1024 elements: fixed chunks per block (one wave plus a few blocks)
// -> units dealt round-robin over exactly one wave of blocks ----------------------------------
template <bool DEALT>
__global__ void __launch_bounds__(1024, 2) kpc_units(const float* __restrict__ x, float* __restrict__ y,
                                                     int units, int per_block, int steps) {
  int first = DEALT ? blockIdx.x : blockIdx.x * per_block;
  int step = DEALT ? gridDim.x : 1;
  int last = DEALT ? units : min(units, first + per_block);
  for (int u = first; u < last; u += step) {
    long i = (long)u * 1024 + threadIdx.x;
    float a = x[i], b = a + 1.f;
    for (int k = 0; k < steps; k++) { a = fmaf(a, 0.9999f, 1e-4f); b = fmaf(b, 0.9999f, 1e-4f); }
    y[i] = a + b;
  }
}
KPC kpc_units_run(const float* x, float* y, int units, int blocks, int per_block, int steps, int dealt,
                  cudaStream_t s) {
  if (dealt) kpc_units<true><<<blocks, 1024, 0, s>>>(x, y, units, per_block, steps);
  else kpc_units<false><<<blocks, 1024, 0, s>>>(x, y, units, per_block, steps);
  return launched();
}

// ---- a staged scale whose dynamic shared memory allows one block per SM -> a small stage ------
__global__ void kpc_staged(const float* __restrict__ x, float* __restrict__ y, long n) {
  extern __shared__ float stage[];
  for (long base = blockIdx.x * (long)blockDim.x; base < n; base += (long)gridDim.x * blockDim.x) {
    long i = base + threadIdx.x;
    stage[threadIdx.x] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) y[i] = 3.f * stage[threadIdx.x];
    __syncthreads();
  }
}
KPC kpc_staged_run(const float* x, float* y, long n, int blocks, int smem_bytes, cudaStream_t s) {
  cudaError_t e = cudaFuncSetAttribute(kpc_staged, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return (int)e;
  kpc_staged<<<blocks, 128, smem_bytes, s>>>(x, y, n);
  return launched();
}

// ---- a per-thread array indexed at run time under a 32-register cap (local memory) -> the same
// updates with compile-time indices (one warp-uniform branch) and no cap ------------------------
#define KPC_LEN 48
__device__ __forceinline__ void kpc_fill(float (&acc)[KPC_LEN], float v) {
#pragma unroll
  for (int k = 0; k < KPC_LEN; k++) acc[k] = v * (float)(k + 1);
}
__device__ __forceinline__ float kpc_total(const float (&acc)[KPC_LEN]) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < KPC_LEN; k++) s += acc[k];
  return s;
}
template <int SHIFT>
__device__ __forceinline__ void kpc_mix_fixed(float (&acc)[KPC_LEN]) {
#pragma unroll
  for (int r = 0; r < 8; r++)
#pragma unroll
    for (int k = 0; k < KPC_LEN; k++) acc[k] = fmaf(acc[(k + SHIFT + r) % KPC_LEN], 0.03125f, 0.5f * acc[k]);
}
__global__ void __launch_bounds__(256, 8) kpc_mix_indexed(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[KPC_LEN];
  kpc_fill(acc, x[i]);
  int shift = (threadIdx.x >> 5) & 7;  // the same for a whole warp, known only at run time
  for (int r = 0; r < 8; r++) {
#pragma unroll
    for (int k = 0; k < KPC_LEN; k++) acc[k] = fmaf(acc[(k + shift + r) % KPC_LEN], 0.03125f, 0.5f * acc[k]);
  }
  y[i] = kpc_total(acc);
}
__global__ void kpc_mix_unrolled(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[KPC_LEN];
  kpc_fill(acc, x[i]);
  switch ((threadIdx.x >> 5) & 7) {
    case 0: kpc_mix_fixed<0>(acc); break;
    case 1: kpc_mix_fixed<1>(acc); break;
    case 2: kpc_mix_fixed<2>(acc); break;
    case 3: kpc_mix_fixed<3>(acc); break;
    case 4: kpc_mix_fixed<4>(acc); break;
    case 5: kpc_mix_fixed<5>(acc); break;
    case 6: kpc_mix_fixed<6>(acc); break;
    default: kpc_mix_fixed<7>(acc); break;
  }
  y[i] = kpc_total(acc);
}
KPC kpc_mix_run(const float* x, float* y, long n, int unrolled, cudaStream_t s) {
  if (unrolled) kpc_mix_unrolled<<<blocks_for(n, 256), 256, 0, s>>>(x, y, n);
  else kpc_mix_indexed<<<blocks_for(n, 256), 256, 0, s>>>(x, y, n);
  return launched();
}

// ---- a per-element FMA chain where only the first warp of each 256-thread block works -> every
// warp works ------------------------------------------------------------------------------
template <bool ALL_WARPS>
__global__ void kpc_chain(const float* __restrict__ x, float* __restrict__ y, long n, int steps) {
  if (!ALL_WARPS && threadIdx.x >= 32) return;
  long i = blockIdx.x * (long)(ALL_WARPS ? blockDim.x : 32) + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int k = 0; k < steps; k++) v = fmaf(v, 0.9999f, 1e-4f);
  y[i] = v;
}
KPC kpc_chain_run(const float* x, float* y, long n, int steps, int all_warps, cudaStream_t s) {
  if (all_warps) kpc_chain<true><<<blocks_for(n, 256), 256, 0, s>>>(x, y, n, steps);
  else kpc_chain<false><<<blocks_for(n, 32), 256, 0, s>>>(x, y, n, steps);
  return launched();
}

// ---- y[i] = sum over k of x[(i + k * n/8) mod n]: each element re-read 8 times, 1/8 of the
// array apart in time -> the 8 outputs that share their 8 inputs computed by one thread -------
__global__ void kpc_ring_far(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  long s = n / 8;
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < 8; k++) acc += x[(i + k * s) % n];
  y[i] = acc;
}
__global__ void kpc_ring_near(const float* __restrict__ x, float* __restrict__ y, long n) {
  long s = n / 8;
  long j = blockIdx.x * (long)blockDim.x + threadIdx.x;  // residue j < n / 8
  if (j >= s) return;
  float v[8];
#pragma unroll
  for (int m = 0; m < 8; m++) v[m] = x[j + m * s];
#pragma unroll
  for (int seg = 0; seg < 8; seg++) {  // output j + seg * s, summed in the order kpc_ring_far uses
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < 8; k++) acc += v[(seg + k) % 8];
    y[j + seg * s] = acc;
  }
}
KPC kpc_ring_run(const float* x, float* y, long n, int near, cudaStream_t s) {
  if (near) kpc_ring_near<<<blocks_for(n / 8, 256), 256, 0, s>>>(x, y, n);
  else kpc_ring_far<<<blocks_for(n, 256), 256, 0, s>>>(x, y, n);
  return launched();
}

// ---- y = max(1.5x + 0.25, 0): one scalar load per thread -> float4 loads, two per iteration of
// a grid-stride loop (more bytes in flight per warp) ---------------------------------------
__global__ void kpc_bias_relu_scalar(const float* __restrict__ x, float* __restrict__ y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(fmaf(x[i], 1.5f, 0.25f), 0.f);
}
__device__ __forceinline__ float4 kpc_bias_relu4(float4 v) {
  return make_float4(fmaxf(fmaf(v.x, 1.5f, 0.25f), 0.f), fmaxf(fmaf(v.y, 1.5f, 0.25f), 0.f),
                     fmaxf(fmaf(v.z, 1.5f, 0.25f), 0.f), fmaxf(fmaf(v.w, 1.5f, 0.25f), 0.f));
}
__global__ void kpc_bias_relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
  long stride = (long)gridDim.x * blockDim.x;
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  for (; i + stride < n4; i += 2 * stride) {
    float4 a = x[i], b = x[i + stride];
    y[i] = kpc_bias_relu4(a);
    y[i + stride] = kpc_bias_relu4(b);
  }
  if (i < n4) y[i] = kpc_bias_relu4(x[i]);
}
KPC kpc_bias_relu_run(const float* x, float* y, long n, int vec4_blocks, cudaStream_t s) {
  if (vec4_blocks > 0) kpc_bias_relu_vec4<<<vec4_blocks, 256, 0, s>>>((const float4*)x, (float4*)y, n / 4);
  else kpc_bias_relu_scalar<<<blocks_for(n, 256), 256, 0, s>>>(x, y, n);
  return launched();
}
