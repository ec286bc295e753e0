// Good for the tensor-core check: a matrix-vector product is a dot product per row over
// global memory, bandwidth-bound, with no operand reuse; tensor cores would not help.
__global__ void gemv_rowdot(const float* __restrict__ A, const float* __restrict__ x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M) return;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * x[k];
    y[row] = acc;
}
