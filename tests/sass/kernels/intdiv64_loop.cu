// Flawed: 64-bit division and modulo by a runtime width in the loop: a 32-bit fast path
// inline and a call to ptxas' 64-bit division subroutine.
__global__ void gather_rows64(const float* x, float* y, long n, long width, long stride) {
    for (long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        long r = i / width;
        long c = i % width;
        y[i] = x[r * stride + c];
    }
}
