// Flawed: an FP32 GEMM with 4x4 register blocking per thread (no shared memory): each
// loaded value feeds four FMAs, all on the FMA units, no tensor cores.
__global__ void sgemm_regblock(const float* __restrict__ A, const float* __restrict__ B, float* C, int M, int N, int K) {
    int r0 = (blockIdx.y * blockDim.y + threadIdx.y) * 4;
    int c0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    float acc[4][4] = {};
    for (int k = 0; k < K; ++k) {
        float a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = A[(r0 + i) * K + k];
#pragma unroll
        for (int j = 0; j < 4; ++j) b[j] = B[k * N + c0 + j];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) C[(r0 + i) * N + c0 + j] = acc[i][j];
}
