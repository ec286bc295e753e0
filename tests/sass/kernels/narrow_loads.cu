// Flawed: each thread handles four consecutive floats with four 32-bit loads and stores;
// one 128-bit (float4) access each would do.
__global__ void scale4_scalar(const float* x, float* y, float a, int n4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        y[4 * i + 0] = a * x[4 * i + 0];
        y[4 * i + 1] = a * x[4 * i + 1];
        y[4 * i + 2] = a * x[4 * i + 2];
        y[4 * i + 3] = a * x[4 * i + 3];
    }
}
