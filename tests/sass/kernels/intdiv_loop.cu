// Flawed: integer division and modulo by a runtime width inside the loop.
__global__ void gather_rows(const float* x, float* y, int n, int width, int stride) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        int r = i / width;
        int c = i % width;
        y[i] = x[r * stride + c];
    }
}
