// Flawed: an FP32 kernel whose double literals (0.5, 1.0) promote the math to FP64.
__global__ void gelu_ish(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = 0.5 * v * (1.0 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}
