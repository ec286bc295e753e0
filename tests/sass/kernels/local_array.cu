// Flawed: a per-thread array indexed with runtime values lives in local memory (LDL/STL),
// and a register-hungry kernel squeezed by __launch_bounds__ spills.
__global__ void histogram_local(const int* keys, int* out, int n) {
    int bins[64];
    for (int b = 0; b < 64; ++b) bins[b] = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        bins[keys[i] & 63] += 1;
    for (int b = 0; b < 64; ++b) atomicAdd(&out[b], bins[b]);
}

__global__ void __launch_bounds__(1024, 2) spill_heavy(const float* x, float* y, int n, int iters) {
    float v[48];
#pragma unroll
    for (int j = 0; j < 48; ++j) v[j] = x[(threadIdx.x + j * 97) % n];
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 48; ++j) v[j] = v[j] * v[(j + 7) % 48] + v[(j + 13) % 48];
    }
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 48; ++j) s += v[j] * (float)(j + 1);
    y[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
