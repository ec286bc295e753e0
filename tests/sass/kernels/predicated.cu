// Flawed: data-dependent thresholds select among many short transforms; ptxas if-converts
// them, so every lane issues every transform under a predicate (or as a select).
__global__ void piecewise(const float* x, float* y, const float* w, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float v = x[i];
        float c = w[i];
        float r = v, s = 1.f, t = 0.f;
        if (c > 0.1f) { r = r * 2.f; s = s + r; t = t * s; }
        if (c > 0.2f) { r = r + 3.f; s = s * r; t = t - r; }
        if (c < 0.3f) { r = r * v; s = s - v; t = t + s; }
        if (c > 0.4f) { r = r * r; s = s + 1.f; t = t * r; }
        if (c < 0.5f) { r = r - 1.f; s = s * 0.5f; t = t + r; }
        if (c > 0.6f) { r = r * s; s = s + v; t = t - s; }
        if (c < 0.7f) { r = r * 0.25f; s = s - r; t = t * v; }
        if (c > 0.8f) { r = r + v; s = s * v; t = t + 1.f; }
        y[i] = r + s + t;
    }
}
