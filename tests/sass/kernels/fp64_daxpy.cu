// Good (for the FP64 check): a genuine double-precision kernel.
__global__ void daxpy(const double* x, double* y, double a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}
