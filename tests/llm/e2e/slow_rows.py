# A deliberately slow first version, written for the end-to-end test (not by a model):
# one thread per row walks the row, so the 32 threads of a warp read 32 addresses one
# row (16 KiB) apart: every load and store is uncoalesced, and 4096 rows give only
# 32 blocks of 128 threads for 132 SMs.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <c10/cuda/CUDAStream.h>

__global__ void scaled_relu_rows(const float* __restrict__ x, float* __restrict__ y,
                                 float scale, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float* yr = y + (size_t)r * cols;
    for (int c = 0; c < cols; ++c) yr[c] = fmaxf(xr[c], 0.0f) * scale;
}

torch::Tensor scaled_relu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int cols = xc.dim() ? (int)xc.size(-1) : 1;
    int rows = (int)(xc.numel() / cols);
    int threads = 128;
    scaled_relu_rows<<<(rows + threads - 1) / threads, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), (float)scale, rows, cols);
    return y;
}
"""

ext = load_inline(
    name="kp_e2e_scaled_relu_rows",
    cpp_sources="torch::Tensor scaled_relu(torch::Tensor x, double scale);",
    cuda_sources=cuda_src,
    functions=["scaled_relu"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scaled_relu(x, self.scale)
