// Good: row sums over shared-memory tiles staged with cp.async (LDGSTS), double-buffered.
#include <cuda_pipeline.h>
#define TILE 256
__global__ void row_sum_cpasync(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float buf[2][TILE];
    const float* row = x + (size_t)blockIdx.x * cols;
    int ntiles = cols / TILE;
    float acc = 0.f;
    __pipeline_memcpy_async(&buf[0][threadIdx.x], row + threadIdx.x, sizeof(float));
    __pipeline_commit();
    for (int t = 0; t < ntiles; ++t) {
        if (t + 1 < ntiles)
            __pipeline_memcpy_async(&buf[(t + 1) & 1][threadIdx.x], row + (t + 1) * TILE + threadIdx.x, sizeof(float));
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        acc += buf[t & 1][threadIdx.x];
        __syncthreads();
    }
    atomicAdd(&y[blockIdx.x], acc);
}
