// Good: grid-stride scale with 128-bit (float4) loads and stores.
__global__ void scale_float4(const float4* __restrict__ x, float4* __restrict__ y, float a, int n4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x *= a; v.y *= a; v.z *= a; v.w *= a;
        y[i] = v;
    }
}
