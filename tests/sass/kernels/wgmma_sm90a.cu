// kernelpro-arch: sm_90a
// Good for the tensor-core checks (Hopper warpgroup MMA, HGMMA, built for sm_90a); wgmma_serialized is flawed.
// wgmma_tile: one m64n8k16 f16 MMA per k-step (A from registers, B from shared memory
// through a no-swizzle matrix descriptor), fenced, committed and waited per the PTX ISA.
// wgmma_serialized: the same, but an ordinary FP32 multiply writes the accumulator while
// the wgmma pipeline stage is open, which makes ptxas serialize the wgmma (advisory C7515).
// These fixtures are compiled and disassembled, not run.
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
    uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    uint64_t d = 0;
    d |= (uint64_t)((addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo & 0x3FFFF) >> 4) << 16;
    d |= (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
    return d;  // swizzle mode 0 (none), base offset 0
}

__device__ __forceinline__ void mma_64x8x16(float (&d)[4], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

__global__ void __launch_bounds__(128) wgmma_tile(const half* A, const half* B, float* C, int K) {
    __shared__ __align__(128) half Bs[8 * 16];
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int t = threadIdx.x;
    for (int k0 = 0; k0 < K; k0 += 16) {
        Bs[t] = B[k0 * 8 + t];  // 128 halves: an 8 x 16 tile of B, K-major
        __syncthreads();
        uint32_t a[4];
        const uint32_t* arow = reinterpret_cast<const uint32_t*>(A + (t % 64) * K + k0);
        for (int j = 0; j < 4; ++j) a[j] = arow[(t / 64) * 4 + j];
        fence();
        mma_64x8x16(acc, a, smem_desc(Bs, 128, 256), 1);
        commit();
        wait0();
        __syncthreads();
    }
    for (int j = 0; j < 4; ++j) C[t * 4 + j] = acc[j];
}

__global__ void __launch_bounds__(128) wgmma_serialized(const half* A, const half* B, float* C, int K, float decay) {
    __shared__ __align__(128) half Bs[8 * 16];
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    int t = threadIdx.x;
    for (int k0 = 0; k0 < K; k0 += 16) {
        Bs[t] = B[k0 * 8 + t];
        __syncthreads();
        uint32_t a[4];
        const uint32_t* arow = reinterpret_cast<const uint32_t*>(A + (t % 64) * K + k0);
        for (int j = 0; j < 4; ++j) a[j] = arow[(t / 64) * 4 + j];
        fence();
        mma_64x8x16(acc, a, smem_desc(Bs, 128, 256), 1);
        for (int j = 0; j < 4; ++j) acc[j] *= decay;  // defines the accumulator mid-stage
        mma_64x8x16(acc, a, smem_desc(Bs, 128, 256), 1);
        commit();
        wait0();
        __syncthreads();
    }
    for (int j = 0; j < 4; ++j) C[t * 4 + j] = acc[j];
}
